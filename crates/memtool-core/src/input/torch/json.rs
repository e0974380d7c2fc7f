//! PyTorch JSON inputs: profiler Chrome traces (`*.pt.trace.json`) with
//! `[memory]` instant events, and `export_memory_timeline` outputs.
//!
//! The trace is read with serde as a stream from the input through a small
//! buffer: each element of `traceEvents` becomes a compact record (or
//! nothing) as it is parsed, into buffers reused from one event to the next,
//! so a trace of gigabytes is never held, neither as bytes nor as a JSON
//! value tree. Arguments other than the memory ones are skipped without being
//! stored.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{self, BufReader, Read};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::source::{self, ByteSource, SourceReader};
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, Event, EventKind, Format, InputInfo, MemoryKind,
    Profile, Site, SiteId, Step, StrId,
};

/// Which PyTorch JSON document the input holds: a memory timeline is an array
/// of arrays (`[times, sizes]` or raw `[[t, action, bytes, category], ...]`);
/// a Chrome trace is an object (or an array of event objects). Only the
/// first two characters that are not whitespace decide, so only they are
/// read.
pub(crate) fn classify(data: &dyn ByteSource) -> io::Result<Format> {
    let mut text = BufReader::with_capacity(4 << 10, SourceReader::new(data)).bytes();
    let mut first_two = [None, None];
    for slot in &mut first_two {
        *slot = text
            .by_ref()
            .find(|b| !b.as_ref().is_ok_and(|b| b.is_ascii_whitespace()))
            .transpose()?;
    }
    Ok(match first_two {
        [Some(b'['), Some(b'[')] => Format::TorchMemoryTimeline,
        _ => Format::TorchTrace,
    })
}

pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    data: &dyn ByteSource,
    format: Format,
) -> Result<()> {
    match format {
        Format::TorchMemoryTimeline => {
            let bytes = {
                let _span = crate::timings::span("read input");
                source::read_all(data).map_err(|e| super::super::read_error(path, &e))?
            };
            read_timeline(profile, path, &bytes)
        }
        _ => read_trace(profile, path, data),
    }
}

fn corrupt(path: &str, what: &'static str, e: serde_json::Error) -> Error {
    if e.is_io() {
        // The input failed or shrank under the reader: not a JSON problem.
        return super::super::read_error(path, &io::Error::from(e));
    }
    Error::Corrupt {
        path: path.to_string(),
        format: what,
        message: e.to_string(),
        offset: None,
    }
}

/// A JSON scalar read leniently: profilers disagree on whether ids are
/// numbers or strings, and a field of an unexpected type is not an error.
#[derive(Clone, Debug, Default, PartialEq)]
enum Loose {
    Int(i64),
    Float(f64),
    Str(String),
    #[default]
    Other,
}

