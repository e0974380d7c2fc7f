//! The records fast path: trace entries and lists of memo references in the
//! layout CPython's pickler gives them, read straight from the buffered
//! bytes; anything else is left to the opcode loop.

use super::handle_lists::{list_end, HandleLists};
use super::interpreter::{Machine, Slot};
use super::memo::{
    Memo, MemoSlot, Packed, KEY_CONTAINER, KEY_FIRST, KEY_OTHER, KEY_UNKNOWN, MAX_HANDLE,
    PACKED_FORGOTTEN, PACKED_HANDLE,
};
use super::value::{str_value, Container, Value};
use super::visitor::MAX_RECORD_KEYS;
use super::{record_key, Result, Visitor};
use std::rc::Rc;

/// Bytes [`Machine::record`] makes sure are buffered before it gives up on a
/// record cut by the buffer's end (records are far shorter).
const REFILL_AHEAD: usize = 1 << 16;

impl<V: Visitor> Machine<'_, '_, V> {
    /// A shortcut for the commonest shape of a large snapshot, a list of
    /// memo references to converted values (frames already interned):
    /// `MARK (BINGET | LONG_BINGET)* APPENDS` onto a plain list just below the
    /// MARK. When every reference in the buffered bytes is a handle, the
    /// items go straight into the list and the opcodes are taken; otherwise
    /// nothing is taken and the ordinary loop runs them, with the same result.
    pub(super) fn append_handles(&mut self) {
        let Some(Slot::Value(Value::List(list))) =
            self.stack.len().checked_sub(2).map(|i| &self.stack[i])
        else {
            return;
        };
        if list.route.is_some() || list.sealed.get() {
            return;
        }
        let bytes = self.input.buffered();
        // Two passes: check every reference first, so a run that cannot take
        // the shortcut leaves nothing half done.
        let mut at = 0;
        let mut n = 0;
        while let Some((id, len)) = memo_ref(bytes, at) {
            if !matches!(self.memo.get(id), Some(MemoSlot::Handle(_))) {
                return;
            }
            at += len;
            n += 1;
        }
        if bytes.get(at) != Some(&b'e') {
            return;
        }
        let mut items = list.items.borrow_mut();
        items.reserve(n);
        let mut next = 0;
        while let Some((id, len)) = memo_ref(bytes, next) {
            if let Some(MemoSlot::Handle(h)) = self.memo.get(id) {
                items.push(Value::Handle(h));
            }
            next += len;
        }
        drop(items);
        list.appended.set(list.appended.get().saturating_add(n));
        self.input.pos += at + 1;
        self.marks.pop();
        self.stack.pop();
    }

