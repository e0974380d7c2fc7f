//! What a `/host:CPU` plane's stat metadata ids mean to the decoders: the
//! [`Key`] of each stat name memtool reads, the [`RawEvent`] slot of each
//! size or address, and [`SmallKeys`], the per-plane table of one-byte ids
//! that [`Decoder::event_fast`] reads. Both decoders use this module; it
//! uses neither.
//!
//! [`RawEvent`]: super::decode::RawEvent
//! [`Decoder::event_fast`]: super::decode::Decoder::event_fast

use crate::input::xspace::StatKeys;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
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
    GroupId,
}

pub(super) const STAT_NAMES: [(&str, Key); 17] = [
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
    ("group_id", Key::GroupId),
];

/// Where each size or address goes in [`RawEvent::numbers`](super::decode::RawEvent::numbers).
pub(super) const ADDRESS: usize = 0;
pub(super) const ALLOCATION_BYTES: usize = 1;
pub(super) const REQUESTED: usize = 2;
pub(super) const STACK: usize = 3;
pub(super) const HEAP: usize = 4;
pub(super) const AVAILABLE: usize = 5;
pub(super) const PEAK_IN_USE: usize = 6;
/// The step the profiler grouped the event into (`group_id`), which XProf
/// takes for its step when the profile marks none.
pub(super) const GROUP: usize = 7;

/// Where a size or address stat goes in [`RawEvent::numbers`](super::decode::RawEvent::numbers).
#[inline(always)]
pub(super) fn number_slot(key: Key) -> Option<usize> {
    match key {
        Key::Reserved => Some(STACK),
        Key::Allocated => Some(HEAP),
        Key::Available => Some(AVAILABLE),
        Key::PeakInUse => Some(PEAK_IN_USE),
        Key::Requested => Some(REQUESTED),
        Key::AllocationBytes => Some(ALLOCATION_BYTES),
        Key::Address => Some(ADDRESS),
        Key::GroupId => Some(GROUP),
        _ => None,
    }
}

/// Stat metadata ids below this have their key in [`SmallKeys`]: real
/// profiles number their stat metadata from 1, a few dozen at most, and a
/// one-byte id is what [`stat`](super::fast::stat)'s common form takes.
const SMALL_IDS: usize = 0x80;
/// In [`SmallKeys`]: no key of ours.
pub(super) const SMALL_NONE: u8 = 0xff;
/// In [`SmallKeys`]: `fragmentation`.
pub(super) const SMALL_FRAGMENTATION: u8 = 0xfe;
/// In [`SmallKeys`]: a key [`EventStrings::take`](super::decode::EventStrings::take)
/// keeps is this plus the key's place in [`STAT_NAMES`] (below
/// [`SMALL_FRAGMENTATION`]): the key itself, with no lookup in the plane's
/// keys per stat.
pub(super) const SMALL_STRING: u8 = 0x40;

/// The key of a [`SMALL_STRING`] code.
#[inline(always)]
pub(super) fn small_string_key(code: u8) -> Option<Key> {
    STAT_NAMES
        .get(usize::from(code.wrapping_sub(SMALL_STRING)))
        .map(|&(_, key)| key)
}

/// What [`Decoder::event_fast`](super::decode::Decoder::event_fast) does with a stat of each one-byte metadata
/// id, worked out once per plane: the [`RawEvent::numbers`](super::decode::RawEvent::numbers) slot of a size
/// or address (below 8), [`SMALL_STRING`] plus the key of a string, or
/// [`SMALL_FRAGMENTATION`] or [`SMALL_NONE`]. One load per stat in place
/// of the key's lookup and then its slot's.
pub(super) struct SmallKeys(pub(super) [u8; SMALL_IDS]);

impl SmallKeys {
    pub(super) fn new(keys: &StatKeys<Key>) -> SmallKeys {
        let mut codes = [SMALL_NONE; SMALL_IDS];
        for (id, code) in codes.iter_mut().enumerate() {
            let Some(key) = keys.get(id as i64) else {
                continue;
            };
            *code = match number_slot(key) {
                Some(slot) => slot as u8,
                None if key == Key::Fragmentation => SMALL_FRAGMENTATION,
                None => match STAT_NAMES.iter().position(|&(_, k)| k == key) {
                    Some(i) => SMALL_STRING + i as u8,
                    None => SMALL_NONE,
                },
            };
        }
        SmallKeys(codes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_one_code_that_gives_it_back() {
        for (i, &(_, key)) in STAT_NAMES.iter().enumerate() {
            let code = match number_slot(key) {
                Some(slot) => {
                    assert!(slot < 8, "{key:?}");
                    continue;
                }
                None if key == Key::Fragmentation => continue,
                None => SMALL_STRING + i as u8,
            };
            assert!(code < SMALL_FRAGMENTATION, "{key:?}");
            assert_eq!(small_string_key(code), Some(key));
        }
        assert_eq!(small_string_key(SMALL_NONE), None);
        assert_eq!(small_string_key(SMALL_FRAGMENTATION), None);
        assert_eq!(small_string_key(3), None);
    }
}
