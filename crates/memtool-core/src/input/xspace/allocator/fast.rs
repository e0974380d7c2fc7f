//! [`Decoder::event_fast`]: the merged walk's decoder, one pass over an
//! event's bytes with its own inlined wire reading.

use super::decode::{Decoder, EventStrings, Fallback, Interned, LineClock, PlaneKeys, RawEvent};
use super::keys::{number_slot, Key, SMALL_FRAGMENTATION, SMALL_NONE, SMALL_STRING};
use crate::error::Result;
use crate::input::xspace::{as_i64, StatValue};
use crate::model::Names;
use memtool_proto::wire::reader::{varint_at as varint, Value};

/// One field of a message in `buf` at `*pos`, framed as
/// [`memtool_proto::wire::reader::Fields`] frames it; `None` where it gives
/// an error.
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

/// A stat as [`crate::input::xspace::Stat::parse`] reads it; `None` where it gives an error.
#[inline(always)]
pub(super) fn stat(buf: &[u8]) -> Option<(i64, StatValue<'_>)> {
    // Nearly every stat is a one-byte metadata id and one varint value:
    // `08 id 18|20|38 value`.
    if let [0x08, id @ 0..=0x7f, tag @ (0x18 | 0x20 | 0x38), rest @ ..] = buf {
        let mut pos = 0;
        if let Some(v) = varint(rest, &mut pos).filter(|_| pos == rest.len()) {
            return Some((i64::from(*id), small_value(*tag, v)));
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

/// The value of a stat in [`stat`]'s common form, by its field's tag.
#[inline(always)]
fn small_value<'a>(tag: u8, v: u64) -> StatValue<'a> {
    match tag {
        0x18 => StatValue::Uint64(v),
        0x20 => StatValue::Int64(v as i64),
        _ => StatValue::Ref(v),
    }
}

impl Decoder {
    /// [`Decoder::event`] in one pass over the event's bytes, for the merged
    /// walk: the same event on valid input; `Err` on anything the slow path
    /// would refuse (and, being stricter, on damaged stats of events it
    /// would not read), which the walk in file order then reads. Always
    /// inlined into the run's loop: `#[inline]` left it a call once the
    /// loop had two callers (the framed events and the general step's),
    /// ~280 instructions an event more (BENCHMARKS.md Run O-xspace-model,
    /// Run P-xspace-decode).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn event_fast(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &PlaneKeys,
        clock: &LineClock,
        bytes: &[u8],
        base: u64,
        seen: (u64, u64),
    ) -> Result<Option<RawEvent>, Fallback> {
        let (mut metadata_id, mut offset_ps) = (0, 0);
        let mut raw = RawEvent::new(0, seen, false);
        let mut strings = EventStrings::default();
        // Events of other kinds (most of a host trace) need only framing:
        // their stats are skipped once the metadata id says so.
        let wanted = |id: &i64| plane.allocs.contains(id) || plane.frees.contains(id);
        let (mut skip_stats, mut skipped) = (false, false);
        // Whether a stat is a `step_num`: only then does an event of
        // another kind need the slow path (most events of a host trace on
        // a plane that marks steps are not step marks).
        let mut step_mark = false;
        let mut pos = 0;
        while pos < bytes.len() {
            // Nearly every field is a stat in `stat`'s common form, with a
            // one-byte length: `22 len 08 id tag value`, read here whole.
            if let [0x22, len @ 0..=0x7f, 0x08, id @ 0..=0x7f, tag @ (0x18 | 0x20 | 0x38), ..] =
                *bytes.get(pos..).unwrap_or_default()
            {
                let end = pos + 2 + usize::from(len);
                let mut at = pos + 5;
                // Read from the whole event (a varint is read a word at a
                // time where eight bytes are there), then held to the stat.
                if let Some(v) = varint(bytes, &mut at).filter(|_| at == end) {
                    pos = end;
                    if skip_stats {
                        skipped = true;
                        continue;
                    }
                    match plane.small_keys.0[usize::from(id)] {
                        SMALL_NONE => {}
                        SMALL_FRAGMENTATION => {
                            raw.fragmentation = match tag {
                                0x18 => v as f64,
                                0x20 => v as i64 as f64,
                                _ => f64::NAN,
                            };
                        }
                        SMALL_STRING => {
                            if let Some(key) = plane.keys.get(i64::from(id)) {
                                step_mark |= key == Key::StepNum;
                                strings.take(key, small_value(tag, v));
                            }
                        }
                        // A size or address, as `StatValue::as_u64` reads it.
                        slot => {
                            raw.numbers[usize::from(slot)] = match tag {
                                0x18 => v,
                                0x20 if v as i64 >= 0 => v,
                                _ => u64::MAX,
                            };
                        }
                    }
                    continue;
                }
            }
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
                    if key == Key::Fragmentation {
                        raw.fragmentation = v.as_f64().unwrap_or(f64::NAN);
                    } else {
                        step_mark |= key == Key::StepNum;
                        strings.take(key, v);
                    }
                }
                _ => {}
            }
        }
        let is_alloc = plane.allocs.contains(&metadata_id);
        let is_free = plane.frees.contains(&metadata_id);
        if skipped && (is_alloc || is_free) {
            // A second metadata id made it an allocator event after all.
            return Ok(self.event(names, interned, plane, clock, bytes, base, seen)?);
        }
        if !is_alloc && !is_free {
            if !plane.has_steps {
                return Ok(None);
            }
            if !step_mark {
                // As the slow path: read, not a step mark; a time that
                // overflows is counted all the same.
                if clock.at(offset_ps).is_none() {
                    self.bad_times += 1;
                }
                return Ok(None);
            }
            // Step marks are few: the slow path reads them.
            return Ok(self.event(names, interned, plane, clock, bytes, base, seen)?);
        }
        let Some(at) = clock.at(offset_ps) else {
            self.bad_times += 1;
            return Ok(None);
        };
        raw.at = at;
        raw.free = is_free;
        raw.either = is_alloc && is_free;
        self.place_strings(names, interned, plane, &strings, &mut raw);
        Ok(Some(raw))
    }
}
