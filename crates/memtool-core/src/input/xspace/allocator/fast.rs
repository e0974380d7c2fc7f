//! [`Decoder::event_fast`]: the merged walk's decoder, one pass over an
//! event's bytes with its own inlined wire reading.

use super::decode::{
    Decoder, EventStrings, Fallback, Interned, LineClock, PlaneKeys, RawEvent, ALLOCATION,
    DEALLOCATION,
};
use super::keys::{number_slot, small_string_key, Key, SMALL_FRAGMENTATION};
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

/// The sixteen bytes of `buf` at `at` as a little-endian number, zeros
/// past its end: a stat's header and its value in one load where they are
/// there (an event's bytes are read with what the window holds after them,
/// so only the window's last event lacks them).
#[inline(always)]
fn words_at(buf: &[u8], at: usize) -> u128 {
    match buf.get(at..).and_then(|b| b.first_chunk::<16>()) {
        Some(words) => u128::from_le_bytes(*words),
        None => words_at_end(buf, at),
    }
}

#[cold]
#[inline(never)]
fn words_at_end(buf: &[u8], at: usize) -> u128 {
    let mut words = [0u8; 16];
    let rest = buf.get(at..).unwrap_or_default();
    let n = rest.len().min(16);
    words[..n].copy_from_slice(&rest[..n]);
    u128::from_le_bytes(words)
}

/// The varint of exactly `len` bytes (1 to 10) at the start of `words`, as
/// [`varint`] reads it where it ends after `len` bytes; `None` where it
/// would end elsewhere. A stat's length gives its value's: where the first
/// byte with its top bit clear is checks where it stops, three steps pack
/// its 7-bit groups. Nine or ten bytes are a negative `int64` (a varint
/// holds its two's complement), which the general reader took ~200
/// instructions over.
#[inline(always)]
fn varint_of_length(words: u128, len: usize) -> Option<u64> {
    let word = words as u64;
    if len == 1 {
        return (word & 0x80 == 0).then_some(word & 0xff);
    }
    // The top bits that are clear: the last byte's is the first.
    let stops = !word & 0x8080_8080_8080_8080;
    if len > 8 {
        return long_varint(words, len, stops);
    }
    if stops.trailing_zeros() as usize != (8 * len).wrapping_sub(1) {
        return None;
    }
    // The bits up to that one: the varint's bytes.
    Some(pack_groups(word & (stops ^ stops.wrapping_sub(1))))
}

/// [`varint_of_length`] of nine or ten bytes: eight with their top bits
/// set, then one that stops it, or one more and then 0 or 1 (bit 63).
#[inline(always)]
fn long_varint(words: u128, len: usize, stops: u64) -> Option<u64> {
    let low = pack_groups(words as u64);
    let (ninth, tenth) = ((words >> 64) as u8, (words >> 72) as u8);
    match len {
        _ if stops != 0 => None,
        9 if ninth < 0x80 => Some(low | (u64::from(ninth) << 56)),
        10 if ninth >= 0x80 && tenth <= 1 => {
            Some(low | (u64::from(ninth & 0x7f) << 56) | (u64::from(tenth) << 63))
        }
        _ => None,
    }
}

/// The 7-bit groups of a varint's (up to eight) bytes in `x`, packed in
/// three steps (pairs, quads, the whole word).
#[inline(always)]
fn pack_groups(x: u64) -> u64 {
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// What an allocator event's stats give, as both of `event_fast`'s ways of
/// reading a stat store it.
struct Taken<'a, 'e> {
    /// The event's place at the end of the run's events: written there, not
    /// moved there once read (a `RawEvent` is 120 bytes, and was copied
    /// about four times on its way out, ~80 instructions an event).
    raw: &'e mut RawEvent,
    strings: EventStrings<'a>,
    /// How many stats are a `step_num`, and the last one's value: an event
    /// of another kind is a step mark only with one (most events of a host
    /// trace on a plane that marks steps are not step marks).
    step_marks: u32,
    step: StatValue<'a>,
}

impl<'a> Taken<'a, '_> {
    /// A stat read whole by [`stat`].
    #[inline(always)]
    fn stat(&mut self, plane: &PlaneKeys, id: i64, v: StatValue<'a>) {
        let Some(key) = plane.keys.get(id) else {
            return;
        };
        // Sizes and addresses are most stats: one branch for all.
        if let Some(slot) = number_slot(key) {
            self.raw.numbers[slot] = v.as_u64().unwrap_or(u64::MAX);
            return;
        }
        if key == Key::Fragmentation {
            self.raw.fragmentation = v.as_f64().unwrap_or(f64::NAN);
        } else {
            self.string(key, v);
        }
    }

    /// A stat of a key [`EventStrings::take`] keeps, or a `step_num`.
    #[inline(always)]
    fn string(&mut self, key: Key, v: StatValue<'a>) {
        if key == Key::StepNum {
            self.step_marks += 1;
            self.step = v;
        } else {
            self.strings.take(key, v);
        }
    }
}

