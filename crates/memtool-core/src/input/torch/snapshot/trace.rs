//! One device's trace as it is read: each entry turned into allocations,
//! events and segment changes as it arrives, on the reading thread or, with
//! more than one job, on a thread of its own fed by batches of entries.

use std::sync::mpsc;

use super::*;

/// Trace entries per action name, counted without a string per entry.
#[derive(Default)]
pub(super) struct ActionCounts {
    known: [u64; KNOWN_ACTIONS.len()],
    /// Counted by the reader, which has their names (see [`Entry`]).
    pub(super) other: BTreeMap<String, u64>,
}

impl ActionCounts {
    /// A known action; [`Action::Other`] is counted by its name in `other`.
    fn add(&mut self, action: Action) {
        if let Some(i) = KNOWN_ACTIONS.iter().position(|&(a, _)| a == action) {
            self.known[i] += 1;
        }
    }

    pub(super) fn into_map(self) -> BTreeMap<String, u64> {
        let mut map = self.other;
        for (&(_, name), &n) in KNOWN_ACTIONS.iter().zip(&self.known) {
            if n > 0 {
                map.insert(name.to_string(), n);
            }
        }
        map
    }
}

/// One device's trace, turned into allocations and events as entries
/// arrive, so no entry is kept.
pub(super) struct Trace {
    pub(super) counts: ActionCounts,
    /// Entries seen: the index of the next one.
    pub(super) entries: u64,
    /// Whether every `alloc` and `free_completed` entry so far has `time_us`.
    pub(super) timed: bool,
    pub(super) first_time: Option<i64>,
    /// Index and time of the last entry.
    pub(super) last: Option<(u64, Option<i64>)>,
    /// `site` is an index into `site_keys`.
    pub(super) allocations: Vec<Allocation>,
    pub(super) site_keys: Vec<SiteKey>,
    pub(super) site_index: FxHashMap<SiteKey, u32>,
    /// `at` is the entry's time; `event_entries` its index, for the event
    /// index axis when some entry has no time.
    pub(super) events: Vec<Event>,
    pub(super) event_entries: EntryIndices,
    pub(super) live_at_start: Vec<AllocId>,
    pub(super) live: FxHashMap<u64, AllocId>,
    /// Reserved bytes relative to the start after each segment event, with
    /// the entry's index and time.
    pub(super) reserved_changes: Vec<(u64, Option<i64>, i128)>,
    pub(super) reserved: i128,
    /// Each segment event as the range it took or gave back, with the
    /// number of events before it and the entry's index and time.
    pub(super) held_changes: Vec<(usize, u64, Option<i64>, AddressRange, bool)>,
    pub(super) freed_before_window: u64,
    pub(super) realloc_without_free: u64,
    /// Each `oom`: the failure with its entry index, time and stack.
    pub(super) ooms: Vec<RawOom>,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            counts: ActionCounts::default(),
            entries: 0,
            timed: true,
            first_time: None,
            last: None,
            allocations: Vec::new(),
            site_keys: Vec::new(),
            site_index: FxHashMap::default(),
            events: Vec::new(),
            event_entries: EntryIndices::default(),
            live_at_start: Vec::new(),
            live: FxHashMap::default(),
            reserved_changes: Vec::new(),
            reserved: 0,
            held_changes: Vec::new(),
            freed_before_window: 0,
            realloc_without_free: 0,
            ooms: Vec::new(),
        }
    }
}

impl Trace {
    fn new_alloc(&mut self, a: Allocation) -> AllocId {
        let id = AllocId(self.allocations.len() as u32);
        self.allocations.push(a);
        id
    }

    /// The index in `site_keys` of `key`, added on first use.
    fn site(&mut self, key: SiteKey) -> SiteId {
        let next = self.site_keys.len() as u32;
        let site = *self.site_index.entry(key).or_insert(next);
        if site == next {
            self.site_keys.push(key);
        }
        SiteId(site)
    }

