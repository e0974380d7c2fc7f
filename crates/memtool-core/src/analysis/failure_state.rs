//! The allocator's state at the moment of a recorded out-of-memory failure,
//! the input of `oom`'s verdict.
//!
//! A snapshot's `segments` are the allocator's state when the file was
//! written. An out-of-memory observer writes it right after the failure, so
//! they are the state at the failure; but a program that catches the error
//! and goes on (frees its tensors, dumps the snapshot later) leaves a trace
//! with events after the failure, and an end state that says nothing about
//! the failure. Then the state is replayed: the ranges the allocator held at
//! the failure (the end's, with the later `segment_*` changes undone) and
//! the allocations live there, placed at their addresses; the free blocks
//! are the gaps between them inside each range. When the file does not
//! record the ranges, free memory inside them at the failure is unknown and
//! the state says so.

use serde::Serialize;

use crate::model::{AllocId, BlockState, Memory, OutOfMemory, StrId};

use super::segments;

/// PyTorch's caching allocator rounds every block up to a multiple of
/// 512 bytes (`kMinBlockSize`); a replayed block takes that much room.
const MIN_BLOCK_BYTES: u64 = 512;

/// Where the figures at a failure come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateAtFailure {
    /// The recorded segments: no event follows the failure, so they are the
    /// allocator's state then.
    Segments,
    /// Replayed from the trace to the failure: events follow it, so the
    /// recorded segments are a later state.
    Replayed,
    /// Events follow the failure and the file does not record which ranges
    /// the allocator held: reserved and free memory at the failure are
    /// unknown (reserved is counted as the live blocks, free as none).
    Unknown,
}

/// Free memory inside the reserved segments of one pool and stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolFree {
    /// The pool (`large`, `small`), when recorded.
    pub pool: Option<String>,
    /// The stream, when recorded.
    pub stream: Option<i64>,
    /// Segments of this pool and stream.
    pub segments: usize,
    /// Their bytes.
    pub reserved_bytes: u64,
    /// Bytes of their free blocks.
    pub free_bytes: u64,
    /// How many free blocks.
    pub free_blocks: usize,
    /// The largest free block.
    pub largest_free_block_bytes: u64,
}

/// One segment (a replayed held range) at the failure, as the allocator
/// settings' advice weighs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentAtFailure {
    /// Its bytes.
    pub bytes: u64,
    /// Bytes of its free blocks.
    pub free_bytes: u64,
    /// Whether a block in it is allocated or waits to be freed.
    pub holds_live: bool,
}

/// The allocator at a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatorState {
    /// Where these figures come from.
    pub source: StateAtFailure,
    /// Bytes held from the device.
    pub reserved: u64,
    /// Bytes of blocks handed out (rounded as the allocator rounds them).
    pub allocated: u64,
    /// Bytes of blocks freed but waiting for stream work.
    pub pending: u64,
    /// Bytes of free blocks inside the reserved segments.
    pub free: u64,
    /// Free memory per pool and stream, most free first.
    pub pools: Vec<PoolFree>,
    /// The segments, for the settings' advice.
    pub segments: Vec<SegmentAtFailure>,
    /// Events recorded after the failure.
    pub events_after: usize,
}

