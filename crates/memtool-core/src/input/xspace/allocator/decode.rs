//! Decoding one `/host:CPU` event into a [`RawEvent`]: the plane's stat
//! keys, line clocks, allocators and steps seen, and [`Decoder::event`], the
//! decoder both walks share.

use super::keys::{
    Key, SmallKeys, ADDRESS, ALLOCATION_BYTES, AVAILABLE, GROUP, HEAP, PEAK_IN_USE, REQUESTED,
    STACK, STAT_NAMES,
};
use crate::error::Result;
use crate::input::xspace::stream::{event_metadata_id, Skim};
use crate::input::xspace::{
    Event, Metadata, PlaneAt, Slice, StatKeys, StatValue, StreamError, Window,
};
use crate::model::{Names, Step, StrId};
use memtool_proto::wire::reader::{Header, WireError};

/// Why the merged walk gave up (a line out of time order, damage, or what
/// only the general decoder reads): the walk in file order takes over.
#[derive(Debug)]
pub(super) struct Fallback;

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

/// One allocator event as read, before it is placed in its memory. Kept
/// compact (about 100 bytes): a profile holds millions of them until they
/// are sorted. Absent numbers are `u64::MAX`, absent strings `StrId(0)` (the
/// empty string, which is never stored as a value).
#[derive(Clone, Copy, Debug)]
pub(super) struct RawEvent {
    pub(super) at: i64,
    /// Walk order, for ties: line, then index in the line.
    pub(super) seq_rank: u64,
    pub(super) seq: u64,
    pub(super) free: bool,
    /// Its metadata id is defined both as an allocation and as a free: the
    /// builder tells which it is by its address.
    pub(super) either: bool,
    pub(super) allocator: u32,
    pub(super) numbers: [u64; 8],
    /// NaN when absent.
    pub(super) fragmentation: f64,
    pub(super) strings: [StrId; 4],
}

pub(super) const OP: usize = 0;
pub(super) const SHAPE: usize = 1;
pub(super) const DTYPE: usize = 2;
pub(super) const REGION: usize = 3;

