//! Per-step figures of a memory with steps: the peak in use inside each step,
//! allocations and frees, and what was in use when the step ended — the
//! input of per-step summaries and of leak detection at step boundaries.

use serde::Serialize;

use crate::model::{EventKind, Memory};

use super::replay;

/// The memory figures of one step of a training or serving loop.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepStats {
    /// The step number the program gave.
    pub step: i64,
    /// Where the step starts on the memory's axis.
    pub start: i64,
    /// Where it ends.
    pub end: i64,
    /// Most bytes in use at an event of the step (the allocator's figure
    /// when it reports one).
    pub peak_bytes: u64,
    /// Where in the step the peak is.
    pub peak_at: i64,
    /// Allocations made in the step.
    pub allocations: u64,
    /// Frees in the step.
    pub deallocations: u64,
    /// Bytes allocated in the step.
    pub allocated_bytes: u64,
    /// Bytes freed in the step.
    pub freed_bytes: u64,
    /// Bytes in use after the step's last event.
    pub end_bytes: u64,
    /// Index of the timeline point after the step's last event.
    #[serde(skip)]
    pub end_point: usize,
}

/// One row per step that has events, in step order. Events between two steps
/// count for the next one (they prepare it), as [`Memory::step_at`] says.
///
/// One walk over the events with the live bytes alone (not the whole
/// [`replay::Point`] of each), reading an allocator's figures a block of
/// samples at a time: 660,000 XSpace events were ~145 instructions each
/// through `for_each_point`.
pub fn per_step(memory: &Memory) -> Vec<StepStats> {
    if memory.steps.is_empty() || replay::uses_instants(memory) {
        return Vec::new();
    }
    let samples_every_event = replay::samples_every_event(memory);
    // Where the allocator reports the bytes in use after every event, the
    // walk counts no live bytes of its own: they would never be read
    // (~a quarter of the walk over 660,000 XSpace events).
    let count_live = !samples_every_event || !memory.allocator_samples.allocated_in_every_sample();
    let mut walk = StepWalk {
        memory,
        // A row per step at most (the events are in time order, so a
        // step's events are one stretch): grown by doubling, 30,000 rows'
        // 2.6 MB were ~800 page faults of the walk, each copy to fresh pages.
        rows: Vec::with_capacity(memory.steps.len()),
        steps: StepCursor::default(),
        live: replay::LiveBytes::at_start(memory),
    };
    if !samples_every_event {
        (0..memory.events.len()).for_each(|i| walk.event::<true>(i, None));
    } else if count_live {
        // Sample `i` is the allocator's state after event `i`.
        memory
            .allocator_samples
            .for_each_allocated(|i, reported| walk.event::<true>(i, reported));
    } else {
        memory
            .allocator_samples
            .for_each_allocated(|i, reported| walk.event::<false>(i, reported));
    }
    walk.rows
}

/// The state of [`per_step`]'s walk.
struct StepWalk<'m> {
    memory: &'m Memory,
    rows: Vec<StepStats>,
    steps: StepCursor,
    /// The live bytes, counted where no allocator reports them at every
    /// event (`COUNT_LIVE` of [`StepWalk::event`]).
    live: replay::LiveBytes<'m>,
}

impl StepWalk<'_> {
    /// Event `i`, after which the allocator reported `reported` bytes in
    /// use (else the live bytes count). Without `COUNT_LIVE`, every event
    /// has `reported` and the live bytes are not counted (a walk of its
    /// own, not a test at each event).
    #[inline]
    fn event<const COUNT_LIVE: bool>(&mut self, i: usize, reported: Option<u64>) {
        let memory = self.memory;
        let Some(&event) = memory.events.get(i) else {
            return;
        };
        if COUNT_LIVE {
            self.live.apply(event.kind(), event.alloc());
        }
        let Some(step) = self.steps.step_at(memory, event.at) else {
            return;
        };
        let in_use = reported.unwrap_or(self.live.bytes);
        let point = i + 1;
        if self.rows.last().is_none_or(|r| r.step != step.id) {
            self.rows.push(StepStats {
                step: step.id,
                start: step.start,
                end: step.end,
                peak_bytes: 0,
                peak_at: event.at,
                allocations: 0,
                deallocations: 0,
                allocated_bytes: 0,
                freed_bytes: 0,
                end_bytes: 0,
                end_point: point,
            });
        }
        let Some(row) = self.rows.last_mut() else {
            return;
        };
        let bytes = memory.allocation(event.alloc()).bytes;
        match event.kind() {
            EventKind::Alloc => {
                row.allocations += 1;
                row.allocated_bytes = row.allocated_bytes.saturating_add(bytes);
            }
            EventKind::Free => {
                row.deallocations += 1;
                row.freed_bytes = row.freed_bytes.saturating_add(bytes);
            }
        }
        if in_use > row.peak_bytes {
            row.peak_bytes = in_use;
            row.peak_at = event.at;
        }
        row.end_bytes = in_use;
        row.end_point = point;
    }
}

