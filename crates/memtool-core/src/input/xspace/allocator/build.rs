//! Building one memory per allocator from its events in time order:
//! allocations, events, live set at start, allocator samples and warnings.

use rustc_hash::FxHashMap;

use super::decode::{Decoder, RawEvent, DTYPE, OP, REGION, SHAPE};
use super::STACK_OP;
use crate::model::{
    Address, AllocId, Allocation, AllocatorSample, Axis, BeforeRecording, EventKind, Memory,
    MemoryKind, Names, Profile, Site, SiteId, StackId, Step, StrId, XprofStepRun,
};

/// What both walks found, before the memories are made.
pub(super) struct Collected {
    pub(super) decoder: Decoder,
    /// Every step marked, each id once, in any order (not the decoder's
    /// table: the merged walk collects its runs' in a list).
    pub(super) steps: Vec<Step>,
    /// The strings the decoder interned, which its allocator names are ids
    /// of (the profile's table gets only the strings of sites, in time
    /// order, whichever walk read them).
    pub(super) decoded: Names,
    /// By allocator index (`RawEvent::allocator`).
    pub(super) builders: Vec<MemoryBuilder>,
    /// Whether there was any allocator event.
    pub(super) any: bool,
}

impl Collected {
    /// Adds the memories; returns whether there were allocator events.
    pub(super) fn finish(self, profile: &mut Profile, path: &str, host: &str) -> bool {
        let Collected {
            decoder,
            mut steps,
            decoded,
            mut builders,
            any,
        } = self;
        if decoder.bad_times > 0 {
            profile.warn(
                path,
                format!(
                    "{} events have a time that overflows and were skipped",
                    decoder.bad_times
                ),
            );
        }
        steps.sort_by_key(|s| (s.start, s.id));
        let mut order: Vec<usize> = (0..decoder.allocators.len()).collect();
        order.sort_by_key(|&i| decoder.allocators[i].first);
        builders.resize_with(decoder.allocators.len(), MemoryBuilder::default);
        for index in order {
            let builder = std::mem::take(&mut builders[index]);
            let name = decoder.allocators[index].name;
            let name = name.map_or("<unnamed allocator>", |n| decoded.str(n));
            let id = super::super::allocator_id(profile, name, host, path);
            let memory = builder.finish(profile, path, id, steps.clone());
            profile.memories.push(memory);
        }
        any
    }
}

/// Sites of allocator events by (op, shape, dtype, region): a profile has a
/// few hundred, each interned once rather than hashed per event.
pub(super) struct SiteCache {
    ids: FxHashMap<[StrId; 4], SiteId>,
    /// The sites last found, by a cheap hash of their strings: nearly every
    /// event's site is here, one multiply and one compare in place of the
    /// map's hashing and probing (~100 instructions an event, on the
    /// merging thread).
    recent: Box<[([StrId; 4], SiteId); RECENT_SITES]>,
}

/// Entries of [`SiteCache::recent`]: more than the sites of a step's ops.
const RECENT_SITES: usize = 256;

impl Default for SiteCache {
    fn default() -> Self {
        SiteCache {
            ids: FxHashMap::default(),
            // No event has these strings: no table holds 2^32 of them.
            recent: Box::new([([StrId(u32::MAX); 4], SiteId(0)); RECENT_SITES]),
        }
    }
}