    fn event(&mut self, index: u64, time_us: Option<i64>, kind: EventKind, alloc: AllocId) {
        self.events
            .push(Event::new(time_us.unwrap_or(0), kind, alloc));
        self.event_entries.push(index);
    }

    fn held_change(
        &mut self,
        index: u64,
        time_us: Option<i64>,
        addr: u64,
        size: u64,
        reserved: bool,
    ) {
        let range = AddressRange {
            start: addr,
            bytes: size,
        };
        self.held_changes
            .push((self.events.len(), index, time_us, range, reserved));
    }

    /// One entry; `site` is its site as made by an `alloc` entry.
    fn add(&mut self, action: Action, addr: u64, size: u64, time_us: Option<i64>, site: SiteKey) {
        self.counts.add(action);
        let index = self.entries;
        self.entries += 1;
        self.last = Some((index, time_us));
        if self.first_time.is_none() {
            self.first_time = time_us;
        }
        if matches!(action, Action::Alloc | Action::FreeCompleted) && time_us.is_none() {
            self.timed = false;
        }
        match action {
            Action::Alloc => {
                if let Some(old) = self.live.remove(&addr) {
                    self.realloc_without_free += 1;
                    self.event(index, time_us, EventKind::Free, old);
                }
                let site = self.site(site);
                let alloc = self.new_alloc(placed(size, addr, site));
                self.live.insert(addr, alloc);
                self.event(index, time_us, EventKind::Alloc, alloc);
            }
            Action::FreeCompleted => {
                let alloc = match self.live.remove(&addr) {
                    Some(alloc) => alloc,
                    None => {
                        // Named by the free's stack, as MemoryViz does.
                        self.freed_before_window += 1;
                        // The free's compile context is not where it was made.
                        let site = self.site(SiteKey {
                            compiled_graph: None,
                            freed_before_window: true,
                            ..site
                        });
                        let alloc = self.new_alloc(placed(size, addr, site));
                        self.live_at_start.push(alloc);
                        alloc
                    }
                };
                self.event(index, time_us, EventKind::Free, alloc);
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                self.reserved += i128::from(size);
                self.reserved_changes.push((index, time_us, self.reserved));
                self.held_change(index, time_us, addr, size, true);
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                self.reserved -= i128::from(size);
                self.reserved_changes.push((index, time_us, self.reserved));
                self.held_change(index, time_us, addr, size, false);
            }
            // Recorded by `Traces::add`, which has its free bytes.
            Action::Oom => {}
            Action::FreeRequested | Action::Other => {}
        }
    }
}

/// An `oom` entry before its position and site are known.
pub(super) struct RawOom {
    pub(super) requested: u64,
    pub(super) device_free: Option<u64>,
    pub(super) stream: Option<i64>,
    pub(super) index: u64,
    pub(super) time_us: Option<i64>,
    pub(super) stack: StackId,
    pub(super) events_before: usize,
}

/// A trace entry as its device's [`Trace`] takes it: plain data (the
/// decoder's values are not `Send`), so entries can be built into traces on
/// a thread of their own while the pickle is decoded.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) device: usize,
    pub(super) action: Action,
    pub(super) addr: u64,
    pub(super) size: u64,
    pub(super) time_us: Option<i64>,
    pub(super) site: SiteKey,
    /// An `oom` entry's free bytes on the device.
    pub(super) device_free: Option<u64>,
}

/// The allocation of `size` bytes at `addr` an entry makes: a snapshot
/// records only what the program asked for, and counts that, as torch's
/// own tools do.
fn placed(size: u64, addr: u64, site: SiteId) -> Allocation {
    Allocation {
        bytes: size,
        requested: size,
        count: 1,
        address: crate::model::Address::new(addr),
        site,
    }
}

/// Entries per batch handed to the building thread, and batches in flight:
/// enough to keep both threads busy, little memory (about 100 KiB a batch).
const BATCH: usize = 1024;
const BATCHES_IN_FLIGHT: usize = 8;

