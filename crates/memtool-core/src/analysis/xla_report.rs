//! The post-mortem of an XLA out-of-memory report read from a log
//! ([`Profile::xla_reports`]): a program that failed to compile or to
//! allocate, so there is no timeline, only what the report says. Its
//! figures (capacity, how far over, the allocations) are the report's own;
//! the padded and unpadded size of every listed shape is computed from its
//! layout and checked against them. It is an `oom` entry like the others
//! (`source: "xla_report"`), with the report's usage breakdown, its
//! allocations with their padding explained, and what would make it fit.

use crate::model::{
    Axis, Memory, MemoryKind, Profile, ProgramAllocation, ReportedAllocation, ReportedBytes,
    UsageLine, XlaOomReport, XlaReportKind,
};
use crate::report::units::bytes as size;

use super::oom::{CapacitySource, PostMortem, ProgramOverCapacity, RemovalCandidate, Verdict};
use super::program_peak::BufferAtPeak;
use super::xla_report_facts::{AllocationRow, DumpMatch, UsageRow, XlaReportFacts};
use super::{MemoryHeader, Options};

/// The post-mortem of every report in `profile`.
pub fn post_mortems(profile: &Profile, options: &Options) -> Vec<PostMortem> {
    profile
        .xla_reports
        .iter()
        .map(|r| post_mortem(r, options))
        .collect()
}

