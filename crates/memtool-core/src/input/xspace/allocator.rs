//! Allocator events of an XSpace: TSL's BFC allocator and oneDNN's `mklcpu`
//! record every allocation and free as `MemoryAllocation` /
//! `MemoryDeallocation` events on the `/host:CPU` plane, each carrying the
//! allocator's totals after it.
//!
//! Mapping into the model (one [`Memory`] per allocator, [`Axis::TimePs`]):
//! - `at` = `line.timestamp_ns × 1000 + offset_ps`, minus the profile start
//!   (`Task Environment` / `profile_start_time`, else the earliest line) when
//!   the line timestamps are absolute; TensorFlow and JAX already write them
//!   relative to the start. Events
//!   are ordered by `at`, ties by (line, index) — not by line-relative offset
//!   as XProf does.
//! - A free is matched to the live allocation at its address. A free with no
//!   live allocation there freed something allocated before the profile
//!   started: it becomes an allocation live at start.
//! - The heap the allocator already held at the first event, less those, is
//!   one allocation live at start ([`BEFORE_START_OP`]); stack reserved on
//!   the device (`bytes_reserved`) is another ([`STACK_OP`]). Replaying the
//!   events then gives the allocator's own in-use figure.
//! - Each event's totals become one [`AllocatorSample`] (in use = stack +
//!   heap, free = `bytes_available`, `fragmentation`).
//! - Steps are the spans of events carrying a `step_num` stat (TensorFlow
//!   `Trace('train', step_num=k)`, JAX `StepTraceAnnotation`).

use std::collections::HashMap;

use super::{corrupt, planes, Line, Metadata, Plane, StatKeys, StatValue};
use crate::error::Result;
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, Event, EventKind, Memory, MemoryKind, Profile,
    Site, StackId, Step, StrId,
};

/// The op label of the heap held before the first event.
pub const BEFORE_START_OP: &str = "<allocated before the profile started>";
/// The op label of stack reserved on the device (TPU), as XProf names it.
pub const STACK_OP: &str = "stack";

const HOST_PLANE: &str = "/host:CPU";
const TASK_ENVIRONMENT: &str = "Task Environment";

/// How to capture allocator events, for profiles without them.
const NO_EVENTS_HINT: &str = "no allocator events (MemoryAllocation/MemoryDeallocation) on \
    /host:CPU, so there is no allocator timeline; TensorFlow records them with \
    tf.profiler.experimental.start(logdir, options=tf.profiler.experimental.ProfilerOptions(\
    host_tracer_level=3)), JAX and PyTorch/XLA on GPU or TPU with jax.profiler.trace(logdir); \
    JAX on CPU records none";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    AllocatorName,
    DeviceOrdinal,
    IndexOnHost,
    Reserved,
    Allocated,
    Available,
    Fragmentation,
    PeakInUse,
    Requested,
    AllocationBytes,
    Address,
    TfOp,
    Region,
    DataType,
    Shape,
    StepNum,
}

const STAT_NAMES: [(&str, Key); 16] = [
    ("allocator_name", Key::AllocatorName),
    ("device_ordinal", Key::DeviceOrdinal),
    ("index_on_host", Key::IndexOnHost),
    ("bytes_reserved", Key::Reserved),
    ("bytes_allocated", Key::Allocated),
    ("bytes_available", Key::Available),
    ("fragmentation", Key::Fragmentation),
    ("peak_bytes_in_use", Key::PeakInUse),
    ("requested_bytes", Key::Requested),
    ("allocation_bytes", Key::AllocationBytes),
    ("addr", Key::Address),
    ("tf_op", Key::TfOp),
    ("region_type", Key::Region),
    ("data_type", Key::DataType),
    ("shape", Key::Shape),
    ("step_num", Key::StepNum),
];

/// One allocator event as read, before it is placed in its memory. Kept
/// compact (about 100 bytes): a profile holds millions of them until they
/// are sorted. Absent numbers are `u64::MAX`, absent strings `StrId(0)` (the
/// empty string, which is never stored as a value).
#[derive(Clone, Debug)]
struct RawEvent {
    at: i64,
    /// Walk order: (line, index) ties.
    seq: u64,
    free: bool,
    allocator: u32,
    numbers: [u64; 7],
    /// NaN when absent.
    fragmentation: f64,
    strings: [StrId; 4],
}

