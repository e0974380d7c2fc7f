//! XSpace (`*.xplane.pb`, `tensorflow.profiler.XSpace`, see
//! `proto/xplane.proto`): a lazy, zero-copy walker over planes, lines, events
//! and stats, and the readers built on it.
//!
//! XSpace files reach gigabytes, so nothing here decodes a whole message: a
//! [`Plane`], [`Line`], [`Event`] or [`Stat`] is a view into the input bytes,
//! and its children are framed only when asked for. Only the per-plane
//! metadata maps (names of event and stat types) are collected into memory;
//! they are small next to the events.
//!
//! The walker is shared by every reader of XSpace content (allocator events in
//! [`allocator`]; compiled programs on `/host:metadata`).

mod allocator;

use std::borrow::Cow;
use std::collections::HashMap;

use super::wire::{Fields, Value, WireError};
use crate::error::{Error, Result};
use crate::model::Profile;

/// Reads everything memtool understands in an XSpace into `profile`.
pub(crate) fn read(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    allocator::read(profile, path, bytes)
}

/// The error for a framing problem found while walking `path`.
pub(crate) fn corrupt(path: &str, e: WireError) -> Error {
    Error::Corrupt {
        path: path.to_string(),
        format: "XSpace",
        message: e.message.to_string(),
        offset: Some(e.offset as u64),
    }
}

/// A length-delimited sub-message: its bytes and their offset in the input.
#[derive(Clone, Copy, Debug)]
struct Slice<'a> {
    bytes: &'a [u8],
    base: usize,
}

impl<'a> Slice<'a> {
    fn fields(self) -> Fields<'a> {
        Fields::at(self.bytes, self.base)
    }
}

/// Calls `visit` for each field of `msg`, stopping at the first framing error.
fn each_field<'a>(
    msg: Slice<'a>,
    mut visit: impl FnMut(u32, Value<'a>, usize),
) -> Result<(), WireError> {
    for field in msg.fields() {
        let (number, value, at) = field?;
        visit(number, value, at);
    }
    Ok(())
}

/// Iterates the sub-messages stored in field `number` of `msg`.
fn children<'a>(msg: Slice<'a>, number: u32) -> impl Iterator<Item = Result<Slice<'a>, WireError>> {
    msg.fields().filter_map(move |f| match f {
        Ok((n, Value::Bytes(bytes), base)) if n == number => Some(Ok(Slice { bytes, base })),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}

fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Protobuf `int64` fields arrive as varints holding two's complement.
fn as_i64(value: Value<'_>) -> Option<i64> {
    value.as_u64().map(|v| v as i64)
}

/// The planes of an XSpace, in file order.
pub fn planes(bytes: &[u8]) -> impl Iterator<Item = Result<Plane<'_>, WireError>> {
    children(Slice { bytes, base: 0 }, 1).map(|plane| plane.and_then(Plane::parse))
}

/// One `XPlane`: a device or host and its timelines.
#[derive(Clone, Debug)]
pub struct Plane<'a> {
    pub id: i64,
    pub name: Cow<'a, str>,
    msg: Slice<'a>,
}

