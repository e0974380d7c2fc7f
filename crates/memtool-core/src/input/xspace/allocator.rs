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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc;

use rustc_hash::FxHashMap;

use super::stream::{header_i64, FieldAt, Skim, Stream};
use super::{
    as_i64, Event, Metadata, PlaneAt, Planes, Slice, StatKeys, StatValue, StreamError, Window,
};
use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::wire::{Header, Value, WireError};
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, EventKind, Memory, MemoryKind, Names, Profile,
    Site, SiteId, StackId, Step, StrId,
};

/// The op label of the heap held before the first event.
pub const BEFORE_START_OP: &str = "<allocated before the profile started>";
/// The op label of stack reserved on the device (TPU), as XProf names it.
pub const STACK_OP: &str = "stack";

const HOST_PLANE: &str = "/host:CPU";
const TASK_ENVIRONMENT: &str = "Task Environment";

/// How to capture allocator events, for profiles without any memory.
pub(super) const NO_EVENTS_HINT: &str =
    "no allocator events (MemoryAllocation/MemoryDeallocation) on \
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
#[derive(Clone, Copy, Debug)]
struct RawEvent {
    at: i64,
    /// Walk order, for ties: line, then index in the line.
    seq_rank: u64,
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
    fn new(at: i64, seen: (u64, u64), free: bool) -> RawEvent {
        RawEvent {
            at,
            seq_rank: seen.0,
            seq: seen.1,
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

/// Reads the allocator events of `source` into one memory per allocator: by
/// the merged walk, else (a line out of time order, damage) by the walk in
/// file order, which gives the same memories, or the error.
/// `force_general_path` decodes events with [`Decoder::event`] only, never
/// [`Decoder::event_fast`].
/// Adds a memory per allocator; returns whether there were allocator events.
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    force_general_path: bool,
) -> Result<bool> {
    let mut window = Window::new(source, SKIM_CHUNK);
    let start_ns = profile_start_ns(&mut window).map_err(|e| e.into_error(path))?;
    let merged = {
        let _span = crate::timings::span("xspace: allocator events");
        merged(&mut profile.names, source, start_ns, !force_general_path)
    };
    let collected = match merged {
        Ok(collected) => collected,
        // A line out of time order, or damage: the walk in file order sorts
        // what it reads, and finds the first problem in that order.
        Err(Fallback) => {
            let _span = crate::timings::span("xspace: allocator events, in file order");
            sequential(&mut profile.names, source, start_ns).map_err(|e| e.into_error(path))?
        }
    };
    Ok(collected.finish(profile, path))
}

/// How much of the input a skim over headers reads at a time.
const SKIM_CHUNK: usize = 64 << 10;
/// How much of the input the lines' windows read at a time, all together.
const LINE_CHUNKS: usize = 4 << 20;
/// Lines merged at most (a cursor and a window each); a host plane with more
/// threads than this is read in file order and sorted.
const MAX_MERGED_LINES: usize = 4096;

/// `profile_start_time` of the `Task Environment` plane, in ns since the epoch.
fn profile_start_ns(window: &mut Window<'_>) -> Result<Option<i64>, StreamError> {
    let mut planes = Planes::new(window);
    while let Some(at) = planes.next(window)? {
        if at.name != TASK_ENVIRONMENT {
            continue;
        }
        let bytes = at.load(window)?;
        let plane = at.parse(&bytes)?;
        let meta = plane.metadata()?;
        for stat in plane.stats() {
            let stat = stat?;
            if meta.stat_name(stat.metadata_id) == Some("profile_start_time") {
                return Ok(stat.value.as_i64());
            }
        }
    }
    Ok(None)
}

/// Line timestamps beyond this (about 11 days) count from the epoch.
const ABSOLUTE_NS: i64 = 1_000_000_000_000_000;

/// What one `/host:CPU` plane's metadata says about its events.
struct PlaneKeys {
    meta: Metadata,
    keys: StatKeys<Key>,
    allocs: Vec<i64>,
    frees: Vec<i64>,
    has_steps: bool,
    /// Interned text of `ref_value` stats, by ref id.
    ref_strings: Vec<Option<Option<StrId>>>,
}

impl PlaneKeys {
    /// Reads the plane's metadata maps (fields 4 and 5), skipping its lines.
    fn read(window: &mut Window<'_>, plane: &PlaneAt) -> Result<PlaneKeys, StreamError> {
        let mut meta = Metadata::default();
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(window)? {
            if let (4 | 5, Header::Len(len)) = (number, header) {
                meta.add_entry(number, window.bytes(at, len)?, at as usize)?;
            }
        }
        let keys = meta.stat_keys(&STAT_NAMES);
        Ok(PlaneKeys {
            allocs: meta.event_ids("MemoryAllocation"),
            frees: meta.event_ids("MemoryDeallocation"),
            has_steps: keys.contains(Key::StepNum),
            keys,
            meta,
            ref_strings: Vec::new(),
        })
    }
}

/// Where a line's times count from.
#[derive(Clone, Copy, Debug)]
struct LineClock {
    timestamp_ns: i64,
    origin_ns: i64,
}

impl LineClock {
    /// What to subtract from a line's timestamp so times count from the
    /// profile start. TensorFlow and JAX write line timestamps already
    /// relative to it; absolute ones (since the epoch) have the start, or
    /// without one the earliest line, subtracted — picoseconds since the
    /// epoch would not fit in an `i64`.
    fn new(timestamp_ns: i64, start_ns: Option<i64>, earliest_ns: Option<i64>) -> LineClock {
        let origin_ns = match (start_ns, earliest_ns) {
            (Some(start), _) if start > 0 && timestamp_ns >= start => start,
            (None, Some(earliest)) if earliest > ABSOLUTE_NS => earliest,
            _ => 0,
        };
        LineClock {
            timestamp_ns,
            origin_ns,
        }
    }

    fn at(&self, offset_ps: i64) -> Option<i64> {
        self.timestamp_ns
            .checked_sub(self.origin_ns)
            .and_then(|ns| ns.checked_mul(1000))
            .and_then(|ps| ps.checked_add(offset_ps))
    }
}

/// An allocator seen in the events, and where first: (line in walk order,
/// event in line). Memories come in that order, whatever order events are
/// read in.
struct AllocatorSeen {
    name: Option<StrId>,
    first: (u64, u64),
}

/// Turns event bytes into [`RawEvent`]s; shared by both walks.
struct Decoder {
    allocators: Vec<AllocatorSeen>,
    /// Step number → span, merged over every event that marks it.
    steps: FxHashMap<i64, Step>,
    bad_times: u64,
}

impl Decoder {
    fn new() -> Decoder {
        Decoder {
            allocators: Vec::new(),
            steps: FxHashMap::default(),
            bad_times: 0,
        }
    }

    /// One event of a line (its bytes at `base` in the input): the
    /// allocator event it is, if it is one; step marks are recorded.
    fn event(
        &mut self,
        names: &mut Names,
        plane: &mut PlaneKeys,
        clock: &LineClock,
        bytes: &[u8],
        base: u64,
        seen: (u64, u64),
    ) -> Result<Option<RawEvent>, WireError> {
        let event = Event::parse(Slice {
            bytes,
            base: base as usize,
        })?;
        let is_alloc = plane.allocs.contains(&event.metadata_id);
        let is_free = plane.frees.contains(&event.metadata_id);
        if !is_alloc && !is_free && !plane.has_steps {
            return Ok(None);
        }
        let Some(at) = clock.at(event.offset_ps) else {
            self.bad_times += 1;
            return Ok(None);
        };
        if is_alloc || is_free {
            let raw = self.allocator_event(names, plane, &event, at, is_free, seen)?;
            Ok(Some(raw))
        } else {
            self.step_event(&plane.keys, &event, at)?;
            Ok(None)
        }
    }

    fn step_event(
        &mut self,
        keys: &StatKeys<Key>,
        event: &Event<'_>,
        at: i64,
    ) -> Result<(), WireError> {
        for stat in event.stats() {
            let stat = stat?;
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
        names: &mut Names,
        plane: &mut PlaneKeys,
        event: &Event<'_>,
        at: i64,
        free: bool,
        seen: (u64, u64),
    ) -> Result<RawEvent, WireError> {
        let mut raw = RawEvent::new(at, seen, free);
        let mut strings: [Option<StatValue<'_>>; 3] = [None; 3];
        let mut dtype: Option<Option<&str>> = None;
        let mut allocator = AllocatorStat::Unset;
        for stat in event.stats() {
            let stat = stat?;
            let Some(key) = plane.keys.get(stat.metadata_id) else {
                continue;
            };
            let v = stat.value;
            match key {
                Key::AllocatorName => allocator = AllocatorStat::Name(v),
                Key::DeviceOrdinal | Key::IndexOnHost => {
                    if let (AllocatorStat::Unset, Some(n)) = (allocator, v.as_i64()) {
                        allocator = AllocatorStat::Ordinal(n);
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
                Key::TfOp => strings[OP] = Some(v),
                Key::Shape => strings[SHAPE] = Some(v),
                Key::Region => strings[REGION - 1] = Some(v),
                Key::DataType => dtype = Some(v.as_i64().and_then(dtype_name)),
                Key::StepNum => {}
            }
        }
        // Strings are interned once the last stat of each kind is known, in
        // the order [`Decoder::event_fast`] interns them: both walks then
        // give one names table.
        let PlaneKeys {
            meta, ref_strings, ..
        } = plane;
        // Strings are nearly always `ref_value`s: intern each once.
        let mut string = |v: &StatValue<'_>| string_stat(meta, ref_strings, names, v);
        for (slot, value) in [
            (OP, strings[OP]),
            (SHAPE, strings[SHAPE]),
            (REGION, strings[REGION - 1]),
        ] {
            if let Some(v) = value {
                let id = string(&v);
                raw.set_string(slot, id);
            }
        }
        let allocator = match allocator {
            AllocatorStat::Unset => None,
            AllocatorStat::Name(v) => string(&v),
            AllocatorStat::Ordinal(n) => Some(names.string(&n.to_string())),
        };
        if let Some(name) = dtype {
            raw.set_string(DTYPE, name.map(|name| names.string(name)));
        }
        raw.allocator = self.allocator_index(allocator, seen);
        Ok(raw)
    }
}

/// Reads the varint at `*pos`, as [`crate::input::wire::Fields`] does;
/// `None` where it would give an error.
#[inline(always)]
fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let byte = *buf.get(*pos)?;
    *pos += 1;
    if byte < 0x80 {
        return Some(u64::from(byte));
    }
    let mut value = u64::from(byte & 0x7f);
    let mut shift = 7u32;
    loop {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// One field of a message in `buf` at `*pos`, framed as
/// [`crate::input::wire::Fields`] frames it; `None` where it gives an error.
#[inline(always)]
fn next_field<'a>(buf: &'a [u8], pos: &mut usize) -> Option<(u32, Value<'a>)> {
    let key = varint(buf, pos)?;
    let number = key >> 3;
    if number == 0 || number > u64::from(u32::MAX >> 3) {
        return None;
    }
    let value = match key & 7 {
        0 => Value::Varint(varint(buf, pos)?),
        1 => {
            let b = buf.get(*pos..*pos + 8)?;
            *pos += 8;
            Value::Fixed64(u64::from_le_bytes(b.try_into().ok()?))
        }
        2 => {
            let len = usize::try_from(varint(buf, pos)?).ok()?;
            let b = buf.get(*pos..pos.checked_add(len)?)?;
            *pos += len;
            Value::Bytes(b)
        }
        5 => {
            let b = buf.get(*pos..*pos + 4)?;
            *pos += 4;
            Value::Fixed32(u32::from_le_bytes(b.try_into().ok()?))
        }
        _ => return None,
    };
    Some((number as u32, value))
}

/// A stat as [`super::Stat::parse`] reads it; `None` where it gives an error.
#[inline(always)]
fn stat(buf: &[u8]) -> Option<(i64, StatValue<'_>)> {
    // Nearly every stat is a one-byte metadata id and one varint value:
    // `08 id 18|20|38 value`.
    if let [0x08, id @ 0..=0x7f, tag @ (0x18 | 0x20 | 0x38), rest @ ..] = buf {
        let mut pos = 0;
        if let Some(v) = varint(rest, &mut pos).filter(|_| pos == rest.len()) {
            let value = match tag {
                0x18 => StatValue::Uint64(v),
                0x20 => StatValue::Int64(v as i64),
                _ => StatValue::Ref(v),
            };
            return Some((i64::from(*id), value));
        }
    }
    let (mut id, mut value) = (0, StatValue::None);
    let mut pos = 0;
    while pos < buf.len() {
        match next_field(buf, &mut pos)? {
            (1, v) => id = as_i64(v).unwrap_or(0),
            (2, Value::Fixed64(bits)) => value = StatValue::Double(f64::from_bits(bits)),
            (3, v) => value = v.as_u64().map_or(StatValue::None, StatValue::Uint64),
            (4, v) => value = as_i64(v).map_or(StatValue::None, StatValue::Int64),
            (5, Value::Bytes(b)) => value = StatValue::Str(b),
            (6, Value::Bytes(b)) => value = StatValue::Bytes(b),
            (7, v) => value = v.as_u64().map_or(StatValue::None, StatValue::Ref),
            _ => {}
        }
    }
    Some((id, value))
}

/// Where a size or address stat goes in [`RawEvent::numbers`].
#[inline(always)]
fn number_slot(key: Key) -> Option<usize> {
    match key {
        Key::Reserved => Some(STACK),
        Key::Allocated => Some(HEAP),
        Key::Available => Some(AVAILABLE),
        Key::PeakInUse => Some(PEAK_IN_USE),
        Key::Requested => Some(REQUESTED),
        Key::AllocationBytes => Some(ALLOCATION_BYTES),
        Key::Address => Some(ADDRESS),
        _ => None,
    }
}

/// What an allocator event's stats name its allocator by, last stat winning
/// as in [`Decoder::allocator_event`].
#[derive(Clone, Copy)]
enum AllocatorStat<'a> {
    Unset,
    Name(StatValue<'a>),
    Ordinal(i64),
}

/// Caches for what nearly every event repeats: `ref_value` strings (per
/// plane, in [`PlaneKeys`]), dtype names and allocator ordinals.
#[derive(Default)]
struct Interned {
    dtypes: Vec<Option<StrId>>,
    ordinals: Vec<(i64, StrId)>,
}

impl Decoder {
    /// [`Decoder::event`] in one pass over the event's bytes, for the merged
    /// walk: the same event on valid input; `Err` on anything the slow path
    /// would refuse (and, being stricter, on damaged stats of events it
    /// would not read), which the walk in file order then reads.
    #[allow(clippy::too_many_arguments)]
    fn event_fast(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &mut PlaneKeys,
        clock: &LineClock,
        bytes: &[u8],
        base: u64,
        seen: (u64, u64),
    ) -> Result<Option<RawEvent>, Fallback> {
        let (mut metadata_id, mut offset_ps) = (0, 0);
        let mut raw = RawEvent::new(0, seen, false);
        let mut strings: [Option<StatValue<'_>>; 3] = [None; 3];
        let mut dtype: Option<Option<usize>> = None;
        let mut allocator = AllocatorStat::Unset;
        // Events of other kinds (most of a host trace) need only framing:
        // their stats are skipped once the metadata id says so.
        let wanted = |id: &i64| plane.allocs.contains(id) || plane.frees.contains(id);
        let (mut skip_stats, mut skipped) = (false, false);
        let mut pos = 0;
        while pos < bytes.len() {
            let Some((number, value)) = next_field(bytes, &mut pos) else {
                return Err(Fallback);
            };
            match (number, value) {
                (1, v) => {
                    metadata_id = as_i64(v).unwrap_or(0);
                    skip_stats = !plane.has_steps && !wanted(&metadata_id);
                }
                (2, v) => offset_ps = as_i64(v).unwrap_or(0),
                (4, Value::Bytes(_)) if skip_stats => skipped = true,
                (4, Value::Bytes(b)) => {
                    let (id, v) = stat(b).ok_or(Fallback)?;
                    let Some(key) = plane.keys.get(id) else {
                        continue;
                    };
                    // Sizes and addresses are most stats: one branch for all.
                    if let Some(slot) = number_slot(key) {
                        raw.numbers[slot] = v.as_u64().unwrap_or(u64::MAX);
                        continue;
                    }
                    match key {
                        Key::AllocatorName => allocator = AllocatorStat::Name(v),
                        Key::DeviceOrdinal | Key::IndexOnHost => {
                            if let (AllocatorStat::Unset, Some(n)) = (allocator, v.as_i64()) {
                                allocator = AllocatorStat::Ordinal(n);
                            }
                        }
                        Key::Reserved
                        | Key::Allocated
                        | Key::Available
                        | Key::PeakInUse
                        | Key::Requested
                        | Key::AllocationBytes
                        | Key::Address => {}
                        Key::Fragmentation => raw.fragmentation = v.as_f64().unwrap_or(f64::NAN),
                        Key::TfOp => strings[OP] = Some(v),
                        Key::Shape => strings[SHAPE] = Some(v),
                        Key::Region => strings[REGION - 1] = Some(v),
                        Key::DataType => dtype = Some(v.as_i64().and_then(dtype_index)),
                        Key::StepNum => {}
                    }
                }
                _ => {}
            }
        }
        let is_alloc = plane.allocs.contains(&metadata_id);
        let is_free = plane.frees.contains(&metadata_id);
        if skipped && (is_alloc || is_free) {
            // A second metadata id made it an allocator event after all.
            return Ok(self.event(names, plane, clock, bytes, base, seen)?);
        }
        if !is_alloc && !is_free {
            if !plane.has_steps {
                return Ok(None);
            }
            // Step marks are few: the slow path reads them.
            return Ok(self.event(names, plane, clock, bytes, base, seen)?);
        }
        let Some(at) = clock.at(offset_ps) else {
            self.bad_times += 1;
            return Ok(None);
        };
        raw.at = at;
        raw.free = is_free;
        let PlaneKeys {
            meta, ref_strings, ..
        } = plane;
        let mut string = |v: &StatValue<'_>| string_stat(meta, ref_strings, names, v);
        for (slot, value) in [
            (OP, strings[OP]),
            (SHAPE, strings[SHAPE]),
            (REGION, strings[REGION - 1]),
        ] {
            if let Some(v) = value {
                let id = string(&v);
                raw.set_string(slot, id);
            }
        }
        let allocator = match allocator {
            AllocatorStat::Unset => None,
            AllocatorStat::Name(v) => string(&v),
            AllocatorStat::Ordinal(n) => Some(match interned.ordinals.iter().find(|o| o.0 == n) {
                Some(&(_, id)) => id,
                None => {
                    let id = names.string(&n.to_string());
                    interned.ordinals.push((n, id));
                    id
                }
            }),
        };
        if let Some(index) = dtype {
            let id = index.map(|i| {
                if interned.dtypes.len() <= i {
                    interned.dtypes.resize(i + 1, None);
                }
                let name = DTYPE_CODES.get(i).copied().unwrap_or("unknown");
                *interned.dtypes[i].get_or_insert_with(|| names.string(name))
            });
            raw.set_string(DTYPE, id);
        }
        raw.allocator = self.allocator_index(allocator, seen);
        Ok(Some(raw))
    }

    fn allocator_index(&mut self, name: Option<StrId>, seen: (u64, u64)) -> u32 {
        match self.allocators.iter().position(|a| a.name == name) {
            Some(i) => {
                let first = &mut self.allocators[i].first;
                *first = (*first).min(seen);
                i as u32
            }
            None => {
                self.allocators.push(AllocatorSeen { name, first: seen });
                (self.allocators.len() - 1) as u32
            }
        }
    }
}

/// Why the merged walk gave up: the walk in file order takes over.
#[derive(Debug)]
struct Fallback;

impl From<StreamError> for Fallback {
    fn from(_: StreamError) -> Self {
        Fallback
    }
}

impl From<WireError> for Fallback {
    fn from(_: WireError) -> Self {
        Fallback
    }
}

impl From<std::io::Error> for Fallback {
    fn from(_: std::io::Error) -> Self {
        Fallback
    }
}

/// One line being read in the merged walk: its next allocator event is
/// `head`.
struct Cursor<'s> {
    plane: usize,
    /// The line's place in walk order (all host planes' lines counted).
    rank: u64,
    /// Events of the line read so far.
    index: u64,
    clock: LineClock,
    fields: Stream,
    window: Window<'s>,
    head: Option<RawEvent>,
    /// Whether events are decoded by [`Decoder::event_fast`].
    fast_events: bool,
}

impl Cursor<'_> {
    fn advance(
        &mut self,
        decoder: &mut Decoder,
        names: &mut Names,
        interned: &mut Interned,
        planes: &mut [PlaneKeys],
    ) -> Result<(), Fallback> {
        let last_at = self.head.take().map(|e| e.at);
        let plane = planes.get_mut(self.plane).ok_or(Fallback)?;
        while let Some((number, field)) = self.fields.next(&mut self.window)? {
            match (number, field) {
                // A timestamp after the events: they were timed too early.
                (3, _) => return Err(Fallback),
                (4, FieldAt::Bytes { at, len }) => {
                    self.index += 1;
                    let bytes = self.window.bytes(at, len)?;
                    let seen = (self.rank, self.index);
                    let clock = &self.clock;
                    let raw = if self.fast_events {
                        decoder.event_fast(names, interned, plane, clock, bytes, at, seen)?
                    } else {
                        decoder.event(names, plane, clock, bytes, at, seen)?
                    };
                    if let Some(raw) = raw {
                        if last_at.is_some_and(|last| raw.at < last) {
                            return Err(Fallback);
                        }
                        self.head = Some(raw);
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Reads the allocator events of every `/host:CPU` line at once, merging the
/// lines by time, straight into the memories: nothing is kept per event but
/// what the model keeps. Profilers write each line's events in time order
/// (TSL's `SortXSpace`); a line that is not, or any damage, ends this walk.
/// Events are decoded by [`Decoder::event_fast`] when `fast_events`, else by
/// [`Decoder::event`].
fn merged(
    names: &mut Names,
    source: &dyn ByteSource,
    start_ns: Option<i64>,
    fast_events: bool,
) -> Result<Collected, Fallback> {
    let mut skim = Window::new(source, SKIM_CHUNK);
    let mut planes: Vec<PlaneKeys> = Vec::new();
    // (plane, timestamp, where the first event is, line end)
    let mut lines: Vec<(usize, i64, u64, u64)> = Vec::new();
    let mut plane_iter = Planes::new(&skim);
    while let Some(plane) = plane_iter.next(&mut skim)? {
        if plane.name != HOST_PLANE {
            continue;
        }
        planes.push(PlaneKeys::read(&mut skim, &plane)?);
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(&mut skim)? {
            let (3, Header::Len(len)) = (number, header) else {
                continue;
            };
            // The line's own fields come before its events on the wire.
            let mut line = Skim::new(at, at + len);
            let mut timestamp_ns = 0;
            let mut first_event = line.end;
            loop {
                let field_at = line.pos;
                let Some((number, header, _)) = line.next(&mut skim)? else {
                    break;
                };
                match (number, header) {
                    (3, h) => timestamp_ns = header_i64(h).unwrap_or(0),
                    (4, Header::Len(_)) => {
                        first_event = field_at;
                        break;
                    }
                    _ => {}
                }
            }
            lines.push((planes.len() - 1, timestamp_ns, first_event, line.end));
        }
    }
    drop(skim);
    if lines.len() > MAX_MERGED_LINES {
        return Err(Fallback);
    }

    let mut decoder = Decoder::new();
    let mut interned = Interned::default();
    let chunk = (LINE_CHUNKS / lines.len().max(1)).clamp(16 << 10, 1 << 20);
    let mut cursors: Vec<Cursor<'_>> = Vec::with_capacity(lines.len());
    let mut queue = BinaryHeap::with_capacity(lines.len());
    for (rank, &(plane, timestamp_ns, first_event, end)) in lines.iter().enumerate() {
        let earliest_ns = match start_ns {
            Some(_) => None,
            None => lines.iter().filter(|l| l.0 == plane).map(|l| l.1).min(),
        };
        let mut cursor = Cursor {
            plane,
            rank: rank as u64,
            index: 0,
            clock: LineClock::new(timestamp_ns, start_ns, earliest_ns),
            fields: Stream::new(first_event, end),
            window: Window::new(source, chunk.min((end - first_event) as usize)),
            head: None,
            fast_events,
        };
        cursor.advance(&mut decoder, names, &mut interned, &mut planes)?;
        if let Some(head) = &cursor.head {
            queue.push(Reverse((head.at, cursors.len())));
        }
        cursors.push(cursor);
    }

    // Decoding and the merge stay on this thread; a second one builds the
    // memories, batch by batch, in the order the merge gives.
    let mut sites = SiteCache::default();
    let (sender, receiver) = mpsc::sync_channel::<Vec<(RawEvent, SiteId)>>(BATCHES_IN_FLIGHT);
    std::thread::scope(|scope| {
        let builder = std::thread::Builder::new()
            .name("xspace-builder".into())
            .spawn_scoped(scope, move || {
                let mut builders: Vec<MemoryBuilder> = Vec::new();
                let mut any = false;
                for batch in receiver {
                    for (event, site) in &batch {
                        let index = event.allocator as usize;
                        if builders.len() <= index {
                            builders.resize_with(index + 1, MemoryBuilder::default);
                        }
                        builders[index].push(event, *site);
                        any = true;
                    }
                }
                (builders, any)
            })?;
        let mut merge = || -> Result<(), Fallback> {
            let mut batch = Vec::with_capacity(BATCH);
            while let Some(Reverse((_, i))) = queue.pop() {
                let cursor = &mut cursors[i];
                if let Some(event) = cursor.head {
                    batch.push((event, sites.site(names, &event)));
                    if batch.len() == BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        sender.send(full).map_err(|_| Fallback)?;
                    }
                }
                cursor.advance(&mut decoder, names, &mut interned, &mut planes)?;
                if let Some(head) = &cursor.head {
                    queue.push(Reverse((head.at, i)));
                }
            }
            sender.send(batch).map_err(|_| Fallback)
        };
        let merged = merge();
        drop(sender);
        let (builders, any) = builder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        merged?;
        Ok(Collected {
            decoder,
            builders,
            any,
        })
    })
}

/// Events per batch handed to the building thread, and batches in flight:
/// enough to keep both threads busy, little memory (about 100 KiB a batch).
const BATCH: usize = 1024;
const BATCHES_IN_FLIGHT: usize = 8;

/// Reads the allocator events in file order, as they are laid out, and sorts
/// them: for lines out of time order, and to report the first damage in file
/// order.
fn sequential(
    names: &mut Names,
    source: &dyn ByteSource,
    start_ns: Option<i64>,
) -> Result<Collected, StreamError> {
    let mut skim = Window::new(source, SKIM_CHUNK);
    let mut window = Window::new(source, 1 << 20);
    let mut decoder = Decoder::new();
    let mut events: Vec<RawEvent> = Vec::new();
    let mut planes: Vec<PlaneKeys> = Vec::new();
    let mut rank = 0u64;
    let mut plane_iter = Planes::new(&skim);
    while let Some(plane) = plane_iter.next(&mut skim)? {
        if plane.name != HOST_PLANE {
            continue;
        }
        planes.push(PlaneKeys::read(&mut skim, &plane)?);
        let keys = planes.last_mut().expect("just pushed");
        let earliest_ns = match start_ns {
            Some(_) => None,
            None => earliest_line_ns(&mut skim, &plane)?,
        };
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(&mut skim)? {
            let (3, Header::Len(len)) = (number, header) else {
                continue;
            };
            let timestamp_ns = line_timestamp_ns(&mut skim, at, at + len)?;
            let clock = LineClock::new(timestamp_ns, start_ns, earliest_ns);
            rank += 1;
            let mut index = 0u64;
            let mut line = Stream::new(at, at + len);
            while let Some((number, field)) = line.next(&mut window)? {
                let (4, FieldAt::Bytes { at, len }) = (number, field) else {
                    continue;
                };
                index += 1;
                let bytes = window.bytes(at, len)?;
                let seen = (rank, index);
                if let Some(raw) = decoder.event(names, keys, &clock, bytes, at, seen)? {
                    events.push(raw);
                }
            }
        }
    }
    // In time order, ties in walk order: the order the merged walk gives, so
    // sites are interned in its order too, and each allocator's events are
    // in time order.
    events.sort_by_key(|e| (e.at, e.seq_rank, e.seq));
    let mut builders: Vec<MemoryBuilder> = Vec::new();
    builders.resize_with(decoder.allocators.len(), MemoryBuilder::default);
    let mut sites = SiteCache::default();
    for event in &events {
        if let Some(builder) = builders.get_mut(event.allocator as usize) {
            builder.push(event, sites.site(names, event));
        }
    }
    Ok(Collected {
        decoder,
        builders,
        any: !events.is_empty(),
    })
}

/// A line's `timestamp_ns`, its fields framed (as [`super::Line`] does).
fn line_timestamp_ns(window: &mut Window<'_>, start: u64, end: u64) -> Result<i64, StreamError> {
    let mut timestamp_ns = 0;
    let mut fields = Skim::new(start, end);
    while let Some((number, header, _)) = fields.next(window)? {
        if number == 3 {
            timestamp_ns = header_i64(header).unwrap_or(0);
        }
    }
    Ok(timestamp_ns)
}

/// The earliest `timestamp_ns` of the plane's lines.
fn earliest_line_ns(window: &mut Window<'_>, plane: &PlaneAt) -> Result<Option<i64>, StreamError> {
    let mut earliest: Option<i64> = None;
    let mut fields = Skim::new(plane.start, plane.end);
    while let Some((number, header, at)) = fields.next(window)? {
        let (3, Header::Len(len)) = (number, header) else {
            continue;
        };
        let ts = line_timestamp_ns(window, at, at + len)?;
        earliest = Some(earliest.map_or(ts, |e| e.min(ts)));
    }
    Ok(earliest)
}

/// What both walks found, before the memories are made.
struct Collected {
    decoder: Decoder,
    /// By allocator index (`RawEvent::allocator`).
    builders: Vec<MemoryBuilder>,
    /// Whether there was any allocator event.
    any: bool,
}

impl Collected {
    /// Adds the memories; returns whether there were allocator events.
    fn finish(self, profile: &mut Profile, path: &str) -> bool {
        let Collected {
            decoder,
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
        let mut steps: Vec<Step> = decoder.steps.into_values().collect();
        steps.sort_by_key(|s| (s.start, s.id));
        let mut order: Vec<usize> = (0..decoder.allocators.len()).collect();
        order.sort_by_key(|&i| decoder.allocators[i].first);
        builders.resize_with(decoder.allocators.len(), MemoryBuilder::default);
        for index in order {
            let builder = std::mem::take(&mut builders[index]);
            let name = decoder.allocators[index].name;
            let name = name.map_or("<unnamed allocator>", |n| profile.names.str(n));
            let id = if profile.memories.iter().any(|m| m.id == name) {
                format!("{name} ({})", file_name(path))
            } else {
                name.to_string()
            };
            let memory = builder.finish(profile, path, id, steps.clone());
            profile.memories.push(memory);
        }
        any
    }
}

/// A string stat, interned. Strings are nearly always `ref_value`s (ids of
/// the plane's stat metadata): each is interned once and cached by ref id.
fn string_stat(
    meta: &Metadata,
    ref_strings: &mut Vec<Option<Option<StrId>>>,
    names: &mut Names,
    v: &StatValue<'_>,
) -> Option<StrId> {
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
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Sites of allocator events by (op, shape, dtype, region): a profile has a
/// few hundred, each interned once rather than hashed per event.
#[derive(Default)]
struct SiteCache {
    ids: FxHashMap<[StrId; 4], SiteId>,
}

impl SiteCache {
    fn site(&mut self, names: &mut Names, e: &RawEvent) -> SiteId {
        *self.ids.entry(e.strings).or_insert_with(|| {
            names.site(Site {
                stack: StackId(0),
                op: e.string(OP),
                shape: e.string(SHAPE),
                dtype: e.string(DTYPE),
                category: e.string(REGION),
            })
        })
    }
}

/// One allocator's memory, built from its events in time order: its
/// allocations, events, live set at start and allocator samples.
struct MemoryBuilder {
    memory: Memory,
    /// Live allocations by address.
    live: FxHashMap<u64, AllocId>,
    live_at_start_bytes: u64,
    reused: u64,
    no_address_frees: u64,
    stack_changes: u64,
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
            stack_changes: 0,
            first: None,
        }
    }
}

impl MemoryBuilder {
    fn push(&mut self, e: &RawEvent, site: SiteId) {
        let first = *self.first.get_or_insert(*e);
        let memory = &mut self.memory;
        let bytes = e.allocation_bytes().or(e.requested()).unwrap_or(0);
        let allocation = Allocation {
            bytes,
            requested: e.requested().unwrap_or(bytes),
            count: 1,
            address: e.address(),
            site,
        };
        let id = if e.free {
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
        memory.events.push(crate::model::Event {
            at: e.at,
            kind: if e.free {
                EventKind::Free
            } else {
                EventKind::Alloc
            },
            alloc: id,
        });
        if e.stack() != first.stack() {
            self.stack_changes += 1;
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

    fn finish(self, profile: &mut Profile, path: &str, id: String, steps: Vec<Step>) -> Memory {
        let MemoryBuilder {
            mut memory,
            live_at_start_bytes,
            reused,
            no_address_frees,
            stack_changes,
            first,
            ..
        } = self;
        memory.id = id;
        memory.steps = steps;
        let first_stack = first.and_then(|e| e.stack());
        // What the heap held before the first event that no free accounts for.
        if let Some(first) = first {
            if let Some(heap) = first.heap() {
                let own = first.allocation_bytes().or(first.requested()).unwrap_or(0);
                let before = if first.free {
                    heap.saturating_add(own)
                } else {
                    heap.saturating_sub(own)
                };
                let unexplained = before.saturating_sub(live_at_start_bytes);
                if unexplained > 0 {
                    pseudo_allocation(profile, &mut memory, unexplained, BEFORE_START_OP, None);
                }
            }
        }
        if let Some(stack) = first_stack.filter(|&s| s > 0) {
            pseudo_allocation(profile, &mut memory, stack, STACK_OP, Some(STACK_OP));
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
        memory
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

/// TensorFlow's `DataType` codes' names, as `DataTypeString` names them.
const DTYPE_CODES: [&str; 31] = [
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

/// TensorFlow's `DataType` enum, named as `DataTypeString` names it.
fn dtype_name(code: i64) -> Option<&'static str> {
    dtype_index(code).map(|i| DTYPE_CODES.get(i).copied().unwrap_or("unknown"))
}

/// Where a `DataType` code's name is in [`DTYPE_CODES`] (its length for
/// codes it does not list, named "unknown").
fn dtype_index(code: i64) -> Option<usize> {
    // 0 is "not set" on frees; the allocation's own type is what counts.
    match code {
        1.. => Some(
            usize::try_from(code)
                .unwrap_or(usize::MAX)
                .min(DTYPE_CODES.len()),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::input::xspace::tests::{field, int};

    fn metadata_entry(out: &mut Vec<u8>, map: u32, id: u64, name: &str) {
        let mut meta = Vec::new();
        int(&mut meta, 1, id);
        field(&mut meta, 2, name.as_bytes());
        let mut entry = Vec::new();
        int(&mut entry, 1, id);
        field(&mut entry, 2, &meta);
        field(out, map, &entry);
    }

    /// (offset ps, free, allocator, address, heap bytes after)
    type Ev = (u64, bool, &'static str, u64, u64);

    fn line(timestamp_ns: u64, events: &[Ev], timestamp_last: bool) -> Vec<u8> {
        let mut line = Vec::new();
        if !timestamp_last {
            int(&mut line, 3, timestamp_ns);
        }
        for &(offset, free, allocator, address, heap) in events {
            let mut event = Vec::new();
            int(&mut event, 1, if free { 2 } else { 1 });
            int(&mut event, 2, offset);
            let mut stat = Vec::new();
            int(&mut stat, 1, 10);
            field(&mut stat, 5, allocator.as_bytes());
            field(&mut event, 4, &stat);
            for (id, v) in [(11, address), (12, heap), (13, 256)] {
                let mut stat = Vec::new();
                int(&mut stat, 1, id);
                int(&mut stat, 3, v);
                field(&mut event, 4, &stat);
            }
            field(&mut line, 4, &event);
        }
        if timestamp_last {
            int(&mut line, 3, timestamp_ns);
        }
        line
    }

    fn xspace(lines: &[Vec<u8>]) -> Vec<u8> {
        let mut plane = Vec::new();
        field(&mut plane, 2, HOST_PLANE.as_bytes());
        for l in lines {
            field(&mut plane, 3, l);
        }
        metadata_entry(&mut plane, 4, 1, "MemoryAllocation");
        metadata_entry(&mut plane, 4, 2, "MemoryDeallocation");
        for (id, name) in [
            (10, "allocator_name"),
            (11, "addr"),
            (12, "bytes_allocated"),
            (13, "allocation_bytes"),
        ] {
            metadata_entry(&mut plane, 5, id, name);
        }
        let mut space = Vec::new();
        field(&mut space, 1, &plane);
        space
    }

    /// Line A (first in the file) holds allocator `x`; line B starts earlier
    /// in time with allocator `y`, and interleaves with A.
    const A: [Ev; 3] = [
        (10, false, "x", 1, 256),
        (30, false, "x", 2, 512),
        (50, true, "x", 1, 256),
    ];
    const B: [Ev; 3] = [
        (5, false, "y", 7, 256),
        (20, false, "x", 3, 768),
        (40, true, "y", 7, 0),
    ];

    fn memories(profile: &Profile) -> Vec<String> {
        profile
            .memories
            .iter()
            .map(|m| {
                let events: Vec<(i64, bool, u64)> = m
                    .events
                    .iter()
                    .map(|e| {
                        let a = m.allocation(e.alloc);
                        (e.at, e.kind == EventKind::Free, a.address.unwrap_or(0))
                    })
                    .collect();
                format!(
                    "{} {:?} live at start {:?} samples {:?}",
                    m.id, events, m.live_at_start, m.allocator_samples
                )
            })
            .collect()
    }

    fn read_bytes(bytes: Vec<u8>) -> Profile {
        let mut profile = Profile::default();
        read(&mut profile, "t.xplane.pb", &bytes, false).unwrap();
        profile
    }

    #[test]
    fn lines_merge_by_time_and_memories_keep_walk_order() {
        let bytes = xspace(&[line(0, &A, false), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true).is_ok());
        let profile = read_bytes(bytes.clone());
        let got = memories(&profile);
        assert_eq!(got.len(), 2);
        // `x` first: its first event comes first in the file, though `y`'s
        // comes first in time.
        assert!(
            got[0].starts_with("x [(10, false, 1), (20, false, 3), (30, false, 2), (50, true, 1)]"),
            "{}",
            got[0]
        );
        assert!(
            got[1].starts_with("y [(5, false, 7), (40, true, 7)]"),
            "{}",
            got[1]
        );
        // The walk in file order builds the same memories.
        let mut sequential_profile = Profile::default();
        sequential(&mut sequential_profile.names, &bytes, None)
            .unwrap()
            .finish(&mut sequential_profile, "t.xplane.pb");
        assert_eq!(memories(&sequential_profile), got);
    }

    #[test]
    fn a_line_out_of_time_order_is_sorted() {
        let in_order = read_bytes(xspace(&[line(0, &A, false), line(0, &B, false)]));
        let mut reversed = A;
        reversed.reverse();
        let bytes = xspace(&[line(0, &reversed, false), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true).is_err());
        assert_eq!(memories(&read_bytes(bytes)), memories(&in_order));
    }

    #[test]
    fn a_timestamp_after_the_events_times_them_all() {
        let first = read_bytes(xspace(&[line(7, &A, false), line(0, &B, false)]));
        let bytes = xspace(&[line(7, &A, true), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true).is_err());
        let last = read_bytes(bytes);
        assert_eq!(memories(&last), memories(&first));
        assert!(memories(&last)[0].contains("(7010, false, 1)"));
    }
}