    /// A shortcut for the commonest shape of a large snapshot, a trace
    /// entry: a dict appended to a list the visitor takes records from (see
    /// [`Visitor::records`]), as CPython's pickler writes it, `EMPTY_DICT`
    /// just taken, then `MEMOIZE MARK (key value)* SETITEMS`, keys and values
    /// being scalars, strings (memoized or not), memo references to values
    /// that are not containers, and lists of memo references to handles.
    /// When the whole dict is in the buffered bytes in that shape, and no
    /// earlier item of the list waits on the stack, the values of the keys
    /// the visitor reads go straight to it ([`Visitor::record`]), with the
    /// memo and the list changed as the ordinary
    /// loop would (the dict's memo slot forgotten, as the visitor's `item`
    /// does). Otherwise nothing is taken or changed, and the ordinary loop
    /// runs the opcodes.
    pub(super) fn record(&mut self) -> Result<bool> {
        let len = self.stack.len();
        let Some(&at) = self.claimed.last() else {
            return Ok(false);
        };
        if at + 2 != len || self.marks.last() != Some(&(at + 1)) {
            return Ok(false);
        }
        let Some(Slot::Value(Value::List(list))) = self.stack.get(at) else {
            return Ok(false);
        };
        let Some(route) = list.route else {
            return Ok(false);
        };
        let bytes = self.input.buffered();
        if list.sealed.get()
            || !self.memo.sparse.is_empty()
            || self.memo.values.len() + bytes.len() >= MAX_HANDLE as usize
            || V::RECORD_KEYS.len() > MAX_RECORD_KEYS
            || !self.visitor.records(route)
        {
            return Ok(false);
        }
        let list = list.clone();
        // The scratch vectors borrowed in place, beside the input, memo and
        // visitor: taken out of `self` and put back per record, the empty
        // ones left behind went through the drop glue (~70 instructions a
        // trace entry).
        let Machine {
            input,
            memo,
            visitor,
            handle_lists,
            record_fields: fields,
            record_memo: memoized,
            record_items: scratch,
            ..
        } = self;
        // Left empty by the record before (below): sized once, not emptied
        // and refilled per record.
        if fields.len() != V::RECORD_KEYS.len() {
            fields.clear();
            fields.resize_with(V::RECORD_KEYS.len(), || None);
        }
        // The dict's own memo id; the values memoized in it follow.
        let id = memo.dense.len() as u32;
        let mut refilled = false;
        let taken = loop {
            let taken = scan_record(
                input.buffered(),
                memo,
                &mut **visitor,
                handle_lists,
                route,
                id,
                fields,
                memoized,
                scratch,
            );
            if taken.is_some() || refilled || input.buffered().len() >= REFILL_AHEAD {
                break taken;
            }
            // Perhaps cut by the buffer's end: once more with more bytes.
            let buffered = input.buffered().len();
            let ahead = input.len.saturating_sub(input.offset());
            if ahead as usize <= buffered || input.refill(ahead.min(REFILL_AHEAD as u64)).is_err() {
                break taken;
            }
            refilled = true;
            fields.iter_mut().for_each(|f| *f = None);
            memoized.clear();
            scratch.clear();
        };
        // The visitor's refusal, made an error once the borrows above end.
        let result = match taken {
            None => Ok(false),
            Some((taken, nested)) => {
                input.pos += taken;
                memo.dense.push(Packed::new(MemoSlot::Forgotten));
                for (i, v) in memoized.drain(..).enumerate() {
                    // Cannot fail: the memo has room for every byte scanned.
                    let _ = memo.put(id + 1 + i as u32, v);
                }
                let depth = if nested { 3 } else { 2 };
                if depth > list.depth.get() {
                    list.depth.set(depth);
                }
                list.appended.set(list.appended.get().saturating_add(1));
                visitor.record(route, fields, memo).map(|()| true)
            }
        };
        // Emptied for the next record; `memoized` was drained or never
        // filled, `scratch` is cleared where it is filled.
        for field in fields.iter_mut() {
            match field {
                // Nothing to release: taken and forgotten, not passed to the
                // drop glue (a call per field, most of them integers).
                None => {}
                Some(
                    Value::None
                    | Value::Bool(_)
                    | Value::Int(_)
                    | Value::BigInt(_)
                    | Value::Float(_)
                    | Value::Handle(_),
                ) => std::mem::forget(field.take()),
                Some(_) => *field = None,
            }
        }
        memoized.clear();
        result.or_else(|message| self.err(message))
    }

    /// A record the ordinary loop completes where the fast path would have
    /// taken it (a dict whose SETITEMS leaves it alone above the MARK of a
    /// list the visitor takes records from) is handed over at once, as
    /// [`Machine::record`] does, not at the list's APPENDS: a later
    /// reference to it, in its batch or inside a later record, is then
    /// refused alike on both paths, and the stack never holds the batch.
    pub(super) fn record_completed(&mut self) -> Result<()> {
        let Some(at) = self.stack.len().checked_sub(3) else {
            return Ok(());
        };
        if self.marks.last() != Some(&(at + 1))
            || !matches!(self.stack.get(at + 2), Some(Slot::Value(Value::Dict(_))))
        {
            return Ok(());
        }
        let Some(Slot::Value(Value::List(list))) = self.stack.get(at) else {
            return Ok(());
        };
        let Some(route) = list.route else {
            return Ok(());
        };
        if list.sealed.get() || !self.visitor.records(route) {
            return Ok(());
        }
        let list = list.clone();
        let Some(Slot::Value(record)) = self.stack.pop() else {
            return Ok(());
        };
        self.append_items(&list, std::iter::once(record))
    }
}