impl<'a> Plane<'a> {
    fn parse(msg: Slice<'a>) -> Result<Plane<'a>, WireError> {
        let mut plane = Plane {
            id: 0,
            name: Cow::Borrowed(""),
            msg,
        };
        each_field(msg, |n, v, _| match (n, v) {
            (1, v) => plane.id = as_i64(v).unwrap_or(0),
            (2, Value::Bytes(b)) => plane.name = text(b),
            _ => {}
        })?;
        Ok(plane)
    }

    /// The names of this plane's event and stat types.
    pub fn metadata(&self) -> Result<Metadata<'a>, WireError> {
        let mut meta = Metadata::default();
        for field in self.msg.fields() {
            let (number, value, base) = field?;
            let (4 | 5, Value::Bytes(entry)) = (number, value) else {
                continue;
            };
            // A map entry: key = 1, value = 2 (the metadata message, which
            // repeats its id in field 1 and has its name in field 2).
            let mut key = None;
            let mut name = None;
            for f in Fields::at(entry, base) {
                match f? {
                    (1, v, _) => key = key.or(as_i64(v)),
                    (2, Value::Bytes(value), vbase) => {
                        for g in Fields::at(value, vbase) {
                            match g? {
                                (1, v, _) => key = key.or(as_i64(v)),
                                (2, Value::Bytes(b), _) => name = Some(text(b)),
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
            let (Some(key), Some(name)) = (key, name) else {
                continue;
            };
            if number == 4 {
                meta.events.insert(key, name);
            } else {
                meta.stats.insert(key, name);
            }
        }
        Ok(meta)
    }

    /// The plane's own stats (device properties, `Task Environment` times).
    pub fn stats(&self) -> impl Iterator<Item = Result<Stat<'a>, WireError>> {
        children(self.msg, 6).map(|s| s.and_then(Stat::parse))
    }

    pub fn lines(&self) -> impl Iterator<Item = Result<Line<'a>, WireError>> {
        children(self.msg, 3).map(|l| l.and_then(Line::parse))
    }
}

/// Names of a plane's event and stat types, by metadata id.
#[derive(Clone, Debug, Default)]
pub struct Metadata<'a> {
    events: HashMap<i64, Cow<'a, str>>,
    stats: HashMap<i64, Cow<'a, str>>,
}

impl<'a> Metadata<'a> {
    /// Every event type: (metadata id, name), in id order.
    pub fn events(&self) -> Vec<(i64, &str)> {
        let mut out: Vec<(i64, &str)> = self
            .events
            .iter()
            .map(|(&id, n)| (id, n.as_ref()))
            .collect();
        out.sort_unstable();
        out
    }

    /// Every stat type: (metadata id, name), in id order.
    pub fn stats(&self) -> Vec<(i64, &str)> {
        let mut out: Vec<(i64, &str)> =
            self.stats.iter().map(|(&id, n)| (id, n.as_ref())).collect();
        out.sort_unstable();
        out
    }

    pub fn event_name(&self, id: i64) -> Option<&str> {
        self.events.get(&id).map(|n| n.as_ref())
    }

    pub fn stat_name(&self, id: i64) -> Option<&str> {
        self.stats.get(&id).map(|n| n.as_ref())
    }

    /// Ids of the event types with this name (several planes' metadata can
    /// repeat a name under different ids).
    pub fn event_ids(&self, name: &str) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .events
            .iter()
            .filter(|(_, n)| n.as_ref() == name)
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// A map from stat metadata id to a caller's key, for the stat names in
    /// `wanted` — so the hot loop over events compares integers, not strings.
    pub fn stat_keys<K: Copy + PartialEq>(&self, wanted: &[(&str, K)]) -> StatKeys<K> {
        let mut keys = StatKeys {
            dense: Vec::new(),
            sparse: HashMap::new(),
        };
        for (&id, name) in &self.stats {
            let Some(&(_, k)) = wanted.iter().find(|(w, _)| *w == name.as_ref()) else {
                continue;
            };
            match usize::try_from(id).ok().filter(|&i| i < DENSE_IDS) {
                Some(i) => {
                    if keys.dense.len() <= i {
                        keys.dense.resize(i + 1, None);
                    }
                    keys.dense[i] = Some(k);
                }
                None => {
                    keys.sparse.insert(id, k);
                }
            }
        }
        keys
    }

    /// A stat's value as text: a string, or a `ref_value` resolved to the
    /// name of the stat metadata it points at.
    pub fn str_value(&self, value: &StatValue<'a>) -> Option<Cow<'_, str>> {
        match *value {
            StatValue::Str(b) => Some(text(b)),
            StatValue::Ref(id) => i64::try_from(id)
                .ok()
                .and_then(|id| self.stats.get(&id))
                .map(|n| Cow::Borrowed(n.as_ref())),
            _ => None,
        }
    }
}

/// Metadata ids below this are looked up in a table rather than hashed:
/// writers number metadata densely from 1.
const DENSE_IDS: usize = 1 << 16;

/// Stat metadata ids mapped to a caller's keys (see [`Metadata::stat_keys`]).
#[derive(Clone, Debug)]
pub struct StatKeys<K> {
    dense: Vec<Option<K>>,
    sparse: HashMap<i64, K>,
}

impl<K: Copy + PartialEq> StatKeys<K> {
    pub fn get(&self, id: i64) -> Option<K> {
        match usize::try_from(id).ok().filter(|&i| i < DENSE_IDS) {
            Some(i) => self.dense.get(i).copied().flatten(),
            None => self.sparse.get(&id).copied(),
        }
    }

    pub fn contains(&self, key: K) -> bool {
        self.dense.iter().flatten().any(|&k| k == key) || self.sparse.values().any(|&k| k == key)
    }
}

/// One `XLine`: a thread or stream's timeline.
#[derive(Clone, Debug)]
pub struct Line<'a> {
    pub id: i64,
    pub name: Cow<'a, str>,
    /// Start of the line; event times are offsets from it.
    pub timestamp_ns: i64,
    msg: Slice<'a>,
}

impl<'a> Line<'a> {
    fn parse(msg: Slice<'a>) -> Result<Line<'a>, WireError> {
        let mut line = Line {
            id: 0,
            name: Cow::Borrowed(""),
            timestamp_ns: 0,
            msg,
        };
        each_field(msg, |n, v, _| match (n, v) {
            (1, v) => line.id = as_i64(v).unwrap_or(0),
            (2, Value::Bytes(b)) => line.name = text(b),
            (3, v) => line.timestamp_ns = as_i64(v).unwrap_or(0),
            _ => {}
        })?;
        Ok(line)
    }

    pub fn events(&self) -> impl Iterator<Item = Result<Event<'a>, WireError>> {
        children(self.msg, 4).map(|e| e.and_then(Event::parse))
    }

    /// The absolute time of an event of this line, in picoseconds since the
    /// line's clock origin; `None` when it does not fit in an `i64`.
    pub fn time_ps(&self, event: &Event<'_>) -> Option<i64> {
        self.timestamp_ns
            .checked_mul(1000)?
            .checked_add(event.offset_ps)
    }
}

/// One `XEvent`.
#[derive(Clone, Debug)]
pub struct Event<'a> {
    pub metadata_id: i64,
    /// Start, in picoseconds after the line's `timestamp_ns`.
    pub offset_ps: i64,
    pub duration_ps: i64,
    msg: Slice<'a>,
}

impl<'a> Event<'a> {
    fn parse(msg: Slice<'a>) -> Result<Event<'a>, WireError> {
        let mut event = Event {
            metadata_id: 0,
            offset_ps: 0,
            duration_ps: 0,
            msg,
        };
        each_field(msg, |n, v, _| match n {
            1 => event.metadata_id = as_i64(v).unwrap_or(0),
            2 => event.offset_ps = as_i64(v).unwrap_or(0),
            3 => event.duration_ps = as_i64(v).unwrap_or(0),
            _ => {}
        })?;
        Ok(event)
    }

    pub fn stats(&self) -> impl Iterator<Item = Result<Stat<'a>, WireError>> {
        children(self.msg, 4).map(|s| s.and_then(Stat::parse))
    }
}

/// One `XStat`: a value named by the plane's stat metadata.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat<'a> {
    pub metadata_id: i64,
    pub value: StatValue<'a>,
}

