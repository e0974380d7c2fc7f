//! PyTorch JSON inputs: profiler Chrome traces (`*.pt.trace.json`) with
//! `[memory]` instant events, and `export_memory_timeline` outputs.
//!
//! The trace is read with serde as a stream: each element of `traceEvents`
//! becomes a small record (or nothing) as it is parsed, so a trace of hundreds
//! of megabytes never exists as a JSON value tree. Arguments other than the
//! memory ones are skipped without being stored.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, Event, EventKind, Format, InputInfo, MemoryKind,
    Profile, Site, SiteId, Step, StrId,
};

/// Which PyTorch JSON document the bytes hold: a memory timeline is an array
/// of arrays (`[times, sizes]` or raw `[[t, action, bytes, category], ...]`);
/// a Chrome trace is an object (or an array of event objects).
pub(crate) fn classify(bytes: &[u8]) -> Format {
    let mut text = bytes.iter().copied().filter(|b| !b.is_ascii_whitespace());
    match (text.next(), text.next()) {
        (Some(b'['), Some(b'[')) => Format::TorchMemoryTimeline,
        _ => Format::TorchTrace,
    }
}

pub(crate) fn read(profile: &mut Profile, path: &str, bytes: &[u8], format: Format) -> Result<()> {
    match format {
        Format::TorchMemoryTimeline => read_timeline(profile, path, bytes),
        _ => read_trace(profile, path, bytes),
    }
}

fn corrupt(path: &str, what: &'static str, e: serde_json::Error) -> Error {
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

/// A string field that may hold anything else (read as absent).
#[derive(Debug, Default)]
struct LooseStr<'a>(Option<Cow<'a, str>>);

impl<'a> LooseStr<'a> {
    fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LooseStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = LooseStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(None))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
                Ok(LooseStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LooseStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LooseStr(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
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

/// One element of `traceEvents`, with only what memtool uses.
#[derive(Debug, Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow, default)]
    name: LooseStr<'a>,
    #[serde(borrow, default)]
    ph: LooseStr<'a>,
    #[serde(borrow, default)]
    cat: LooseStr<'a>,
    #[serde(default)]
    pid: Loose,
    #[serde(default)]
    tid: Loose,
    #[serde(default)]
    ts: Loose,
    #[serde(default)]
    dur: Loose,
    #[serde(default)]
    args: LooseArgs,
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

/// A `[memory]` event.
struct MemoryRecord {
    order: usize,
    ts: f64,
    thread: (i64, i64),
    device: (i64, i64),
    addr: Option<u64>,
    bytes: i64,
    total_allocated: Option<u64>,
    total_reserved: Option<u64>,
}

/// A CPU operator span, for attributing allocations.
struct OpRecord {
    start: f64,
    end: f64,
    thread: (i64, i64),
    name: StrId,
}

struct TraceState<'p> {
    profile: &'p mut Profile,
    memory: Vec<MemoryRecord>,
    ops: Vec<OpRecord>,
    /// `ProfilerStep#N` spans: (N, start µs, end µs).
    steps: Vec<Step>,
    devices: Vec<DeviceProperty>,
}

impl TraceState<'_> {
    fn event(&mut self, e: RawEvent<'_>) {
        let name = e.name.as_deref().unwrap_or("");
        let ph = e.ph.as_deref().unwrap_or("");
        if name == "[memory]" {
            let args = e.args.0;
            let Some(bytes) = args.bytes.int() else {
                return;
            };
            let Some(ts) = e.ts.float() else { return };
            self.memory.push(MemoryRecord {
                order: self.memory.len(),
                ts,
                thread: (e.pid.key(), e.tid.key()),
                device: (
                    args.device_type.int().unwrap_or(0),
                    args.device_id.int().unwrap_or(-1),
                ),
                addr: args.addr.int().and_then(|a| u64::try_from(a).ok()),
                bytes,
                total_allocated: args
                    .total_allocated
                    .int()
                    .and_then(|a| u64::try_from(a).ok()),
                total_reserved: args
                    .total_reserved
                    .int()
                    .and_then(|a| u64::try_from(a).ok()),
            });
            return;
        }
        if ph != "X" {
            return;
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
            return;
        }
        // `cpu_op` in Kineto traces; `Operator` in PyTorch 1.9-era ones.
        let cat = e.cat.as_deref().unwrap_or("");
        if cat != "cpu_op" && cat != "Operator" {
            return;
        }
        let (Some(start), Some(dur)) = (e.ts.float(), e.dur.float()) else {
            return;
        };
        let name = self.profile.names.string(name);
        self.ops.push(OpRecord {
            start,
            end: start + dur.max(0.0),
            thread: (e.pid.key(), e.tid.key()),
            name,
        });
    }
}

struct EventsSeed<'s, 'p>(&'s mut TraceState<'p>);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while let Some(e) = a.next_element::<Option<RawEvent<'de>>>()? {
            if let Some(e) = e {
                self.0.event(e);
            }
        }
        Ok(())
    }
}

