//! Walking a memory's timeline. Every analysis asks for points and live sets
//! through here, whatever the input format: a memory with instants (pprof
//! snapshots) has one point per instant; a memory with an event stream has a
//! point before the first event and one after each event.

use crate::model::{AllocId, EventKind, Memory};

/// Totals at one point of a memory's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// Index of the point (instant index, or 0 = start and i+1 = after event i).
    pub index: usize,
    /// Position on the memory's axis.
    pub at: i64,
    /// Bytes the allocator handed out.
    pub bytes: u64,
    /// Bytes the program asked for.
    pub requested: u64,
    /// Buffers live (an allocation's `count` each).
    pub buffers: u64,
}

/// Tracks which allocations are live while events are applied in order.
/// Frees of allocations that are not live, and allocations that already are,
/// change nothing: profiles cut at either end contain both.
pub struct LiveSet<'m> {
    memory: &'m Memory,
    live: Vec<bool>,
    /// Live bytes.
    pub bytes: u64,
    /// Live bytes as the program asked for them.
    pub requested: u64,
    /// Live buffers.
    pub buffers: u64,
}

impl<'m> LiveSet<'m> {
    /// The live set before the memory's first event.
    pub fn at_start(memory: &'m Memory) -> Self {
        let mut set = LiveSet {
            memory,
            live: none_live(memory.allocations.len()),
            bytes: 0,
            requested: 0,
            buffers: 0,
        };
        for &id in &memory.live_at_start {
            set.insert(id);
        }
        set
    }

    /// Applies one event; returns whether it changed the live set.
    pub fn apply(&mut self, kind: EventKind, id: AllocId) -> bool {
        match kind {
            EventKind::Alloc => self.insert(id),
            EventKind::Free => self.remove(id),
        }
    }

    fn insert(&mut self, id: AllocId) -> bool {
        if !flip(&mut self.live, id, true) {
            return false;
        }
        let a = &self.memory.allocations[id.index()];
        // Saturating: a file may claim sizes whose sum does not fit in 64
        // bits (`load` warns); a capped figure, never a wrapped one.
        self.bytes = self.bytes.saturating_add(a.bytes);
        self.requested = self.requested.saturating_add(a.requested);
        self.buffers = self.buffers.saturating_add(u64::from(a.count));
        true
    }

    fn remove(&mut self, id: AllocId) -> bool {
        if !flip(&mut self.live, id, false) {
            return false;
        }
        let a = &self.memory.allocations[id.index()];
        self.bytes = self.bytes.saturating_sub(a.bytes);
        self.requested = self.requested.saturating_sub(a.requested);
        self.buffers = self.buffers.saturating_sub(u64::from(a.count));
        true
    }

    /// Whether allocation `id` is live.
    pub fn contains(&self, id: AllocId) -> bool {
        self.live.get(id.index()).copied().unwrap_or(false)
    }

    /// The live allocations, in allocation order.
    pub fn ids(&self) -> Vec<AllocId> {
        self.live
            .iter()
            .enumerate()
            .filter(|(_, &l)| l)
            .map(|(i, _)| AllocId(i as u32))
            .collect()
    }
}

/// No allocation live, a `bool` each, written when made: a vector allocated
/// zeroed (`vec![false; n]`) is mapped to the kernel's zero page where a
/// walk first reads it, and the write that follows faults again and
/// interrupts the other cores to flush their TLBs: 22 to 41 such
/// interrupts a `summary` of the 660,000-event XSpace benchmark (counted
/// with the `tlb:tlb_flush` tracepoint), each keeping the walk waiting
/// while another core is woken; none since.
fn none_live(allocations: usize) -> Vec<bool> {
    let mut live = Vec::with_capacity(allocations);
    live.resize(allocations, false);
    live
}

/// Marks allocation `id` live or not; whether that changed anything (an
/// id out of range, a free of what is not live and an allocation of what
/// already is change nothing), shared by [`LiveSet`] and [`LiveBytes`].
#[inline]
fn flip(live: &mut [bool], id: AllocId, to: bool) -> bool {
    match live.get_mut(id.index()) {
        Some(slot) if *slot != to => {
            *slot = to;
            true
        }
        _ => false,
    }
}

