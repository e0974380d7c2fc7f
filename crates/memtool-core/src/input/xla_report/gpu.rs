//! The GPU runtime's `Out of memory while trying to allocate N bytes.`, and
//! the BFC allocator's dump that XLA (and TensorFlow) log at the failure:
//! `Allocator (GPU_0_bfc) ran out of memory trying to allocate 200.00GiB
//! (rounded to 214748364800)`, `BFCAllocator dump for GPU_0_bfc`, bins,
//! `InUse at …`/`Free  at … of size N`, `N Chunks of size S totalling …`,
//! `Total bytes in pool: … memory_limit_: … available bytes: …`, then
//! `Stats:` with `Limit:`, `InUse:`, `MaxInUse:`, `NumAllocs:`,
//! `MaxAllocSize:` a line each. The dump comes before the runtime's message
//! in XLA's logs; one that comes after it belongs to it too.

use super::{after, figure};
use crate::model::{BfcDump, ChunksOfSize, ReportedBytes, XlaOomReport, XlaReportKind};

/// A dump being read, and the failure it began with.
#[derive(Default)]
pub(super) struct Pending {
    dump: BfcDump,
    /// The line of the BFC allocator's own failure, and its (rounded) request.
    failure: Option<(u64, u64)>,
    /// The first line of the dump.
    first_line: Option<u64>,
}

impl Pending {
    /// Reads `text`: a report when it is the runtime's message.
    pub(super) fn line(&mut self, number: u64, text: &str) -> Option<XlaOomReport> {
        if let Some(rest) = after(text, "Out of memory while trying to allocate ") {
            let (request, rest) = figure(rest)?;
            let request = match rest.trim_start().strip_prefix("bytes") {
                Some(_) => ReportedBytes::exact(request.bytes),
                None => request,
            };
            let mut report = XlaOomReport::new(XlaReportKind::GpuAllocator, number);
            report.request = Some(request);
            self.attach(&mut report);
            return Some(report);
        }
        if let Some(rest) = after(text, "Allocator (") {
            if let Some((name, rest)) = rest.split_once(") ran out of memory trying to allocate ") {
                // A retry the caller tolerates is no failure.
                if text.contains("not a failure") {
                    return None;
                }
                let flushed = self.take_failure();
                let rounded = after(rest, "(rounded to ")
                    .and_then(|r| figure(r))
                    .map(|(r, _)| r.bytes)
                    .or_else(|| figure(rest).map(|(r, _)| r.bytes));
                self.dump.allocator = Some(name.to_string());
                self.failure = rounded.map(|r| (number, r));
                self.first_line = Some(number);
                return flushed;
            }
        }
        self.dump_line(number, text);
        None
    }

    /// One line of the dump, wherever a log prefix puts it.
    fn dump_line(&mut self, number: u64, text: &str) {
        let dump = &mut self.dump;
        let mut seen = true;
        if let Some(name) = after(text, "BFCAllocator dump for ") {
            dump.allocator = Some(name.trim().to_string());
        } else if let Some(size) = after(text, "Free  at ")
            .or_else(|| after(text, "Free at "))
            .and_then(|r| after(r, " of size "))
        {
            if let Some((size, _)) = figure(size) {
                dump.free_chunks += 1;
                dump.free_chunk_bytes = dump.free_chunk_bytes.saturating_add(size.bytes);
                dump.largest_free_chunk_bytes = dump.largest_free_chunk_bytes.max(size.bytes);
            }
        } else if let Some((count, size)) = chunks_line(text) {
            dump.in_use_by_size.push(ChunksOfSize {
                chunk_bytes: size,
                chunks: count,
            });
        } else if let Some(limit) = after(text, "memory_limit_: ") {
            dump.limit_bytes = number_at(limit).or(dump.limit_bytes);
            dump.available_bytes = after(text, "available bytes: ").and_then(number_at);
            dump.pool_bytes = after(text, "Total bytes in pool: ")
                .or_else(|| after(text, "total_region_allocated_bytes_: "))
                .and_then(number_at);
        } else if self.first_line.is_some() || !dump.is_empty() {
            // The stats follow `Stats:` a line each, without a log prefix.
            let (key, value) = text.trim().split_once(':').unwrap_or(("", ""));
            let value = number_at(value.trim());
            match key {
                "Limit" => dump.limit_bytes = value,
                "InUse" => dump.in_use_bytes = value,
                "MaxInUse" => dump.max_in_use_bytes = value,
                "NumAllocs" => dump.num_allocs = value,
                "MaxAllocSize" => dump.max_alloc_size_bytes = value,
                _ => seen = false,
            }
        } else {
            seen = false;
        }
        if seen && self.first_line.is_none() {
            self.first_line = Some(number);
        }
    }

    /// Gives `report` the dump read so far.
    fn attach(&mut self, report: &mut XlaOomReport) {
        let pending = std::mem::take(self);
        // The runtime's request, printed rounded (`16.00GiB`), is the
        // allocator's exact rounded one when they agree.
        if let (Some((_, rounded)), Some(request)) = (pending.failure, &mut report.request) {
            if request.rounding > 0 && request.agrees_with(rounded) {
                *request = ReportedBytes::exact(rounded);
            }
        }
        if !pending.dump.is_empty() {
            report.memory_space = pending.dump.allocator.clone();
            report.bfc = Some(pending.dump);
        }
    }

    /// The BFC allocator's failure read so far with no runtime message for
    /// it, as a report of its own.
    fn take_failure(&mut self) -> Option<XlaOomReport> {
        let (line, request) = self.failure?;
        let mut report = XlaOomReport::new(XlaReportKind::GpuAllocator, line);
        report.request = Some(ReportedBytes::exact(request));
        self.attach(&mut report);
        Some(report)
    }

    /// At the end of the text: a dump after the last runtime message goes to
    /// it when it has none; a failure without one is a report of its own.
    pub(super) fn finish(mut self, last: Option<&mut XlaOomReport>) -> Option<XlaOomReport> {
        if self.dump.is_empty() {
            return None;
        }
        if let Some(last) = last {
            let after_it = self.first_line.is_some_and(|l| l > last.line);
            if last.bfc.is_none() && after_it {
                self.attach(last);
                return None;
            }
        }
        self.take_failure()
    }
}

/// `27 Chunks of size 256 totalling 6.8KiB` → (27, 256).
fn chunks_line(text: &str) -> Option<(u64, u64)> {
    let (before, size) = text.split_once(" Chunks of size ")?;
    let count = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    let count = count.parse().ok()?;
    let size = number_at(size)?;
    Some((count, size))
}

/// The decimal number `text` starts with.
fn number_at(text: &str) -> Option<u64> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text[..end].parse().ok()
}