impl SiteCache {
    /// The site of `e`, whose strings are ids of `decoded`, in `names`: its
    /// strings are interned there when the site is first met, so sites met
    /// in one order give one table whatever order the events were decoded in.
    #[inline(always)]
    pub(super) fn site(&mut self, names: &mut Names, decoded: &Names, e: &RawEvent) -> SiteId {
        let [a, b, c, d] = e.strings.map(|s| u64::from(s.0));
        let mixed =
            ((a | b << 32) ^ (c | d << 32).rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = (mixed >> 56) as usize;
        if self.recent[slot].0 == e.strings {
            return self.recent[slot].1;
        }
        let site = self.site_uncached(names, decoded, e);
        self.recent[slot] = (e.strings, site);
        site
    }

    #[inline(never)]
    fn site_uncached(&mut self, names: &mut Names, decoded: &Names, e: &RawEvent) -> SiteId {
        *self.ids.entry(e.strings).or_insert_with(|| {
            let mut string = |slot| e.string(slot).map(|id| names.string(decoded.str(id)));
            let site = Site {
                stack: StackId(0),
                op: string(OP),
                shape: string(SHAPE),
                dtype: string(DTYPE),
                category: string(REGION),
                ..Site::default()
            };
            names.site(site)
        })
    }
}

/// One allocator's memory, built from its events in time order: its
/// allocations, events, live set at start and allocator samples.
pub(super) struct MemoryBuilder {
    memory: Memory,
    /// Live allocations by address.
    live: FxHashMap<u64, AllocId>,
    live_at_start_bytes: u64,
    reused: u64,
    no_address_frees: u64,
    /// Events whose metadata id is defined as both kinds, told apart by
    /// address.
    either: u64,
    /// The stack reservation in force and its allocation, once one was made
    /// (the first event's reservation is made live at the start in
    /// `finish`, after the heap held before the start).
    stack: Option<u64>,
    stack_alloc: Option<AllocId>,
    /// The reservation live at the start, once a change made it.
    first_stack_alloc: Option<AllocId>,
    /// Every stack allocation: their site is given in `finish`, so the
    /// profile's names are interned in one order on either walk's thread.
    stack_allocs: Vec<AllocId>,
    /// Spans of this allocator's events by `group_id`, in the order first
    /// met: its steps when the profile marks none with `step_num`.
    groups: Vec<Step>,
    group_index: FxHashMap<i64, usize>,
    /// The group of the last grouped event: runs of one group are the rule.
    last_group: usize,
    /// The last `group_id` met, for XProf's step of an event without one.
    last_xprof_group: Option<i64>,
    first: Option<RawEvent>,
}

impl Default for MemoryBuilder {
    fn default() -> Self {
        MemoryBuilder {
            memory: Memory::new(String::new(), MemoryKind::Allocator, Axis::TimePs),
            live: FxHashMap::default(),
            live_at_start_bytes: 0,
            reused: 0,
            no_address_frees: 0,
            either: 0,
            stack: None,
            stack_alloc: None,
            first_stack_alloc: None,
            stack_allocs: Vec::new(),
            groups: Vec::new(),
            group_index: FxHashMap::default(),
            last_group: 0,
            last_xprof_group: None,
            first: None,
        }
    }
}

/// How many events, and allocations among them, an allocator is expected
/// to have: its memory's vectors are made that long at once rather than
/// grown by copy, each page of them faulted in once.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Room {
    pub(super) events: usize,
    pub(super) allocations: usize,
}

impl MemoryBuilder {
    /// A builder whose memory has room for `room`, as far as the memory
    /// can be had: an estimate is no reason to stop (what is not reserved
    /// grows as it fills).
    pub(super) fn with_room(room: Room) -> MemoryBuilder {
        let mut builder = MemoryBuilder::default();
        let memory = &mut builder.memory;
        let _ = memory.events.try_reserve_exact(room.events);
        let _ = memory.allocations.try_reserve_exact(room.allocations);
        memory.allocator_samples.reserve(room.events);
        builder
    }

    /// How many events the memory holds, and has room for.
    #[cfg(test)]
    pub(super) fn events_room(&self) -> (usize, usize) {
        (self.memory.events.len(), self.memory.events.capacity())
    }

