//! The address × time picture of an allocator (PyTorch's "allocator state"
//! view; for a compiled program, offset × program order): a fixed grid of
//! cells, each holding the band of an allocation that covers it. The gaps
//! between used address ranges are cut out so that distant segments do not
//! shrink everything else to a line.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::replay;
use crate::model::{Memory, SiteId};

/// Cell code of an empty cell; band `i` is `CODES[i]`.
const EMPTY: u8 = b'.';
const CODES: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

#[derive(Debug, PartialEq, Eq, Serialize)]
pub(super) struct AddressView {
    pub cols: usize,
    pub rows: usize,
    /// Row-major, top row = lowest address; `.` is free, `A` the first band;
    /// run-length coded ([`run_length`]): the grid is 600 × 200 cells
    /// whatever the memory holds, and most of them are runs.
    pub grid: String,
    /// Position of the first and last column (relative to the timeline's x0).
    pub x: [i64; 2],
    /// Address ranges in use, lowest first, as `[start, end, first_row,
    /// offset]`, `offset` where the range starts on the rows' axis (the
    /// bytes of the ranges below it): row `r` shows the bytes from
    /// `r × span / rows` on that axis. At most 64 (the largest); the rest
    /// stay in the rows, unnamed.
    pub segments: Vec<[u64; 4]>,
    /// Sum of the ranges' lengths: the bytes the rows span.
    pub span: u64,
}

/// Builds the view, or `None` when the memory has no events or no addresses.
/// `band_of` maps a site to its band index in the timeline.
pub(super) fn address_view(
    memory: &Memory,
    x0: i64,
    cols: usize,
    rows: usize,
    mut band_of: impl FnMut(SiteId) -> usize,
) -> Option<AddressView> {
    if replay::uses_instants(memory) || memory.allocations.iter().all(|a| a.address.is_none()) {
        return None;
    }
    let (cols, rows) = (cols.max(1), rows.max(1));
    // Used address ranges, merged.
    let mut ranges: Vec<(u64, u64)> = memory
        .allocations
        .iter()
        .filter_map(|a| a.address().map(|s| (s, s.saturating_add(a.bytes.max(1)))))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    // Offset of each range on the compressed axis.
    let mut offsets = Vec::with_capacity(merged.len());
    let mut span: u64 = 0;
    for &(s, e) in &merged {
        offsets.push(span);
        span = span.saturating_add(e - s);
    }
    let compressed = |addr: u64| -> u64 {
        let i = merged
            .partition_point(|&(s, _)| s <= addr)
            .saturating_sub(1);
        match merged.get(i) {
            Some(&(s, _)) => offsets[i].saturating_add(addr.saturating_sub(s)),
            None => 0,
        }
    };
    let row_of = |off: u64| {
        ((off as u128 * rows as u128) / span.max(1) as u128).min(rows as u128 - 1) as usize
    };

    let (t_first, t_last) = replay::event_span(memory).unwrap_or((0, 0));
    let t_span = (t_last as i128 - t_first as i128).max(1);
    // A memory known only by what was live at its start (a snapshot without
    // a trace) has no time span: its allocations fill the width.
    let instant = t_last == t_first;
    let col_of = |at: i64| {
        let off = (at as i128 - t_first as i128).clamp(0, t_span);
        ((off * (cols as i128 - 1)) / t_span) as usize
    };

    let mut grid = vec![EMPTY; cols * rows];
    let mut codes: HashMap<SiteId, u8> = HashMap::new();
    // Live ranges never overlap in a sane allocator, which bounds the cells
    // painted; a profile whose ranges do overlap is cut off here instead.
    let mut budget: u64 = 64 * (cols * rows) as u64 + 16 * memory.allocations.len() as u64;
    replay::for_each_lifetime(memory, |id, start, end| {
        let Some(a) = memory.allocations.get(id.index()) else {
            return;
        };
        let Some(addr) = a.address() else {
            return;
        };
        let code = *codes.entry(a.site).or_insert_with(|| {
            CODES
                .get(band_of(a.site))
                .copied()
                .unwrap_or(CODES[CODES.len() - 1])
        });
        let first = compressed(addr);
        let (r0, r1) = (
            row_of(first),
            row_of(first.saturating_add(a.bytes.max(1) - 1)),
        );
        let (c0, c1) = if instant {
            (0, cols - 1)
        } else {
            (col_of(start), col_of(end.max(start)))
        };
        let cells = ((r1 - r0 + 1) * (c1 - c0 + 1)) as u64;
        if cells > budget {
            return;
        }
        budget -= cells;
        for r in r0..=r1 {
            // One fill per row (a memset), not a store per cell: a block
            // can cover the whole grid, and a page has a grid per memory.
            grid[r * cols + c0..=r * cols + c1].fill(code);
        }
    });
    let mut segments: Vec<[u64; 4]> = merged
        .iter()
        .zip(&offsets)
        .map(|(&(s, e), &off)| [s, e, row_of(off) as u64, off])
        .collect();
    if segments.len() > 64 {
        // Keep the 64 largest ranges' labels: the rest are slivers.
        let mut by_size: Vec<usize> = (0..segments.len()).collect();
        by_size.sort_by_key(|&i| (std::cmp::Reverse(segments[i][1] - segments[i][0]), i));
        let mut keep: Vec<usize> = by_size.into_iter().take(64).collect();
        keep.sort_unstable();
        segments = keep.into_iter().map(|i| segments[i]).collect();
    }
    Some(AddressView {
        cols,
        rows,
        grid: run_length(&grid),
        x: [t_first.wrapping_sub(x0), t_last.wrapping_sub(x0)],
        segments,
        span,
    })
}