fn post_mortem(report: &XlaOomReport, options: &Options) -> PostMortem {
    let allocations: Vec<AllocationRow> = report.allocations.iter().map(allocation_row).collect();
    let listed_padding = allocations
        .iter()
        .fold(0u64, |t, a| t.saturating_add(a.padding_bytes));
    let padding_waste = hlo_temp_padding(report, listed_padding).unwrap_or(listed_padding);
    let space = report.memory_space.clone();
    let space_text = space.as_deref().unwrap_or(match report.kind {
        XlaReportKind::GpuAllocator => "GPU",
        _ => "memory",
    });
    let (capacity, capacity_source) = match (options.capacity, &report.capacity) {
        (Some(c), _) => (Some(c), CapacitySource::Given),
        (None, Some(c)) => (Some(c.bytes), CapacitySource::Profile),
        (None, None) => match report.bfc.as_ref().and_then(|b| b.limit_bytes) {
            Some(limit) => (Some(limit), CapacitySource::Profile),
            None => (None, CapacitySource::Unknown),
        },
    };
    let bytes = |f: &Option<ReportedBytes>| f.as_ref().map(|f| f.bytes);
    let request = match report.kind {
        XlaReportKind::CompileTime => bytes(&report.used).unwrap_or(0),
        _ => bytes(&report.request).unwrap_or(0),
    };
    let in_use = report
        .bfc
        .as_ref()
        .and_then(|b| b.in_use_bytes)
        .unwrap_or(0);
    let largest_free = report.bfc.as_ref().map_or(0, |b| {
        b.largest_free_chunk_bytes
            .max(b.available_bytes.unwrap_or(0))
    });
    let (verdict, shortfall) = match (report.kind, capacity) {
        (_, None) => (Verdict::Capacity, 0),
        (XlaReportKind::CompileTime, Some(c)) => (
            Verdict::Capacity,
            match (options.capacity, &report.over) {
                (None, Some(over)) => over.bytes,
                _ => request.saturating_sub(c),
            },
        ),
        (XlaReportKind::Allocation, Some(c)) => (Verdict::Capacity, request.saturating_sub(c)),
        (XlaReportKind::GpuAllocator, Some(c)) => {
            let needed = in_use.saturating_add(request);
            if needed > c || report.bfc.is_none() {
                (Verdict::Capacity, needed.saturating_sub(c))
            } else {
                (Verdict::Fragmentation, request.saturating_sub(largest_free))
            }
        }
    };
    let explanation = explain(
        report,
        verdict,
        request,
        capacity,
        shortfall,
        in_use,
        largest_free,
        padding_waste,
    );

    let buffers: Vec<BufferAtPeak> = report
        .allocations
        .iter()
        .zip(&allocations)
        .map(|(a, row)| BufferAtPeak {
            instruction: row
                .instruction
                .clone()
                .or_else(|| a.allocation.clone())
                .unwrap_or_else(|| format!("#{}", row.rank.unwrap_or(0))),
            opcode: row.opcode.clone(),
            shape: row.shape.clone(),
            bytes: row.bytes,
            unpadded_bytes: row.unpadded_bytes,
            op_name: row.op.clone(),
            category: row.allocation_type.clone(),
            phase: None,
            source: row.source.clone(),
        })
        .collect();
    let mut buffers = buffers;
    buffers.sort_by_key(|b| std::cmp::Reverse(b.bytes));
    let by = |key| super::oom::buffers_by(&buffers, key);
    let by_op = by(|b| b.op_name.as_ref().or(b.opcode.as_ref()));
    // Freeing helps only where the request alone fits.
    let freeing_helps = report.kind == XlaReportKind::CompileTime
        || (verdict == Verdict::Capacity && capacity.is_some_and(|c| request <= c));
    let remove_to_fit = if freeing_helps {
        super::oom::removal(&by_op, shortfall)
    } else {
        Vec::new()
    };
    let would_fit = would_fit(
        report,
        &allocations,
        capacity,
        shortfall,
        padding_waste,
        &remove_to_fit,
    );
    let by_shape = by(|b| b.shape.as_ref());
    let by_source = by(|b| b.source.as_ref());
    let program = (!buffers.is_empty()).then(|| ProgramOverCapacity {
        peak_bytes: request,
        peak_label: format!("as reported at line {}", report.line),
        peak_instruction: report.instruction.clone(),
        over_bytes: shortfall,
        padding_waste_bytes: padding_waste,
        unpadded_peak_bytes: request.saturating_sub(padding_waste),
        by_op: by_op.clone(),
        by_shape,
        by_source,
        buffers,
    });
    let kind = match report.kind {
        XlaReportKind::GpuAllocator => MemoryKind::Allocator,
        _ => MemoryKind::ProgramSpace,
    };
    PostMortem {
        header: MemoryHeader {
            id: format!("{space_text} (line {})", report.line),
            kind,
            host: None,
            axis: match kind {
                MemoryKind::Allocator => Axis::EventIndex,
                _ => Axis::ProgramOrder,
            },
            capacity_bytes: None,
            module: None,
            memory_space: None,
            category_totals: false,
        },
        verdict,
        explanation,
        request_bytes: request,
        capacity_bytes: capacity.unwrap_or(0),
        capacity_source,
        shortfall_bytes: shortfall,
        allocator: None,
        program,
        live_by_user_frame: Vec::new(),
        live_by_op: Vec::new(),
        live_by_category: Vec::new(),
        category_sources: crate::model::CategorySources::new(),
        remove_to_fit,
        xla_report: Some(XlaReportFacts {
            source: "xla_report",
            report_kind: report.kind,
            line: report.line,
            repeated_at_lines: report.repeated_at_lines.clone(),
            space,
            used_bytes: bytes(&report.used),
            usage: report.usage.iter().map(usage_row).collect(),
            program_requirement: report.program.iter().map(usage_row).collect(),
            allocations,
            would_fit,
            bfc: report.bfc.clone(),
            dump_searched: false,
        }),
    }
}

/// The HLO temp's padded less unpadded size, the whole program's padding,
/// where the report states both and it says more than the listed
/// allocations' exact padding (`listed`): both are rounded to a hundredth of
/// their unit, so a difference within that rounding says nothing more.
fn hlo_temp_padding(report: &XlaOomReport, listed: u64) -> Option<u64> {
    let (unpadded, padded) = report.hlo_temp_unpadded_padded.as_ref()?;
    let stated = padded.bytes.saturating_sub(unpadded.bytes);
    let rounding = padded.rounding.saturating_add(unpadded.rounding);
    (stated > listed.saturating_add(rounding)).then_some(stated)
}

fn usage_row(u: &UsageLine) -> UsageRow {
    UsageRow {
        name: u.name.clone(),
        bytes: u.size.as_ref().map(|s| s.bytes),
        detail: u.detail.clone(),
    }
}