/// A [`LiveSet`] that counts live bytes alone: what a walk that wants the
/// bytes in use after each event keeps (the per-step figures, the
/// landmarks' timeline), without the requested bytes and buffers beside.
pub struct LiveBytes<'m> {
    memory: &'m Memory,
    live: Vec<bool>,
    /// Live bytes, as [`LiveSet::bytes`].
    pub bytes: u64,
}

impl<'m> LiveBytes<'m> {
    /// The live bytes before the memory's first event.
    pub fn at_start(memory: &'m Memory) -> Self {
        let mut set = LiveBytes {
            memory,
            live: none_live(memory.allocations.len()),
            bytes: 0,
        };
        for &id in &memory.live_at_start {
            set.apply(EventKind::Alloc, id);
        }
        set
    }

    /// Applies one event as [`LiveSet::apply`]; returns whether it changed
    /// the live set.
    #[inline]
    pub fn apply(&mut self, kind: EventKind, id: AllocId) -> bool {
        let alloc = kind == EventKind::Alloc;
        if !flip(&mut self.live, id, alloc) {
            return false;
        }
        let bytes = self.memory.allocations[id.index()].bytes;
        self.bytes = if alloc {
            self.bytes.saturating_add(bytes)
        } else {
            self.bytes.saturating_sub(bytes)
        };
        true
    }

    /// Whether allocation `id` is live.
    pub fn contains(&self, id: AllocId) -> bool {
        self.live.get(id.index()).copied().unwrap_or(false)
    }

    /// The live allocations, in allocation order.
    pub fn ids(&self) -> impl Iterator<Item = AllocId> + '_ {
        self.live
            .iter()
            .enumerate()
            .filter(|(_, &l)| l)
            .map(|(i, _)| AllocId(i as u32))
    }
}

/// Whether the memory is described by instants rather than events.
pub fn uses_instants(memory: &Memory) -> bool {
    !memory.instants.is_empty()
}

/// Calls `visit` for every point of the memory's timeline, in order.
pub fn for_each_point(memory: &Memory, mut visit: impl FnMut(Point)) {
    if uses_instants(memory) {
        for index in 0..memory.instants.len() {
            if let Some(p) = instant_point(memory, index) {
                visit(p);
            }
        }
        return;
    }
    let mut set = LiveSet::at_start(memory);
    let start_at = memory.events.first().map_or(0, |e| e.at);
    visit(point_of(&set, 0, start_at));
    for (i, event) in memory.events.iter().enumerate() {
        set.apply(event.kind(), event.alloc());
        visit(point_of(&set, i + 1, event.at));
    }
}

/// Allocation and free events of a memory's stream (`None` for snapshots).
pub fn event_counts(memory: &Memory) -> Option<(usize, usize)> {
    if memory.events.is_empty() {
        return None;
    }
    let allocs = memory
        .events
        .iter()
        .filter(|e| e.kind() == EventKind::Alloc)
        .count();
    Some((allocs, memory.events.len() - allocs))
}

/// Whether the allocator reported its state after every event (sample `i`
/// is the state after event `i`), as XSpace allocators do; otherwise samples
/// are placed by time.
pub fn samples_every_event(memory: &Memory) -> bool {
    memory.allocator_samples.len() == memory.events.len()
}

/// The first event's position and the latest position of any event (events
/// of some formats are not in time order), or `None` without events.
pub fn event_span(memory: &Memory) -> Option<(i64, i64)> {
    let first = memory.events.first()?.at;
    let last = memory.events.iter().map(|e| e.at).max().unwrap_or(first);
    Some((first, last.max(first)))
}

/// One step of [`walk_to_points`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkStep {
    /// The allocation is live from here on (live at the start, or made).
    Live(AllocId),
    /// The allocation is no longer live.
    Freed(AllocId),
    /// The walk reached the k-th of the points asked for.
    Point(usize),
}