const ADDRESS: usize = 0;
const ALLOCATION_BYTES: usize = 1;
const REQUESTED: usize = 2;
const STACK: usize = 3;
const HEAP: usize = 4;
const AVAILABLE: usize = 5;
const PEAK_IN_USE: usize = 6;

const OP: usize = 0;
const SHAPE: usize = 1;
const DTYPE: usize = 2;
const REGION: usize = 3;

impl RawEvent {
    fn new(at: i64, seq: u64, free: bool) -> RawEvent {
        RawEvent {
            at,
            seq,
            free,
            allocator: 0,
            numbers: [u64::MAX; 7],
            fragmentation: f64::NAN,
            strings: [StrId(0); 4],
        }
    }

    fn number(&self, which: usize) -> Option<u64> {
        self.numbers.get(which).copied().filter(|&n| n != u64::MAX)
    }

    fn set_number(&mut self, which: usize, value: Option<u64>) {
        if let Some(slot) = self.numbers.get_mut(which) {
            *slot = value.unwrap_or(u64::MAX);
        }
    }

    fn string(&self, which: usize) -> Option<StrId> {
        self.strings.get(which).copied().filter(|s| s.0 != 0)
    }

    fn set_string(&mut self, which: usize, value: Option<StrId>) {
        if let Some(slot) = self.strings.get_mut(which) {
            *slot = value.unwrap_or(StrId(0));
        }
    }

    fn address(&self) -> Option<u64> {
        self.number(ADDRESS)
    }
    fn allocation_bytes(&self) -> Option<u64> {
        self.number(ALLOCATION_BYTES)
    }
    fn requested(&self) -> Option<u64> {
        self.number(REQUESTED)
    }
    fn stack(&self) -> Option<u64> {
        self.number(STACK)
    }
    fn heap(&self) -> Option<u64> {
        self.number(HEAP)
    }
    fn available(&self) -> Option<u64> {
        self.number(AVAILABLE)
    }
    fn peak_in_use(&self) -> Option<u64> {
        self.number(PEAK_IN_USE)
    }
    fn fragmentation(&self) -> Option<f64> {
        Some(self.fragmentation).filter(|f| f.is_finite())
    }
}

pub(crate) fn read(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let start_ns = profile_start_ns(path, bytes)?;
    let mut reader = Reader {
        profile,
        path,
        start_ns,
        allocators: Vec::new(),
        events: Vec::new(),
        steps: HashMap::new(),
        seq: 0,
        bad_times: 0,
        ref_strings: Vec::new(),
    };
    for plane in planes(bytes) {
        let plane = plane.map_err(|e| corrupt(path, e))?;
        if plane.name == HOST_PLANE {
            reader.read_plane(&plane)?;
        }
    }
    reader.finish();
    Ok(())
}

/// `profile_start_time` of the `Task Environment` plane, in ns since the epoch.
fn profile_start_ns(path: &str, bytes: &[u8]) -> Result<Option<i64>> {
    for plane in planes(bytes) {
        let plane = plane.map_err(|e| corrupt(path, e))?;
        if plane.name != TASK_ENVIRONMENT {
            continue;
        }
        let meta = plane.metadata().map_err(|e| corrupt(path, e))?;
        for stat in plane.stats() {
            let stat = stat.map_err(|e| corrupt(path, e))?;
            if meta.stat_name(stat.metadata_id) == Some("profile_start_time") {
                return Ok(stat.value.as_i64());
            }
        }
    }
    Ok(None)
}

/// Line timestamps beyond this (about 11 days) count from the epoch.
const ABSOLUTE_NS: i64 = 1_000_000_000_000_000;

/// The earliest `timestamp_ns` of the plane's lines.
fn earliest_line_ns(plane: &Plane<'_>) -> Result<Option<i64>, super::WireError> {
    let mut earliest: Option<i64> = None;
    for line in plane.lines() {
        let ts = line?.timestamp_ns;
        earliest = Some(earliest.map_or(ts, |e| e.min(ts)));
    }
    Ok(earliest)
}

