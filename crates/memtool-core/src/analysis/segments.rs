//! The allocator's end-state layout (PyTorch snapshot segments), split the
//! way `torch.cuda._memory_viz.segsum` splits it: reserved = allocated (a
//! live block counts its requested size) + free internal (live blocks'
//! rounding) + free external (every block not live, pending frees included).
//! Read from `Memory.segments` only; any format that records segments gets it.
//!
//! Also what the allocator holds over time: the address ranges at any point
//! (`Memory.held` with `held_changes` undone), and reserved against in-use
//! bytes at every point, from the allocator's reserved figure.

use std::collections::BTreeMap;

use serde::Serialize;

use super::replay::{self, Point};
use crate::model::{AddressRange, BlockState, HeldChange, Memory, Names};

/// Totals over all segments of a memory, and one row per segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentLayout {
    /// Bytes the allocator holds from the device.
    pub reserved_bytes: u64,
    /// Bytes of allocated blocks.
    pub allocated_bytes: u64,
    /// Free bytes in free blocks.
    pub free_external_bytes: u64,
    /// Bytes allocated blocks hold beyond what was asked (rounding).
    pub free_internal_bytes: u64,
    /// The largest block free for reuse (`inactive`) in any segment.
    pub largest_free_block_bytes: u64,
    /// Each segment, largest free space first.
    pub segments: Vec<SegmentRow>,
}

/// One segment of the allocator's layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentRow {
    /// Its start address, when recorded.
    pub address: Option<u64>,
    /// The CUDA stream it serves, when recorded.
    pub stream: Option<i64>,
    /// Segment type or pool (`large`, `small`), when recorded.
    pub pool: Option<String>,
    /// Bytes reserved from the device.
    pub reserved_bytes: u64,
    /// Bytes of its allocated blocks.
    pub allocated_bytes: u64,
    /// Free bytes in its free blocks.
    pub free_external_bytes: u64,
    /// Bytes its allocated blocks hold beyond what was asked.
    pub free_internal_bytes: u64,
    /// Its largest free block.
    pub largest_free_block_bytes: u64,
    /// How many blocks it is split into.
    pub blocks: usize,
    /// How many of them are allocated.
    pub live_blocks: usize,
}

/// `None` when the memory records no segments.
pub fn layout(names: &Names, memory: &Memory) -> Option<SegmentLayout> {
    if memory.segments.is_empty() {
        return None;
    }
    let mut rows: Vec<SegmentRow> = memory
        .segments
        .iter()
        .map(|s| {
            let mut row = SegmentRow {
                address: s.address,
                stream: s.stream,
                pool: s.pool.map(|p| names.str(p).to_string()),
                reserved_bytes: s.bytes,
                allocated_bytes: 0,
                free_external_bytes: 0,
                free_internal_bytes: 0,
                largest_free_block_bytes: 0,
                blocks: s.blocks.len(),
                live_blocks: 0,
            };
            for b in &s.blocks {
                if b.state == BlockState::Allocated {
                    row.live_blocks += 1;
                    row.allocated_bytes = row.allocated_bytes.saturating_add(b.requested);
                    row.free_internal_bytes = row
                        .free_internal_bytes
                        .saturating_add(b.bytes.saturating_sub(b.requested));
                } else {
                    row.free_external_bytes = row.free_external_bytes.saturating_add(b.bytes);
                    if b.state == BlockState::Free {
                        row.largest_free_block_bytes = row.largest_free_block_bytes.max(b.bytes);
                    }
                }
            }
            row
        })
        .collect();
    // Most free space first, as a reader hunting fragmentation wants; then
    // by address for a stable order.
    rows.sort_by(|a, b| {
        b.free_external_bytes
            .cmp(&a.free_external_bytes)
            .then(a.address.cmp(&b.address))
    });
    let sum = |f: fn(&SegmentRow) -> u64| rows.iter().fold(0u64, |t, r| t.saturating_add(f(r)));
    Some(SegmentLayout {
        reserved_bytes: sum(|r| r.reserved_bytes),
        allocated_bytes: sum(|r| r.allocated_bytes),
        free_external_bytes: sum(|r| r.free_external_bytes),
        free_internal_bytes: sum(|r| r.free_internal_bytes),
        largest_free_block_bytes: rows
            .iter()
            .map(|r| r.largest_free_block_bytes)
            .max()
            .unwrap_or(0),
        segments: rows,
    })
}

/// The address ranges an allocator holds at one point: disjoint, in address
/// order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeldRanges {
    /// Start → end (exclusive) of each range.
    ranges: BTreeMap<u64, u64>,
    /// Their total length.
    bytes: u64,
}

impl HeldRanges {
    fn of(ranges: &[AddressRange]) -> HeldRanges {
        let mut held = HeldRanges::default();
        for r in ranges {
            held.add(r.start, r.end());
        }
        held
    }