impl Decoder {
    /// [`Decoder::event`] in one pass over the event's bytes, for the merged
    /// walk: the same event on valid input, pushed onto `events` if it is an
    /// allocator event (`Err` if it is earlier than their last); `Err` on anything the slow path
    /// would refuse (and, being stricter, on damaged stats of events it
    /// would not read), which the walk in file order then reads. `held` is
    /// the event's `len` bytes and whatever follows them in the window
    /// (never read as the event's: it lets a stat be read by whole words).
    /// Always inlined into the run's loop: `#[inline]` left it a call once
    /// the loop had two callers (the framed events and the general
    /// step's), ~280 instructions an event more (BENCHMARKS.md Run
    /// O-xspace-model, Run P-xspace-decode).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn event_fast(
        &mut self,
        names: &mut Names,
        interned: &mut Interned,
        plane: &PlaneKeys,
        clock: &LineClock,
        held: &[u8],
        len: usize,
        base: u64,
        seen: (u64, u64),
        events: &mut Vec<RawEvent>,
    ) -> Result<(), Fallback> {
        let bytes = held.get(..len).ok_or(Fallback)?;
        let last_at = events.last().map(|e| e.at);
        // Taken back off unless it is an allocator event.
        events.push(RawEvent::new(0, seen, false));
        let Some(raw) = events.last_mut() else {
            return Err(Fallback);
        };
        let (mut metadata_id, mut offset_ps, mut duration_ps) = (0, 0, 0);
        let mut taken = Taken {
            raw,
            strings: EventStrings::default(),
            step_marks: 0,
            step: StatValue::None,
        };
        // Events of other kinds (most of a host trace) need only framing:
        // their stats are skipped once the metadata id says so.
        let wanted = |id: &i64| plane.event_kind(*id) != 0;
        let (mut skip_stats, mut skipped) = (false, false);
        let mut pos = 0;
        // Nearly every event opens with its metadata id (one byte) and
        // offset: `08 id 10 offset`, read here; anything else by the loop.
        if let [0x08, id @ 0..=0x7f, 0x10, ..] = *bytes {
            let mut at = 3;
            if let Some(offset) = varint(bytes, &mut at) {
                metadata_id = i64::from(id);
                skip_stats = !plane.has_steps && !wanted(&metadata_id);
                offset_ps = offset as i64;
                pos = at;
            }
        }
        while pos < bytes.len() {
            // Nearly every field is a stat of a one-byte metadata id, with
            // a one-byte length: `22 len 08 id tag value`, its header checked
            // in one word, its value's length its length less three.
            let words = words_at(held, pos);
            let word = words as u64;
            // What follows the header: a value of up to eleven bytes.
            let value_words = words >> 40;
            let len = ((word >> 8) & 0x7f) as usize;
            let end = pos + 2 + len;
            if word & 0x80ff_80ff == 0x0008_0022 && end <= bytes.len() {
                let id = ((word >> 24) & 0x7f) as usize;
                let tag = (word >> 32) as u8;
                let value = match tag {
                    0x18 | 0x20 | 0x38 if (4..=13).contains(&len) => {
                        varint_of_length(value_words, len - 3)
                    }
                    _ => None,
                };
                if let Some(v) = value {
                    pos = end;
                    if skip_stats {
                        skipped = true;
                        continue;
                    }
                    let code = plane.small_keys.0[id];
                    if code < 8 {
                        // A size or address, as `StatValue::as_u64` reads it.
                        let number = tag == 0x18 || (tag == 0x20 && v as i64 >= 0);
                        taken.raw.numbers[usize::from(code & 7)] =
                            if number { v } else { u64::MAX };
                    } else if let Some(key) = small_string_key(code) {
                        taken.string(key, small_value(tag, v));
                    } else if code == SMALL_FRAGMENTATION {
                        taken.raw.fragmentation = match tag {
                            0x18 => v as f64,
                            0x20 => v as i64 as f64,
                            _ => f64::NAN,
                        };
                    }
                    continue;
                }
                // A double (`fragmentation`): `11` and eight bytes.
                if tag == 0x11 && len == 11 {
                    pos = end;
                    if skip_stats {
                        skipped = true;
                        continue;
                    }
                    let bits = value_words as u64;
                    taken.stat(plane, id as i64, StatValue::Double(f64::from_bits(bits)));
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
                (3, v) => duration_ps = as_i64(v).unwrap_or(0),
                (4, Value::Bytes(_)) if skip_stats => skipped = true,
                (4, Value::Bytes(b)) => {
                    let (id, v) = stat(b).ok_or(Fallback)?;
                    taken.stat(plane, id, v);
                }
                _ => {}
            }
        }
        let Taken {
            raw,
            strings,
            step_marks,
            step,
        } = taken;
        let kind = plane.event_kind(metadata_id);
        let is_alloc = kind & ALLOCATION != 0;
        let is_free = kind & DEALLOCATION != 0;
        if skipped && (is_alloc || is_free) {
            // A second metadata id made it an allocator event after all.
            events.pop();
            let raw = self.event(names, interned, plane, clock, bytes, base, seen)?;
            return push_in_order(events, raw);
        }
        if !is_alloc && !is_free {
            events.pop();
            if !plane.has_steps {
                return Ok(());
            }
            if step_marks > 1 {
                // Marked twice: the slow path reads it.
                let raw = self.event(names, interned, plane, clock, bytes, base, seen)?;
                return push_in_order(events, raw);
            }
            // As the slow path: a time that overflows is counted, whether
            // or not the event marks a step. A profile may mark a step per
            // event of a whole line (`train` on TensorFlow's `python` line:
            // 30,000 on the 660k-event benchmark), so marks are read here,
            // not by the slow path (~2,000 instructions each, all on the
            // thread decoding that line while the other cores waited).
            let Some(at) = clock.at(offset_ps) else {
                self.bad_times += 1;
                return Ok(());
            };
            if let (1, Some(id)) = (step_marks, step.as_i64()) {
                self.mark_step(id, at, duration_ps);
            }
            return Ok(());
        }
        let Some(at) = clock.at(offset_ps) else {
            self.bad_times += 1;
            events.pop();
            return Ok(());
        };
        if last_at.is_some_and(|last| at < last) {
            return Err(Fallback);
        }
        raw.at = at;
        raw.free = is_free;
        raw.either = is_alloc && is_free;
        self.place_strings(names, interned, plane, &strings, raw);
        Ok(())
    }
}