fn allocation_row(a: &ReportedAllocation) -> AllocationRow {
    let reported = a.size.as_ref();
    let agrees = match (&a.layout, reported) {
        (Some(l), Some(size)) => Some(
            size.agrees_with(l.padded_bytes)
                && a.unpadded_size
                    .as_ref()
                    .is_none_or(|u| u.agrees_with(l.unpadded_bytes)),
        ),
        _ => None,
    };
    // memtool's exact sizes where they print as the report's (or the
    // report states none), else the report's rounded ones.
    let (bytes, unpadded) = match &a.layout {
        Some(l) if agrees != Some(false) => (l.padded_bytes, l.unpadded_bytes),
        _ => {
            let bytes = reported.map_or(0, |s| s.bytes);
            let unpadded = match (&a.unpadded_size, &a.padding) {
                (Some(u), _) => u.bytes,
                (None, Some(p)) => bytes.saturating_sub(p.bytes),
                // The report leaves out `Unpadded size` when there is no padding.
                (None, None) => bytes,
            };
            (bytes, unpadded.min(bytes))
        }
    };
    AllocationRow {
        rank: a.rank,
        allocation: a.allocation.clone(),
        bytes,
        unpadded_bytes: unpadded,
        padding_bytes: bytes - unpadded,
        shape: a.shape.clone(),
        layout: a.layout.as_ref().map(|l| l.explanation.clone()),
        agrees_with_report: agrees,
        op: a.op_name.clone().or_else(|| a.op_type.clone()),
        source: a.source.clone(),
        instruction: a.instruction.clone(),
        opcode: a.opcode.clone(),
        allocation_type: a.allocation_type.clone(),
        in_dump: None,
    }
}

/// Finds each listed `#allocationN` of the XLA reports among
/// `post_mortems` in the compiled programs of `dump` (an XLA dump, or an
/// XSpace, of the same compile): the allocation of that index and size,
/// where several programs have one those whose buffer has the reported
/// shape. A report names no program, so a dump of several can match more
/// than one; the first is shown and the others counted.
pub fn match_in_dump(post_mortems: &mut [PostMortem], dump: &Profile) {
    for facts in post_mortems
        .iter_mut()
        .filter_map(|p| p.xla_report.as_mut())
    {
        facts.dump_searched = true;
        for row in &mut facts.allocations {
            row.in_dump = find_in_dump(dump, row);
        }
    }
}

/// `7` of `#allocation7`.
fn allocation_index(name: &str) -> Option<i64> {
    name.strip_prefix("#allocation")?.parse().ok()
}

fn find_in_dump(dump: &Profile, row: &AllocationRow) -> Option<DumpMatch> {
    let index = allocation_index(row.allocation.as_deref()?)?;
    let mut found: Vec<(&Memory, &ProgramAllocation)> = dump
        .memories
        .iter()
        .filter_map(|m| {
            let program = m.program.as_ref()?;
            let a = program
                .allocations
                .iter()
                .find(|a| a.index == index && a.bytes == row.bytes)?;
            Some((m, a))
        })
        .collect();
    let names = &dump.names;
    let shape_of = |a: &ProgramAllocation| names.site_of(a.site).shape.map(|s| names.str(s));
    if let Some(shape) = row.shape.as_deref() {
        if found.iter().any(|(_, a)| shape_of(a) == Some(shape)) {
            found.retain(|(_, a)| shape_of(a) == Some(shape));
        }
    }
    let (&(memory, a), others) = found.split_first()?;
    Some(DumpMatch {
        module: memory.id.clone(),
        allocation_index: index,
        bytes: a.bytes,
        buffer: BufferAtPeak::of(
            names,
            a.site,
            Some(&a.buffer),
            (a.buffer.own_bytes, a.buffer.own_unpadded_bytes),
        ),
        other_programs: others.len(),
    })
}