    /// Takes `[start, end)`, merging it with the ranges it touches.
    fn add(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        let touching: Vec<(u64, u64)> = self
            .ranges
            .range(..=end)
            .rev()
            .take_while(|&(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.ranges.remove(&s);
            self.bytes -= e - s;
            start = start.min(s);
            end = end.max(e);
        }
        self.ranges.insert(start, end);
        self.bytes += end - start;
    }

    /// Gives back `[start, end)`, splitting the ranges it cuts.
    fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let cut: Vec<(u64, u64)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|&(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in cut {
            self.ranges.remove(&s);
            self.bytes -= e - s;
            if s < start {
                self.ranges.insert(s, start);
                self.bytes += start - s;
            }
            if e > end {
                self.ranges.insert(end, e);
                self.bytes += e - end;
            }
        }
    }

    fn apply(&mut self, change: &HeldChange, forward: bool) {
        let (start, end) = (change.range.start, change.range.end());
        if change.reserved == forward {
            self.add(start, end);
        } else {
            self.remove(start, end);
        }
    }

    /// Bytes held (disjoint ranges within the 64-bit address space: their
    /// sum cannot overflow).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The ranges, `(start, end)`, in address order.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }
}

/// Whether the ranges held at timeline point `index` include `change`. A
/// change made between two events counts from the point after the next
/// event: a segment reserved for an allocation is in use with it, and one
/// given back after a free was free memory until then. The last point is
/// the end state, every change included.
fn includes(memory: &Memory, index: usize, change: &HeldChange) -> bool {
    change.events_before < index || index >= memory.events.len()
}

/// The ranges `memory`'s allocator holds at timeline point `index` (as
/// [`Point::index`]): the ranges held at the end with the later changes
/// undone, latest first. `None` when the profile does not say which ranges
/// the allocator holds.
pub fn held_at(memory: &Memory, index: usize) -> Option<HeldRanges> {
    if memory.held.is_empty() {
        return None;
    }
    let mut held = HeldRanges::of(&memory.held);
    for change in memory
        .held_changes
        .iter()
        .rev()
        .take_while(|c| !includes(memory, index, c))
    {
        held.apply(change, false);
    }
    Some(held)
}

/// The ranges `memory`'s allocator held at a moment between two events: after
/// `events_before` events, at position `at` on its axis (an out-of-memory
/// failure's). Of the changes made in that gap, those at or before `at` are
/// in (an allocator gives its cached segments back before it gives up), the
/// later ones undone. `None` when the profile does not say which ranges the
/// allocator holds.
pub fn held_between_events(memory: &Memory, events_before: usize, at: i64) -> Option<HeldRanges> {
    if memory.held.is_empty() {
        return None;
    }
    let mut held = HeldRanges::of(&memory.held);
    for change in memory.held_changes.iter().rev().take_while(|c| {
        c.events_before > events_before || (c.events_before == events_before && c.at > at)
    }) {
        held.apply(change, false);
    }
    Some(held)
}

/// Reserved and in-use bytes at one point of a memory's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReservedUse {
    /// The timeline point.
    pub point: Point,
    /// What the allocator reserved there.
    pub reserved_bytes: u64,
    /// In use there: the allocator's figure where it reports one at every
    /// event, else the replayed live bytes.
    pub in_use_bytes: u64,
}

impl ReservedUse {
    /// Reserved but not in use: free memory the allocator holds.
    pub fn unused_bytes(&self) -> u64 {
        self.reserved_bytes.saturating_sub(self.in_use_bytes)
    }
}

/// Calls `visit` at every point of `memory`'s event timeline where what the
/// allocator reserved is known. Only an allocator that reports what it
/// reserved has a figure (PyTorch `Total Reserved`, snapshot segments): a
/// compiled program's memory space is held whole, not reserved as needed.
/// Where the profile also says which ranges it holds ([`held_at`]), their
/// bytes are the figure, changing at the exact event; else its reports, from
/// the first on. Nothing for memories described by instants.
pub fn for_each_reserved_point(memory: &Memory, mut visit: impl FnMut(ReservedUse)) {
    let samples = &memory.allocator_samples;
    // A format reports reserved bytes in all of a memory's samples or in
    // none: the ends tell without a scan of millions of XSpace samples.
    let reports_reserved = [samples.first(), samples.last()]
        .into_iter()
        .flatten()
        .any(|s| s.reserved_bytes().is_some());
    if replay::uses_instants(memory) || !reports_reserved {
        return;
    }
    if let Some(mut held) = held_at(memory, 0) {
        let mut next = memory
            .held_changes
            .iter()
            .take_while(|c| includes(memory, 0, c))
            .count();
        replay::for_each_point(memory, |p| {
            while let Some(change) = memory
                .held_changes
                .get(next)
                .filter(|c| includes(memory, p.index, c))
            {
                held.apply(change, true);
                next += 1;
            }
            visit(ReservedUse {
                point: p,
                reserved_bytes: held.bytes(),
                in_use_bytes: p.bytes,
            });
        });
        return;
    }
    let dense = replay::samples_every_event(memory);
    let sample_points: Vec<usize> = if dense {
        Vec::new()
    } else {
        (0..samples.len())
            .map(|i| replay::point_of_sample(memory, i))
            .collect()
    };
    let mut next = 0usize;
    let mut reserved: Option<u64> = None;
    replay::for_each_point(memory, |p| {
        let mut in_use = p.bytes;
        if dense {
            if let Some(s) = p.index.checked_sub(1).and_then(|i| samples.get(i)) {
                reserved = s.reserved_bytes().or(reserved);
                in_use = s.allocated_bytes().unwrap_or(in_use);
            }
        } else {
            while next < samples.len() && sample_points[next] <= p.index {
                reserved = samples
                    .get(next)
                    .and_then(|s| s.reserved_bytes())
                    .or(reserved);
                next += 1;
            }
        }
        if let Some(reserved_bytes) = reserved {
            visit(ReservedUse {
                point: p,
                reserved_bytes,
                in_use_bytes: in_use,
            });
        }
    });
}