impl Loose {
    fn int(&self) -> Option<i64> {
        match self {
            Loose::Int(i) => Some(*i),
            Loose::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18 => {
                Some(*f as i64)
            }
            Loose::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn float(&self) -> Option<f64> {
        match self {
            Loose::Int(i) => Some(*i as f64),
            Loose::Float(f) if f.is_finite() => Some(*f),
            Loose::Str(s) => s.trim().parse().ok().filter(|f: &f64| f.is_finite()),
            _ => None,
        }
    }

    /// A thread or process id as a key (string ids hashed).
    fn key(&self) -> i64 {
        match self {
            Loose::Str(s) => s.trim().parse().unwrap_or_else(|_| {
                s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
                }) as i64
            }),
            other => other.int().unwrap_or(0),
        }
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Loose, E> {
                Ok(i64::try_from(v).map_or(Loose::Float(v as f64), Loose::Int))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Loose, E> {
                Ok(Loose::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Loose, E> {
                Ok(Loose::Str(v.to_string()))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_unit<E>(self) -> std::result::Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Loose, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Loose, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// The arguments of a `[memory]` event; every other argument is skipped.
#[derive(Debug, Default, Deserialize)]
struct MemoryArgs {
    #[serde(rename = "Addr", default)]
    addr: Loose,
    #[serde(rename = "Bytes", default)]
    bytes: Loose,
    #[serde(rename = "Total Allocated", default)]
    total_allocated: Loose,
    #[serde(rename = "Total Reserved", default)]
    total_reserved: Loose,
    #[serde(rename = "Device Type", default)]
    device_type: Loose,
    #[serde(rename = "Device Id", default)]
    device_id: Loose,
}

/// `args`, or defaults when it is not an object.
#[derive(Debug, Default)]
struct LooseArgs(MemoryArgs);

impl<'de> Deserialize<'de> for LooseArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseArgs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an args object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                a: A,
            ) -> std::result::Result<LooseArgs, A::Error> {
                MemoryArgs::deserialize(de::value::MapAccessDeserializer::new(a)).map(LooseArgs)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<LooseArgs, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LooseArgs::default())
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_unit<E>(self) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
struct DeviceProperty {
    #[serde(default)]
    id: Loose,
    #[serde(rename = "totalGlobalMem", default)]
    total_global_mem: Loose,
}

/// A string field read into a buffer kept from one event to the next; any
/// other JSON value reads as absent.
#[derive(Default)]
struct TextField {
    text: String,
    present: bool,
}

impl TextField {
    fn get(&self) -> Option<&str> {
        self.present.then_some(self.text.as_str())
    }
}

impl<'de> DeserializeSeed<'de> for &mut TextField {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut TextField {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<(), E> {
        self.text.clear();
        self.text.push_str(v);
        self.present = true;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        self.present = false;
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.present = false;
        Ok(())
    }
}

/// One element of `traceEvents`, with only what memtool uses. One value is
/// refilled for every event, so its string buffers are allocated once.
#[derive(Default)]
struct RawEvent {
    name: TextField,
    ph: TextField,
    cat: TextField,
    pid: Loose,
    tid: Loose,
    ts: Loose,
    dur: Loose,
    args: MemoryArgs,
}

/// The fields of [`RawEvent`] in their positional order (an event written
/// as an array is read by position, as a derived `Deserialize` would).
const EVENT_FIELDS: [&str; 8] = ["name", "ph", "cat", "pid", "tid", "ts", "dur", "args"];

/// A key of an event object: the index of a field in [`EVENT_FIELDS`], or
/// `None` for a key memtool skips. Keys are matched in place, not stored.
struct EventKey(Option<usize>);

impl<'de> Deserialize<'de> for EventKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EventKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<EventKey, E> {
                Ok(EventKey(EVENT_FIELDS.iter().position(|&f| f == v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> std::result::Result<EventKey, E> {
                Ok(EventKey(
                    EVENT_FIELDS.iter().position(|&f| f.as_bytes() == v),
                ))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<EventKey, E> {
                Ok(EventKey(
                    usize::try_from(v).ok().filter(|&i| i < EVENT_FIELDS.len()),
                ))
            }
        }
        d.deserialize_identifier(V)
    }
}

impl RawEvent {
    /// Reads field `index` of [`EVENT_FIELDS`] from `d`.
    fn field<'de, D: Deserializer<'de>>(
        &mut self,
        index: usize,
        d: D,
    ) -> std::result::Result<(), D::Error> {
        match index {
            0 => (&mut self.name).deserialize(d),
            1 => (&mut self.ph).deserialize(d),
            2 => (&mut self.cat).deserialize(d),
            3 => Loose::deserialize(d).map(|v| self.pid = v),
            4 => Loose::deserialize(d).map(|v| self.tid = v),
            5 => Loose::deserialize(d).map(|v| self.ts = v),
            6 => Loose::deserialize(d).map(|v| self.dur = v),
            _ => LooseArgs::deserialize(d).map(|v| self.args = v.0),
        }
    }
}

/// Field `index` of an event as a seed, for `next_value_seed` /
/// `next_element_seed`.
struct FieldSeed<'e>(&'e mut RawEvent, usize);

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        self.0.field(self.1, d)
    }
}

/// Fills a [`RawEvent`] from one element of `traceEvents`; `filled` says
/// whether there was an event (a `null` element is none).
struct EventSeed<'e> {
    event: &'e mut RawEvent,
    filled: &'e mut bool,
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("option")
    }
    fn visit_none<E>(self) -> std::result::Result<(), E> {
        *self.filled = false;
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        *self.filled = false;
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        let event = self.event;
        event.name.present = false;
        event.ph.present = false;
        event.cat.present = false;
        event.pid = Loose::Other;
        event.tid = Loose::Other;
        event.ts = Loose::Other;
        event.dur = Loose::Other;
        event.args = MemoryArgs::default();
        d.deserialize_struct("RawEvent", &EVENT_FIELDS, EventFields(event))?;
        *self.filled = true;
        Ok(())
    }
}

struct EventFields<'e>(&'e mut RawEvent);

impl<'de> Visitor<'de> for EventFields<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct RawEvent")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        let mut seen = [false; EVENT_FIELDS.len()];
        while let Some(EventKey(key)) = a.next_key()? {
            let Some(index) = key else {
                a.next_value::<IgnoredAny>()?;
                continue;
            };
            if let Some(seen) = seen.get_mut(index) {
                if *seen {
                    return Err(de::Error::duplicate_field(EVENT_FIELDS[index]));
                }
                *seen = true;
            }
            a.next_value_seed(FieldSeed(self.0, index))?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        for index in 0..EVENT_FIELDS.len() {
            if a.next_element_seed(FieldSeed(self.0, index))?.is_none() {
                break;
            }
        }
        Ok(())
    }
}

/// A `[memory]` event, compact: millions of them are held until the trace
/// is read (it need not be in time order, and the operator spans that
/// attribute them may come later in the file).
struct MemoryRecord {
    ts: f64,
    bytes: i64,
    addr: u64,
    total_allocated: u64,
    total_reserved: u64,
    /// Index into `TraceState::threads`.
    thread: u32,
    /// Index into `TraceState::devices`.
    device: u32,
    /// The innermost operator span around the event, once attributed.
    op: Option<StrId>,
    /// Which of `addr`, `total_allocated`, `total_reserved` the event has
    /// (`HAS_*` bits).
    present: u8,
}

const HAS_ADDR: u8 = 1;
const HAS_TOTAL_ALLOCATED: u8 = 2;
const HAS_TOTAL_RESERVED: u8 = 4;

impl MemoryRecord {
    fn addr(&self) -> Option<u64> {
        (self.present & HAS_ADDR != 0).then_some(self.addr)
    }
    fn total_allocated(&self) -> Option<u64> {
        (self.present & HAS_TOTAL_ALLOCATED != 0).then_some(self.total_allocated)
    }
    fn total_reserved(&self) -> Option<u64> {
        (self.present & HAS_TOTAL_RESERVED != 0).then_some(self.total_reserved)
    }
}

/// A CPU operator span, for attributing allocations.
struct OpRecord {
    start: f64,
    end: f64,
    thread: (i64, i64),
    /// Index into `TraceState::op_names` while parsing, then a [`StrId`].
    name: u32,
}

/// Distinct keys (threads, devices) numbered in order of first appearance,
/// so records hold a `u32` rather than the key.
#[derive(Default)]
struct KeyTable {
    keys: Vec<(i64, i64)>,
    ids: HashMap<(i64, i64), u32>,
}

impl KeyTable {
    fn id(&mut self, key: (i64, i64)) -> u32 {
        *self.ids.entry(key).or_insert_with(|| {
            self.keys.push(key);
            (self.keys.len() - 1) as u32
        })
    }