/// Replays an event stream up to each of `points` (ascending point indices,
/// as [`Point::index`]): `visit` sees the allocations live at the start, then
/// each change of the live set, and `Point(k)` when the k-th point is
/// reached. What keeps running totals at many points (leak series, timeline
/// columns) builds on this, so the live set has one walk.
pub fn walk_to_points(memory: &Memory, points: &[usize], mut visit: impl FnMut(WalkStep)) {
    let mut set = LiveSet::at_start(memory);
    for id in set.ids() {
        visit(WalkStep::Live(id));
    }
    let mut applied = 0usize;
    for (k, &p) in points.iter().enumerate() {
        while applied < p.min(memory.events.len()) {
            let event = memory.events[applied];
            if set.apply(event.kind(), event.alloc()) {
                visit(match event.kind() {
                    EventKind::Alloc => WalkStep::Live(event.alloc()),
                    EventKind::Free => WalkStep::Freed(event.alloc()),
                });
            }
            applied += 1;
        }
        visit(WalkStep::Point(k));
    }
}

/// The totals of instant `index`.
fn instant_point(memory: &Memory, index: usize) -> Option<Point> {
    let instant = memory.instants.get(index)?;
    let mut p = Point {
        index,
        at: instant.at,
        bytes: 0,
        requested: 0,
        buffers: 0,
    };
    for &id in &instant.live {
        let a = memory.allocation(id);
        p.bytes = p.bytes.saturating_add(a.bytes);
        p.requested = p.requested.saturating_add(a.requested);
        p.buffers = p.buffers.saturating_add(u64::from(a.count));
    }
    Some(p)
}

fn point_of(set: &LiveSet<'_>, index: usize, at: i64) -> Point {
    Point {
        index,
        at,
        bytes: set.bytes,
        requested: set.requested,
        buffers: set.buffers,
    }
}

/// The first point with the most live bytes, or `None` for a memory with no points.
pub fn peak(memory: &Memory) -> Option<Point> {
    let mut best: Option<Point> = None;
    for_each_point(memory, |p| {
        if best.is_none_or(|b| p.bytes > b.bytes) {
            best = Some(p);
        }
    });
    best
}

/// How to choose among points that tie for the most bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ties {
    /// The first (memtool's default: when the peak was first reached).
    #[default]
    First,
    /// The last (what XProf reports), with XProf's other rules for the
    /// peak: the allocator's own figure as it reports it, and a compiled
    /// program's first peak all the same.
    Last,
}

/// The peak as the commands report it. When the allocator reports its own
/// in-use figure ([`crate::model::AllocatorSample::allocated_bytes`]), that
/// figure decides — it counts what the recorded events may miss — and the
/// live set is the replayed one at the same position; otherwise it is the
/// replayed peak.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// The timeline point at the peak (replayed totals).
    pub point: Point,
    /// Bytes in use at the peak: the allocator's figure (or the live
    /// allocations' total, if more), else `point.bytes`.
    pub bytes: u64,
    /// The allocator sample at the peak, when the peak came from one.
    pub sample: Option<usize>,
}

/// The peak as outputs report it: the allocator's in-use figure at the first (or with `Ties::Last`, the last) of its highest samples when it reports one at every event, else the replayed peak.
pub fn reported_peak(memory: &Memory, ties: Ties) -> Option<Peak> {
    // A compiled program's peak is the first position its heap reaches it:
    // XProf's Memory Viewer (`peakHeapSizePosition`) and memtool alike.
    let ties = if memory.program.is_some() {
        Ties::First
    } else {
        ties
    };
    let mut best: Option<(usize, u64)> = None;
    // Only an allocator that reports its state at every event (XSpace) has a
    // peak of its own; sparse samples (PyTorch segment events) would miss it.
    let dense = samples_every_event(memory);
    let samples = &memory.allocator_samples;
    for i in (0..samples.len()).filter(|_| dense) {
        let Some(bytes) = samples.allocated_bytes(i) else {
            continue;
        };
        let better = match (best, ties) {
            (None, _) => true,
            (Some((_, b)), Ties::First) => bytes > b,
            (Some((_, b)), Ties::Last) => bytes >= b,
        };
        if better {
            best = Some((i, bytes));
        }
    }
    match best {
        Some((sample, bytes)) => {
            let index = point_of_sample(memory, sample);
            let point = point_at(memory, index)?;
            // An allocator never holds less than its live allocations: where
            // its count is lower (a free it made without an event), the
            // recorded allocations are the peak, so the breakdown of the
            // live set adds up to it.
            Some(Peak {
                point,
                // XProf reports the allocator's figure as it is (with
                // `Ties::Last`, its rules).
                bytes: match ties {
                    Ties::First => bytes.max(point.bytes),
                    Ties::Last => bytes,
                },
                sample: Some(sample),
            })
        }
        None => {
            let point = match ties {
                Ties::First => peak(memory)?,
                Ties::Last => {
                    let mut best: Option<Point> = None;
                    for_each_point(memory, |p| {
                        if best.is_none_or(|b| p.bytes >= b.bytes) {
                            best = Some(p);
                        }
                    });
                    best?
                }
            };
            Some(Peak {
                point,
                bytes: point.bytes,
                sample: None,
            })
        }
    }
}

