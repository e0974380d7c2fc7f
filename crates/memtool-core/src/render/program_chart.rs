//! A compiled program's buffers drawn as XProf's Memory Viewer draws them:
//! each buffer a block at its offset in the memory space (height: its size)
//! across the program positions it is live (width: its live range), and
//! the buffers live at the peak position listed by size for the "at the
//! peak" bar chart. The page's script (`templates/program.js`) draws both.

use serde::Serialize;

use crate::analysis::replay;
use crate::model::{Memory, Names};

/// Blocks sent to the page per program: the largest, and every one live at
/// the peak. A program's heap simulation has one buffer per value, so a
/// large program has tens of thousands; the smallest are slivers a pixel
/// high in a picture scaled to the peak.
pub(super) const MAX_BLOCKS: usize = 2000;

/// The picture of one program's memory space.
#[derive(Debug, Serialize)]
pub(super) struct ProgramChart {
    /// The program's module (`jit_step`) and memory space, as `peak` names
    /// them.
    pub module: String,
    pub memory_space: i64,
    /// First position drawn and one past the last (program order: the
    /// heap simulator's event index, as XProf numbers them).
    pub x: [i64; 2],
    /// The peak position, XProf's `peakHeapSizePosition`: the blocks live
    /// there are those flagged `peak`.
    pub peak_at: i64,
    pub peak_bytes: u64,
    /// Top of the offset axis: the end of the highest block drawn.
    pub span: u64,
    /// In allocation order (then by offset).
    pub blocks: Vec<ProgramBlock>,
    /// Blocks left out (the smallest, none live at the peak) and their
    /// bytes.
    pub omitted: usize,
    pub omitted_bytes: u64,
}

/// One buffer's live range in the space.
#[derive(Debug, Serialize)]
pub(super) struct ProgramBlock {
    /// Position where it becomes live, and where it is freed (one past the
    /// last position for one live to the end).
    pub s: i64,
    pub e: i64,
    /// Offset in the space and bytes (with padding), the bytes without.
    pub o: u64,
    pub b: u64,
    pub u: u64,
    /// The instruction that defines it (`fusion.3{1}`).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opcode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// The framework op (`jit(step)/transpose(jvp())/dot_general`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// The innermost source line, `file:line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Live at the peak position.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub peak: bool,
}

/// The chart of a compiled program's memory space, or `None` for any other
/// memory, or one without events or offsets. `peak_index` is the peak
/// point as [`replay::for_each_point`] numbers points.
pub(super) fn program_chart(
    names: &Names,
    memory: &Memory,
    peak_index: usize,
    peak_bytes: u64,
) -> Option<ProgramChart> {
    let program = memory.program.as_ref()?;
    if replay::uses_instants(memory) || memory.events.is_empty() {
        return None;
    }
    let first = memory.events.first().map_or(0, |e| e.at);
    let last = memory.events.iter().map(|e| e.at).max().unwrap_or(first);
    let end = last.saturating_add(1);
    let at = |event: Option<usize>, default: i64| {
        event
            .and_then(|i| memory.events.get(i))
            .map_or(default, |e| e.at)
    };
    // (start, end, offset, bytes, alloc, live at peak)
    let mut spans = Vec::new();
    replay::for_each_lifespan(memory, |span| {
        let a = memory.allocation(span.alloc);
        if let Some(offset) = a.address() {
            spans.push((
                at(span.made, first),
                at(span.freed, end),
                offset,
                a.bytes,
                span.alloc,
                span.live_at(peak_index),
            ));
        }
    });
    if spans.is_empty() {
        return None;
    }
    // Keep the blocks live at the peak, then the largest.
    spans.sort_by(|a, b| b.5.cmp(&a.5).then(b.3.cmp(&a.3)).then(a.4.cmp(&b.4)));
    let kept = spans
        .len()
        .min(MAX_BLOCKS)
        .max(spans.iter().filter(|s| s.5).count());
    let omitted = spans.len() - kept;
    let omitted_bytes = spans[kept..]
        .iter()
        .fold(0u64, |sum, s| sum.saturating_add(s.3));
    spans.truncate(kept);
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)).then(a.4.cmp(&b.4)));
    let text = |id: Option<crate::model::StrId>| id.map(|s| names.str(s).to_string());
    let span = spans
        .iter()
        .map(|s| s.2.saturating_add(s.3))
        .max()
        .unwrap_or(0);
    let blocks = spans
        .into_iter()
        .map(|(s, e, o, b, id, peak)| {
            let a = memory.allocation(id);
            let site = names.site_of(a.site);
            let buffer = program.buffer(id);
            ProgramBlock {
                s,
                e: e.max(s.saturating_add(1)),
                o,
                b,
                u: a.requested,
                name: buffer.map_or_else(String::new, |b| names.str(b.name).to_string()),
                opcode: text(buffer.and_then(|b| b.opcode)),
                shape: text(site.shape),
                op: text(site.op),
                category: text(site.category),
                source: names.leaf(site.stack).map(|f| {
                    let frame = names.frame_of(f);
                    format!("{}:{}", names.str(frame.file), frame.line)
                }),
                peak,
            }
        })
        .collect();
    let peak_at = match peak_index {
        0 => first,
        i => at(Some(i - 1), first),
    };
    Some(ProgramChart {
        module: program.module.clone(),
        memory_space: program.memory_space,
        x: [first, end],
        peak_at,
        peak_bytes,
        span,
        blocks,
        omitted,
        omitted_bytes,
    })
}