    fn key(&self, id: u32) -> (i64, i64) {
        self.keys.get(id as usize).copied().unwrap_or_default()
    }

    /// Each id's position when the keys are sorted.
    fn ranks(&self) -> Vec<u32> {
        let mut by_key: Vec<u32> = (0..self.keys.len() as u32).collect();
        by_key.sort_by_key(|&id| self.key(id));
        let mut ranks = vec![0u32; self.keys.len()];
        for (rank, &id) in by_key.iter().enumerate() {
            if let Some(slot) = ranks.get_mut(id as usize) {
                *slot = rank as u32;
            }
        }
        ranks
    }
}

/// What the parse keeps. It touches no profile, so a parse that gives up
/// half-way leaves nothing behind.
#[derive(Default)]
struct TraceState {
    memory: Vec<MemoryRecord>,
    /// Operator names in order of first appearance.
    op_names: Vec<Box<str>>,
    op_name_ids: HashMap<Box<str>, u32>,
    threads: KeyTable,
    devices: KeyTable,
    ops: Vec<OpRecord>,
    /// `ProfilerStep#N` spans: (N, start µs, end µs).
    steps: Vec<Step>,
    device_properties: Vec<DeviceProperty>,
}

/// Record indices are `u32` (as allocation ids are): past that many
/// `[memory]` events a trace is refused rather than miscounted.
const MAX_MEMORY_EVENTS: usize = u32::MAX as usize;

impl TraceState {
    fn event<E: de::Error>(&mut self, e: &RawEvent) -> std::result::Result<(), E> {
        let name = e.name.get().unwrap_or("");
        let ph = e.ph.get().unwrap_or("");
        if name == "[memory]" {
            let args = &e.args;
            let Some(bytes) = args.bytes.int() else {
                return Ok(());
            };
            let Some(ts) = e.ts.float() else {
                return Ok(());
            };
            if self.memory.len() >= MAX_MEMORY_EVENTS {
                return Err(E::custom(format_args!(
                    "more than {MAX_MEMORY_EVENTS} [memory] events; memtool reads at most that many"
                )));
            }
            let addr = args.addr.int().and_then(|a| u64::try_from(a).ok());
            let total_allocated = args
                .total_allocated
                .int()
                .and_then(|a| u64::try_from(a).ok());
            let total_reserved = args
                .total_reserved
                .int()
                .and_then(|a| u64::try_from(a).ok());
            let present = [
                (addr.is_some(), HAS_ADDR),
                (total_allocated.is_some(), HAS_TOTAL_ALLOCATED),
                (total_reserved.is_some(), HAS_TOTAL_RESERVED),
            ]
            .iter()
            .filter(|(has, _)| *has)
            .fold(0, |bits, (_, bit)| bits | bit);
            let thread = self.threads.id((e.pid.key(), e.tid.key()));
            let device = self.devices.id((
                args.device_type.int().unwrap_or(0),
                args.device_id.int().unwrap_or(-1),
            ));
            self.memory.push(MemoryRecord {
                ts,
                bytes,
                addr: addr.unwrap_or(0),
                total_allocated: total_allocated.unwrap_or(0),
                total_reserved: total_reserved.unwrap_or(0),
                thread,
                device,
                op: None,
                present,
            });
            return Ok(());
        }
        if ph != "X" {
            return Ok(());
        }
        if let Some(number) = name.strip_prefix("ProfilerStep#") {
            if let (Some(id), Some(start), Some(dur)) =
                (number.trim().parse().ok(), e.ts.float(), e.dur.float())
            {
                self.steps.push(Step {
                    id,
                    start: start.round() as i64,
                    end: (start + dur.max(0.0)).round() as i64,
                });
            }
            return Ok(());
        }
        // `cpu_op` in Kineto traces; `Operator` in PyTorch 1.9-era ones.
        let cat = e.cat.get().unwrap_or("");
        if cat != "cpu_op" && cat != "Operator" {
            return Ok(());
        }
        let (Some(start), Some(dur)) = (e.ts.float(), e.dur.float()) else {
            return Ok(());
        };
        let name = match self.op_name_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = self.op_names.len() as u32;
                self.op_names.push(name.into());
                self.op_name_ids.insert(name.into(), id);
                id
            }
        };
        self.ops.push(OpRecord {
            start,
            end: start + dur.max(0.0),
            thread: (e.pid.key(), e.tid.key()),
            name,
        });
        Ok(())
    }
}

struct EventsSeed<'s>(&'s mut TraceState);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        let mut event = RawEvent::default();
        let mut filled = false;
        while a
            .next_element_seed(EventSeed {
                event: &mut event,
                filled: &mut filled,
            })?
            .is_some()
        {
            if filled {
                self.0.event(&event)?;
            }
        }
        Ok(())
    }
}

struct TopSeed<'s>(&'s mut TraceState);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace object with traceEvents")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = a.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "traceEvents" => a.next_value_seed(EventsSeed(self.0))?,
                "deviceProperties" => {
                    let devices: Option<Vec<DeviceProperty>> = a.next_value()?;
                    self.0.device_properties = devices.unwrap_or_default();
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> std::result::Result<(), A::Error> {
        EventsSeed(self.0).visit_seq(a)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        Err(E::custom("expected a trace object"))
    }
}