/// How many separate moments reach `peak`'s bytes: runs of points (or, where
/// the allocator's own figure decides the peak, of samples) at that figure,
/// each after a lower one. More than 1 when the peak is tied.
pub fn peak_moments(memory: &Memory, peak: &Peak) -> usize {
    let mut runs = 0usize;
    let mut at_peak = false;
    let mut count = |bytes: u64| {
        let here = bytes == peak.bytes;
        if here && !at_peak {
            runs += 1;
        }
        at_peak = here;
    };
    if peak.sample.is_some() {
        let samples = &memory.allocator_samples;
        for bytes in (0..samples.len()).filter_map(|i| samples.allocated_bytes(i)) {
            count(bytes);
        }
    } else {
        for_each_point(memory, |p| count(p.bytes));
    }
    runs.max(1)
}

/// The timeline point an allocator sample describes: right after its event
/// when there is one sample per event, else after the last event at or
/// before the sample's position.
pub fn point_of_sample(memory: &Memory, sample: usize) -> usize {
    if uses_instants(memory) {
        return memory.allocator_samples.get(sample).map_or(0, |s| {
            memory
                .instants
                .partition_point(|i| i.at <= s.at)
                .saturating_sub(1)
        });
    }
    if samples_every_event(memory) {
        return sample + 1;
    }
    memory
        .allocator_samples
        .get(sample)
        .map_or(0, |s| memory.events.partition_point(|e| e.at <= s.at))
}

/// The point with this index, if the timeline has it.
pub fn point_at(memory: &Memory, index: usize) -> Option<Point> {
    if uses_instants(memory) {
        return instant_point(memory, index);
    }
    // Only the events before the point are replayed.
    let before = memory.events.get(..index)?;
    let mut set = LiveSet::at_start(memory);
    for event in before {
        set.apply(event.kind(), event.alloc());
    }
    let at = match before.last() {
        Some(e) => e.at,
        None => memory.events.first().map_or(0, |e| e.at),
    };
    Some(point_of(&set, index, at))
}

/// The allocations live at point `index` and the last point of the
/// timeline, from one replay (a summary wants both).
pub fn live_at_and_last(memory: &Memory, index: usize) -> (Vec<AllocId>, Option<Point>) {
    if uses_instants(memory) {
        let last = memory.instants.len().checked_sub(1);
        return (
            live_at(memory, index),
            last.and_then(|i| point_at(memory, i)),
        );
    }
    let mut set = LiveSet::at_start(memory);
    let mut live = (index == 0).then(|| set.ids());
    for (i, event) in memory.events.iter().enumerate() {
        set.apply(event.kind(), event.alloc());
        if i + 1 == index {
            live = Some(set.ids());
        }
    }
    let at = memory.events.last().map_or(0, |e| e.at);
    let last = point_of(&set, memory.events.len(), at);
    (live.unwrap_or_default(), Some(last))
}

/// When each allocation was made, from the events before point `index`
/// (`None` for allocations live at the start or not yet made).
pub fn allocated_at(memory: &Memory, index: usize) -> Vec<Option<i64>> {
    allocation_events(memory, index)
        .into_iter()
        .map(|e| e.map(|e| memory.events[e].at))
        .collect()
}

