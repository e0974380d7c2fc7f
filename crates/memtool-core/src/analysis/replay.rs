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
    pub bytes: u64,
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
    pub bytes: u64,
    pub requested: u64,
    pub buffers: u64,
}

impl<'m> LiveSet<'m> {
    /// The live set before the memory's first event.
    pub fn at_start(memory: &'m Memory) -> Self {
        let mut set = LiveSet {
            memory,
            live: vec![false; memory.allocations.len()],
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
        let Some(slot) = self.live.get_mut(id.index()) else {
            return false;
        };
        if *slot {
            return false;
        }
        *slot = true;
        let a = &self.memory.allocations[id.index()];
        self.bytes += a.bytes;
        self.requested += a.requested;
        self.buffers += a.count;
        true
    }

    fn remove(&mut self, id: AllocId) -> bool {
        let Some(slot) = self.live.get_mut(id.index()) else {
            return false;
        };
        if !*slot {
            return false;
        }
        *slot = false;
        let a = &self.memory.allocations[id.index()];
        self.bytes -= a.bytes;
        self.requested -= a.requested;
        self.buffers -= a.count;
        true
    }

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

/// Whether the memory is described by instants rather than events.
pub fn uses_instants(memory: &Memory) -> bool {
    !memory.instants.is_empty()
}

/// Calls `visit` for every point of the memory's timeline, in order.
pub fn for_each_point(memory: &Memory, mut visit: impl FnMut(Point)) {
    if uses_instants(memory) {
        for (index, instant) in memory.instants.iter().enumerate() {
            let mut p = Point {
                index,
                at: instant.at,
                bytes: 0,
                requested: 0,
                buffers: 0,
            };
            for &id in &instant.live {
                let a = memory.allocation(id);
                p.bytes += a.bytes;
                p.requested += a.requested;
                p.buffers += a.count;
            }
            visit(p);
        }
        return;
    }
    let mut set = LiveSet::at_start(memory);
    let start_at = memory.events.first().map_or(0, |e| e.at);
    visit(point_of(&set, 0, start_at));
    for (i, event) in memory.events.iter().enumerate() {
        set.apply(event.kind, event.alloc);
        visit(point_of(&set, i + 1, event.at));
    }
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
        set.apply(event.kind, event.alloc);
    }
    set.ids()
}

/// Calls `visit(alloc, start, end)` for every interval during which an
/// allocation of an event stream was live: freed ones in the order of their
/// frees, then those still live at the last event (ending there), in
/// allocation order. Memories described by
/// instants have no lifetimes and visit nothing.
pub fn for_each_lifetime(memory: &Memory, mut visit: impl FnMut(AllocId, i64, i64)) {
    if uses_instants(memory) || (memory.events.is_empty() && memory.live_at_start.is_empty()) {
        return;
    }
    let start_at = memory.events.first().map_or(0, |e| e.at);
    let end_at = memory.events.last().map_or(start_at, |e| e.at);
    let mut set = LiveSet::at_start(memory);
    let mut since: Vec<i64> = vec![start_at; memory.allocations.len()];
    for event in &memory.events {
        if set.apply(event.kind, event.alloc) {
            let Some(slot) = since.get_mut(event.alloc.index()) else {
                continue;
            };
            match event.kind {
                EventKind::Alloc => *slot = event.at,
                EventKind::Free => visit(event.alloc, *slot, event.at),
            }
        }
    }
    for id in set.ids() {
        visit(id, since[id.index()], end_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, Event, MemoryKind, SiteId};

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
        let ev = |at, kind, a| Event {
            at,
            kind,
            alloc: AllocId(a),
        };
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
    fn lifetimes_cover_every_live_interval() {
        let m = memory();
        let mut spans = Vec::new();
        for_each_lifetime(&m, |id, start, end| spans.push((id.0, start, end)));
        // 0 is live from the start until its free at 2, then again from 5 to the end.
        assert_eq!(spans, vec![(0, 1, 2), (0, 5, 5), (1, 1, 5), (2, 4, 5)]);
    }
}