/// [`Scan::record`] over `bytes` (the buffered ones), `visitor` offered
/// the record's lists; `None` when the memo could not number every value
/// the bytes might memoize.
#[allow(clippy::too_many_arguments)]
fn scan_record<V: Visitor>(
    bytes: &[u8],
    memo: &Memo,
    visitor: &mut V,
    lists: &mut HandleLists,
    route: u32,
    id: u32,
    fields: &mut [Option<Value>],
    memoized: &mut Vec<Value>,
    scratch: &mut Vec<u32>,
) -> Option<(usize, bool)> {
    if memo.values.len() + bytes.len() >= MAX_HANDLE as usize {
        return None;
    }
    let mut as_handle =
        |key: Option<usize>, handles: &[u32]| visitor.record_list(route, key, handles);
    let mut record = Scan {
        bytes,
        memo,
        id,
        keys: V::RECORD_KEYS,
        memoized,
        scratch,
        lists,
    };
    record.record(fields, &mut as_handle)
}

/// A record's bytes being read (see [`Machine::record`]): the memo as it
/// was before the record, the dict's memo id `id`, and the values the
/// record memoizes (ids `id + 1` on).
struct Scan<'a> {
    bytes: &'a [u8],
    memo: &'a Memo,
    id: u32,
    keys: &'static [&'static str],
    memoized: &'a mut Vec<Value>,
    /// The items of a list being read.
    scratch: &'a mut Vec<u32>,
    /// Lists of handles met before, by their bytes.
    lists: &'a mut HandleLists,
}

/// The visitor's [`Visitor::record_list`] for a list of handles under a
/// key (the key's index in its `RECORD_KEYS`).
type AsHandle<'a> = dyn FnMut(Option<usize>, &[u32]) -> Option<u32> + 'a;

/// What a memo reference inside a record refers to.
enum Referred<'a> {
    Handle(u32),
    Value(&'a Value),
}

