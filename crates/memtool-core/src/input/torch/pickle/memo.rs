//! The pickle memo: values a pickle refers back to, with four-byte slots.

use std::cell::Cell;
use std::collections::HashMap;

use super::Value;

/// The largest handle the memo keeps in place of a value (see
/// [`Memo::convert`]); a larger one leaves the value in the memo.
pub(crate) const MAX_HANDLE: u32 = (1 << 30) - 1;

/// The memo, which a visitor may rewrite (see [`Value::Handle`]). MEMOIZE
/// numbers entries densely, so they live in a vector; ids a BINPUT places
/// past its end go to a map, so a large id never sizes an allocation.
///
/// Pickle memoizes every container, most of them never referenced again, so
/// a slot is four bytes ([`Packed`]): values live in `values` (slots freed
/// when the visitor forgets or converts them are reused), handles and
/// forgotten entries take no more than the slot.
#[derive(Default)]
pub(crate) struct Memo {
    pub(super) dense: Vec<Packed>,
    pub(super) sparse: HashMap<u32, Packed>,
    pub(super) values: Vec<Value>,
    /// Parallel to `values`: which of the visitor's record keys each value
    /// is ([`KEY_UNKNOWN`] until the records fast path first asks), so a
    /// key a trace entry refers back to is told by one load, not by
    /// comparing its text.
    pub(super) key_codes: Vec<Cell<u8>>,
    free_values: Vec<u32>,
    /// How many times a slot holding a handle was given something else:
    /// what a list of references to handles means (see `HandleLists`)
    /// holds while this count is unchanged.
    pub(super) handles_replaced: u64,
}

/// A value's record key code not worked out yet (see `Memo::key_codes`).
pub(super) const KEY_UNKNOWN: u8 = 0;
/// A value that is none of the visitor's record keys.
pub(super) const KEY_OTHER: u8 = 1;
/// A container: a memo reference to one inside a record is refused.
pub(super) const KEY_CONTAINER: u8 = 2;
/// The code of the visitor's first record key; key `k` is `KEY_FIRST + k`.
pub(super) const KEY_FIRST: u8 = 3;

#[derive(Clone, Copy)]
pub(super) enum MemoSlot {
    /// Index into `Memo::values`.
    Value(u32),
    Handle(u32),
    /// An entry the visitor consumed: it still counts for MEMOIZE
    /// numbering, but a reference to it is an error.
    Forgotten,
}

/// A [`MemoSlot`] in 32 bits: the top two bits say which, the rest is the
/// value index or handle (both at most [`MAX_HANDLE`]).
#[derive(Clone, Copy)]
pub(super) struct Packed(pub(super) u32);

pub(super) const PACKED_HANDLE: u32 = 1 << 30;
pub(super) const PACKED_FORGOTTEN: u32 = u32::MAX;

impl Packed {
    pub(super) fn new(slot: MemoSlot) -> Packed {
        Packed(match slot {
            MemoSlot::Value(i) => i,
            MemoSlot::Handle(h) => h | PACKED_HANDLE,
            MemoSlot::Forgotten => PACKED_FORGOTTEN,
        })
    }

    pub(super) fn slot(self) -> MemoSlot {
        match self.0 {
            PACKED_FORGOTTEN => MemoSlot::Forgotten,
            x if x & PACKED_HANDLE != 0 => MemoSlot::Handle(x & MAX_HANDLE),
            x => MemoSlot::Value(x),
        }
    }
}

impl Memo {
    fn slot_mut(&mut self, id: u32) -> Option<&mut Packed> {
        match self.dense.get_mut(id as usize) {
            Some(slot) => Some(slot),
            None => self.sparse.get_mut(&id),
        }
    }

    #[inline]
    pub(super) fn get(&self, id: u32) -> Option<MemoSlot> {
        match self.dense.get(id as usize) {
            Some(slot) => Some(slot.slot()),
            None => self.sparse.get(&id).map(|p| p.slot()),
        }
    }

    /// Distinct ids stored, as Python's `len(memo)`.
    pub(super) fn len(&self) -> usize {
        self.dense.len() + self.sparse.len()
    }

    fn release(&mut self, slot: Packed) {
        match slot.slot() {
            MemoSlot::Value(i) => {
                self.values[i as usize] = Value::None;
                self.free_values.push(i);
            }
            MemoSlot::Handle(_) => self.handles_replaced += 1,
            MemoSlot::Forgotten => {}
        }
    }

    pub(super) fn set(&mut self, id: u32, new: MemoSlot) {
        if let Some(slot) = self.slot_mut(id) {
            let old = std::mem::replace(slot, Packed::new(new));
            self.release(old);
        }
    }

    /// Records that the visitor converted `value` to `handle`: later memo
    /// references to it get [`Value::Handle`] (when `handle` is at most
    /// [`MAX_HANDLE`]), and copies already taken answer [`Value::handle`].
    pub(crate) fn convert(&mut self, value: &Value, handle: u32) {
        match value {
            Value::List(c) => c.handle.set(Some(handle)),
            Value::Dict(c) => c.handle.set(Some(handle)),
            _ => return,
        }
        if let Some(id) = value.memo_id() {
            if handle <= MAX_HANDLE && matches!(self.get(id), Some(MemoSlot::Value(_))) {
                self.set(id, MemoSlot::Handle(handle));
            }
        }
    }

    /// Forgets a memo slot: a reference to it later is an error.
    pub(crate) fn forget(&mut self, id: u32) {
        self.set(id, MemoSlot::Forgotten);
    }

    /// Whether the slot was forgotten (its value consumed by the visitor).
    pub(crate) fn is_forgotten(&self, id: u32) -> bool {
        matches!(self.get(id), Some(MemoSlot::Forgotten))
    }

    /// Stores `value` at `id`; `None` when the memo holds as many values as
    /// a slot can number.
    pub(super) fn put(&mut self, id: u32, value: Value) -> Option<()> {
        let slot = match value {
            Value::Handle(h) if h <= MAX_HANDLE => MemoSlot::Handle(h),
            value => {
                match &value {
                    Value::List(c) => c.memo_id.set(Some(id)),
                    Value::Dict(c) => c.memo_id.set(Some(id)),
                    _ => {}
                }
                let index = match self.free_values.pop() {
                    Some(i) => {
                        self.values[i as usize] = value;
                        self.key_codes[i as usize].set(KEY_UNKNOWN);
                        i
                    }
                    None if self.values.len() <= MAX_HANDLE as usize => {
                        self.values.push(value);
                        self.key_codes.push(Cell::new(KEY_UNKNOWN));
                        (self.values.len() - 1) as u32
                    }
                    None => return None,
                };
                MemoSlot::Value(index)
            }
        };
        let slot = Packed::new(slot);
        if let Some(existing) = self.slot_mut(id) {
            let old = std::mem::replace(existing, slot);
            self.release(old);
        } else if id as usize == self.dense.len() && self.sparse.is_empty() {
            self.dense.push(slot);
        } else {
            self.sparse.insert(id, slot);
        }
        Some(())
    }
}