/// The event that made each allocation, from the events before point
/// `index` (`None` for allocations live at the start or not yet made).
pub fn allocation_events(memory: &Memory, index: usize) -> Vec<Option<usize>> {
    let mut made = vec![None; memory.allocations.len()];
    for (i, event) in memory.events.iter().enumerate().take(index) {
        if event.kind() == EventKind::Alloc {
            if let Some(slot) = made.get_mut(event.alloc().index()) {
                *slot = Some(i);
            }
        }
    }
    made
}

/// XProf's active allocations at its peak (`ProcessActiveAllocations` in
/// its memory_profile.cc), for `--xprof-compat`: of the events up to time
/// `at` — those at the peak's own time after it included — only those XProf
/// puts in `step` ([`Memory::xprof_step_of_event`]) count; an allocation is
/// active until a free of that step at its address, and replaces one active
/// at the same address. Allocations without an address (the stack
/// reservation memtool adds) are not XProf's events.
pub fn xprof_active(memory: &Memory, at: i64, step: i64) -> Vec<AllocId> {
    let mut active: rustc_hash::FxHashMap<u64, AllocId> = Default::default();
    for (i, event) in memory.events.iter().enumerate() {
        if event.at > at {
            break;
        }
        let Some(address) = memory.allocation(event.alloc()).address() else {
            continue;
        };
        if memory.xprof_step_of_event(i) != Some(step) {
            continue;
        }
        match event.kind() {
            EventKind::Alloc => {
                active.insert(address, event.alloc());
            }
            EventKind::Free => {
                active.remove(&address);
            }
        }
    }
    let mut ids: Vec<AllocId> = active.into_values().collect();
    ids.sort_unstable();
    ids
}

/// The last point of the timeline.
pub fn last(memory: &Memory) -> Option<Point> {
    let mut out = None;
    for_each_point(memory, |p| out = Some(p));
    out
}

/// The allocations live at point `index` (as numbered by [`for_each_point`]).
pub fn live_at(memory: &Memory, index: usize) -> Vec<AllocId> {
    if uses_instants(memory) {
        return memory
            .instants
            .get(index)
            .map(|i| i.live.clone())
            .unwrap_or_default();
    }
    let mut set = LiveSet::at_start(memory);
    for event in memory.events.iter().take(index) {
        set.apply(event.kind(), event.alloc());
    }
    set.ids()
}

/// One interval during which an allocation of an event stream was live, by
/// the events that began and ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifespan {
    /// The allocation.
    pub alloc: AllocId,
    /// The index in [`Memory::events`] of the event that made it live;
    /// `None` for an allocation live at the start.
    pub made: Option<usize>,
    /// The index of the event that freed it; `None` while it is still live
    /// after the last event.
    pub freed: Option<usize>,
}

impl Lifespan {
    /// Whether the allocation is live at point `index` (as numbered by
    /// [`for_each_point`]: point i+1 is right after event i).
    pub fn live_at(&self, index: usize) -> bool {
        self.made.is_none_or(|m| m < index) && self.freed.is_none_or(|f| index <= f)
    }
}

/// Calls `visit` for every interval during which an allocation of an event
/// stream was live: freed ones in the order of their frees, then those still
/// live after the last event, in allocation order. Memories described by
/// instants have no lifespans and visit nothing.
pub fn for_each_lifespan(memory: &Memory, visit: impl FnMut(Lifespan)) {
    if uses_instants(memory) {
        return;
    }
    // Each allocation's state in one word: not live, live since before the
    // first event, or live since event `state - MADE_AT`. A walk that only
    // wants lifespans needs no bytes in use; a live flag beside an
    // `Option<usize>` per allocation (17 bytes, two arrays) was a third of
    // inferring the categories of a 10^6-entry snapshot. A `u32` word
    // unless the positions need more (over 60 GB of events).
    if memory.events.len() < (u32::MAX - 2) as usize {
        lifespans_by_word::<u32>(memory, visit);
    } else {
        lifespans_by_word::<u64>(memory, visit);
    }
}