struct TopSeed<'s, 'p>(&'s mut TraceState<'p>);

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
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
                    self.0.devices = devices.unwrap_or_default();
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

fn read_trace(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let mut state = TraceState {
        profile,
        memory: Vec::new(),
        ops: Vec::new(),
        steps: Vec::new(),
        devices: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    TopSeed(&mut state)
        .deserialize(&mut de)
        .map_err(|e| corrupt(path, "PyTorch trace JSON", e))?;
    let TraceState {
        profile,
        mut memory,
        mut ops,
        mut steps,
        devices,
    } = state;
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
    // Chrome traces need not be in time order; keep file order among equals.
    memory.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(a.order.cmp(&b.order)));
    ops.sort_by(|a, b| {
        a.thread
            .cmp(&b.thread)
            .then(a.start.total_cmp(&b.start))
            .then(b.end.total_cmp(&a.end))
    });
    let op_of = attribute_ops(&memory, &ops);

    let mut by_device: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
    for (i, m) in memory.iter().enumerate() {
        by_device.entry(m.device).or_default().push(i);
    }
    let capacity: HashMap<i64, u64> = devices
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
    for ((device_type, device_id), indices) in by_device {
        let id = match device_type {
            0 => "cpu".to_string(),
            1 => format!("cuda:{device_id}"),
            t => format!("device{t}:{device_id}"),
        };
        let records: Vec<(&MemoryRecord, Option<StrId>)> = indices
            .iter()
            .filter_map(|&i| Some((memory.get(i)?, op_of.get(i).copied().flatten())))
            .collect();
        let cap = (device_type == 1)
            .then(|| capacity.get(&device_id).copied())
            .flatten();
        build_trace_memory(profile, path, &id, device_type == 1, cap, &records);
        if let Some(m) = profile.memories.iter_mut().find(|m| m.id == id) {
            m.steps = steps.clone();
        }
    }
    Ok(())
}

/// For each memory event (by index), the innermost operator span on its
/// thread that contains it: one sweep per thread with a stack of open spans.
fn attribute_ops(memory: &[MemoryRecord], ops: &[OpRecord]) -> Vec<Option<StrId>> {
    let mut out = vec![None; memory.len()];
    let mut by_thread: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
    for (i, m) in memory.iter().enumerate() {
        by_thread.entry(m.thread).or_default().push(i);
    }
    for (thread, events) in by_thread {
        let first = ops.partition_point(|o| o.thread < thread);
        let last = ops.partition_point(|o| o.thread <= thread);
        let spans = ops.get(first..last).unwrap_or_default();
        let mut open: Vec<&OpRecord> = Vec::new();
        let mut next = 0;
        for i in events {
            let Some(ts) = memory.get(i).map(|m| m.ts) else {
                continue;
            };
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
            if let (Some(slot), Some(op)) = (out.get_mut(i), open.last()) {
                *slot = Some(op.name);
            }
        }
    }
    out
}

fn build_trace_memory(
    profile: &mut Profile,
    path: &str,
    id: &str,
    is_device: bool,
    capacity: Option<u64>,
    records: &[(&MemoryRecord, Option<StrId>)],
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
    for &(m, op) in records {
        let at = m.ts.round() as i64;
        let size = m.bytes.unsigned_abs();
        if m.addr.is_none() {
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
            if let Some(old) = m.addr.and_then(|a| live.remove(&a)) {
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
                    address: m.addr,
                    site,
                },
            );
            match m.addr {
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
            let found = match m.addr {
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
                        address: m.addr,
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
        if m.total_allocated.is_some() || m.total_reserved.is_some() {
            samples.push(
                AllocatorSample::new(at)
                    .with_reserved_bytes(m.total_reserved.filter(|_| is_device))
                    .with_allocated_bytes(m.total_allocated),
            );
        }
    }
    // `Total Allocated` after the first event tells what was live before
    // the trace began; what the frees did not reveal is one allocation.
    if let Some(&(first, _)) = records.first() {
        if let Some(total) = first.total_allocated {
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

    fn load(text: &str) -> Result<Profile> {
        let mut profile = Profile::default();
        let format = classify(text.as_bytes());
        read(&mut profile, "t.json", text.as_bytes(), format)?;
        Ok(profile)
    }

    #[test]
    fn classifies_timelines_and_traces() {
        assert_eq!(classify(b" [ [1], [[0]]]"), Format::TorchMemoryTimeline);
        assert_eq!(classify(b"[[-1, 1, 5, 0]]"), Format::TorchMemoryTimeline);
        assert_eq!(classify(b"{\"traceEvents\": []}"), Format::TorchTrace);
        assert_eq!(classify(b"[{\"name\": \"x\"}]"), Format::TorchTrace);
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
    fn malformed_documents_are_errors() {
        assert!(load("{\"traceEvents\": [1, 2]}").is_err());
        assert!(load("{\"traceEvents\": [").is_err());
        assert!(matches!(load("{}"), Err(Error::NoData { .. })));
        assert!(load("[[1, 2, 3]]").is_ok());
    }
}
