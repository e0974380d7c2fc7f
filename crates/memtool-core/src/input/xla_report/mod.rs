//! XLA's out-of-memory reports in a log or pasted text: a program that
//! failed to compile or to allocate never writes a profile, and the text is
//! all the user has. Three messages are read wherever they sit in a line
//! (after a log prefix, an exception name, `RESOURCE_EXHAUSTED:`):
//!
//! - the TPU compiler's report (`compile.rs`): `Ran out of memory in memory
//!   space hbm. Used 17.60G of 16.00G hbm. Exceeded hbm capacity by 1.60G.`,
//!   then `Total hbm usage >= …` (reserved, program, arguments), `Output
//!   size …`, `Program hbm requirement …` (global, scoped, HLO temp) and
//!   `Largest program allocations in hbm:`, each with `Size:`, `Operator:`,
//!   `Shape:`, `Unpadded size:`, `Extra memory due to padding:`, `XLA
//!   label:` and `Allocation type:`;
//! - the one-line `Allocation (size=N) would exceed memory (size=M) ::
//!   #allocationK [shape = '…', space=hbm, size = …, tag = '…'] :: …`
//!   (`compile.rs`);
//! - the GPU runtime's `Out of memory while trying to allocate N bytes.`,
//!   with the BFC allocator's dump around it when logged (`gpu.rs`).
//!
//! The text is read a line at a time (each cut at [`MAX_LINE`]), so memory
//! stays bounded whatever the log's size; a report the same as an earlier
//! one (the log line and the exception that repeats it) is counted once.

mod compile;
mod gpu;
pub(crate) mod layout;

use std::io::{BufRead, BufReader};

use crate::error::Result;
use crate::input::source::{ByteSource, SourceReader};
use crate::model::{Format, InputInfo, Profile, ReportedBytes, XlaOomReport, XlaReportKind};

/// Longest line kept; the rest of a longer line is skipped (no report line
/// is near it).
const MAX_LINE: usize = 64 << 10;

/// Detection: whether the head of an input is text (UTF-8 without NULs or
/// other control characters than tab, line ends and the escape of terminal
/// colours), which may hold a report. Binary formats are judged first.
pub(crate) fn looks_like_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A head cut inside a character is still text.
        Err(e) => e.error_len().is_none(),
    };
    valid
        && !head.is_empty()
        && head
            .iter()
            .all(|&b| b >= 0x20 || matches!(b, b'\t' | b'\n' | b'\r' | 0x1b | 0x0c))
}

/// Whether `head` holds the first line of a report this module reads (or
/// the `RESOURCE_EXHAUSTED` status XLA raises with each).
pub(crate) fn mentions_report(head: &[u8]) -> bool {
    const MARKERS: [&[u8]; 4] = [
        b"Ran out of memory in memory space ",
        b"would exceed memory",
        b"Out of memory while trying to allocate",
        b"RESOURCE_EXHAUSTED",
    ];
    MARKERS
        .iter()
        .any(|m| head.windows(m.len()).any(|w| w == *m))
}

/// Reads every out-of-memory report in the text `data` into `profile`, and
/// says how many there were: text that holds none is no input memtool
/// reads, and adds nothing to `profile`.
pub(crate) fn read(profile: &mut Profile, path: &str, data: &dyn ByteSource) -> Result<usize> {
    let mut reader = BufReader::with_capacity(64 << 10, SourceReader::new(data));
    let mut scanner = Scanner::default();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read =
            read_line(&mut reader, &mut line).map_err(|e| crate::input::read_error(path, &e))?;
        if read == 0 {
            break;
        }
        number += 1;
        let text = String::from_utf8_lossy(&line);
        scanner.line(number, text.trim_end_matches(['\n', '\r']));
    }
    let reports = scanner.finish();
    if reports.is_empty() {
        // Text without a report is no input memtool reads: the loader says
        // so as for any other.
        return Ok(0);
    }
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::XlaReport,
        executables: None,
    });
    for report in &reports {
        for a in &report.allocations {
            if let (Some(layout), Some(size)) = (&a.layout, &a.size) {
                if !size.agrees_with(layout.padded_bytes) {
                    profile.warn(
                        path,
                        format!(
                            "line {}: {} takes {} by memtool's reading of its layout, but the \
                             report says {}; the report's figure is used",
                            report.line,
                            a.shape.as_deref().unwrap_or("?"),
                            layout.padded_bytes,
                            size.text
                        ),
                    );
                }
            }
        }
    }
    // Read by every command: the note says what a log holds, never which
    // command to run (under `oom` that would point at itself).
    profile.note(
        path,
        format!(
            "{} XLA out-of-memory report{} and no memory timeline: a log tells each report's \
             post-mortem, not memory over time",
            reports.len(),
            if reports.len() == 1 { "" } else { "s" }
        ),
    );
    let found = reports.len();
    profile.xla_reports.extend(reports);
    Ok(found)
}

/// One line into `line` (with its end), at most [`MAX_LINE`] bytes of it
/// kept; the number of bytes consumed.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

/// The reports found so far, and the one being read.
#[derive(Default)]
struct Scanner {
    reports: Vec<XlaOomReport>,
    /// The reports by [`repeat_key`], so a repeat is found without a scan
    /// over every report (a log may hold thousands).
    by_key: rustc_hash::FxHashMap<String, Vec<usize>>,
    compile: Option<compile::Open>,
    gpu: gpu::Pending,
}