/// [`for_each_lifespan`]'s walk, each allocation's state held in an `S`,
/// which numbers every event.
fn lifespans_by_word<S>(memory: &Memory, mut visit: impl FnMut(Lifespan))
where
    S: Copy + Into<u64> + TryFrom<u64>,
{
    const NOT_LIVE: u64 = 0;
    const LIVE_AT_START: u64 = 1;
    const MADE_AT: u64 = 2;
    // Never out of range: the caller picks `S` to number every event.
    let word = |value: u64| S::try_from(value).ok();
    let Some(not_live) = word(NOT_LIVE) else {
        return;
    };
    let mut state: Vec<S> = vec![not_live; memory.allocations.len()];
    for &id in &memory.live_at_start {
        if let Some(slot) = state.get_mut(id.index()) {
            if (*slot).into() == NOT_LIVE {
                *slot = word(LIVE_AT_START).unwrap_or(not_live);
            }
        }
    }
    let made_of = |slot: u64| (slot >= MADE_AT).then(|| (slot - MADE_AT) as usize);
    for (i, event) in memory.events.iter().enumerate() {
        let Some(slot) = state.get_mut(event.alloc().index()) else {
            continue;
        };
        let value: u64 = (*slot).into();
        match event.kind() {
            EventKind::Alloc if value == NOT_LIVE => {
                *slot = word(i as u64 + MADE_AT).unwrap_or(not_live);
            }
            EventKind::Free if value != NOT_LIVE => {
                *slot = not_live;
                visit(Lifespan {
                    alloc: event.alloc(),
                    made: made_of(value),
                    freed: Some(i),
                });
            }
            _ => {}
        }
    }
    for (index, &slot) in state.iter().enumerate() {
        let value: u64 = slot.into();
        if value != NOT_LIVE {
            visit(Lifespan {
                alloc: AllocId(index as u32),
                made: made_of(value),
                freed: None,
            });
        }
    }
}