    pub(super) fn push(&mut self, e: &RawEvent, site: SiteId) {
        self.xprof_step(e.group());
        if self.first.is_none() {
            self.first = Some(*e);
            self.stack = e.stack();
        }
        if let Some(stack) = e.stack().filter(|&s| Some(s) != self.stack) {
            self.change_stack(e.at, stack);
        }
        if let Some(id) = e.group() {
            self.group_event(id, e.at);
        }
        // An event whose kind its metadata leaves open frees the allocation
        // live at its address, if there is one; otherwise it allocates.
        let free = e.free && (!e.either || e.address().is_some_and(|a| self.live.contains_key(&a)));
        self.either += u64::from(e.either);
        let memory = &mut self.memory;
        let bytes = e.allocation_bytes().or(e.requested()).unwrap_or(0);
        let allocation = Allocation {
            bytes,
            requested: e.requested().unwrap_or(bytes),
            count: 1,
            address: e.address().and_then(Address::new),
            site,
        };
        let id = if free {
            match e.address().and_then(|a| self.live.remove(&a)) {
                Some(id) => id,
                None => {
                    // Freed, never seen allocated: it was live at the start.
                    if e.address().is_none() {
                        self.no_address_frees += 1;
                    }
                    let id = memory.push_allocation(allocation);
                    memory.live_at_start.push(id);
                    self.live_at_start_bytes = self.live_at_start_bytes.saturating_add(bytes);
                    id
                }
            }
        } else {
            let id = memory.push_allocation(allocation);
            if let Some(address) = e.address() {
                if self.live.insert(address, id).is_some() {
                    self.reused += 1;
                }
            }
            id
        };
        memory.events.push(crate::model::Event::new(
            e.at,
            if free {
                EventKind::Free
            } else {
                EventKind::Alloc
            },
            id,
        ));
        memory.allocator_samples.push(
            AllocatorSample::new(e.at)
                .with_allocated_bytes(e.heap().map(|h| h.saturating_add(e.stack().unwrap_or(0))))
                .with_free_bytes(e.available())
                .with_fragmentation(e.fragmentation()),
        );
        if let Some(p) = e.peak_in_use() {
            memory.allocator_peak_bytes = Some(memory.allocator_peak_bytes.map_or(p, |q| q.max(p)));
        }
    }

    /// XProf's step of the event about to be pushed (and of the stack
    /// change events pushed before it): its group, else the last group
    /// seen + 1.
    fn xprof_step(&mut self, group: Option<i64>) {
        if let Some(group) = group {
            self.last_xprof_group = Some(group);
        }
        let step =
            group.unwrap_or_else(|| self.last_xprof_group.map_or(0, |g| g.saturating_add(1)));
        let runs = &mut self.memory.xprof_steps;
        if runs.last().is_none_or(|r| r.step != step) {
            runs.push(XprofStepRun {
                first_event: self.memory.events.len(),
                step,
            });
        }
    }

    /// Events come in time order, so a group's span grows at its end.
    fn group_event(&mut self, id: i64, at: i64) {
        if self.groups.get(self.last_group).is_none_or(|s| s.id != id) {
            self.last_group = match self.group_index.get(&id) {
                Some(&i) => i,
                None => {
                    self.group_index.insert(id, self.groups.len());
                    self.groups.push(Step {
                        id,
                        start: at,
                        end: at,
                    });
                    self.groups.len() - 1
                }
            };
        }
        let step = &mut self.groups[self.last_group];
        step.end = step.end.max(at);
    }

    /// The stack reservation changed before event at `at` reported it: the
    /// old reservation is freed and the new one allocated there, so the
    /// replay follows the allocator's in-use figure (stack + heap), as XProf
    /// counts it. The two events have samples with no figures: the
    /// allocator reported its state only after the event that follows.
    fn change_stack(&mut self, at: i64, stack: u64) {
        let old = self.stack.unwrap_or(0);
        let live = match self.stack_alloc {
            Some(id) => Some(id),
            // The first reservation, live from the start.
            None if old > 0 => {
                let id = self.stack_allocation(old);
                self.first_stack_alloc = Some(id);
                Some(id)
            }
            None => None,
        };
        let record = |memory: &mut Memory, kind, alloc| {
            memory
                .events
                .push(crate::model::Event::new(at, kind, alloc));
            memory.allocator_samples.push(AllocatorSample::new(at));
        };
        if let Some(id) = live {
            record(&mut self.memory, EventKind::Free, id);
        }
        self.stack_alloc = None;
        if stack > 0 {
            let id = self.stack_allocation(stack);
            record(&mut self.memory, EventKind::Alloc, id);
            self.stack_alloc = Some(id);
        }
        self.stack = Some(stack);
    }