impl Scan<'_> {
    /// Reads a record's `MEMOIZE MARK (key value)* SETITEMS` (see
    /// [`Machine::record`]), the value of the visitor's `k`-th key into
    /// `fields[k]`, and the values it memoizes into `memoized`. Returns
    /// the bytes taken and whether a value is a list, or `None` when the
    /// bytes are not in that shape (or end first).
    fn record(
        &mut self,
        fields: &mut [Option<Value>],
        as_handle: &mut AsHandle<'_>,
    ) -> Option<(usize, bool)> {
        if self.bytes.get(..2)? != [0x94, b'('] {
            return None;
        }
        let mut at = 2;
        let mut nested = false;
        // Values of keys the visitor does not read, and keys not read
        // through the memo.
        let mut other = None;
        loop {
            skip_frames(self.bytes, &mut at);
            if *self.bytes.get(at)? == b'u' {
                return Some((at + 1, nested));
            }
            let key = self.key(&mut at, &mut other)?;
            // The first value of a key given twice, as `item` reads a dict.
            let (out, keep) = match key.and_then(|k| fields.get_mut(k)) {
                Some(field) if field.is_none() => (field, true),
                _ => (&mut other, false),
            };
            let list = self.value(&mut at, out, keep, key, as_handle)?;
            if let Some(v) = out {
                v.seal();
            }
            other = None;
            // A list taken as a handle nests as deep as the list would have.
            nested |= list;
        }
    }

    /// A key at `*at`: the index of the visitor's key it is, `None` for
    /// another. A memo reference (a key of every record after the first)
    /// is told by its value's code in the memo, worked out once; anything
    /// else is read into `other` and told by its text.
    #[inline]
    fn key(&mut self, at: &mut usize, other: &mut Option<Value>) -> Option<Option<usize>> {
        skip_frames(self.bytes, at);
        if let Some((r, len)) = memo_ref(self.bytes, *at) {
            if r < self.id && self.bytes.get(*at + len) != Some(&0x94) {
                *at += len;
                let code = match self.memo.get(r)? {
                    MemoSlot::Handle(_) => KEY_OTHER,
                    MemoSlot::Forgotten => return None,
                    MemoSlot::Value(i) => {
                        let cached = &self.memo.key_codes[i as usize];
                        if cached.get() == KEY_UNKNOWN {
                            cached.set(self.key_code(&self.memo.values[i as usize]));
                        }
                        cached.get()
                    }
                };
                return match code {
                    KEY_CONTAINER => None,
                    KEY_OTHER => Some(None),
                    code => Some(Some(usize::from(code - KEY_FIRST))),
                };
            }
        }
        // Keys are never lists.
        let mut no_lists = |_: Option<usize>, _: &[u32]| None;
        self.value(at, other, true, None, &mut no_lists)?;
        if let Some(key) = other {
            key.seal();
        }
        Some(other.as_ref().and_then(|k| record_key(self.keys, k)))
    }

    /// The code in `Memo::key_codes` of a value memoized before the record.
    fn key_code(&self, v: &Value) -> u8 {
        match v {
            Value::List(_) | Value::Dict(_) | Value::Tuple(_) => KEY_CONTAINER,
            // Cannot overflow: at most `MAX_RECORD_KEYS` keys.
            v => record_key(self.keys, v).map_or(KEY_OTHER, |k| KEY_FIRST + k as u8),
        }
    }

    /// One value at `*at`, and a MEMOIZE after it, into `out` (a memo
    /// reference only when `keep` or memoized: the reference is checked,
    /// not copied). A list of handles is offered to `as_handle` with its
    /// key. Returns whether the value is a list.
    #[inline(always)]
    fn value(
        &mut self,
        at: &mut usize,
        out: &mut Option<Value>,
        keep: bool,
        key: Option<usize>,
        as_handle: &mut AsHandle<'_>,
    ) -> Option<bool> {
        let bytes = self.bytes;
        skip_frames(bytes, at);
        let mut i = *at + 1;
        let op = *bytes.get(*at)?;
        let mut is_list = false;
        if let b'h' | b'j' = op {
            let (r, len) = memo_ref(bytes, *at)?;
            i = *at + len;
            let memoize = bytes.get(i) == Some(&0x94);
            match record_ref(self.memo, self.id, self.memoized, r)? {
                Referred::Handle(h) => *out = Some(Value::Handle(h)),
                // The values a trace entry refers back to (its action,
                // sizes met before) copied into `out` field by field:
                // `Value::clone` returns the copy through the stack, written
                // in two parts and read back in one (a failed store forward).
                Referred::Value(Value::Str(s)) if keep || memoize => {
                    *out = Some(Value::Str(Rc::clone(s)));
                }
                Referred::Value(&Value::Int(n)) if keep || memoize => *out = Some(Value::Int(n)),
                Referred::Value(v) if keep || memoize => *out = Some(v.clone()),
                Referred::Value(_) => {}
            }
        } else if let b'K' | b'M' | b'J' | 0x8a = op {
            // The integer is worked out in a register and stored into `out`
            // as tag and payload: built as a whole value first, it was
            // written to the stack in two parts and read back in one,
            // which stalls (store forwarding fails) on every integer.
            let n = match op {
                b'K' => {
                    i += 1;
                    i64::from(*bytes.get(i - 1)?)
                }
                b'M' => {
                    i += 2;
                    let b = bytes.get(i - 2..i)?;
                    i64::from(u16::from_le_bytes([b[0], b[1]]))
                }
                b'J' => {
                    i += 4;
                    let b = bytes.get(i - 4..i)?;
                    i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                }
                _ => long1(bytes, &mut i)?,
            };
            *out = Some(Value::Int(n));
        } else {
            *out = Some(match op {
                b'N' => Value::None,
                0x88 => Value::Bool(true),
                0x89 => Value::Bool(false),
                b'G' => {
                    i += 8;
                    let b: [u8; 8] = bytes.get(i - 8..i)?.try_into().ok()?;
                    Value::Float(f64::from_be_bytes(b))
                }
                0x8c => {
                    let n = usize::from(*bytes.get(i)?);
                    let raw = bytes.get(i + 1..i + 1 + n)?;
                    i += 1 + n;
                    str_value(raw)
                }
                b']' => {
                    is_list = true;
                    // The list's memo id comes before its items', and its
                    // items are memo references, which memoize nothing.
                    let memoize = bytes.get(i) == Some(&0x94);
                    if memoize {
                        i += 1;
                    }
                    // A list met before (the same bytes, the memo's
                    // handles unchanged) is the same handle: the visitor's
                    // answer depends on the handles alone.
                    let generation = self.memo.handles_replaced;
                    let known = key.and_then(|k| self.lists.find(generation, k, bytes, i));
                    if let Some((end, handle)) = known {
                        i = end;
                        if memoize {
                            self.memoized.push(Value::Handle(handle));
                        }
                        *out = Some(Value::Handle(handle));
                        if bytes.get(i) == Some(&0x94) {
                            self.memoized.push(Value::Handle(handle));
                            i += 1;
                        }
                        *at = i;
                        return Some(true);
                    }
                    let end = key.and_then(|_| list_end(bytes, i));
                    let start = i;
                    self.scratch.clear();
                    let n = scan_handles(bytes, &mut i, self.memo, self.scratch)?;
                    if let Some(handle) = as_handle(key, self.scratch) {
                        self.scratch.clear();
                        if let (Some(k), Some(end)) = (key, end) {
                            if end == i {
                                self.lists.insert(generation, k, bytes, (start, i), handle);
                            }
                        }
                        if memoize {
                            self.memoized.push(Value::Handle(handle));
                        }
                        Value::Handle(handle)
                    } else {
                        let list = Container::new(None, Vec::new());
                        if memoize {
                            self.memoized.push(Value::List(list.clone()));
                        }
                        let mut items = list.items.borrow_mut();
                        items.reserve_exact(n);
                        // From handles, not values moved through the stack:
                        // each value written there in two parts and read
                        // back whole stalls.
                        items.extend(self.scratch.drain(..).map(Value::Handle));
                        drop(items);
                        list.appended.set(n);
                        Value::List(list)
                    }
                }
                _ => return None,
            });
        }
        if bytes.get(i) == Some(&0x94) {
            self.memoized.push(out.clone()?);
            i += 1;
        }
        *at = i;
        Some(is_list)
    }
}