fn parse_with_serde<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
) -> serde_json::Result<TraceState> {
    let mut state = TraceState::default();
    TopSeed(&mut state).deserialize(de)?;
    Ok(state)
}

/// The fast pass over a trace read from a file. serde_json reads a `Read`
/// one byte at a time, which costs twice its parse of bytes in memory; so
/// this pass reads the file in large blocks, finds where each element of
/// `traceEvents` (and each other top-level value) ends with a scan that only
/// tracks strings and nesting, and hands serde each element as a slice. serde
/// still checks every element; the scan checks the punctuation between them.
/// Whatever this pass does not expect it leaves to serde's streaming reader.
mod window {
    use super::*;

    /// Bytes read from the input at a time.
    pub(super) const BLOCK: usize = 1 << 20;

    /// Parses the trace, or gives up (`None`) at anything unexpected.
    pub(super) fn parse(data: &dyn ByteSource) -> Option<TraceState> {
        let mut input = Window {
            reader: SourceReader::new(data),
            buf: Vec::new(),
            pos: 0,
            eof: false,
        };
        let mut state = TraceState::default();
        match input.peek()? {
            b'{' => {
                input.pos += 1;
                if input.peek()? == b'}' {
                    return Some(state);
                }
                loop {
                    let key: Cow<'_, str> = parse_slice(input.value()?)?;
                    let is_events = key == "traceEvents";
                    let is_devices = key == "deviceProperties";
                    if input.peek()? != b':' {
                        return None;
                    }
                    input.pos += 1;
                    if is_events {
                        events(&mut input, &mut state)?;
                    } else if is_devices {
                        let devices: Option<Vec<DeviceProperty>> = parse_slice(input.value()?)?;
                        state.device_properties = devices.unwrap_or_default();
                    } else {
                        parse_slice::<IgnoredAny>(input.value()?)?;
                    }
                    match input.peek()? {
                        b',' => input.pos += 1,
                        b'}' => return Some(state),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                events(&mut input, &mut state)?;
                Some(state)
            }
            _ => None,
        }
    }

    /// The `traceEvents` array, one element at a time.
    fn events(input: &mut Window<'_>, state: &mut TraceState) -> Option<()> {
        if input.peek()? != b'[' {
            return None;
        }
        input.pos += 1;
        if input.peek()? == b']' {
            input.pos += 1;
            return Some(());
        }
        let mut event = RawEvent::default();
        let mut filled = false;
        loop {
            let element = input.value()?;
            let mut de = serde_json::Deserializer::from_slice(element);
            EventSeed {
                event: &mut event,
                filled: &mut filled,
            }
            .deserialize(&mut de)
            .ok()?;
            de.end().ok()?;
            if filled {
                state.event::<serde_json::Error>(&event).ok()?;
            }
            match input.peek()? {
                b',' => input.pos += 1,
                b']' => {
                    input.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn parse_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = T::deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(value)
    }

    /// The input as a sliding window of whole values.
    struct Window<'a> {
        reader: SourceReader<'a>,
        /// Bytes read and not yet dropped; `buf[pos..]` is unread.
        buf: Vec<u8>,
        pos: usize,
        eof: bool,
    }

    impl Window<'_> {
        /// Drops the bytes read past (the value being scanned starts at `pos`,
        /// which becomes 0) and reads more input; false at the end of the
        /// input (or a read error, which serde's pass will report).
        fn more(&mut self) -> bool {
            self.buf.drain(..self.pos);
            self.pos = 0;
            if self.eof {
                return false;
            }
            let kept = self.buf.len();
            // At least double, so a value longer than a block is read in a
            // number of steps logarithmic in its length.
            self.buf.resize(kept + BLOCK.max(kept), 0);
            let mut filled = kept;
            while let Some(spare) = self.buf.get_mut(filled..).filter(|s| !s.is_empty()) {
                match self.reader.read(spare) {
                    Ok(0) | Err(_) => {
                        self.eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                }
            }
            self.buf.truncate(filled);
            filled > kept
        }

        /// The next byte that is not JSON whitespace, left unread.
        fn peek(&mut self) -> Option<u8> {
            loop {
                match self.buf.get(self.pos..)?.iter().position(|&b| !is_space(b)) {
                    Some(skip) => {
                        self.pos += skip;
                        return self.buf.get(self.pos).copied();
                    }
                    None => {
                        self.pos = self.buf.len();
                        if !self.more() {
                            return None;
                        }
                    }
                }
            }
        }

        /// The bytes of the next JSON value, read past. Only where it ends is
        /// found here; whether it is valid is for serde.
        fn value(&mut self) -> Option<&[u8]> {
            let first = self.peek()?;
            // `buf[pos..end]` is scanned.
            let mut end = self.pos + 1;
            match first {
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => loop {
                    match self
                        .buf
                        .get(end..)?
                        .iter()
                        .position(|&b| ENDS_SCALAR[usize::from(b)])
                    {
                        Some(n) => {
                            end += n;
                            break;
                        }
                        None => {
                            end -= self.pos;
                            // A scalar may end the input.
                            if !self.more() {
                                end = self.buf.len();
                                break;
                            }
                        }
                    }
                },
                b'"' | b'{' | b'[' => {
                    let mut depth = usize::from(first != b'"');
                    let mut in_string = first == b'"';
                    loop {
                        let special = if in_string { &IN_STRING } else { &STRUCTURE };
                        let found = self
                            .buf
                            .get(end..)?
                            .iter()
                            .position(|&b| special[usize::from(b)]);
                        let Some(b) = found.and_then(|n| {
                            end += n;
                            self.buf.get(end).copied()
                        }) else {
                            end -= self.pos;
                            if !self.more() {
                                return None;
                            }
                            continue;
                        };
                        match b {
                            b'\\' => {
                                // The escaped byte may be in the next block.
                                if end + 1 >= self.buf.len() {
                                    end -= self.pos;
                                    if !self.more() {
                                        return None;
                                    }
                                    continue;
                                }
                                end += 2;
                            }
                            b'"' => {
                                in_string = !in_string;
                                end += 1;
                                if !in_string && depth == 0 {
                                    break;
                                }
                            }
                            b'{' | b'[' => {
                                depth += 1;
                                end += 1;
                            }
                            _ => {
                                depth = depth.saturating_sub(1);
                                end += 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                        }
                    }
                }
                _ => return None,
            }
            let start = self.pos;
            self.pos = end;
            self.buf.get(start..end)
        }
    }

    const fn byte_set(bytes: &[u8]) -> [bool; 256] {
        let mut set = [false; 256];
        let mut i = 0;
        while i < bytes.len() {
            set[bytes[i] as usize] = true;
            i += 1;
        }
        set
    }

    /// Bytes that end a number or `true`/`false`/`null`.
    const ENDS_SCALAR: [bool; 256] = byte_set(b" \n\t\r,]}");
    /// Bytes that matter inside a string.
    const IN_STRING: [bool; 256] = byte_set(b"\"\\");
    /// Bytes that matter outside strings, inside an object or array.
    const STRUCTURE: [bool; 256] = byte_set(b"\"{}[]");

    fn is_space(b: u8) -> bool {
        matches!(b, b' ' | b'\n' | b'\t' | b'\r')
    }
}

/// How much of the trace is buffered at a time.
const READ_BUFFER: usize = 256 << 10;

fn read_trace(profile: &mut Profile, path: &str, data: &dyn ByteSource) -> Result<()> {
    let state = {
        let _span = crate::timings::span("torch trace: parse");
        match data.as_bytes() {
            // Gunzipped traces are in memory already: parse them in place.
            Some(bytes) => parse_with_serde(&mut serde_json::Deserializer::from_slice(bytes)),
            None => match window::parse(data) {
                Some(state) => Ok(state),
                // The fast pass gave up (a malformed trace, an unusual layout,
                // a read error): serde's own streaming reader decides, and
                // words any error.
                None => {
                    let reader = BufReader::with_capacity(READ_BUFFER, SourceReader::new(data));
                    parse_with_serde(&mut serde_json::Deserializer::from_reader(reader))
                }
            },
        }
        .map_err(|e| corrupt(path, "PyTorch trace JSON", e))?
    };
    let _span = crate::timings::span("torch trace: timelines");
    let TraceState {
        mut memory,
        op_names,
        op_name_ids,
        threads,
        devices,
        mut ops,
        mut steps,
        device_properties,
    } = state;
    drop(op_name_ids);
    // Interned in order of first appearance, as if interned while parsing.
    let op_ids: Vec<StrId> = op_names.iter().map(|n| profile.names.string(n)).collect();
    for op in &mut ops {
        op.name = op_ids.get(op.name as usize).map_or(0, |id| id.0);
    }
    steps.sort_by_key(|s| (s.start, s.id));
    steps.dedup();
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::TorchTrace,
        executables: None,
    });
    if memory.is_empty() {
        return Err(Error::NoData {
            path: path.to_string(),
            message: "the trace has no [memory] events; record it with \
                      torch.profiler.profile(profile_memory=True)"
                .into(),
        });
    }
    // Chrome traces need not be in time order; keep file order among equals
    // (the sort is stable).
    memory.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    ops.sort_by(|a, b| {
        a.thread
            .cmp(&b.thread)
            .then(a.start.total_cmp(&b.start))
            .then(b.end.total_cmp(&a.end))
    });
    attribute_ops(&mut memory, &threads, &ops);
    drop(ops);

    // Record indices grouped by device in key order, in time order within
    // each (the sort is stable).
    let device_rank = devices.ranks();
    let rank = |m: &MemoryRecord| device_rank.get(m.device as usize).copied();
    let mut by_device: Vec<u32> = (0..memory.len() as u32).collect();
    by_device.sort_by_key(|&i| memory.get(i as usize).and_then(rank));
    let capacity: HashMap<i64, u64> = device_properties
        .iter()
        .filter_map(|d| {
            Some((
                d.id.int()?,
                d.total_global_mem
                    .int()
                    .and_then(|m| u64::try_from(m).ok())?,
            ))
        })
        .collect();
    for indices in by_device.chunk_by(|&a, &b| {
        let device = |i: u32| memory.get(i as usize).map(|m| m.device);
        device(a) == device(b)
    }) {
        let Some(first) = indices.first().and_then(|&i| memory.get(i as usize)) else {
            continue;
        };
        let (device_type, device_id) = devices.key(first.device);
        let id = match device_type {
            0 => "cpu".to_string(),
            1 => format!("cuda:{device_id}"),
            t => format!("device{t}:{device_id}"),
        };
        let records = indices.iter().filter_map(|&i| memory.get(i as usize));
        let cap = (device_type == 1)
            .then(|| capacity.get(&device_id).copied())
            .flatten();
        build_trace_memory(profile, path, &id, device_type == 1, cap, records);
        if let Some(m) = profile.memories.iter_mut().find(|m| m.id == id) {
            m.steps = steps.clone();
        }
    }
    Ok(())
}

/// Sets each memory event's `op` to the innermost operator span on its
/// thread that contains it: one sweep per thread with a stack of open spans.
/// `memory` is in time order; `ops` sorted by thread, start, longest first.
fn attribute_ops(memory: &mut [MemoryRecord], threads: &KeyTable, ops: &[OpRecord]) {
    let thread_rank = threads.ranks();
    let rank = |m: &MemoryRecord| thread_rank.get(m.thread as usize).copied();
    let mut by_thread: Vec<u32> = (0..memory.len() as u32).collect();
    by_thread.sort_by_key(|&i| memory.get(i as usize).and_then(rank));
    let thread_lengths: Vec<usize> = by_thread
        .chunk_by(|&a, &b| {
            let thread = |i: u32| memory.get(i as usize).map(|m| m.thread);
            thread(a) == thread(b)
        })
        .map(<[u32]>::len)
        .collect();
    let mut rest = by_thread.as_slice();
    for length in thread_lengths {
        let (events, after) = rest.split_at(length.min(rest.len()));
        rest = after;
        let Some(thread) = events
            .first()
            .and_then(|&i| memory.get(i as usize))
            .map(|m| threads.key(m.thread))
        else {
            continue;
        };
        let first = ops.partition_point(|o| o.thread < thread);
        let last = ops.partition_point(|o| o.thread <= thread);
        let spans = ops.get(first..last).unwrap_or_default();
        let mut open: Vec<&OpRecord> = Vec::new();
        let mut next = 0;
        for &i in events {
            let Some(m) = memory.get_mut(i as usize) else {
                continue;
            };
            let ts = m.ts;
            while let Some(span) = spans.get(next).filter(|s| s.start <= ts) {
                while open.last().is_some_and(|o| o.end < span.start) {
                    open.pop();
                }
                open.push(span);
                next += 1;
            }
            while open.last().is_some_and(|o| o.end < ts) {
                open.pop();
            }
            if let Some(op) = open.last() {
                m.op = Some(StrId(op.name));
            }
        }
    }
}

fn build_trace_memory<'a>(
    profile: &mut Profile,
    path: &str,
    id: &str,
    is_device: bool,
    capacity: Option<u64>,
    records: impl Iterator<Item = &'a MemoryRecord>,
) {
    let before = profile.names.string("(allocated before the trace)");
    let before_site = profile.names.site(Site {
        op: Some(before),
        ..Site::default()
    });
    let mut sites: HashMap<Option<StrId>, SiteId> = HashMap::new();
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut live_at_start: Vec<AllocId> = Vec::new();
    let mut samples: Vec<AllocatorSample> = Vec::new();
    let mut live: HashMap<u64, AllocId> = HashMap::new();
    // Traces without `Addr` (PyTorch 1.9): frees are paired with the most
    // recent live allocation of the same size.
    let mut live_by_size: HashMap<u64, Vec<AllocId>> = HashMap::new();
    let mut without_addr = 0u64;
    let mut freed_before = 0u64;
    let mut before_bytes: u64 = 0;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let push = |allocations: &mut Vec<Allocation>, a: Allocation| {
        let id = AllocId(allocations.len() as u32);
        allocations.push(a);
        id
    };
    let mut first = None;
    for m in records {
        first.get_or_insert(m);
        let op = m.op;
        let at = m.ts.round() as i64;
        let size = m.bytes.unsigned_abs();
        if m.addr().is_none() {
            without_addr += 1;
        }
        if m.bytes >= 0 {
            *counts.entry("alloc".into()).or_insert(0) += 1;
            let site = *sites.entry(op).or_insert_with(|| {
                profile.names.site(Site {
                    op,
                    ..Site::default()
                })
            });
            if let Some(old) = m.addr().and_then(|a| live.remove(&a)) {
                events.push(Event {
                    at,
                    kind: EventKind::Free,
                    alloc: old,
                });
            }
            let alloc = push(
                &mut allocations,
                Allocation {
                    bytes: size,
                    requested: size,
                    count: 1,
                    address: m.addr(),
                    site,
                },
            );
            match m.addr() {
                Some(a) => {
                    live.insert(a, alloc);
                }
                None => live_by_size.entry(size).or_default().push(alloc),
            }
            events.push(Event {
                at,
                kind: EventKind::Alloc,
                alloc,
            });
        } else {
            *counts.entry("free".into()).or_insert(0) += 1;
            let found = match m.addr() {
                Some(a) => live.remove(&a),
                None => live_by_size.get_mut(&size).and_then(Vec::pop),
            };
            let alloc = found.unwrap_or_else(|| {
                freed_before += 1;
                before_bytes = before_bytes.saturating_add(size);
                let alloc = push(
                    &mut allocations,
                    Allocation {
                        bytes: size,
                        requested: size,
                        count: 1,
                        address: m.addr(),
                        site: before_site,
                    },
                );
                live_at_start.push(alloc);
                alloc
            });
            events.push(Event {
                at,
                kind: EventKind::Free,
                alloc,
            });
        }
        if m.total_allocated().is_some() || m.total_reserved().is_some() {
            samples.push(
                AllocatorSample::new(at)
                    .with_reserved_bytes(m.total_reserved().filter(|_| is_device))
                    .with_allocated_bytes(m.total_allocated()),
            );
        }
    }
    // `Total Allocated` after the first event tells what was live before
    // the trace began; what the frees did not reveal is one allocation.
    if let Some(first) = first {
        if let Some(total) = first.total_allocated() {
            let start = i128::from(total) - i128::from(first.bytes);
            let unseen = start - i128::from(before_bytes);
            if unseen > 0 {
                let bytes = u64::try_from(unseen).unwrap_or(u64::MAX);
                let alloc = push(
                    &mut allocations,
                    Allocation {
                        bytes,
                        requested: bytes,
                        count: 1,
                        address: None,
                        site: before_site,
                    },
                );
                live_at_start.push(alloc);
            } else if unseen < 0 {
                profile.warn(
                    path,
                    format!(
                        "{id}: frees of allocations made before the trace exceed the first \
                         `Total Allocated`; live bytes may be off by {}",
                        -unseen
                    ),
                );
            }
        }
    }
    if without_addr > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {without_addr} [memory] events have no Addr (an old profiler); frees \
                 are paired with the latest live allocation of the same size"
            ),
        );
    }
    if freed_before > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {freed_before} frees are of allocations made before the trace; they are \
                 counted as live at the start"
            ),
        );
    }
    let axis = Axis::TimeUs;
    let memory = profile.memory_mut(
        id,
        if is_device {
            MemoryKind::Device
        } else {
            MemoryKind::Allocator
        },
        axis,
    );
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    memory.allocator_samples = samples;
    memory.recorded_events = counts;
    memory.capacity = capacity;
}