    /// A stack reservation's allocation, not yet live; its site is set in
    /// `finish`.
    fn stack_allocation(&mut self, bytes: u64) -> AllocId {
        let id = self.memory.push_allocation(Allocation {
            bytes,
            requested: bytes,
            count: 1,
            address: None,
            site: SiteId(0),
        });
        self.stack_allocs.push(id);
        id
    }

    fn finish(self, profile: &mut Profile, path: &str, id: String, steps: Vec<Step>) -> Memory {
        let MemoryBuilder {
            mut memory,
            live_at_start_bytes,
            reused,
            no_address_frees,
            either,
            first_stack_alloc,
            mut stack_allocs,
            mut groups,
            first,
            ..
        } = self;
        memory.id = id;
        memory.steps = if steps.is_empty() {
            // As XProf: without `step_num` marks, the events' `group_id`s
            // are the steps, per allocator.
            groups.sort_by_key(|s| (s.start, s.id));
            groups
        } else {
            steps
        };
        let first_stack = first.and_then(|e| e.stack());
        // So far, what was live at the start is what was freed without being
        // allocated: memory from before the profile, freed during it. It
        // keeps the free's shape, type and region; the free's op is not the
        // op that allocated it.
        let mut freed_sites: FxHashMap<SiteId, SiteId> = FxHashMap::default();
        for &id in &memory.live_at_start {
            let a = &mut memory.allocations[id.index()];
            let free_site = a.site;
            a.site = *freed_sites.entry(free_site).or_insert_with(|| {
                let s = *profile.names.site_of(free_site);
                profile.names.before_recording_site(
                    BeforeRecording::Freed,
                    s.stack,
                    s.shape,
                    s.dtype,
                    s.category,
                )
            });
        }
        // What the heap held before the first event that no free accounts for.
        if let Some(first) = first {
            if let Some(heap) = first.heap() {
                let own = first.allocation_bytes().or(first.requested()).unwrap_or(0);
                let before = if first.free && !first.either {
                    heap.saturating_add(own)
                } else {
                    heap.saturating_sub(own)
                };
                let unexplained = before.saturating_sub(live_at_start_bytes);
                if unexplained > 0 {
                    let site = profile.names.before_recording_site(
                        BeforeRecording::StillLive,
                        StackId(0),
                        None,
                        None,
                        None,
                    );
                    let id = memory.push_allocation(Allocation {
                        bytes: unexplained,
                        requested: unexplained,
                        count: 1,
                        address: None,
                        site,
                    });
                    memory.live_at_start.push(id);
                }
            }
        }
        match first_stack_alloc {
            Some(id) => memory.live_at_start.push(id),
            None => {
                if let Some(stack) = first_stack.filter(|&s| s > 0) {
                    let id = memory.push_allocation(Allocation {
                        bytes: stack,
                        requested: stack,
                        count: 1,
                        address: None,
                        site: SiteId(0),
                    });
                    memory.live_at_start.push(id);
                    stack_allocs.push(id);
                }
            }
        }
        if !stack_allocs.is_empty() {
            let site = pseudo_site(&mut profile.names, STACK_OP, Some(STACK_OP));
            for id in stack_allocs {
                memory.allocations[id.index()].site = site;
            }
        }
        let id = memory.id.clone();
        if reused > 0 {
            profile.warn(
                path,
                format!("{id}: {reused} allocations reuse the address of a live allocation without a free in between; the earlier ones stay live"),
            );
        }
        if either > 0 {
            profile.warn(
                path,
                format!("{id}: {either} events have a metadata id defined both as MemoryAllocation and as MemoryDeallocation; each is taken as the free of the allocation live at its address, else as an allocation"),
            );
        }
        if no_address_frees > 0 {
            profile.warn(
                path,
                format!("{id}: {no_address_frees} frees have no address and match no allocation"),
            );
        }
        memory
    }
}

/// The site of what the allocator holds with no event of its own: named by
/// its op (and region), no stack, shape or dtype.
fn pseudo_site(names: &mut Names, op: &str, category: Option<&str>) -> SiteId {
    let op = Some(names.string(op));
    let category = category.map(|c| names.string(c));
    names.site(Site {
        stack: StackId(0),
        op,
        shape: None,
        dtype: None,
        category,
        ..Site::default()
    })
}
