//! The lazy walker over XSpace bytes in memory: [`Plane`] → [`Line`] →
//! [`Event`] → [`Stat`], plane metadata with `ref_value` resolution, event
//! metadata with their stats. Used for the planes read whole (`Task
//! Environment`, `/host:metadata`) and single events; each view keeps its
//! absolute offset in the input, so errors name the byte a walk of the whole
//! file would.

use std::borrow::Cow;
use std::collections::HashMap;

use memtool_proto::wire::reader::{Fields, Value, WireError};

/// A length-delimited sub-message: its bytes and their offset in the input.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slice<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) base: usize,
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

pub(super) fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Protobuf `int64` fields arrive as varints holding two's complement.
pub(super) fn as_i64(value: Value<'_>) -> Option<i64> {
    value.as_u64().map(|v| v as i64)
}

/// The planes of an XSpace, in file order. memtool reads a file's planes
/// through the stream walker; the tests walk XSpaces they build with this.
#[cfg(test)]
pub(crate) fn planes(bytes: &[u8]) -> impl Iterator<Item = Result<Plane<'_>, WireError>> {
    children(Slice { bytes, base: 0 }, 1).map(|plane| plane.and_then(Plane::parse))
}

/// One `XPlane`: a device or host and its timelines.
#[derive(Clone, Debug)]
pub(crate) struct Plane<'a> {
    pub id: i64,
    pub name: Cow<'a, str>,
    msg: Slice<'a>,
}

impl<'a> Plane<'a> {
    pub(super) fn parse(msg: Slice<'a>) -> Result<Plane<'a>, WireError> {
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
    pub(crate) fn metadata(&self) -> Result<Metadata, WireError> {
        let mut meta = Metadata::default();
        for field in self.msg.fields() {
            let (number, value, base) = field?;
            if let (4 | 5, Value::Bytes(entry)) = (number, value) {
                meta.add_entry(number, entry, base)?;
            }
        }
        Ok(meta)
    }

    /// The plane's event metadata entries, with their own stats (the
    /// `/host:metadata` plane keeps each compiled program's `HloProto` there
    /// as a bytes stat).
    pub(crate) fn event_metadata(
        &self,
    ) -> impl Iterator<Item = Result<EventMetadata<'a>, WireError>> {
        children(self.msg, 4).filter_map(|entry| {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e)),
            };
            // A map entry: key = 1, value = 2.
            let value = children(entry, 2).next()?;
            Some(value.and_then(EventMetadata::parse))
        })
    }

    /// The plane's own stats (device properties, `Task Environment` times).
    pub(crate) fn stats(&self) -> impl Iterator<Item = Result<Stat<'a>, WireError>> {
        children(self.msg, 6).map(|s| s.and_then(Stat::parse))
    }

    /// The plane's lines (read by the stream walker; the tests use this).
    #[cfg(test)]
    pub(crate) fn lines(&self) -> impl Iterator<Item = Result<Line<'a>, WireError>> {
        children(self.msg, 3).map(|l| l.and_then(Line::parse))
    }
}

/// One `XEventMetadata`: an event type, with stats shared by its events.
#[derive(Clone, Debug)]
pub(crate) struct EventMetadata<'a> {
    pub id: i64,
    pub name: Cow<'a, str>,
    pub display_name: Cow<'a, str>,
    msg: Slice<'a>,
}

impl<'a> EventMetadata<'a> {
    fn parse(msg: Slice<'a>) -> Result<EventMetadata<'a>, WireError> {
        let mut meta = EventMetadata {
            id: 0,
            name: Cow::Borrowed(""),
            display_name: Cow::Borrowed(""),
            msg,
        };
        each_field(msg, |n, v, _| match (n, v) {
            (1, v) => meta.id = as_i64(v).unwrap_or(0),
            (2, Value::Bytes(b)) => meta.name = text(b),
            (4, Value::Bytes(b)) => meta.display_name = text(b),
            _ => {}
        })?;
        Ok(meta)
    }

    pub(crate) fn stats(&self) -> impl Iterator<Item = Result<Stat<'a>, WireError>> {
        children(self.msg, 5).map(|s| s.and_then(Stat::parse))
    }
}

/// Names of a plane's event and stat types, by metadata id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metadata {
    events: HashMap<i64, String>,
    /// Earlier names of event types defined again under another name (a
    /// protobuf map keeps the last definition; the earlier ones still say
    /// what the events may be).
    redefined: Vec<(i64, String)>,
    stats: HashMap<i64, String>,
}