/// The `oneof value` of an `XStat`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatValue<'a> {
    Double(f64),
    Uint64(u64),
    Int64(i64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
    /// A string stored as the name of another stat metadata entry.
    Ref(u64),
    /// No value, or one in a field this reader does not know.
    None,
}

impl<'a> Stat<'a> {
    fn parse(msg: Slice<'a>) -> Result<Stat<'a>, WireError> {
        let mut stat = Stat {
            metadata_id: 0,
            value: StatValue::None,
        };
        each_field(msg, |n, v, _| match (n, v) {
            (1, v) => stat.metadata_id = as_i64(v).unwrap_or(0),
            (2, Value::Fixed64(bits)) => stat.value = StatValue::Double(f64::from_bits(bits)),
            (3, v) => stat.value = v.as_u64().map_or(StatValue::None, StatValue::Uint64),
            (4, v) => stat.value = as_i64(v).map_or(StatValue::None, StatValue::Int64),
            (5, Value::Bytes(b)) => stat.value = StatValue::Str(b),
            (6, Value::Bytes(b)) => stat.value = StatValue::Bytes(b),
            (7, v) => stat.value = v.as_u64().map_or(StatValue::None, StatValue::Ref),
            _ => {}
        })?;
        Ok(stat)
    }
}

impl StatValue<'_> {
    /// The value as a signed integer (doubles truncated when finite and in range).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            StatValue::Int64(v) => Some(v),
            StatValue::Uint64(v) => i64::try_from(v).ok(),
            StatValue::Double(d) if d.is_finite() && d.abs() < 9.2e18 => Some(d as i64),
            _ => None,
        }
    }

    /// The value as a size or address: negative numbers are not one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            StatValue::Uint64(v) => Some(v),
            StatValue::Int64(v) => u64::try_from(v).ok(),
            StatValue::Double(d) if (0.0..1.8e19).contains(&d) => Some(d as u64),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            StatValue::Double(d) => Some(d),
            StatValue::Int64(v) => Some(v as f64),
            StatValue::Uint64(v) => Some(v as f64),
            _ => None,
        }
    }
}