/// `raw`, if any, pushed onto `events`: `Err` if it is earlier than their
/// last (the run is out of time order), which the walk in file order reads.
pub(super) fn push_in_order(
    events: &mut Vec<RawEvent>,
    raw: Option<RawEvent>,
) -> Result<(), Fallback> {
    if let Some(raw) = raw {
        if events.last().is_some_and(|last| raw.at < last.at) {
            return Err(Fallback);
        }
        events.push(raw);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length and every way a varint can stop within eight bytes,
    /// against the wire reader's varint held to that length.
    #[test]
    fn a_varint_of_known_length_reads_as_the_wire_reader_reads_it() {
        let patterns: [u8; 6] = [0x00, 0x01, 0x7f, 0x80, 0x81, 0xff];
        for len in 0..=12usize {
            for a in patterns {
                for b in patterns {
                    for c in patterns {
                        for fill in [0x80u8, 0x00, 0xaa, 0xff] {
                            // 16 bytes: `a` first, `c` at `len - 2`, `b` at `len - 1`.
                            let mut buf = [fill; 16];
                            buf[0] = a;
                            if len >= 2 {
                                buf[len - 2] = c;
                            }
                            if len >= 1 {
                                buf[len - 1] = b;
                            }
                            let mut at = 0;
                            let expected = varint(&buf, &mut at).filter(|_| at == len);
                            let words = u128::from_le_bytes(buf);
                            let got = varint_of_length(words, len);
                            assert_eq!(got, expected, "{len} {buf:02x?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn words_past_the_end_are_zeros() {
        assert_eq!(words_at(&[1, 2, 3], 1), 0x0302);
        assert_eq!(words_at(&[1, 2, 3], 5), 0);
        let bytes: Vec<u8> = (1..=17).collect();
        assert_eq!(
            words_at(&bytes, 1),
            0x1110_0f0e_0d0c_0b0a_0908_0706_0504_0302
        );
    }
}