/// [`Memory::step_at`] for positions that mostly come in order (events):
/// profiles have a step per few dozen events, so walking the steps along
/// beats a binary search per event.
#[derive(Default)]
struct StepCursor {
    /// Steps starting at or before the last position asked for.
    after: usize,
    last_at: Option<i64>,
}

impl StepCursor {
    fn step_at<'m>(&mut self, memory: &'m Memory, at: i64) -> Option<&'m crate::model::Step> {
        let steps = &memory.steps;
        if self.last_at.is_some_and(|last| at >= last) {
            while steps.get(self.after).is_some_and(|s| s.start <= at) {
                self.after += 1;
            }
        } else {
            self.after = steps.partition_point(|s| s.start <= at);
        }
        self.last_at = Some(at);
        // As `Memory::step_at`: the step holding `at`, else the next one.
        if let Some(step) = self.after.checked_sub(1).and_then(|i| steps.get(i)) {
            if at <= step.end {
                return Some(step);
            }
        }
        steps.get(self.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, MemoryKind, SiteId, Step};

    #[test]
    fn events_count_for_their_step_and_gaps_for_the_next() {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
        for bytes in [10, 20, 30] {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site: SiteId(0),
            });
        }
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        m.events = vec![
            ev(5, EventKind::Alloc, 0),
            ev(12, EventKind::Alloc, 1),
            ev(15, EventKind::Free, 1),
            ev(25, EventKind::Alloc, 2),
        ];
        m.steps = vec![
            Step {
                id: 0,
                start: 0,
                end: 10,
            },
            Step {
                id: 1,
                start: 20,
                end: 30,
            },
        ];
        let rows = per_step(&m);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].step, rows[0].allocations, rows[0].end_bytes),
            (0, 1, 10)
        );
        // 12 and 15 fall between the steps: they count for step 1.
        assert_eq!(
            (
                rows[1].allocations,
                rows[1].deallocations,
                rows[1].peak_bytes
            ),
            (2, 1, 40)
        );
        assert_eq!((rows[1].end_bytes, rows[1].end_point), (40, 4));
    }

    #[test]
    fn reported_bytes_count_where_every_event_has_them_else_live_bytes_fill_in() {
        use crate::model::AllocatorSample;
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
        for bytes in [10, 20] {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site: SiteId(0),
            });
        }
        m.events = vec![
            Event::new(1, EventKind::Alloc, AllocId(0)),
            Event::new(2, EventKind::Alloc, AllocId(1)),
        ];
        m.steps = vec![Step {
            id: 7,
            start: 0,
            end: 10,
        }];
        let with = |reported: [Option<u64>; 2]| {
            let mut m = m.clone();
            for (at, bytes) in [1, 2].into_iter().zip(reported) {
                m.allocator_samples
                    .push(AllocatorSample::new(at).with_allocated_bytes(bytes));
            }
            let row = per_step(&m).remove(0);
            (row.peak_bytes, row.peak_at, row.end_bytes)
        };
        // Every sample reports: its figures, not the live 30 bytes.
        assert_eq!(with([Some(100), Some(50)]), (100, 1, 50));
        // One does not: the live bytes stand in for it.
        assert_eq!(with([Some(100), None]), (100, 1, 30));
        assert_eq!(with([Some(5), None]), (30, 2, 30));
    }

    #[test]
    fn the_step_cursor_answers_as_step_at_in_and_out_of_order() {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
        // Overlapping, gapped and empty spans.
        for (id, start, end) in [(0, 0, 10), (1, 5, 8), (2, 20, 30), (3, 20, 21), (4, 40, 40)] {
            m.steps.push(Step { id, start, end });
        }
        let mut cursor = StepCursor::default();
        let positions = (-3..50).chain([7, 2, 45, 20, 20, 19, 60, -1]);
        for at in positions {
            assert_eq!(
                cursor.step_at(&m, at).map(|s| s.id),
                m.step_at(at).map(|s| s.id),
                "{at}"
            );
        }
    }
}