/// The state of `memory`'s allocator at `failure`, where `live` is the
/// replayed live set there; `pool_name` names a segment's pool.
pub fn at_failure(
    memory: &Memory,
    failure: &OutOfMemory,
    live: &[AllocId],
    pool_name: impl Fn(StrId) -> String,
) -> AllocatorState {
    let events_after = memory.events.len().saturating_sub(failure.events_before);
    let mut state = AllocatorState {
        source: StateAtFailure::Segments,
        reserved: 0,
        allocated: 0,
        pending: 0,
        free: 0,
        pools: Vec::new(),
        segments: Vec::new(),
        events_after,
    };
    if events_after == 0 && !memory.segments.is_empty() {
        for s in &memory.segments {
            let pool = s.pool.map(&pool_name);
            let mut seg = SegmentAtFailure {
                bytes: s.bytes,
                free_bytes: 0,
                holds_live: false,
            };
            let row = pool_row(&mut state.pools, pool, s.stream);
            row.segments += 1;
            row.reserved_bytes = row.reserved_bytes.saturating_add(s.bytes);
            for b in &s.blocks {
                match b.state {
                    BlockState::Allocated => {
                        state.allocated = state.allocated.saturating_add(b.bytes);
                        seg.holds_live = true;
                    }
                    BlockState::PendingFree => {
                        state.pending = state.pending.saturating_add(b.bytes);
                        seg.holds_live = true;
                    }
                    BlockState::Free => {
                        seg.free_bytes = seg.free_bytes.saturating_add(b.bytes);
                        row.free_bytes = row.free_bytes.saturating_add(b.bytes);
                        row.free_blocks += 1;
                        row.largest_free_block_bytes = row.largest_free_block_bytes.max(b.bytes);
                    }
                }
            }
            state.reserved = state.reserved.saturating_add(s.bytes);
            state.free = state.free.saturating_add(seg.free_bytes);
            state.segments.push(seg);
        }
    } else if let Some(held) = (events_after > 0)
        .then(|| segments::held_between_events(memory, failure.events_before, failure.at))
        .flatten()
    {
        state.source = StateAtFailure::Replayed;
        state.allocated = live.iter().fold(0u64, |t, &id| {
            t.saturating_add(block_bytes(memory.allocation(id).bytes))
        });
        // Live blocks by address, each taking its rounded size.
        let mut placed: Vec<(u64, u64)> = live
            .iter()
            .filter_map(|&id| {
                let a = memory.allocation(id);
                a.address()
                    .map(|at| (at, at.saturating_add(block_bytes(a.bytes))))
            })
            .collect();
        placed.sort_unstable();
        let mut next = 0usize;
        for (start, end) in held.ranges() {
            // The range's pool and stream: those of a recorded segment in it.
            let recorded = memory
                .segments
                .iter()
                .find(|s| s.address.is_some_and(|a| a >= start && a < end));
            let pool = recorded.and_then(|s| s.pool).map(&pool_name);
            let stream = recorded.and_then(|s| s.stream);
            let mut seg = SegmentAtFailure {
                bytes: end - start,
                free_bytes: 0,
                holds_live: false,
            };
            let row = pool_row(&mut state.pools, pool, stream);
            row.segments += 1;
            row.reserved_bytes = row.reserved_bytes.saturating_add(end - start);
            while next < placed.len() && placed[next].0 < start {
                next += 1;
            }
            let mut cursor = start;
            while next < placed.len() && placed[next].0 < end {
                let (block_start, block_end) = placed[next];
                gap(cursor, block_start, row, &mut seg);
                cursor = cursor.max(block_end.min(end));
                seg.holds_live = true;
                next += 1;
            }
            gap(cursor, end, row, &mut seg);
            state.free = state.free.saturating_add(seg.free_bytes);
            state.segments.push(seg);
        }
        state.reserved = held.bytes();
    } else {
        // No layout at the failure: the live allocations are all that is
        // known to be in use, and free memory inside the segments is unknown.
        state.source = StateAtFailure::Unknown;
        let live_bytes = live
            .iter()
            .fold(0u64, |t, &id| t.saturating_add(memory.allocation(id).bytes));
        state.allocated = live_bytes;
        state.reserved = live_bytes;
    }
    state.pools.sort_by(|a, b| {
        b.free_bytes
            .cmp(&a.free_bytes)
            .then_with(|| a.pool.cmp(&b.pool))
            .then(a.stream.cmp(&b.stream))
    });
    state
}

/// Counts `[from, to)`, a gap between live blocks, as a free block.
fn gap(from: u64, to: u64, row: &mut PoolFree, seg: &mut SegmentAtFailure) {
    if to > from {
        seg.free_bytes += to - from;
        row.free_bytes = row.free_bytes.saturating_add(to - from);
        row.free_blocks += 1;
        row.largest_free_block_bytes = row.largest_free_block_bytes.max(to - from);
    }
}

/// The room a live allocation of `bytes` takes in its segment.
fn block_bytes(bytes: u64) -> u64 {
    bytes
        .max(1)
        .div_ceil(MIN_BLOCK_BYTES)
        .saturating_mul(MIN_BLOCK_BYTES)
}

fn pool_row(pools: &mut Vec<PoolFree>, pool: Option<String>, stream: Option<i64>) -> &mut PoolFree {
    let i = match pools
        .iter()
        .position(|p| p.pool == pool && p.stream == stream)
    {
        Some(i) => i,
        None => {
            pools.push(PoolFree {
                pool,
                stream,
                segments: 0,
                reserved_bytes: 0,
                free_bytes: 0,
                free_blocks: 0,
                largest_free_block_bytes: 0,
            });
            pools.len() - 1
        }
    };
    &mut pools[i]
}
