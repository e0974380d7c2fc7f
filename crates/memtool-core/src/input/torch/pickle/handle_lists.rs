//! Lists of memo references to handles, remembered by their bytes.
//!
//! A large snapshot's trace entries repeat a few hundred call stacks: each
//! `alloc` entry has a new `frames` list, `MARK (BINGET | LONG_BINGET)*
//! APPENDS`, of dozens of references to frame dicts memoized long before.
//! The same stack is the same bytes, so the visitor's answer for it
//! ([`Visitor::record_list`](super::Visitor::record_list)) is found by
//! its bytes, without looking up each reference in the memo, collecting
//! the handles and hashing them again: the lists remembered are grouped by
//! their first bytes and the few of a group compared whole, ~290
//! instructions for a list of ~50 references (154 bytes); reading the
//! list through to its end and hashing it whole (still done where fewer
//! bytes are buffered than the groups need) cost ~670, looking up its
//! references ~2,060 (BENCHMARKS.md Run O-snapshot).
//!
//! The bytes mean the same handles only while the memo slots they name do
//! not change: every remembered list names only slots that held handles,
//! and the memo counts each time a slot holding a handle is given something
//! else (`Memo::handles_replaced`); when the count moves, everything
//! remembered is forgotten.

use rustc_hash::FxHashMap;

use super::visitor::MAX_RECORD_KEYS;

/// The most bytes of lists remembered (and again of lists grouped); past
/// it, lists are read the long way (same result), so a snapshot of
/// millions of distinct stacks does not hold their bytes without bound.
const MAX_BYTES: usize = 32 << 20;

/// The bytes from a list's MARK by which remembered lists are grouped. A
/// list's end is only known by reading it through (`list_end`, ~9
/// instructions a reference) and its bytes hashed after that (~3 a
/// byte), so lists are found by a fixed number of bytes at their start
/// and compared whole, not hashed whole. Stacks are leaf first and share
/// their allocator frames: of a snapshot's 159 distinct lists, 32 bytes
/// tell 24 groups apart, 48 bytes 136 (2.4 lists to compare on average,
/// weighted by use, most told apart by their last word).
const PREFIX: usize = 48;

/// A list remembered: its bytes, from its MARK to its last APPENDS, and
/// the visitor's handle for it.
struct Known {
    bytes: Box<[u8]>,
    handle: u32,
}

#[derive(Default)]
pub(super) struct HandleLists {
    /// Per record key (its index in `RECORD_KEYS`): the list's bytes, from
    /// its MARK to its last APPENDS, to the visitor's handle for it.
    by_bytes: Vec<FxHashMap<Box<[u8]>, u32>>,
    bytes: usize,
    /// The same lists, per record key, grouped by their first [`PREFIX`]
    /// bytes (those after the list included, for a shorter list): the
    /// ones remembered where that many bytes were buffered.
    by_prefix: Vec<FxHashMap<[u8; PREFIX], Vec<Known>>>,
    prefix_bytes: usize,
    /// `Memo::handles_replaced` when the lists were remembered.
    generation: u64,
}

impl HandleLists {
    /// Forgets every list when the memo changed (see the module's doc).
    #[inline]
    fn check(&mut self, generation: u64) -> bool {
        if generation != self.generation {
            self.by_bytes.clear();
            self.bytes = 0;
            self.by_prefix.clear();
            self.prefix_bytes = 0;
            self.generation = generation;
            return false;
        }
        true
    }

    /// The end (`list_end(bytes, at)`) and handle of the list of `key`
    /// whose items start at `bytes[at]`, if a list of the same bytes was
    /// remembered with the memo as it is (`generation`, see the module's
    /// doc).
    #[inline]
    pub(super) fn find(
        &mut self,
        generation: u64,
        key: usize,
        bytes: &[u8],
        at: usize,
    ) -> Option<(usize, u32)> {
        if !self.check(generation) {
            return None;
        }
        self.find_by_prefix(key, bytes, at).or_else(|| {
            let end = list_end(bytes, at)?;
            let handle = self.by_bytes.get(key)?.get(&bytes[at..end])?;
            Some((end, *handle))
        })
    }

    /// [`HandleLists::find`] among the lists grouped by their first bytes:
    /// a remembered list's bytes found at `at` and `list_end` stopping
    /// after them there is `list_end` stopping there from `at`, as it reads
    /// the same bytes the same way.
    #[inline]
    fn find_by_prefix(&self, key: usize, bytes: &[u8], at: usize) -> Option<(usize, u32)> {
        let prefix: &[u8; PREFIX] = bytes.get(at..at + PREFIX)?.try_into().ok()?;
        let group = self.by_prefix.get(key)?.get(prefix)?;
        group.iter().find_map(|known| {
            let end = at + known.bytes.len();
            let here = bytes.get(at..end)?;
            // The last word first (lists of one group mostly differ
            // there), then the bytes after the group's.
            (last_word(here) == last_word(&known.bytes)
                && here.get(PREFIX..) == known.bytes.get(PREFIX..)
                && list_end(bytes, end) == Some(end))
            .then_some((end, known.handle))
        })
    }

    /// Remembers the visitor's `handle` for the list of `key` whose bytes
    /// are `bytes[start..end]` (every reference in it a handle, `end` being
    /// `list_end(bytes, start)`), with the memo at `generation`.
    pub(super) fn insert(
        &mut self,
        generation: u64,
        key: usize,
        bytes: &[u8],
        (start, end): (usize, usize),
        handle: u32,
    ) {
        self.check(generation);
        let Some(list) = bytes.get(start..end) else {
            return;
        };
        if key >= MAX_RECORD_KEYS || self.bytes + list.len() > MAX_BYTES {
            return;
        }
        if self.by_bytes.len() <= key {
            self.by_bytes.resize_with(key + 1, FxHashMap::default);
        }
        if self.by_bytes[key].insert(list.into(), handle).is_none() {
            self.bytes += list.len();
        }
        // Grouped as well, where the group's bytes are buffered.
        let Some(Ok(prefix)) = bytes
            .get(start..start + PREFIX)
            .map(<[u8; PREFIX]>::try_from)
        else {
            return;
        };
        if self.prefix_bytes + list.len() + PREFIX > MAX_BYTES {
            return;
        }
        if self.by_prefix.len() <= key {
            self.by_prefix.resize_with(key + 1, FxHashMap::default);
        }
        let group = self.by_prefix[key].entry(prefix).or_default();
        match group.iter_mut().find(|known| *known.bytes == *list) {
            Some(known) => known.handle = handle,
            None => {
                group.push(Known {
                    bytes: list.into(),
                    handle,
                });
                self.prefix_bytes += list.len() + PREFIX;
            }
        }
    }
}

/// The last eight bytes, as one comparison.
#[inline]
fn last_word(bytes: &[u8]) -> Option<u64> {
    let word = bytes.get(bytes.len().checked_sub(8)?..)?;
    Some(u64::from_le_bytes(word.try_into().ok()?))
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