/// The integer of a LONG1 whose length byte is at `*i` (1 to 8 bytes,
/// two's complement, little-endian), `*i` moved past it. Read as one word
/// where eight bytes are buffered, the bytes past its length shifted out:
/// copying a length not known in advance is a call to `memcpy`, twice an
/// entry in a snapshot (`addr`, `time_us`).
#[inline]
fn long1(bytes: &[u8], i: &mut usize) -> Option<i64> {
    let n = usize::from(*bytes.get(*i)?);
    if n == 0 || n > 8 {
        return None;
    }
    let start = *i + 1;
    let raw = bytes.get(start..start + n)?;
    let word = match bytes.get(start..start + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().ok()?),
        None => raw.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b)),
    };
    *i = start + n;
    // Sign-extended from the top byte of the `n` read.
    let shift = 64 - 8 * n as u32;
    Some(((word << shift) as i64) >> shift)
}

/// Steps over FRAME opcodes (a length hint, no-ops to the decoder), which
/// the pickler puts before any value.
#[inline]
fn skip_frames(bytes: &[u8], at: &mut usize) {
    while bytes.get(*at) == Some(&0x95) && bytes.len() >= *at + 9 {
        *at += 9;
    }
}

/// The items of the list just read in a record (see [`Scan::value`]): runs
/// of `MARK (BINGET | LONG_BINGET)* APPENDS` and `(BINGET | LONG_BINGET)
/// APPEND` whose references are all handles, pushed to `out`. Returns how
/// many.
#[inline]
fn scan_handles(bytes: &[u8], at: &mut usize, memo: &Memo, out: &mut Vec<u32>) -> Option<usize> {
    let mut i = *at;
    let before = out.len();
    // Handles only: the memo has no sparse entries here (see Machine::record).
    let handle = |r: u32| {
        let p = memo.dense.get(r as usize)?.0;
        (p & PACKED_HANDLE != 0 && p != PACKED_FORGOTTEN).then_some(p & MAX_HANDLE)
    };
    loop {
        skip_frames(bytes, &mut i);
        match bytes.get(i) {
            Some(b'(') => {
                i += 1;
                // Each reference matched whole: one bounds check, not one
                // per byte.
                loop {
                    let r = match *bytes.get(i..)? {
                        [b'h', r, ..] => {
                            i += 2;
                            u32::from(r)
                        }
                        [b'j', a, b, c, d, ..] => {
                            i += 5;
                            u32::from_le_bytes([a, b, c, d])
                        }
                        [b'e', ..] => {
                            i += 1;
                            break;
                        }
                        [0x95, ..] => {
                            let before = i;
                            skip_frames(bytes, &mut i);
                            if i == before {
                                return None;
                            }
                            continue;
                        }
                        _ => return None,
                    };
                    out.push(handle(r)?);
                }
            }
            Some(b'h' | b'j') => {
                let (r, len) = memo_ref(bytes, i)?;
                if bytes.get(i + len) != Some(&b'a') {
                    break;
                }
                out.push(handle(r)?);
                i += len + 1;
            }
            _ => break,
        }
    }
    *at = i;
    Some(out.len() - before)
}