/// Category names of `export_memory_timeline`, in its column order
/// (`torch.profiler._memory_profiler._CATEGORY_TO_INDEX`).
const CATEGORIES: [&str; 8] = [
    "PARAMETER",
    "OPTIMIZER_STATE",
    "INPUT",
    "TEMPORARY",
    "ACTIVATION",
    "GRADIENT",
    "AUTOGRAD_DETAIL",
    "unknown",
];

/// The two timeline forms: `[times, sizes]` with one row of per-category
/// bytes per time (column 0 unused, then [`CATEGORIES`]), or raw rows
/// `[t_ns, action, bytes, category]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Timeline {
    Coalesced((Vec<Loose>, Vec<Vec<Loose>>)),
    Raw(Vec<Vec<Loose>>),
}

/// A memory timeline has no allocation identities, only bytes per category
/// over time. Each category is modelled as one allocation whose size is the
/// category's total; when the total changes, that allocation is freed and a
/// new one of the new size made at the same time (free first, so no point
/// counts both).
fn read_timeline(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let timeline: Timeline = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, "PyTorch memory timeline JSON", e))?;
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::TorchMemoryTimeline,
        executables: None,
    });
    // (time in µs, category index, new total)
    let mut changes: Vec<(Option<i64>, usize, i128)> = Vec::new();
    let mut totals = [0i128; CATEGORIES.len()];
    let mut bad_rows = 0u64;
    match timeline {
        Timeline::Coalesced((times, sizes)) => {
            for (t, row) in times.iter().zip(&sizes) {
                let at = t.int();
                for (c, total) in totals.iter_mut().enumerate() {
                    let Some(v) = row.get(c + 1).and_then(Loose::int) else {
                        continue;
                    };
                    if i128::from(v) != *total {
                        *total = i128::from(v);
                        changes.push((at, c, *total));
                    }
                }
            }
        }
        Timeline::Raw(rows) => {
            for row in rows {
                let (Some(t), Some(delta), Some(c)) = (
                    row.first().and_then(Loose::int),
                    row.get(2).and_then(Loose::int),
                    row.get(3)
                        .and_then(Loose::int)
                        .and_then(|c| usize::try_from(c).ok()),
                ) else {
                    bad_rows += 1;
                    continue;
                };
                let Some(total) = totals.get_mut(c) else {
                    bad_rows += 1;
                    continue;
                };
                *total += i128::from(delta);
                // Raw times are ns, -1 for tensors that existed before profiling.
                let at = (t >= 0).then_some(t / 1000);
                changes.push((at, c, *total));
            }
        }
    }
    if bad_rows > 0 {
        profile.warn(
            path,
            format!("{bad_rows} timeline rows are malformed; skipped"),
        );
    }
    let category_sites: Vec<SiteId> = CATEGORIES
        .iter()
        .map(|c| {
            let category = profile.names.string(c);
            profile.names.site(Site {
                category: Some(category),
                ..Site::default()
            })
        })
        .collect();
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut live_at_start: Vec<AllocId> = Vec::new();
    let mut current: [Option<AllocId>; CATEGORIES.len()] = [None; CATEGORIES.len()];
    let mut negative = 0u64;
    for (at, c, total) in changes {
        let (Some(slot), Some(&site)) = (current.get_mut(c), category_sites.get(c)) else {
            continue;
        };
        let bytes = u64::try_from(total).unwrap_or_else(|_| {
            negative += 1;
            0
        });
        let new = (bytes > 0).then(|| {
            let id = AllocId(allocations.len() as u32);
            allocations.push(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site,
            });
            id
        });
        match at {
            // Before profiling: the start state, no events.
            None => {
                if let Some(old) = slot.take() {
                    live_at_start.retain(|&a| a != old);
                }
                live_at_start.extend(new);
            }
            Some(at) => {
                if let Some(old) = slot.take() {
                    events.push(Event {
                        at,
                        kind: EventKind::Free,
                        alloc: old,
                    });
                }
                if let Some(new) = new {
                    events.push(Event {
                        at,
                        kind: EventKind::Alloc,
                        alloc: new,
                    });
                }
            }
        }
        *slot = new;
    }
    if negative > 0 {
        profile.warn(
            path,
            format!("{negative} category totals go below zero; read as 0"),
        );
    }
    let memory = profile.memory_mut("timeline", MemoryKind::Device, Axis::TimeUs);
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes served only through `read_exact_at`, as a file is: the reader
    /// streams them instead of parsing them in place.
    struct Streamed(Vec<u8>);

    impl ByteSource for Streamed {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.0.read_exact_at(offset, buf)
        }
    }

    fn load_from(data: &dyn ByteSource) -> Result<Profile> {
        let mut profile = Profile::default();
        let format = super::classify(data).unwrap();
        read(&mut profile, "t.json", data, format)?;
        Ok(profile)
    }

    /// Reads `text` both streamed and in place; both must agree (on the
    /// profile; serde_json's two readers may place a type error one column
    /// apart).
    fn load(text: &str) -> Result<Profile> {
        let streamed = load_from(&Streamed(text.as_bytes().to_vec()));
        let in_place = load_from(&text.as_bytes().to_vec());
        match (&streamed, &in_place) {
            (Ok(a), Ok(b)) => {
                // Interning tables print in hash order; what they hold shows
                // through the memories' ids.
                let shown = |p: &Profile| format!("{:?}", (&p.inputs, &p.memories, &p.warnings));
                assert_eq!(shown(a), shown(b));
            }
            (a, b) => assert_eq!(a.is_ok(), b.is_ok(), "{a:?} / {b:?}"),
        }
        streamed
    }

    fn classify(bytes: &[u8]) -> Format {
        let streamed = super::classify(&Streamed(bytes.to_vec())).unwrap();
        assert_eq!(streamed, super::classify(&bytes.to_vec()).unwrap());
        streamed
    }

    #[test]
    fn classifies_timelines_and_traces() {
        assert_eq!(classify(b" [ [1], [[0]]]"), Format::TorchMemoryTimeline);
        assert_eq!(classify(b"[[-1, 1, 5, 0]]"), Format::TorchMemoryTimeline);
        assert_eq!(classify(b"{\"traceEvents\": []}"), Format::TorchTrace);
        assert_eq!(classify(b"[{\"name\": \"x\"}]"), Format::TorchTrace);
        // Only the first two characters that are not whitespace decide, however
        // far into the input they are.
        let mut padded = vec![b' '; 100_000];
        padded.extend_from_slice(b"[\n[1], [[0]]]");
        assert_eq!(classify(&padded), Format::TorchMemoryTimeline);
        assert_eq!(classify(b""), Format::TorchTrace);
        assert_eq!(classify(b"["), Format::TorchTrace);
    }

    #[test]
    fn fields_of_unexpected_types_are_read_around() {
        // A numeric name, string ids and sizes, args that are not an object,
        // a bare array of events: none of it is fatal.
        let p = load(
            r#"[{"name": 5, "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 10, "tid": "main"},
                {"name": "[memory]", "ph": "i", "ts": "2", "tid": "main",
                 "args": {"Bytes": "100", "Addr": 16, "Device Type": 1, "Device Id": 0}},
                {"name": "[memory]", "ph": "i", "ts": 3, "args": "oops"},
                {"name": "[memory]", "ph": "i", "ts": 4,
                 "args": {"Bytes": -100, "Addr": 16, "Device Type": 1, "Device Id": 0, "Total Allocated": []}}]"#,
        )
        .unwrap();
        assert_eq!(p.memories.len(), 1);
        let m = &p.memories[0];
        assert_eq!(m.id, "cuda:0");
        assert_eq!(m.events.len(), 2);
        assert_eq!(m.allocations[0].bytes, 100);
    }

    #[test]
    fn a_trace_larger_than_the_read_buffer_streams_to_the_same_model() {
        // Two threads, two devices, times running backwards on one thread, and
        // an operator span on each thread: the regrouping by thread and by
        // device after the parse must keep each memory in time order.
        let mut text = String::from(
            r#"{"traceEvents": [
            {"name": "aten::add", "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 1000000, "pid": 1, "tid": 1},
            {"name": "aten::mul", "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 1000000, "pid": 1, "tid": 2}"#,
        );
        let events = 12_000;
        for i in 0..events {
            let (tid, device, ts) = if i % 2 == 0 {
                (1, 0, 10 * i)
            } else {
                (2, 1, 10 * (events - i))
            };
            let bytes = if i % 4 < 2 { 512 } else { -512 };
            let addr = 4096 * (i / 4) + 64 * (i % 2);
            text.push_str(&format!(
                r#", {{"name": "[memory]", "ph": "i", "ts": {ts}, "pid": 1, "tid": {tid},
                     "args": {{"Bytes": {bytes}, "Addr": {addr}, "Device Type": {device},
                               "Device Id": 0, "Ev Idx": {i}, "note": "{}"}}}}"#,
                // Brackets and escaped quotes inside strings, across blocks.
                r#"a\"{[}]\\"#.repeat(i % 7)
            ));
        }
        text.push_str("]}");
        assert!(text.len() > 2 * window::BLOCK);
        let p = load(&text).unwrap();
        let ids: Vec<&str> = p.memories.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["cpu", "cuda:0"]);
        // Backwards in time, each free on the second thread comes before its
        // allocation: all of them are of allocations made before the trace.
        for ((m, op), before) in p
            .memories
            .iter()
            .zip(["aten::add", "aten::mul"])
            .zip([0, events / 4])
        {
            assert_eq!(m.events.len(), events / 2);
            assert!(m.events.windows(2).all(|w| w[0].at <= w[1].at));
            assert_eq!(m.live_at_start.len(), before);
            let made = m
                .events
                .iter()
                .find(|e| e.kind == EventKind::Alloc)
                .unwrap();
            let site = p.names.site_of(m.allocations[made.alloc.0 as usize].site);
            assert_eq!(site.op.map(|s| p.names.str(s)), Some(op));
        }
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(load("{\"traceEvents\": [1, 2]}").is_err());
        assert!(load("{\"traceEvents\": [").is_err());
        assert!(matches!(load("{}"), Err(Error::NoData { .. })));
        assert!(load("[[1, 2, 3]]").is_ok());
    }
}
