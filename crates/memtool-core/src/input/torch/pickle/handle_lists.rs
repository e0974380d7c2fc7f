//! Lists of memo references to handles, remembered by their bytes.
//!
//! A large snapshot's trace entries repeat a few hundred call stacks: each
//! `alloc` entry has a new `frames` list, `MARK (BINGET | LONG_BINGET)*
//! APPENDS`, of dozens of references to frame dicts memoized long before.
//! The same stack is the same bytes, so the visitor's answer for it
//! ([`Visitor::record_list`](super::Visitor::record_list)) is found by
//! hashing the bytes, without looking up each reference in the memo,
//! collecting the handles and hashing them again: ~660 instructions for a
//! list of ~50 references (154 bytes), was ~2,060 (BENCHMARKS.md Run
//! O-snapshot).
//!
//! The bytes mean the same handles only while the memo slots they name do
//! not change: every remembered list names only slots that held handles,
//! and the memo counts each time a slot holding a handle is given something
//! else (`Memo::handles_replaced`); when the count moves, everything
//! remembered is forgotten.

use rustc_hash::FxHashMap;

use super::visitor::MAX_RECORD_KEYS;

/// The most bytes of lists remembered; past it, lists are read the long way
/// (same result), so a snapshot of millions of distinct stacks does not
/// hold their bytes twice.
const MAX_BYTES: usize = 32 << 20;

#[derive(Default)]
pub(super) struct HandleLists {
    /// Per record key (its index in `RECORD_KEYS`): the list's bytes, from
    /// its MARK to its last APPENDS, to the visitor's handle for it.
    by_key: Vec<FxHashMap<Box<[u8]>, u32>>,
    bytes: usize,
    /// `Memo::handles_replaced` when the lists were remembered.
    generation: u64,
}

impl HandleLists {
    /// The handle remembered for the list of `key` whose bytes are `list`,
    /// if the memo is as it was (`generation`, see the module's doc).
    #[inline]
    pub(super) fn get(&mut self, generation: u64, key: usize, list: &[u8]) -> Option<u32> {
        if generation != self.generation {
            self.by_key.clear();
            self.bytes = 0;
            self.generation = generation;
            return None;
        }
        self.by_key.get(key)?.get(list).copied()
    }

    /// Remembers the visitor's `handle` for the list of `key` whose bytes
    /// are `list` (every reference in it a handle), with the memo at
    /// `generation`.
    pub(super) fn insert(&mut self, generation: u64, key: usize, list: &[u8], handle: u32) {
        if generation != self.generation {
            self.by_key.clear();
            self.bytes = 0;
            self.generation = generation;
        }
        if key >= MAX_RECORD_KEYS || self.bytes + list.len() > MAX_BYTES {
            return;
        }
        if self.by_key.len() <= key {
            self.by_key.resize_with(key + 1, FxHashMap::default);
        }
        if self.by_key[key].insert(list.into(), handle).is_none() {
            self.bytes += list.len();
        }
    }
}

/// The end of a list's items at `at` as [`super::records`]' `scan_handles`
/// reads them (runs of `MARK (BINGET | LONG_BINGET)* APPENDS` and
/// `(BINGET | LONG_BINGET) APPEND`), from their bytes alone; `None` where a
/// FRAME or anything else would make the two readings differ (the list is
/// then read the long way).
#[inline]
pub(super) fn list_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    loop {
        match *bytes.get(i..)? {
            [b'(', ..] => {
                i += 1;
                // The hot loop (dozens of references a list): one byte looked at
                // per reference. A reference cut short steps past the end,
                // and the next look finds nothing.
                loop {
                    match *bytes.get(i)? {
                        b'h' => i += 2,
                        b'j' => i += 5,
                        b'e' => break,
                        _ => return None,
                    }
                }
                i += 1;
            }
            [b'h', _, b'a', ..] => i += 3,
            [b'j', _, _, _, _, b'a', ..] => i += 6,
            // A reference not appended: the record's next key.
            [b'h', _, ..] | [b'j', _, _, _, _, ..] => return Some(i),
            // Cut short: `scan_handles` gives up.
            [b'h' | b'j', ..] => return None,
            // A FRAME is stepped over by `scan_handles`, which may go on.
            [0x95, ..] => return None,
            _ => return Some(i),
        }
    }
}