/// Every device's trace, built entry by entry.
#[derive(Default)]
pub(super) struct Traces(Vec<Trace>);

impl Traces {
    #[inline]
    pub(super) fn add(&mut self, e: &Entry) {
        if self.0.len() <= e.device {
            self.0.resize_with(e.device + 1, Trace::default);
        }
        let trace = &mut self.0[e.device];
        if e.action == Action::Oom {
            // An `oom` entry keeps the device's free bytes where others keep the address.
            trace.ooms.push(RawOom {
                requested: e.size,
                device_free: e.device_free,
                stream: e.site.stream,
                index: trace.entries,
                time_us: e.time_us,
                stack: e.site.stack,
                events_before: trace.events.len(),
            });
        }
        trace.add(e.action, e.addr, e.size, e.time_us, e.site);
    }

    pub(super) fn into_vec(self) -> Vec<Trace> {
        self.0
    }
}

/// Where the reader puts entries: built on its own thread (one job), or
/// batched to a building thread (see [`with_builder`]).
pub(super) enum EntrySink {
    Here(Traces),
    Sent {
        batch: Vec<Entry>,
        sender: mpsc::SyncSender<Vec<Entry>>,
        /// Batches the builder is done with, for reuse: a fresh one each
        /// time would be faulted in by the kernel anew.
        spare: mpsc::Receiver<Vec<Entry>>,
    },
}

impl EntrySink {
    #[inline]
    pub(super) fn push(&mut self, e: Entry) {
        match self {
            EntrySink::Here(traces) => traces.add(&e),
            EntrySink::Sent {
                batch,
                sender,
                spare,
            } => {
                batch.push(e);
                if batch.len() == BATCH {
                    let empty = spare
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                    let full = std::mem::replace(batch, empty);
                    // A builder that is gone panicked: its join says so.
                    let _ = sender.send(full);
                }
            }
        }
    }
}

/// `read` run with an [`EntrySink`], and the traces built from what it put
/// there. With more than one job the traces are built on a thread of their
/// own, in the order the entries were read (so the result is the one job's),
/// while `read` goes on decoding; with one job, or when the thread cannot be
/// started, on this one.
pub(super) fn with_builder<T>(
    jobs: usize,
    read: impl FnOnce(&mut EntrySink) -> T,
) -> (T, Vec<Trace>) {
    if jobs <= 1 {
        let mut sink = EntrySink::Here(Traces::default());
        let out = read(&mut sink);
        return (out, sink.into_traces());
    }
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::sync_channel::<Vec<Entry>>(BATCHES_IN_FLIGHT);
        let (spare_sender, spare) = mpsc::channel::<Vec<Entry>>();
        let builder = std::thread::Builder::new()
            .name("snapshot-builder".into())
            .spawn_scoped(scope, move || {
                let mut traces = Traces::default();
                for mut batch in receiver {
                    for e in &batch {
                        traces.add(e);
                    }
                    batch.clear();
                    // The reader is done: nobody takes it.
                    let _ = spare_sender.send(batch);
                }
                traces
            });
        let Ok(builder) = builder else {
            let mut sink = EntrySink::Here(Traces::default());
            let out = read(&mut sink);
            return (out, sink.into_traces());
        };
        let mut sink = EntrySink::Sent {
            batch: Vec::with_capacity(BATCH),
            sender,
            spare,
        };
        let out = read(&mut sink);
        if let EntrySink::Sent { batch, sender, .. } = sink {
            let _ = sender.send(batch);
        }
        let traces = builder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (out, traces.into_vec())
    })
}

impl EntrySink {
    fn into_traces(self) -> Vec<Trace> {
        match self {
            EntrySink::Here(traces) => traces.into_vec(),
            // Only made by `with_builder`, which joins its builder instead.
            EntrySink::Sent { .. } => Vec::new(),
        }
    }
}