/// Calls `visit(alloc, start, end)` for every interval during which an
/// allocation of an event stream was live ([`for_each_lifespan`]'s, in its
/// order), by position: one live at the start starts at the first event,
/// one still live ends at the last.
pub fn for_each_lifetime(memory: &Memory, mut visit: impl FnMut(AllocId, i64, i64)) {
    let start_at = memory.events.first().map_or(0, |e| e.at);
    let end_at = memory.events.last().map_or(start_at, |e| e.at);
    let at = |event: Option<usize>, default: i64| {
        event
            .and_then(|i| memory.events.get(i))
            .map_or(default, |e| e.at)
    };
    for_each_lifespan(memory, |span| {
        visit(span.alloc, at(span.made, start_at), at(span.freed, end_at))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, Event, Instant, MemoryKind, SiteId};

    /// A compiled program's heap reaching its peak twice: the first is its
    /// peak in both modes (XProf's `peakHeapSizePosition`); an allocator's
    /// ties go to the last with XProf's rules.
    #[test]
    fn a_programs_tied_peak_is_the_first_in_both_modes() {
        let mut m = Memory::new("jit_f(1)", MemoryKind::ProgramSpace, Axis::ProgramOrder);
        for _ in 0..2 {
            m.push_allocation(Allocation {
                bytes: 64,
                requested: 64,
                count: 1,
                address: None,
                site: SiteId(0),
            });
        }
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        m.events = vec![
            ev(0, EventKind::Alloc, 0),
            ev(1, EventKind::Free, 0),
            ev(2, EventKind::Alloc, 1),
            ev(3, EventKind::Free, 1),
        ];
        m.program = Some(Box::default());
        for ties in [Ties::First, Ties::Last] {
            let peak = reported_peak(&m, ties).unwrap();
            assert_eq!((peak.bytes, peak.point.index), (64, 1), "{ties:?}");
        }
        m.program = None;
        assert_eq!(reported_peak(&m, Ties::Last).unwrap().point.index, 3);
    }

    fn memory() -> Memory {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        for bytes in [100, 50, 70] {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes - 1,
                count: 1,
                address: None,
                site: SiteId(0),
            });
        }
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        m.live_at_start = vec![AllocId(0)];
        m.events = vec![
            ev(1, EventKind::Alloc, 1),
            ev(2, EventKind::Free, 0),
            ev(3, EventKind::Free, 0), // double free: ignored
            ev(4, EventKind::Alloc, 2),
            ev(5, EventKind::Alloc, 0),
        ];
        m
    }

    #[test]
    fn replays_events_and_finds_the_first_peak() {
        let m = memory();
        let mut bytes = Vec::new();
        for_each_point(&m, |p| bytes.push(p.bytes));
        assert_eq!(bytes, vec![100, 150, 50, 50, 120, 220]);
        let p = peak(&m).unwrap();
        assert_eq!(
            (p.index, p.at, p.bytes, p.requested, p.buffers),
            (5, 5, 220, 217, 3)
        );
        assert_eq!(live_at(&m, 2), vec![AllocId(1)]);
        assert_eq!(last(&m).unwrap().bytes, 220);
    }

    #[test]
    fn points_and_live_sets_by_index_agree_with_the_walk() {
        let m = memory();
        let mut points = Vec::new();
        for_each_point(&m, |p| points.push(p));
        for p in &points {
            assert_eq!(point_at(&m, p.index), Some(*p));
            let (live, last) = live_at_and_last(&m, p.index);
            assert_eq!(live, live_at(&m, p.index));
            assert_eq!(last, points.last().copied());
        }
        assert_eq!(point_at(&m, points.len()), None);
        // A memory of instants (pprof snapshots).
        let mut snapshots = memory();
        snapshots.events.clear();
        snapshots.instants = vec![
            Instant {
                label: "memory1.prof".into(),
                at: 1,
                live: vec![AllocId(0), AllocId(2)],
            },
            Instant {
                label: "memory2.prof".into(),
                at: 2,
                live: vec![AllocId(1)],
            },
        ];
        let mut points = Vec::new();
        for_each_point(&snapshots, |p| points.push(p));
        assert_eq!(points.len(), 2);
        for p in &points {
            assert_eq!(point_at(&snapshots, p.index), Some(*p));
            let (live, last) = live_at_and_last(&snapshots, p.index);
            assert_eq!(live, snapshots.instants[p.index].live);
            assert_eq!(last.unwrap().bytes, 50);
        }
    }

    #[test]
    fn lifetimes_cover_every_live_interval() {
        let m = memory();
        let mut spans = Vec::new();
        for_each_lifetime(&m, |id, start, end| spans.push((id.0, start, end)));
        // 0 is live from the start until its free at 2, then again from 5 to the end.
        assert_eq!(spans, vec![(0, 1, 2), (0, 5, 5), (1, 1, 5), (2, 4, 5)]);
    }

    /// The walk of memories too long for a `u32` position (over 60 GB of
    /// events) is the same walk with a wider word: same lifespans.
    #[test]
    fn lifespans_are_the_same_with_either_word() {
        let m = memory();
        let mut narrow = Vec::new();
        lifespans_by_word::<u32>(&m, |span| narrow.push(span));
        let mut wide = Vec::new();
        lifespans_by_word::<u64>(&m, |span| wide.push(span));
        assert_eq!(narrow.len(), 4);
        assert_eq!(narrow, wide);
    }

    #[test]
    fn lifespans_name_their_events_and_agree_with_the_live_sets() {
        let m = memory();
        let mut spans = Vec::new();
        for_each_lifespan(&m, |span| spans.push(span));
        let span = |a, made, freed| Lifespan {
            alloc: AllocId(a),
            made,
            freed,
        };
        assert_eq!(
            spans,
            vec![
                span(0, None, Some(1)),
                span(0, Some(4), None),
                span(1, Some(0), None),
                span(2, Some(3), None),
            ]
        );
        for index in 0..=m.events.len() {
            let mut live: Vec<AllocId> = spans
                .iter()
                .filter(|s| s.live_at(index))
                .map(|s| s.alloc)
                .collect();
            live.sort();
            assert_eq!(live, live_at(&m, index), "point {index}");
        }
    }
}