impl RawEvent {
    pub(super) fn new(at: i64, seen: (u64, u64), free: bool) -> RawEvent {
        RawEvent {
            at,
            seq_rank: seen.0,
            seq: seen.1,
            free,
            either: false,
            allocator: 0,
            numbers: [u64::MAX; 8],
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

    pub(super) fn string(&self, which: usize) -> Option<StrId> {
        self.strings.get(which).copied().filter(|s| s.0 != 0)
    }

    pub(super) fn set_string(&mut self, which: usize, value: Option<StrId>) {
        if let Some(slot) = self.strings.get_mut(which) {
            *slot = value.unwrap_or(StrId(0));
        }
    }

    pub(super) fn address(&self) -> Option<u64> {
        self.number(ADDRESS)
    }
    pub(super) fn allocation_bytes(&self) -> Option<u64> {
        self.number(ALLOCATION_BYTES)
    }
    pub(super) fn requested(&self) -> Option<u64> {
        self.number(REQUESTED)
    }
    pub(super) fn stack(&self) -> Option<u64> {
        self.number(STACK)
    }
    pub(super) fn heap(&self) -> Option<u64> {
        self.number(HEAP)
    }
    pub(super) fn available(&self) -> Option<u64> {
        self.number(AVAILABLE)
    }
    pub(super) fn peak_in_use(&self) -> Option<u64> {
        self.number(PEAK_IN_USE)
    }
    pub(super) fn group(&self) -> Option<i64> {
        self.number(GROUP).and_then(|g| i64::try_from(g).ok())
    }
    pub(super) fn fragmentation(&self) -> Option<f64> {
        Some(self.fragmentation).filter(|f| f.is_finite())
    }
}

/// Line timestamps beyond this (about 11 days) count from the epoch.
const ABSOLUTE_NS: i64 = 1_000_000_000_000_000;

/// What one `/host:CPU` plane's metadata says about its events.
pub(super) struct PlaneKeys {
    pub(super) meta: Metadata,
    pub(super) keys: StatKeys<Key>,
    /// The keys of one-byte stat metadata ids, for `event_fast`.
    pub(super) small_keys: SmallKeys,
    pub(super) allocs: Vec<i64>,
    pub(super) frees: Vec<i64>,
    /// [`EventKind`] bits of each one-byte event metadata id, for
    /// `event_fast`: one load per event in place of two searches of
    /// `allocs` and `frees` (~60 instructions an event).
    small_kinds: [u8; SMALL_EVENT_IDS],
    pub(super) has_steps: bool,
    /// The plane's place among the host planes read, for [`Interned`]'s
    /// caches of its `ref_value` strings.
    pub(super) index: usize,
}

impl PlaneKeys {
    /// Reads the plane's metadata maps (fields 4 and 5), skipping its lines.
    pub(super) fn read(
        window: &mut Window<'_>,
        plane: &PlaneAt,
        index: usize,
    ) -> Result<PlaneKeys, StreamError> {
        let mut meta = Metadata::default();
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(window)? {
            if let (4 | 5, Header::Len(len)) = (number, header) {
                meta.add_entry(number, window.bytes(at, len)?, at as usize)?;
            }
        }
        let keys = meta.stat_keys(&STAT_NAMES);
        let allocs = meta.event_ids("MemoryAllocation");
        let frees = meta.event_ids("MemoryDeallocation");
        let mut small_kinds = [0u8; SMALL_EVENT_IDS];
        for (id, kind) in small_kinds.iter_mut().enumerate() {
            *kind = kind_of(&allocs, &frees, id as i64);
        }
        Ok(PlaneKeys {
            allocs,
            frees,
            small_kinds,
            has_steps: keys.contains(Key::StepNum),
            small_keys: SmallKeys::new(&keys),
            keys,
            meta,
            index,
        })
    }
}

/// Event metadata ids below this have their kind in
/// [`PlaneKeys::small_kinds`]: one byte on the wire.
const SMALL_EVENT_IDS: usize = 0x80;
/// Bits of an event's kind: its metadata id is defined as a
/// `MemoryAllocation`, as a `MemoryDeallocation` (both: a duplicated key).
pub(super) const ALLOCATION: u8 = 1;
pub(super) const DEALLOCATION: u8 = 2;

/// The [`ALLOCATION`] and [`DEALLOCATION`] bits of events of metadata id
/// `id`, by the plane's lists of each.
fn kind_of(allocs: &[i64], frees: &[i64], id: i64) -> u8 {
    let bit = |ids: &[i64], bit: u8| if ids.contains(&id) { bit } else { 0 };
    bit(allocs, ALLOCATION) | bit(frees, DEALLOCATION)
}

impl PlaneKeys {
    /// The [`ALLOCATION`] and [`DEALLOCATION`] bits of events of metadata
    /// id `id`: 0 for events of other kinds.
    #[inline(always)]
    pub(super) fn event_kind(&self, id: i64) -> u8 {
        match usize::try_from(id)
            .ok()
            .and_then(|i| self.small_kinds.get(i))
        {
            Some(&kind) => kind,
            None => kind_of(&self.allocs, &self.frees, id),
        }
    }

    /// For an event longer than `stream::MAX_EVENT_BYTES`: `Ok` to step over it
    /// unread (it is not an allocator event), the error if it is one.
    pub(super) fn oversized_event(
        &self,
        window: &mut Window<'_>,
        at: u64,
        len: u64,
    ) -> Result<(), StreamError> {
        let id = event_metadata_id(window, at, len)?;
        if id.is_some_and(|id| self.allocs.contains(&id) || self.frees.contains(&id)) {
            return Err(StreamError::OversizedEvent { at, len });
        }
        Ok(())
    }
}

/// Where a line's times count from.
#[derive(Clone, Copy, Debug)]
pub(super) struct LineClock {
    timestamp_ns: i64,
    origin_ns: i64,
}

impl LineClock {
    /// What to subtract from a line's timestamp so times count from the
    /// profile start. TensorFlow and JAX write line timestamps already
    /// relative to it; absolute ones (since the epoch) have the start, or
    /// without one the earliest line, subtracted — picoseconds since the
    /// epoch would not fit in an `i64`.
    pub(super) fn new(
        timestamp_ns: i64,
        start_ns: Option<i64>,
        earliest_ns: Option<i64>,
    ) -> LineClock {
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

    pub(super) fn at(&self, offset_ps: i64) -> Option<i64> {
        self.timestamp_ns
            .checked_sub(self.origin_ns)
            .and_then(|ns| ns.checked_mul(1000))
            .and_then(|ps| ps.checked_add(offset_ps))
    }
}

/// An allocator seen in the events, and where first: (line in walk order,
/// event in line). Memories come in that order, whatever order events are
/// read in.
pub(super) struct AllocatorSeen {
    pub(super) name: Option<StrId>,
    pub(super) first: (u64, u64),
}

/// Turns event bytes into [`RawEvent`]s; shared by both walks.
pub(super) struct Decoder {
    pub(super) allocators: Vec<AllocatorSeen>,
    /// Steps marked, in the order met, a mark of the step marked last
    /// merged into it: an id is here more than once only where marks of
    /// steps interleave ([`coalesce_steps`] makes one per id). A table by
    /// id, grown by doubling in each run of a line of step marks (30,000
    /// steps on the 660k-event benchmark), was ~600 page faults.
    pub(super) steps: Vec<Step>,
    pub(super) bad_times: u64,
}

impl Decoder {
    pub(super) fn new() -> Decoder {
        Decoder {
            allocators: Vec::new(),
            steps: Vec::new(),
            bad_times: 0,
        }
    }

    /// One event of a line (its bytes at `base` in the input): the
    /// allocator event it is, if it is one; step marks are recorded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn event(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &PlaneKeys,
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
            let mut raw =
                self.allocator_event(names, interned, plane, &event, at, is_free, seen)?;
            raw.either = is_alloc && is_free;
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
            self.mark_step(id, at, event.duration_ps);
        }
        Ok(())
    }

    /// Every step marked, each id once (a step marked in several runs spans
    /// them all), in order of id; the decoder keeps none.
    pub(super) fn take_steps(&mut self) -> Vec<Step> {
        let mut steps = std::mem::take(&mut self.steps);
        coalesce_steps(&mut steps);
        steps
    }

    /// Step `id` marked by an event at `at` lasting `duration_ps`.
    pub(super) fn mark_step(&mut self, id: i64, at: i64, duration_ps: i64) {
        let end = at.saturating_add(duration_ps.max(0));
        match self.steps.last_mut() {
            Some(s) if s.id == id => {
                s.start = s.start.min(at);
                s.end = s.end.max(end);
            }
            _ => self.steps.push(Step { id, start: at, end }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn allocator_event(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &PlaneKeys,
        event: &Event<'_>,
        at: i64,
        free: bool,
        seen: (u64, u64),
    ) -> Result<RawEvent, WireError> {
        let mut raw = RawEvent::new(at, seen, free);
        let mut strings = EventStrings::default();
        for stat in event.stats() {
            let stat = stat?;
            let Some(key) = plane.keys.get(stat.metadata_id) else {
                continue;
            };
            let v = stat.value;
            if strings.take(key, v) {
                continue;
            }
            match key {
                Key::Reserved => raw.set_number(STACK, v.as_u64()),
                Key::Allocated => raw.set_number(HEAP, v.as_u64()),
                Key::Available => raw.set_number(AVAILABLE, v.as_u64()),
                Key::Fragmentation => raw.fragmentation = v.as_f64().unwrap_or(f64::NAN),
                Key::PeakInUse => raw.set_number(PEAK_IN_USE, v.as_u64()),
                Key::Requested => raw.set_number(REQUESTED, v.as_u64()),
                Key::AllocationBytes => raw.set_number(ALLOCATION_BYTES, v.as_u64()),
                Key::Address => raw.set_number(ADDRESS, v.as_u64()),
                Key::GroupId => raw.set_number(GROUP, v.as_u64()),
                _ => {}
            }
        }
        self.place_strings(names, interned, plane, &strings, &mut raw);
        Ok(raw)
    }

    /// Interns an allocator event's strings into `raw` and finds its
    /// allocator: in one order whichever decoder read the stats (op, shape,
    /// region, allocator, dtype), so both walks give one names table.
    #[inline(always)]
    pub(super) fn place_strings(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &PlaneKeys,
        strings: &EventStrings<'_>,
        raw: &mut RawEvent,
    ) {
        if interned.ref_strings.len() <= plane.index {
            interned.ref_strings.resize_with(plane.index + 1, Vec::new);
        }
        let Interned {
            ref_strings,
            dtypes,
            ordinals,
        } = interned;
        let ref_strings = &mut ref_strings[plane.index];
        // Strings are nearly always `ref_value`s: intern each once.
        let mut string = |v: &StatValue<'_>| string_stat(&plane.meta, ref_strings, names, v);
        for (slot, value) in [
            (OP, strings.op),
            (SHAPE, strings.shape),
            (REGION, strings.region),
        ] {
            if let Some(v) = value {
                let id = string(&v);
                raw.set_string(slot, id);
            }
        }
        let allocator = match strings.allocator {
            AllocatorStat::Unset => None,
            AllocatorStat::Name(v) => string(&v),
            AllocatorStat::Ordinal(n) => Some(match ordinals.iter().find(|o| o.0 == n) {
                Some(&(_, id)) => id,
                None => {
                    let id = names.string(&n.to_string());
                    ordinals.push((n, id));
                    id
                }
            }),
        };
        if let Some(index) = strings.dtype {
            let id = index.map(|i| {
                if dtypes.len() <= i {
                    dtypes.resize(i + 1, None);
                }
                let name = DTYPE_CODES.get(i).copied().unwrap_or("unknown");
                *dtypes[i].get_or_insert_with(|| names.string(name))
            });
            raw.set_string(DTYPE, id);
        }
        raw.allocator = self.allocator_index(allocator, (raw.seq_rank, raw.seq));
    }

    pub(super) fn allocator_index(&mut self, name: Option<StrId>, seen: (u64, u64)) -> u32 {
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

/// Makes `steps` one per id, in order of id: a step marked more than once
/// spans every mark.
pub(super) fn coalesce_steps(steps: &mut Vec<Step>) {
    steps.sort_unstable_by_key(|s| s.id);
    steps.dedup_by(|later, kept| {
        let same = later.id == kept.id;
        if same {
            kept.start = kept.start.min(later.start);
            kept.end = kept.end.max(later.end);
        }
        same
    });
}

/// What an allocator event's stats name its allocator by, last stat winning
/// as in [`Decoder::allocator_event`].
#[derive(Clone, Copy)]
enum AllocatorStat<'a> {
    Unset,
    Name(StatValue<'a>),
    Ordinal(i64),
}

/// An allocator event's strings as its stats give them, the last stat of
/// each kind winning (an ordinal only until a name or an earlier ordinal):
/// interned by [`Decoder::place_strings`] once every stat is read.
#[derive(Clone, Copy)]
pub(super) struct EventStrings<'a> {
    op: Option<StatValue<'a>>,
    shape: Option<StatValue<'a>>,
    region: Option<StatValue<'a>>,
    /// Where the `DataType` code's name is in [`DTYPE_CODES`].
    dtype: Option<Option<usize>>,
    allocator: AllocatorStat<'a>,
}

impl Default for EventStrings<'_> {
    fn default() -> Self {
        EventStrings {
            op: None,
            shape: None,
            region: None,
            dtype: None,
            allocator: AllocatorStat::Unset,
        }
    }
}

impl<'a> EventStrings<'a> {
    /// Keeps the stat if it gives one of the event's strings; returns
    /// whether it did.
    #[inline(always)]
    pub(super) fn take(&mut self, key: Key, v: StatValue<'a>) -> bool {
        match key {
            Key::AllocatorName => self.allocator = AllocatorStat::Name(v),
            Key::DeviceOrdinal | Key::IndexOnHost => {
                if let (AllocatorStat::Unset, Some(n)) = (self.allocator, v.as_i64()) {
                    self.allocator = AllocatorStat::Ordinal(n);
                }
            }
            Key::TfOp => self.op = Some(v),
            Key::Shape => self.shape = Some(v),
            Key::Region => self.region = Some(v),
            Key::DataType => self.dtype = Some(v.as_i64().and_then(dtype_index)),
            _ => return false,
        }
        true
    }
}

/// Caches, into one names table, of what nearly every event repeats:
/// `ref_value` strings (by plane, then ref id), dtype names and allocator
/// ordinals. One per table: each thread decoding a run has its own.
#[derive(Default)]
pub(super) struct Interned {
    ref_strings: Vec<Vec<Option<Option<StrId>>>>,
    dtypes: Vec<Option<StrId>>,
    ordinals: Vec<(i64, StrId)>,
}

/// A string stat, interned. Strings are nearly always `ref_value`s (ids of
/// the plane's stat metadata): each is interned once and cached by ref id,
/// and found in the cache here, inlined (a call per string was ~20
/// instructions of the ~220 an event's strings took).
#[inline(always)]
fn string_stat(
    meta: &Metadata,
    ref_strings: &mut Vec<Option<Option<StrId>>>,
    names: &mut Names,
    v: &StatValue<'_>,
) -> Option<StrId> {
    if let StatValue::Ref(id) = *v {
        // Only ids below 2^20 are cached: one found is one of them.
        if let Some(Some(id)) = usize::try_from(id).ok().and_then(|i| ref_strings.get(i)) {
            return *id;
        }
    }
    string_stat_uncached(meta, ref_strings, names, v)
}

/// [`string_stat`] for a string not in the cache: interned, and cached if
/// it is a `ref_value`.
#[inline(never)]
fn string_stat_uncached(
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