#[allow(clippy::too_many_arguments)]
fn explain(
    report: &XlaOomReport,
    verdict: Verdict,
    request: u64,
    capacity: Option<u64>,
    shortfall: u64,
    in_use: u64,
    largest_free: u64,
    padding_waste: u64,
) -> String {
    let space = report.memory_space.as_deref().unwrap_or("memory");
    let Some(capacity) = capacity else {
        return format!(
            "{}: {} requested; the log does not say how much the device holds (give \
             --capacity)",
            verdict.name(),
            size(request)
        );
    };
    match report.kind {
        XlaReportKind::CompileTime => format!(
            "capacity: the program needs {} of {} at once, {} more than the {} it holds{}",
            size(request),
            space,
            size(shortfall),
            size(capacity),
            if padding_waste == 0 {
                String::new()
            } else if padding_waste >= shortfall {
                format!(
                    "; {} of it is layout padding, and without it the program would fit",
                    size(padding_waste)
                )
            } else {
                format!("; {} of it is layout padding", size(padding_waste))
            }
        ),
        XlaReportKind::Allocation if request > capacity => format!(
            "capacity: {} alone takes {}, more than the {} {} holds; no freeing makes it \
             fit, the tensor itself must shrink (or be split across devices)",
            report
                .allocations
                .first()
                .and_then(|a| a.allocation.clone())
                .unwrap_or_else(|| "the allocation".to_string()),
            size(request),
            size(capacity),
            space
        ),
        XlaReportKind::Allocation => format!(
            "capacity: {} does not fit in what is left of the {} {} holds",
            size(request),
            size(capacity),
            space
        ),
        XlaReportKind::GpuAllocator if request > capacity => format!(
            "capacity: the {} requested alone is more than the {} the allocator may hold; \
             no freeing makes it fit, the tensor itself must shrink (or be split across \
             devices)",
            size(request),
            size(capacity)
        ),
        XlaReportKind::GpuAllocator if verdict == Verdict::Fragmentation => format!(
            "fragmentation: {} requested, {} in use of {}, so {} is free, but the largest \
             free chunk is {}: the free memory is split",
            size(request),
            size(in_use),
            size(capacity),
            size(capacity.saturating_sub(in_use)),
            size(largest_free)
        ),
        XlaReportKind::GpuAllocator if report.bfc.is_none() => format!(
            "capacity: {} requested on a device of {}; the log holds no allocator dump to \
             say what was in use",
            size(request),
            size(capacity)
        ),
        XlaReportKind::GpuAllocator => format!(
            "capacity: {} in use plus the {} requested needs {}, more than the {} the \
             allocator may hold; {} must go for the request to fit",
            size(in_use),
            size(request),
            size(in_use.saturating_add(request)),
            size(capacity),
            size(shortfall)
        ),
    }
}

/// What would make the program fit, with this report's figures.
fn would_fit(
    report: &XlaOomReport,
    allocations: &[AllocationRow],
    capacity: Option<u64>,
    shortfall: u64,
    padding_waste: u64,
    remove_to_fit: &[RemovalCandidate],
) -> Vec<String> {
    let mut out = Vec::new();
    if shortfall == 0 {
        return out;
    }
    if padding_waste >= shortfall {
        out.push(format!(
            "layouts without padding: {} is padding, more than the {} over",
            size(padding_waste),
            size(shortfall)
        ));
    }
    if let Some(worst) = allocations
        .iter()
        .filter(|a| a.padding_bytes > 0)
        .max_by_key(|a| a.padding_bytes)
    {
        out.push(format!(
            "{}: {} of its {} is padding; minor dimensions that fill the tiles (or another \
             dimension order) save it",
            worst.shape.as_deref().unwrap_or("the largest allocation"),
            size(worst.padding_bytes),
            size(worst.bytes),
        ));
    }
    if let Some(last) = remove_to_fit.last() {
        if last.cumulative_bytes >= shortfall {
            out.push(format!(
                "without (or sharding, or rematerializing) {}: {} of the listed allocations, \
                 enough for the {} over",
                remove_to_fit
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                size(last.cumulative_bytes),
                size(shortfall)
            ));
        }
    }
    if let (Some(capacity), XlaReportKind::Allocation) = (capacity, report.kind) {
        let space = report.memory_space.as_deref().unwrap_or("");
        let bytes = report.request.as_ref().map_or(0, |r| r.bytes);
        if bytes > capacity && space != "hbm" && !space.is_empty() {
            // Scoped memory of a kernel (vmem, smem): its blocks are too big.
            out.push(format!(
                "smaller blocks: {space} holds {}, so the kernel's windows and scratch \
                 buffers must take at most that together (a finer grid, or blocks over \
                 fewer dimensions)",
                size(capacity)
            ));
        } else {
            let ways = bytes.div_ceil(capacity.max(1));
            if ways > 1 {
                out.push(format!(
                    "split across at least {ways} devices (sharding): {} per device, within \
                     the {} each holds, before anything else on it",
                    size(bytes.div_ceil(ways)),
                    size(capacity)
                ));
            }
        }
    }
    out
}
