//! The allocator's end-state layout (PyTorch snapshot segments), split the
//! way `torch.cuda._memory_viz.segsum` splits it: reserved = allocated (a
//! live block counts its requested size) + free internal (live blocks'
//! rounding) + free external (every block not live, pending frees included).
//! Read from `Memory.segments` only; any format that records segments gets it.

use serde::Serialize;

use crate::model::{BlockState, Memory, Names};

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