impl Metadata {
    /// Adds one entry of the plane's event (field 4) or stat (field 5)
    /// metadata map, whose bytes are at `base` in the input.
    pub(crate) fn add_entry(
        &mut self,
        number: u32,
        entry: &[u8],
        base: usize,
    ) -> Result<(), WireError> {
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
            return Ok(());
        };
        let name = name.into_owned();
        if number == 4 {
            if let Some(old) = self.events.insert(key, name) {
                if self.events.get(&key) != Some(&old) {
                    self.redefined.push((key, old));
                }
            }
        } else {
            self.stats.insert(key, name);
        }
        Ok(())
    }

    /// The name of event type `id`.
    #[cfg(test)]
    pub(crate) fn event_name(&self, id: i64) -> Option<&str> {
        self.events.get(&id).map(|n| n.as_ref())
    }

    pub(crate) fn stat_name(&self, id: i64) -> Option<&str> {
        self.stats.get(&id).map(|n| n.as_ref())
    }

    /// Ids of the event types with this name (several planes' metadata can
    /// repeat a name under different ids).
    pub(crate) fn event_ids(&self, name: &str) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .events
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(&id, _)| id)
            .chain(
                self.redefined
                    .iter()
                    .filter(|(_, n)| n.as_str() == name)
                    .map(|&(id, _)| id),
            )
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// A map from stat metadata id to a caller's key, for the stat names in
    /// `wanted` — so the hot loop over events compares integers, not strings.
    pub(crate) fn stat_keys<K: Copy + PartialEq>(&self, wanted: &[(&str, K)]) -> StatKeys<K> {
        let mut keys = StatKeys {
            dense: Vec::new(),
            sparse: HashMap::new(),
        };
        for (&id, name) in &self.stats {
            let Some(&(_, k)) = wanted.iter().find(|(w, _)| *w == name.as_str()) else {
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
    pub(crate) fn str_value<'v>(&'v self, value: &StatValue<'v>) -> Option<Cow<'v, str>> {
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
pub(crate) struct StatKeys<K> {
    dense: Vec<Option<K>>,
    sparse: HashMap<i64, K>,
}

impl<K: Copy + PartialEq> StatKeys<K> {
    pub(crate) fn get(&self, id: i64) -> Option<K> {
        match usize::try_from(id).ok().filter(|&i| i < DENSE_IDS) {
            Some(i) => self.dense.get(i).copied().flatten(),
            None => self.sparse.get(&id).copied(),
        }
    }

    pub(crate) fn contains(&self, key: K) -> bool {
        self.dense.iter().flatten().any(|&k| k == key) || self.sparse.values().any(|&k| k == key)
    }
}

/// One `XLine`: a thread or stream's timeline (read by the stream walker;
/// the tests use this).
#[cfg(test)]
#[derive(Clone, Debug)]
pub(crate) struct Line<'a> {
    pub id: i64,
    pub name: Cow<'a, str>,
    /// Start of the line; event times are offsets from it.
    pub timestamp_ns: i64,
    msg: Slice<'a>,
}

#[cfg(test)]
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

    pub(crate) fn events(&self) -> impl Iterator<Item = Result<Event<'a>, WireError>> {
        children(self.msg, 4).map(|e| e.and_then(Event::parse))
    }

    /// The absolute time of an event of this line, in picoseconds since the
    /// line's clock origin; `None` when it does not fit in an `i64`.
    pub(crate) fn time_ps(&self, event: &Event<'_>) -> Option<i64> {
        self.timestamp_ns
            .checked_mul(1000)?
            .checked_add(event.offset_ps)
    }
}

/// One `XEvent`.
#[derive(Clone, Debug)]
pub(crate) struct Event<'a> {
    pub metadata_id: i64,
    /// Start, in picoseconds after the line's `timestamp_ns`.
    pub offset_ps: i64,
    pub duration_ps: i64,
    msg: Slice<'a>,
}

impl<'a> Event<'a> {
    pub(super) fn parse(msg: Slice<'a>) -> Result<Event<'a>, WireError> {
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

    pub(crate) fn stats(&self) -> impl Iterator<Item = Result<Stat<'a>, WireError>> {
        children(self.msg, 4).map(|s| s.and_then(Stat::parse))
    }
}

/// One `XStat`: a value named by the plane's stat metadata.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stat<'a> {
    pub metadata_id: i64,
    pub value: StatValue<'a>,
}