struct Reader<'p> {
    profile: &'p mut Profile,
    path: &'p str,
    start_ns: Option<i64>,
    /// Allocator names, interned.
    allocators: Vec<Option<StrId>>,
    events: Vec<RawEvent>,
    /// Step number → span, merged over every event that marks it.
    steps: HashMap<i64, Step>,
    seq: u64,
    bad_times: u64,
    /// Interned text of `ref_value` stats of the current plane, by ref id.
    ref_strings: Vec<Option<Option<StrId>>>,
}

impl Reader<'_> {
    fn read_plane(&mut self, plane: &Plane<'_>) -> Result<()> {
        let path = self.path;
        let meta = plane.metadata().map_err(|e| corrupt(path, e))?;
        let allocs = meta.event_ids("MemoryAllocation");
        let frees = meta.event_ids("MemoryDeallocation");
        let keys = meta.stat_keys(&STAT_NAMES);
        let has_steps = keys.contains(Key::StepNum);
        self.ref_strings.clear();
        let earliest_ns = match self.start_ns {
            Some(_) => None,
            None => earliest_line_ns(plane).map_err(|e| corrupt(path, e))?,
        };
        for line in plane.lines() {
            let line = line.map_err(|e| corrupt(path, e))?;
            let origin_ns = self.origin_ns(&line, earliest_ns);
            for event in line.events() {
                let event = event.map_err(|e| corrupt(path, e))?;
                self.seq += 1;
                let is_alloc = allocs.contains(&event.metadata_id);
                let is_free = frees.contains(&event.metadata_id);
                if !is_alloc && !is_free && !has_steps {
                    continue;
                }
                let at = line
                    .timestamp_ns
                    .checked_sub(origin_ns)
                    .and_then(|ns| ns.checked_mul(1000))
                    .and_then(|ps| ps.checked_add(event.offset_ps));
                let Some(at) = at else {
                    self.bad_times += 1;
                    continue;
                };
                if is_alloc || is_free {
                    let raw = self.allocator_event(&meta, &keys, &event, at, is_free)?;
                    self.events.push(raw);
                } else {
                    self.step_event(&keys, &event, at)?;
                }
            }
        }
        Ok(())
    }

    /// What to subtract from a line's timestamp so times count from the
    /// profile start. TensorFlow and JAX write line timestamps already
    /// relative to it; absolute ones (since the epoch) have the start, or
    /// without one the earliest line, subtracted — picoseconds since the
    /// epoch would not fit in an `i64`.
    fn origin_ns(&self, line: &Line<'_>, earliest_ns: Option<i64>) -> i64 {
        match (self.start_ns, earliest_ns) {
            (Some(start), _) if start > 0 && line.timestamp_ns >= start => start,
            (None, Some(earliest)) if earliest > ABSOLUTE_NS => earliest,
            _ => 0,
        }
    }

    fn step_event(
        &mut self,
        keys: &StatKeys<Key>,
        event: &super::Event<'_>,
        at: i64,
    ) -> Result<()> {
        for stat in event.stats() {
            let stat = stat.map_err(|e| corrupt(self.path, e))?;
            if keys.get(stat.metadata_id) != Some(Key::StepNum) {
                continue;
            }
            let Some(id) = stat.value.as_i64() else {
                continue;
            };
            let end = at.saturating_add(event.duration_ps.max(0));
            self.steps
                .entry(id)
                .and_modify(|s| {
                    s.start = s.start.min(at);
                    s.end = s.end.max(end);
                })
                .or_insert(Step { id, start: at, end });
        }
        Ok(())
    }

    fn allocator_event(
        &mut self,
        meta: &Metadata<'_>,
        keys: &StatKeys<Key>,
        event: &super::Event<'_>,
        at: i64,
        free: bool,
    ) -> Result<RawEvent> {
        let mut raw = RawEvent::new(at, self.seq, free);
        let mut allocator: Option<Option<StrId>> = None;
        let names = &mut self.profile.names;
        let ref_strings = &mut self.ref_strings;
        for stat in event.stats() {
            let stat = stat.map_err(|e| corrupt(self.path, e))?;
            let Some(key) = keys.get(stat.metadata_id) else {
                continue;
            };
            let v = stat.value;
            // Strings are nearly always `ref_value`s: intern each once.
            let mut string = |v: &StatValue<'_>| {
                let cached = match *v {
                    StatValue::Ref(id) => usize::try_from(id).ok().filter(|&i| i < 1 << 20),
                    _ => None,
                };
                if let Some(Some(id)) = cached.and_then(|i| ref_strings.get(i)) {
                    return *id;
                }
                let interned = meta
                    .str_value(v)
                    .and_then(|s| names.optional_string(s.as_ref()));
                if let Some(i) = cached {
                    if ref_strings.len() <= i {
                        ref_strings.resize(i + 1, None);
                    }
                    ref_strings[i] = Some(interned);
                }
                interned
            };
            match key {
                Key::AllocatorName => {
                    allocator = Some(string(&v));
                }
                Key::DeviceOrdinal | Key::IndexOnHost => {
                    if allocator.is_none() {
                        allocator = v.as_i64().map(|n| Some(names.string(&n.to_string())));
                    }
                }
                Key::Reserved => raw.set_number(STACK, v.as_u64()),
                Key::Allocated => raw.set_number(HEAP, v.as_u64()),
                Key::Available => raw.set_number(AVAILABLE, v.as_u64()),
                Key::Fragmentation => raw.fragmentation = v.as_f64().unwrap_or(f64::NAN),
                Key::PeakInUse => raw.set_number(PEAK_IN_USE, v.as_u64()),
                Key::Requested => raw.set_number(REQUESTED, v.as_u64()),
                Key::AllocationBytes => raw.set_number(ALLOCATION_BYTES, v.as_u64()),
                Key::Address => raw.set_number(ADDRESS, v.as_u64()),
                Key::TfOp => raw.set_string(OP, string(&v)),
                Key::Region => raw.set_string(REGION, string(&v)),
                Key::Shape => raw.set_string(SHAPE, string(&v)),
                Key::DataType => {
                    let dtype = v
                        .as_i64()
                        .and_then(dtype_name)
                        .map(|name| names.string(name));
                    raw.set_string(DTYPE, dtype);
                }
                Key::StepNum => {}
            }
        }
        let allocator = allocator.flatten();
        raw.allocator = match self.allocators.iter().position(|a| *a == allocator) {
            Some(i) => i as u32,
            None => {
                self.allocators.push(allocator);
                (self.allocators.len() - 1) as u32
            }
        };
        Ok(raw)
    }

    fn finish(self) {
        let Reader {
            profile,
            path,
            allocators,
            mut events,
            steps,
            bad_times,
            ..
        } = self;
        if bad_times > 0 {
            profile.warn(
                path,
                format!("{bad_times} events have a time that overflows and were skipped"),
            );
        }
        let mut steps: Vec<Step> = steps.into_values().collect();
        steps.sort_by_key(|s| (s.start, s.id));
        if events.is_empty() {
            profile.warn(path, NO_EVENTS_HINT);
        }
        // Each allocator's events become one contiguous run, in time order:
        // no copy per allocator.
        events.sort_by_key(|e| (e.allocator, e.at, e.seq));
        let mut rest: &[RawEvent] = &events;
        for (index, name) in allocators.into_iter().enumerate() {
            let n = rest.partition_point(|e| e.allocator as usize == index);
            let (events, tail) = rest.split_at(n);
            rest = tail;
            let name = name.map_or("<unnamed allocator>", |n| profile.names.str(n));
            let id = if profile.memories.iter().any(|m| m.id == name) {
                format!("{name} ({})", file_name(path))
            } else {
                name.to_string()
            };
            let mut memory = Memory::new(id, MemoryKind::Allocator, Axis::TimePs);
            memory.steps = steps.clone();
            build_memory(profile, path, &mut memory, events);
            profile.memories.push(memory);
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Turns one allocator's events (in time order) into allocations, events,
/// the live set at start and allocator samples.
fn build_memory(profile: &mut Profile, path: &str, memory: &mut Memory, events: &[RawEvent]) {
    let mut live: HashMap<u64, AllocId> = HashMap::new();
    let mut live_at_start_bytes: u64 = 0;
    let (mut reused, mut no_address_frees, mut stack_changes) = (0u64, 0u64, 0u64);
    memory.events.reserve(events.len());
    memory.allocator_samples.reserve(events.len());
    let first_stack = events.first().and_then(|e| e.stack());
    for e in events {
        let bytes = e.allocation_bytes().or(e.requested()).unwrap_or(0);
        let site = profile.names.site(Site {
            stack: StackId(0),
            op: e.string(OP),
            shape: e.string(SHAPE),
            dtype: e.string(DTYPE),
            category: e.string(REGION),
        });
        let allocation = Allocation {
            bytes,
            requested: e.requested().unwrap_or(bytes),
            count: 1,
            address: e.address(),
            site,
        };
        let id = if e.free {
            match e.address().and_then(|a| live.remove(&a)) {
                Some(id) => id,
                None => {
                    // Freed, never seen allocated: it was live at the start.
                    if e.address().is_none() {
                        no_address_frees += 1;
                    }
                    let id = memory.push_allocation(allocation);
                    memory.live_at_start.push(id);
                    live_at_start_bytes = live_at_start_bytes.saturating_add(bytes);
                    id
                }
            }
        } else {
            let id = memory.push_allocation(allocation);
            if let Some(address) = e.address() {
                if live.insert(address, id).is_some() {
                    reused += 1;
                }
            }
            id
        };
        memory.events.push(Event {
            at: e.at,
            kind: if e.free {
                EventKind::Free
            } else {
                EventKind::Alloc
            },
            alloc: id,
        });
        if e.stack() != first_stack {
            stack_changes += 1;
        }
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
    // What the heap held before the first event that no free accounts for.
    if let Some(first) = events.first() {
        if let Some(heap) = first.heap() {
            let own = first.allocation_bytes().or(first.requested()).unwrap_or(0);
            let before = if first.free {
                heap.saturating_add(own)
            } else {
                heap.saturating_sub(own)
            };
            let unexplained = before.saturating_sub(live_at_start_bytes);
            if unexplained > 0 {
                pseudo_allocation(profile, memory, unexplained, BEFORE_START_OP, None);
            }
        }
    }
    if let Some(stack) = first_stack.filter(|&s| s > 0) {
        pseudo_allocation(profile, memory, stack, STACK_OP, Some(STACK_OP));
    }
    let id = memory.id.clone();
    if reused > 0 {
        profile.warn(
            path,
            format!("{id}: {reused} allocations reuse the address of a live allocation without a free in between; the earlier ones stay live"),
        );
    }
    if no_address_frees > 0 {
        profile.warn(
            path,
            format!("{id}: {no_address_frees} frees have no address and match no allocation"),
        );
    }
    if stack_changes > 0 {
        profile.warn(
            path,
            format!("{id}: reserved stack size changes during the profile; live sets count the stack at the first event"),
        );
    }
}

fn pseudo_allocation(
    profile: &mut Profile,
    memory: &mut Memory,
    bytes: u64,
    op: &str,
    category: Option<&str>,
) {
    let op = Some(profile.names.string(op));
    let category = category.map(|c| profile.names.string(c));
    let site = profile.names.site(Site {
        stack: StackId(0),
        op,
        shape: None,
        dtype: None,
        category,
    });
    let id = memory.push_allocation(Allocation {
        bytes,
        requested: bytes,
        count: 1,
        address: None,
        site,
    });
    memory.live_at_start.push(id);
}

/// TensorFlow's `DataType` enum, named as `DataTypeString` names it.
fn dtype_name(code: i64) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "INVALID",
        "float",
        "double",
        "int32",
        "uint8",
        "int16",
        "int8",
        "string",
        "complex64",
        "int64",
        "bool",
        "qint8",
        "quint8",
        "qint32",
        "bfloat16",
        "qint16",
        "quint16",
        "uint16",
        "complex128",
        "half",
        "resource",
        "variant",
        "uint32",
        "uint64",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e4m3b11fnuz",
        "float8_e5m2fnuz",
        "int4",
        "uint4",
    ];
    // 0 is "not set" on frees; the allocation's own type is what counts.
    match code {
        1.. => usize::try_from(code)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
            .or(Some("unknown")),
        _ => None,
    }
}