impl Scanner {
    fn line(&mut self, number: u64, text: &str) {
        if let Some(rest) = after(text, "Ran out of memory in memory space ") {
            self.close_compile();
            self.compile = compile::Open::start(number, rest);
            return;
        }
        if let Some(report) = compile::one_line(number, text) {
            self.close_compile();
            self.push(report);
            return;
        }
        if let Some(open) = &mut self.compile {
            if open.line(text) {
                return;
            }
            self.close_compile();
        }
        if let Some(report) = self.gpu.line(number, text) {
            self.push(report);
        }
    }

    fn close_compile(&mut self) {
        if let Some(open) = self.compile.take() {
            let report = open.finish();
            self.push(report);
        }
    }

    /// Adds `report`, or notes it as a repeat of an earlier one.
    fn push(&mut self, report: XlaOomReport) {
        let key = repeat_key(&report);
        let candidates = self.by_key.entry(key).or_default();
        let earlier = candidates
            .iter()
            .copied()
            .find(|&i| repeats(&self.reports[i], &report));
        match earlier {
            Some(i) => {
                let earlier = &mut self.reports[i];
                earlier.repeated_at_lines.push(report.line);
                if earlier.bfc.is_none() {
                    earlier.bfc = report.bfc;
                }
            }
            None => {
                candidates.push(self.reports.len());
                self.reports.push(report);
            }
        }
    }

    fn finish(mut self) -> Vec<XlaOomReport> {
        self.close_compile();
        let gpu = std::mem::take(&mut self.gpu);
        let last_gpu = self
            .reports
            .iter_mut()
            .rev()
            .find(|r| r.kind == XlaReportKind::GpuAllocator);
        if let Some(report) = gpu.finish(last_gpu) {
            self.push(report);
        }
        self.reports.sort_by_key(|r| r.line);
        self.reports
    }
}

/// What a report and its repeats share: the GPU's request (a repeat may
/// lack the allocator's dump), else the whole report but where it is.
fn repeat_key(report: &XlaOomReport) -> String {
    match report.kind {
        XlaReportKind::GpuAllocator => format!("gpu {:?}", report.request),
        _ => format!(
            "{:?}",
            XlaOomReport {
                line: 0,
                repeated_at_lines: Vec::new(),
                ..report.clone()
            }
        ),
    }
}

/// Whether `later` is `earlier` logged again: the same failure, one of the
/// two perhaps without the allocator's dump.
fn repeats(earlier: &XlaOomReport, later: &XlaOomReport) -> bool {
    if earlier.kind == XlaReportKind::GpuAllocator && later.kind == XlaReportKind::GpuAllocator {
        return earlier.request == later.request
            && (earlier.bfc.is_none() || later.bfc.is_none() || earlier.bfc == later.bfc);
    }
    earlier.same_failure(later)
}

/// The text after the first `marker` in `text`.
fn after<'t>(text: &'t str, marker: &str) -> Option<&'t str> {
    text.find(marker).map(|i| &text[i + marker.len()..])
}

/// A size as XLA prints it at the start of `text` (`17.60G`, `980.0K`,
/// `0B`, `1.25GiB`, `214748364800`, `0xc000000`), and the text after it.
/// Binary units, as XLA's `HumanReadableNumBytes`.
fn figure(text: &str) -> Option<(ReportedBytes, &str)> {
    let text = text.trim_start();
    if let Some(hex) = text.strip_prefix("0x") {
        let end = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        let bytes = u64::from_str_radix(&hex[..end], 16).ok()?;
        let rest = &hex[end..];
        return Some((
            ReportedBytes {
                bytes,
                rounding: 0,
                text: text[..2 + end].to_string(),
            },
            rest,
        ));
    }
    let end = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let number = &text[..end];
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || whole.len() > 20 || fraction.len() > 6 || fraction.contains('.') {
        return None;
    }
    let units = &text[end..];
    let letters = units
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(units.len());
    let unit: u128 = match &units[..letters] {
        "" | "B" | "b" => 1,
        "K" | "KB" | "KiB" | "k" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        "T" | "TB" | "TiB" => 1 << 40,
        "P" | "PB" | "PiB" => 1 << 50,
        "E" | "EB" | "EiB" => 1 << 60,
        // `12 bytes`: the word follows after a space; other words are not
        // a size.
        _ => return None,
    };
    let mantissa: u128 = format!("{whole}{fraction}").parse().ok()?;
    let scale = 10u128.pow(fraction.len() as u32);
    let bytes = mantissa.checked_mul(unit)?.checked_add(scale / 2)? / scale;
    let rounding = if unit == 1 && fraction.is_empty() {
        0
    } else {
        unit / scale / 2
    };
    Some((
        ReportedBytes {
            bytes: u64::try_from(bytes).ok()?,
            rounding: u64::try_from(rounding).ok()?,
            text: text[..end + letters].to_string(),
        },
        &units[letters..],
    ))
}

/// A size that is the whole of `token`.
fn whole_figure(token: &str) -> Option<ReportedBytes> {
    figure(token).and_then(|(f, rest)| rest.is_empty().then_some(f))
}

#[cfg(test)]
mod tests;