/// A memo reference inside a record: not to a container (nor the record).
#[inline(always)]
fn record_ref<'a>(memo: &'a Memo, id: u32, memoized: &'a [Value], r: u32) -> Option<Referred<'a>> {
    let v = match r.checked_sub(id) {
        Some(0) => return None,
        Some(n) => memoized.get(n as usize - 1)?,
        None => match memo.get(r)? {
            MemoSlot::Handle(h) => return Some(Referred::Handle(h)),
            MemoSlot::Value(i) => &memo.values[i as usize],
            MemoSlot::Forgotten => return None,
        },
    };
    match v {
        Value::List(_) | Value::Dict(_) | Value::Tuple(_) => None,
        v => Some(Referred::Value(v)),
    }
}

/// The memo id and opcode length of a BINGET or LONG_BINGET at `at`.
#[inline]
fn memo_ref(bytes: &[u8], at: usize) -> Option<(u32, usize)> {
    match bytes.get(at)? {
        b'h' => Some((u32::from(*bytes.get(at + 1)?), 2)),
        b'j' => {
            let id = bytes.get(at + 1..at + 5)?;
            Some((u32::from_le_bytes([id[0], id[1], id[2], id[3]]), 5))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::long1;

    /// Python's `pickle.encode_long`: the shortest two's complement, little-endian.
    fn encoded(n: i64) -> Vec<u8> {
        let all = n.to_le_bytes();
        let mut len = 8;
        while len > 1 {
            let top = all[len - 1];
            let below = all[len - 2];
            let redundant = (top == 0 && below & 0x80 == 0) || (top == 0xff && below & 0x80 != 0);
            if !redundant {
                break;
            }
            len -= 1;
        }
        let mut out = vec![len as u8];
        out.extend_from_slice(&all[..len]);
        out
    }

    #[test]
    fn long1_reads_every_length_at_the_end_of_the_bytes_and_before_more() {
        let values = [
            0,
            1,
            -1,
            127,
            128,
            -128,
            -129,
            255,
            3072,
            -40_000,
            127_077_330_068_480,
            1_773_270_054_278_746,
            i64::MAX,
            i64::MIN,
        ];
        for n in values {
            let bytes = encoded(n);
            let mut i = 0;
            assert_eq!(long1(&bytes, &mut i), Some(n), "{n} alone");
            assert_eq!(i, bytes.len());
            // Followed by other bytes, which must not leak into the value.
            let mut padded = bytes.clone();
            padded.extend_from_slice(&[0xff; 9]);
            let mut i = 0;
            assert_eq!(long1(&padded, &mut i), Some(n), "{n} before 0xff bytes");
            assert_eq!(i, bytes.len());
        }
    }

    #[test]
    fn long1_refuses_lengths_past_eight_bytes_and_cut_values() {
        let mut i = 0;
        assert_eq!(long1(&[0], &mut i), None);
        assert_eq!(long1(&[9, 1, 2, 3, 4, 5, 6, 7, 8, 9], &mut i), None);
        assert_eq!(long1(&[4, 1, 2, 3], &mut i), None);
        assert_eq!(long1(&[], &mut i), None);
        assert_eq!(i, 0);
    }
}