/// The cells as runs: a run of `n` > 1 equal cells is `n` then the code
/// (`AA....BB` is `2A4.2B`), a single cell its code alone, so the text is
/// never longer than the cells and an empty grid is `120000.`.
fn run_length(cells: &[u8]) -> String {
    let mut out = String::new();
    let mut rest = cells;
    while let Some(&code) = rest.first() {
        // Eight cells at a time: grids are mostly long runs, and a page has
        // one per memory.
        let word = u64::from_ne_bytes([code; 8]);
        let whole = rest
            .chunks_exact(8)
            .take_while(|&c| c.try_into().map(u64::from_ne_bytes).ok() == Some(word))
            .count()
            * 8;
        let n = whole + rest[whole..].iter().take_while(|&&c| c == code).count();
        if n > 1 {
            out.push_str(&n.to_string());
        }
        // Every code is ASCII.
        out.push(char::from(code));
        rest = &rest[n..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, EventKind, MemoryKind};

    #[test]
    fn paints_lifetimes_over_compressed_addresses() {
        let mut m = Memory::new("gpu", MemoryKind::Allocator, Axis::EventIndex);
        // Two allocations far apart in the address space, one after the other.
        for (addr, site) in [(0x1000u64, 0u32), (0x7f00_0000_0000, 1)] {
            m.push_allocation(Allocation {
                bytes: 0x100,
                requested: 0x100,
                count: 1,
                address: crate::model::Address::new(addr),
                site: SiteId(site),
            });
        }
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        m.events = vec![
            ev(0, EventKind::Alloc, 0),
            ev(1, EventKind::Free, 0),
            ev(2, EventKind::Alloc, 1),
            ev(3, EventKind::Free, 1),
        ];
        let v = address_view(&m, 0, 4, 2, |s| s.index()).unwrap();
        assert_eq!(v.span, 0x200);
        assert_eq!(
            v.segments,
            vec![
                [0x1000, 0x1100, 0, 0],
                [0x7f00_0000_0000, 0x7f00_0000_0100, 1, 0x100]
            ]
        );
        // Row 0 (first range) live in columns 0..=1, row 1 in columns 2..=3.
        assert_eq!(v.grid, "2A4.2B");

        // Known only as live at the start: both fill the width.
        m.events.clear();
        m.live_at_start = vec![AllocId(0), AllocId(1)];
        let v = address_view(&m, 0, 4, 2, |s| s.index()).unwrap();
        assert_eq!(v.grid, "4A4B");
    }

    #[test]
    fn runs_are_coded_only_where_they_are_shorter() {
        assert_eq!(run_length(b""), "");
        assert_eq!(run_length(b"A"), "A");
        assert_eq!(run_length(b"AB.."), "AB2.");
        assert_eq!(run_length(&[EMPTY; 120_000]), "120000.");
        let mixed = b"ABABABAB".repeat(100);
        assert_eq!(run_length(&mixed).len(), mixed.len());
    }
}