/// The `oneof value` of an `XStat`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum StatValue<'a> {
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
    #[inline]
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match *self {
            StatValue::Int64(v) => Some(v),
            StatValue::Uint64(v) => i64::try_from(v).ok(),
            StatValue::Double(d) if d.is_finite() && d.abs() < 9.2e18 => Some(d as i64),
            _ => None,
        }
    }

    /// The value as a size or address: negative numbers are not one.
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match *self {
            StatValue::Uint64(v) => Some(v),
            StatValue::Int64(v) => u64::try_from(v).ok(),
            StatValue::Double(d) if (0.0..1.8e19).contains(&d) => Some(d as u64),
            _ => None,
        }
    }

    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            StatValue::Double(d) => Some(d),
            StatValue::Int64(v) => Some(v as f64),
            StatValue::Uint64(v) => Some(v as f64),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::xspace::tests::{field, int, varint};

    fn entry(id: u64, name: &str, stats: &[u8]) -> Vec<u8> {
        let mut meta = Vec::new();
        int(&mut meta, 1, id);
        field(&mut meta, 2, name.as_bytes());
        if !stats.is_empty() {
            field(&mut meta, 5, stats);
        }
        let mut e = Vec::new();
        int(&mut e, 1, id);
        field(&mut e, 2, &meta);
        e
    }

    /// A plane with one line (timestamp 7 ns) holding one event whose stats
    /// are an int64, a double, a ref and a uint64.
    fn space() -> Vec<u8> {
        let mut stats = Vec::new();
        let mut s = Vec::new();
        int(&mut s, 1, 1);
        int(&mut s, 4, (-5i64) as u64);
        field(&mut stats, 4, &s);
        let mut s = Vec::new();
        int(&mut s, 1, 2);
        varint(&mut s, (2 << 3) | 1);
        s.extend_from_slice(&0.25f64.to_bits().to_le_bytes());
        field(&mut stats, 4, &s);
        let mut s = Vec::new();
        int(&mut s, 1, 3);
        int(&mut s, 7, 4);
        field(&mut stats, 4, &s);
        let mut event = Vec::new();
        int(&mut event, 1, 9);
        int(&mut event, 2, 500);
        event.extend_from_slice(&stats);
        let mut line = Vec::new();
        int(&mut line, 3, 7);
        field(&mut line, 2, b"thread");
        field(&mut line, 4, &event);
        let mut plane = Vec::new();
        field(&mut plane, 2, b"/host:CPU");
        field(&mut plane, 3, &line);
        let mut hlo_stat = Vec::new();
        int(&mut hlo_stat, 1, 1);
        field(&mut hlo_stat, 6, b"\x01\x02");
        field(&mut plane, 4, &entry(9, "MemoryAllocation", &hlo_stat));
        for (id, name) in [(1, "a"), (2, "b"), (3, "c"), (4, "mklcpu")] {
            field(&mut plane, 5, &entry(id, name, &[]));
        }
        let mut space = Vec::new();
        field(&mut space, 1, &plane);
        space
    }

    #[test]
    fn walks_planes_lines_events_and_stats() {
        let bytes = space();
        let plane = planes(&bytes).next().unwrap().unwrap();
        assert_eq!(plane.name, "/host:CPU");
        let meta = plane.metadata().unwrap();
        assert_eq!(meta.event_name(9), Some("MemoryAllocation"));
        assert_eq!(meta.event_ids("MemoryAllocation"), vec![9]);
        let line = plane.lines().next().unwrap().unwrap();
        assert_eq!((line.name.as_ref(), line.timestamp_ns), ("thread", 7));
        let event = line.events().next().unwrap().unwrap();
        assert_eq!(line.time_ps(&event), Some(7500));
        let stats: Vec<Stat> = event.stats().map(|s| s.unwrap()).collect();
        assert_eq!(stats[0].value.as_i64(), Some(-5));
        assert_eq!(stats[0].value.as_u64(), None);
        assert_eq!(stats[1].value.as_f64(), Some(0.25));
        assert_eq!(meta.str_value(&stats[2].value).as_deref(), Some("mklcpu"));
        let keys = meta.stat_keys(&[("b", 'b'), ("c", 'c')]);
        assert_eq!(
            (keys.get(2), keys.get(3), keys.get(1)),
            (Some('b'), Some('c'), None)
        );
        let em: Vec<EventMetadata> = plane.event_metadata().map(|m| m.unwrap()).collect();
        assert_eq!((em[0].id, em[0].name.as_ref()), (9, "MemoryAllocation"));
        let stat = em[0].stats().next().unwrap().unwrap();
        assert_eq!(stat.value, StatValue::Bytes(&[1, 2]));
    }

    #[test]
    fn a_cut_plane_is_an_error_with_its_offset() {
        let bytes = space();
        for cut in 1..bytes.len() {
            let partial = &bytes[..cut];
            let walked: Result<Vec<_>, _> = planes(partial)
                .map(|p| {
                    let p = p?;
                    p.metadata()?;
                    for line in p.lines() {
                        for event in line?.events() {
                            for stat in event?.stats() {
                                stat?;
                            }
                        }
                    }
                    Ok::<_, WireError>(())
                })
                .collect();
            let err = walked.unwrap_err();
            assert!(err.offset <= cut, "cut at {cut}: {err:?}");
        }
    }
}
