//! The peak of each CUDA stream of a memory, and what each stream held at
//! the memory's peak. A CUDA snapshot records the stream of every
//! allocation (`Site::stream`); the caching allocator keeps each stream's
//! blocks apart, and a program that uses side streams (NCCL communication
//! buffers, prefetches) reaches each stream's peak at a moment of its own.
//! `summary` and `peak` show the table for memories of two streams or more.

use serde::Serialize;

use crate::model::{Memory, Names, StrId};
use crate::report::{Cell, Table};

use super::{display_id, group::NONE_LABEL, point_label, replay};

/// One stream's peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamPeak {
    /// The stream's number as the file writes it (`0`: the default stream).
    pub stream: String,
    /// The stream's own peak: its most live bytes at any point.
    pub peak_bytes: u64,
    /// Where the stream first reached it, on the memory's axis.
    pub peak_at: i64,
    /// That position as a person reads it.
    pub peak_label: String,
    /// The stream's live bytes at the memory's peak.
    pub bytes_at_memory_peak: u64,
}

/// Each stream's peak, largest first (ties by stream), with its bytes at
/// point `memory_peak` (the memory's peak, as [`replay::Point::index`]);
/// empty unless the memory's allocations name two streams or more, or for a
/// memory of instants (no timeline to find a stream's peak on).
pub fn stream_peaks(names: &Names, memory: &Memory, memory_peak: usize) -> Vec<StreamPeak> {
    if replay::uses_instants(memory) {
        return Vec::new();
    }
    // Sites of fewer than two streams in the whole profile (an XSpace's
    // have none) leave every memory with fewer: its allocations, 660,000
    // of them, need not be looked at.
    let mut sites = names.sites().iter();
    let first = sites.next().map(|s| s.stream);
    if sites.all(|s| Some(s.stream) == first) {
        return Vec::new();
    }
    // Streams by a dense index, in order of first allocation.
    let mut streams: Vec<Option<StrId>> = Vec::new();
    let mut stream_of_site: rustc_hash::FxHashMap<crate::model::SiteId, usize> =
        rustc_hash::FxHashMap::default();
    let stream_of: Vec<usize> = memory
        .allocations
        .iter()
        .map(|a| {
            *stream_of_site.entry(a.site).or_insert_with(|| {
                let stream = names.site_of(a.site).stream;
                match streams.iter().position(|&s| s == stream) {
                    Some(i) => i,
                    None => {
                        streams.push(stream);
                        streams.len() - 1
                    }
                }
            })
        })
        .collect();
    if streams.len() < 2 {
        return Vec::new();
    }
    // Each lifespan as a rise at the point after the event that made it
    // (point 0: live at the start) and a fall at the point after its free.
    let mut changes: Vec<(usize, usize, i128)> = Vec::new();
    replay::for_each_lifespan(memory, |span| {
        let bytes = i128::from(memory.allocations[span.alloc.index()].bytes);
        let stream = stream_of[span.alloc.index()];
        changes.push((span.made.map_or(0, |m| m + 1), stream, bytes));
        if let Some(f) = span.freed {
            changes.push((f + 1, stream, -bytes));
        }
    });
    // Falls first at one point: only point 0 has several changes, all rises.
    changes.sort_unstable_by_key(|&(point, _, delta)| (point, delta));
    let mut live = vec![0i128; streams.len()];
    let mut peak = vec![(0i128, 0usize); streams.len()];
    let mut at_memory_peak = vec![0i128; streams.len()];
    for (point, stream, delta) in changes {
        live[stream] += delta;
        if live[stream] > peak[stream].0 {
            peak[stream] = (live[stream], point);
        }
        if point <= memory_peak {
            at_memory_peak[stream] += delta;
        }
    }
    let bytes = |b: i128| u64::try_from(b.max(0)).unwrap_or(u64::MAX);
    let position = |point: usize| match point.checked_sub(1) {
        Some(event) => memory.events.get(event).map_or(0, |e| e.at),
        None => memory.events.first().map_or(0, |e| e.at),
    };
    let mut out: Vec<StreamPeak> = streams
        .iter()
        .enumerate()
        .map(|(i, stream)| {
            let (top, point) = peak[i];
            let at = position(point);
            StreamPeak {
                stream: stream.map_or(NONE_LABEL.to_string(), |s| names.str(s).to_string()),
                peak_bytes: bytes(top),
                peak_at: at,
                peak_label: point_label(memory, point, at),
                bytes_at_memory_peak: bytes(at_memory_peak[i]),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.peak_bytes
            .cmp(&a.peak_bytes)
            .then_with(|| a.stream.cmp(&b.stream))
    });
    out
}

/// The table of a memory's stream peaks (`summary` and `peak` show it),
/// `None` when there are none.
pub fn streams_table(memory_id: &str, streams: &[StreamPeak]) -> Option<Table> {
    if streams.is_empty() {
        return None;
    }
    let mut t = Table::new(
        format!("Peak per CUDA stream — {}", display_id(memory_id)),
        vec!["stream", "peak_bytes", "peak_at", "at_memory_peak"],
    );
    for s in streams {
        t.rows.push(vec![
            s.stream.clone().into(),
            Cell::Bytes(s.peak_bytes),
            Cell::Figure {
                value: Some(s.peak_at),
                label: s.peak_label.clone(),
            },
            Cell::Bytes(s.bytes_at_memory_peak),
        ]);
    }
    t.notes.push(
        "each stream's own peak (its most live bytes, first reached at peak_at) and what it \
         held at the memory's peak"
            .to_string(),
    );
    Some(t)
}
