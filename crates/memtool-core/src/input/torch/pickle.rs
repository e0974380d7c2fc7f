//! A small, safe pickle decoder for plain data (protocols 2 to 5).
//!
//! It knows nothing of PyTorch: it builds containers of plain values and lets
//! a [`Visitor`] claim lists by where they sit ("the `segments` list of the
//! top-level dict"). Items appended to a claimed list are handed to the
//! visitor as soon as they are complete and are then dropped, so a snapshot
//! never exists as one value tree; the visitor may also replace a memoized
//! container by a [`Value::Handle`] of its own (an interned stack), so data
//! the pickle shares through its memo is converted once and stays shared.
//!
//! The pickle is pulled from a [`ByteSource`] through a buffer, so memory
//! follows what the visitor keeps, not the file size.
//!
//! Nothing is ever executed: every opcode that would import, call or build an
//! object is refused. Lengths are checked against the bytes present before
//! anything is read, memo references must exist, containers cannot be changed
//! once they are inside another (so no cycles), and nesting is bounded.

use std::cell::{Cell, Ref, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use crate::input::source::ByteSource;

/// Containers nested deeper than this are refused; a PyTorch snapshot needs 6.
pub const MAX_DEPTH: u32 = 64;

/// Bytes read from the source at a time; an opcode whose argument is longer
/// (a huge string) grows the buffer to fit it, once its length is known to be
/// really there.
const CHUNK: usize = 1 << 20;

/// Bytes [`Machine::record`] makes sure are buffered before it gives up on a
/// record cut by the buffer's end (records are far shorter).
const REFILL_AHEAD: usize = 1 << 16;

/// Why a pickle could not be decoded, with the byte offset of the opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickleError {
    pub offset: u64,
    pub message: String,
}

type Result<T> = std::result::Result<T, PickleError>;

/// A list or dict under construction. `sealed` is set once the container is
/// placed inside another one; pickles of plain data never change it after that.
#[derive(Debug)]
pub struct Container<T> {
    pub items: RefCell<Vec<T>>,
    /// The visitor's tag for this container, when it claimed it.
    pub route: Option<u32>,
    /// The memo slot holding this container, if it was memoized.
    pub memo_id: Cell<Option<u32>>,
    /// What the visitor converted this container to (see [`Memo::convert`]):
    /// copies of it taken from the memo before the conversion find it here.
    handle: Cell<Option<u32>>,
    /// Items appended so far, including those the visitor consumed.
    appended: Cell<usize>,
    depth: Cell<u32>,
    sealed: Cell<bool>,
}

impl<T> Container<T> {
    fn new(route: Option<u32>, items: Vec<T>) -> Rc<Self> {
        Rc::new(Container {
            items: RefCell::new(items),
            route,
            memo_id: Cell::new(None),
            handle: Cell::new(None),
            appended: Cell::new(0),
            depth: Cell::new(1),
            sealed: Cell::new(false),
        })
    }
}

/// A decoded value.
// Every payload at offset 8, so moving a value is two aligned words (with
// the default layout a `bool` at offset 1 makes each move a misaligned
// copy that stalls store forwarding).
#[derive(Clone, Debug)]
#[repr(C, u8)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer too large for `i64`, approximated.
    BigInt(f64),
    Float(f64),
    // Boxed behind the `Rc` (thin pointers) so a value is 16 bytes: values
    // are moved on and off the stack a hundred million times.
    Str(Rc<Box<str>>),
    Bytes(Rc<Box<[u8]>>),
    List(Rc<Container<Value>>),
    Dict(Rc<Container<(Value, Value)>>),
    Tuple(Rc<Tuple>),
    /// What the visitor put in place of a memoized value it converted.
    Handle(u32),
}

/// A tuple's items, and its nesting depth (computed once: tuples are immutable).
#[derive(Debug)]
pub struct Tuple {
    items: Box<[Value]>,
    depth: u32,
}

/// The items of a list or tuple, borrowed.
pub enum Items<'a> {
    List(Ref<'a, Vec<Value>>),
    Tuple(&'a [Value]),
}

impl std::ops::Deref for Items<'_> {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        match self {
            Items::List(l) => l,
            Items::Tuple(t) => t,
        }
    }
}

const _: () = assert!(std::mem::size_of::<Value>() == 16);
const _: () = assert!(std::mem::size_of::<Slot>() == 16);

impl Value {
    fn depth(&self) -> u32 {
        match self {
            Value::List(c) => c.depth.get(),
            Value::Dict(c) => c.depth.get(),
            Value::Tuple(t) => t.depth,
            _ => 0,
        }
    }

    fn seal(&self) {
        match self {
            Value::List(c) => c.sealed.set(true),
            Value::Dict(c) => c.sealed.set(true),
            _ => {}
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an integer: ints and bools.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The value of `key` in a dict with string keys.
    pub fn get(&self, key: &str) -> Option<Value> {
        let Value::Dict(d) = self else { return None };
        let items = d.items.borrow();
        items
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    }

    /// The key-value pairs of a dict, borrowed.
    pub fn pairs(&self) -> Option<Ref<'_, Vec<(Value, Value)>>> {
        match self {
            Value::Dict(d) => Some(d.items.borrow()),
            _ => None,
        }
    }

    /// The items of a list or tuple, borrowed.
    pub fn seq(&self) -> Option<Items<'_>> {
        match self {
            Value::List(l) => Some(Items::List(l.items.borrow())),
            Value::Tuple(t) => Some(Items::Tuple(&t.items)),
            _ => None,
        }
    }

    /// The items of a list or tuple, cloned (cheap: values are reference counted).
    pub fn items(&self) -> Option<Vec<Value>> {
        self.seq().map(|items| items.to_vec())
    }

    /// The memo slot of a memoized list or dict.
    pub fn memo_id(&self) -> Option<u32> {
        match self {
            Value::List(c) => c.memo_id.get(),
            Value::Dict(c) => c.memo_id.get(),
            _ => None,
        }
    }

    /// The visitor's handle for this value: a [`Value::Handle`], or a list or
    /// dict it converted earlier.
    pub fn handle(&self) -> Option<u32> {
        match self {
            Value::Handle(h) => Some(*h),
            Value::List(c) => c.handle.get(),
            Value::Dict(c) => c.handle.get(),
            _ => None,
        }
    }
}

/// Where a new container sits, for [`Visitor::route`].
#[derive(Clone, Copy, Debug)]
pub enum Parent<'a> {
    /// The first value of the pickle (nothing below it on the stack).
    Root,
    /// The value of `key` in a dict the visitor claimed with `route`.
    DictKey { route: u32, key: &'a str },
    /// Item `index` of a list the visitor claimed with `route`.
    ListItem { route: u32, index: usize },
}

/// The largest handle the memo keeps in place of a value (see
/// [`Memo::convert`]); a larger one leaves the value in the memo.
pub const MAX_HANDLE: u32 = (1 << 30) - 1;

/// The memo, which a visitor may rewrite (see [`Value::Handle`]). MEMOIZE
/// numbers entries densely, so they live in a vector; ids a BINPUT places
/// past its end go to a map, so a large id never sizes an allocation.
///
/// Pickle memoizes every container, most of them never referenced again, so
/// a slot is four bytes ([`Packed`]): values live in `values` (slots freed
/// when the visitor forgets or converts them are reused), handles and
/// forgotten entries take no more than the slot.
#[derive(Default)]
pub struct Memo {
    dense: Vec<Packed>,
    sparse: HashMap<u32, Packed>,
    values: Vec<Value>,
    free_values: Vec<u32>,
}

#[derive(Clone, Copy)]
enum MemoSlot {
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
struct Packed(u32);

const PACKED_HANDLE: u32 = 1 << 30;
const PACKED_FORGOTTEN: u32 = u32::MAX;

impl Packed {
    fn new(slot: MemoSlot) -> Packed {
        Packed(match slot {
            MemoSlot::Value(i) => i,
            MemoSlot::Handle(h) => h | PACKED_HANDLE,
            MemoSlot::Forgotten => PACKED_FORGOTTEN,
        })
    }

    fn slot(self) -> MemoSlot {
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
    fn get(&self, id: u32) -> Option<MemoSlot> {
        match self.dense.get(id as usize) {
            Some(slot) => Some(slot.slot()),
            None => self.sparse.get(&id).map(|p| p.slot()),
        }
    }

    /// Distinct ids stored, as Python's `len(memo)`.
    fn len(&self) -> usize {
        self.dense.len() + self.sparse.len()
    }

    fn release(&mut self, slot: Packed) {
        if let MemoSlot::Value(i) = slot.slot() {
            self.values[i as usize] = Value::None;
            self.free_values.push(i);
        }
    }

    fn set(&mut self, id: u32, new: MemoSlot) {
        if let Some(slot) = self.slot_mut(id) {
            let old = std::mem::replace(slot, Packed::new(new));
            self.release(old);
        }
    }

    /// Records that the visitor converted `value` to `handle`: later memo
    /// references to it get [`Value::Handle`] (when `handle` is at most
    /// [`MAX_HANDLE`]), and copies already taken answer [`Value::handle`].
    pub fn convert(&mut self, value: &Value, handle: u32) {
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
    pub fn forget(&mut self, id: u32) {
        self.set(id, MemoSlot::Forgotten);
    }

    /// Stores `value` at `id`; `None` when the memo holds as many values as
    /// a slot can number.
    fn put(&mut self, id: u32, value: Value) -> Option<()> {
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
                        i
                    }
                    None if self.values.len() <= MAX_HANDLE as usize => {
                        self.values.push(value);
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

/// Claims containers and consumes the items of claimed lists.
pub trait Visitor {
    /// A tag for a new list or dict at `parent`, or `None` to build it as
    /// plain data. Only claimed containers report their children.
    fn route(&mut self, parent: Parent<'_>, is_list: bool) -> Option<u32>;

    /// A complete item appended to a list claimed with `route`. Return `true`
    /// to consume it (it is not stored in the list).
    fn item(
        &mut self,
        route: u32,
        item: &Value,
        memo: &mut Memo,
    ) -> std::result::Result<bool, String>;

    /// Whether the dicts appended to the list claimed with `route` are
    /// records: `item` consumes every one of them, and `route` claims
    /// nothing inside them. The decoder may then hand a record's key-value
    /// pairs to [`Visitor::record`] as soon as they are read, building no
    /// dict, in place of handing the dict to `item`.
    fn records(&self, route: u32) -> bool {
        let _ = route;
        false
    }

    /// A list inside a record (see [`Visitor::records`]) under `key`, all
    /// of whose items are handles, as one handle of the visitor's: the list
    /// is then never built, the record's pairs hold [`Value::Handle`] in its
    /// place, and memo references to it get the handle, as if the visitor
    /// had converted it ([`Memo::convert`]). `None` builds the list. The
    /// same list may be asked about more than once.
    fn record_list(&mut self, route: u32, key: &Value, handles: &[u32]) -> Option<u32> {
        let _ = (route, key, handles);
        None
    }

    /// The pairs of a record (see [`Visitor::records`]), as `item` would
    /// have found them in the dict: keys and values alternating.
    fn record(
        &mut self,
        route: u32,
        pairs: &[Value],
        memo: &mut Memo,
    ) -> std::result::Result<(), String> {
        let _ = (route, pairs, memo);
        Ok(())
    }
}

/// A visitor that claims nothing: the pickle is decoded into one value.
pub struct PlainData;

impl Visitor for PlainData {
    fn route(&mut self, _: Parent<'_>, _: bool) -> Option<u32> {
        None
    }
    fn item(&mut self, _: u32, _: &Value, _: &mut Memo) -> std::result::Result<bool, String> {
        Ok(false)
    }
}

/// The pickle's bytes, pulled from the source a chunk at a time.
struct Input<'s> {
    source: &'s dyn ByteSource,
    len: u64,
    buf: Vec<u8>,
    /// Offset in the source of `buf[0]`.
    base: u64,
    pos: usize,
    end: usize,
}

/// Why [`Input::take`] failed.
enum TakeError {
    /// The opcode needs more bytes than remain.
    Short {
        remaining: u64,
    },
    Io(std::io::Error),
}

impl<'s> Input<'s> {
    fn new(source: &'s dyn ByteSource) -> Input<'s> {
        Input {
            source,
            len: source.len(),
            buf: Vec::new(),
            base: 0,
            pos: 0,
            end: 0,
        }
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The next byte when it is buffered (the common case; see [`Input::take`]).
    #[inline]
    fn next_byte(&mut self) -> Option<u8> {
        let b = *self.buf[..self.end].get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// The next `N` bytes when they are buffered.
    #[inline]
    fn next_array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes: [u8; N] = self.buf[..self.end]
            .get(self.pos..self.pos + N)?
            .try_into()
            .ok()?;
        self.pos += N;
        Some(bytes)
    }

    /// The bytes read from the source but not yet taken.
    fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    fn at_end(&self) -> bool {
        self.pos == self.end && self.offset() >= self.len
    }

    #[inline]
    fn take(&mut self, n: u64) -> std::result::Result<&[u8], TakeError> {
        if n <= (self.end - self.pos) as u64 {
            let start = self.pos;
            self.pos += n as usize;
            return Ok(&self.buf[start..self.pos]);
        }
        self.refill(n)?;
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    /// Makes at least `n` bytes available at `pos`, after checking they are
    /// really in the source (so `n` never sizes an allocation by itself).
    #[cold]
    fn refill(&mut self, n: u64) -> std::result::Result<(), TakeError> {
        let remaining = self.len.saturating_sub(self.offset());
        let n = match usize::try_from(n) {
            Ok(n) if n as u64 <= remaining => n,
            _ => return Err(TakeError::Short { remaining }),
        };
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        let want = n.max(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let unread = self.len - (self.base + self.end as u64);
        let fill = usize::try_from(unread)
            .unwrap_or(usize::MAX)
            .min(self.buf.len() - self.end);
        let at = self.base + self.end as u64;
        self.source
            .read_exact_at(at, &mut self.buf[self.end..self.end + fill])
            .map_err(TakeError::Io)?;
        self.end += fill;
        Ok(())
    }
}

enum Slot {
    Mark,
    Value(Value),
}

struct Machine<'s, 'v, V: Visitor> {
    input: Input<'s>,
    op_offset: u64,
    stack: Vec<Slot>,
    /// Stack positions of the MARKs, bottom to top.
    marks: Vec<usize>,
    /// Stack positions where claimed containers were pushed (some may be
    /// stale; [`Machine::route_new`] checks them).
    claimed: Vec<usize>,
    memo: Memo,
    visitor: &'v mut V,
    /// Scratch space for [`Machine::record`]: a record's pairs, and the
    /// values it memoizes after the dict itself.
    record_pairs: Vec<Value>,
    record_memo: Vec<Value>,
    /// The items of a list in a record, as they are read.
    record_items: Vec<u32>,
}

/// Decodes the pickle in `source` as plain data; the result is the top value
/// (claimed lists are empty in it). Bytes after STOP are ignored.
pub fn decode<V: Visitor>(source: &dyn ByteSource, visitor: &mut V) -> Result<Value> {
    let mut m = Machine {
        input: Input::new(source),
        op_offset: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        claimed: Vec::new(),
        memo: Memo::default(),
        visitor,
        record_pairs: Vec::new(),
        record_memo: Vec::new(),
        record_items: Vec::new(),
    };
    m.run()
}

/// A string argument as text (invalid UTF-8 replaced, as protocol-2 byte
/// strings may be anything).
fn str_value(raw: &[u8]) -> Value {
    Value::Str(match std::str::from_utf8(raw) {
        Ok(s) => Rc::new(s.into()),
        Err(_) => Rc::new(String::from_utf8_lossy(raw).into()),
    })
}

impl<V: Visitor> Machine<'_, '_, V> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(PickleError {
            offset: self.op_offset,
            message: message.into(),
        })
    }

    fn take_err(&self, n: u64, e: TakeError) -> PickleError {
        let message = match e {
            TakeError::Short { remaining } => {
                format!("truncated: the opcode needs {n} bytes but {remaining} remain")
            }
            TakeError::Io(e) => format!("reading the input failed: {e}"),
        };
        PickleError {
            offset: self.op_offset,
            message,
        }
    }

    /// The next `n` bytes, turned into a value by `f`.
    #[inline]
    fn take_with<T>(&mut self, n: u64, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        match self.input.take(n) {
            Ok(raw) => Ok(f(raw)),
            Err(e) => Err(self.take_err(n, e)),
        }
    }

    #[inline]
    fn u8(&mut self) -> Result<u8> {
        match self.input.next_byte() {
            Some(b) => Ok(b),
            None => self.take_with(1, |b| b[0]),
        }
    }

    #[inline]
    fn le<const N: usize>(&mut self) -> Result<[u8; N]> {
        if let Some(bytes) = self.input.next_array::<N>() {
            return Ok(bytes);
        }
        self.take_with(N as u64, |b| {
            let mut out = [0u8; N];
            out.copy_from_slice(b);
            out
        })
    }

    fn push(&mut self, v: Value) {
        self.stack.push(Slot::Value(v));
    }

    fn pop(&mut self) -> Result<Value> {
        match self.stack.pop() {
            Some(Slot::Value(v)) => Ok(v),
            Some(Slot::Mark) => self.err("a MARK where a value was expected"),
            None => self.err("stack underflow"),
        }
    }

    fn top(&self) -> Result<&Value> {
        match self.stack.last() {
            Some(Slot::Value(v)) => Ok(v),
            Some(Slot::Mark) => self.err("a MARK where a value was expected"),
            None => self.err("stack underflow"),
        }
    }

    /// Pops the topmost MARK from `marks`; returns its stack position. The
    /// values above it stay on the stack until the opcode moves them.
    fn pop_mark_start(&mut self) -> Result<usize> {
        match self.marks.pop() {
            Some(mark) => Ok(mark.min(self.stack.len())),
            None => self.err("no MARK on the stack"),
        }
    }

    /// Pops everything above the topmost MARK, and the MARK.
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let mark = self.pop_mark_start()?;
        Ok(self.stack.drain(mark..).filter_map(slot_value).collect())
    }

    /// The container a MARK at `mark` was pushed above.
    fn below_mark(&self, mark: usize) -> Result<Value> {
        match mark.checked_sub(1).map(|i| &self.stack[i]) {
            Some(Slot::Value(v)) => Ok(v.clone()),
            Some(Slot::Mark) => self.err("a MARK where a value was expected"),
            None => self.err("stack underflow"),
        }
    }

    /// Pushes a new list or dict, remembering where claimed ones are.
    fn push_container(&mut self, v: Value) {
        let claimed = match &v {
            Value::List(c) => c.route.is_some(),
            Value::Dict(c) => c.route.is_some(),
            _ => false,
        };
        if claimed {
            let at = self.stack.len();
            self.claimed.retain(|&p| p < at);
            self.claimed.push(at);
        }
        self.push(v);
    }

    /// The visitor's route for a container about to be pushed, from where it
    /// sits on the stack. The parent is a claimed container still being
    /// filled: a list followed by its own MARK and complete items (or by
    /// nothing: a single APPEND), a dict followed by its MARK (or not) and
    /// keys and values ending with a key. A container followed by values but
    /// no MARK is complete, waiting to be added to the one below it.
    fn route_new(&mut self, is_list: bool) -> Option<u32> {
        if self.stack.is_empty() {
            return self.visitor.route(Parent::Root, is_list);
        }
        let len = self.stack.len();
        self.claimed.retain(|&p| p < len);
        let top_mark = self.marks.last().copied();
        for i in (0..self.claimed.len()).rev() {
            let p = self.claimed[i];
            let (route, list) = match self.stack.get(p) {
                Some(Slot::Value(Value::List(c))) if !c.sealed.get() => (c.route?, Some(c)),
                Some(Slot::Value(Value::Dict(c))) if !c.sealed.get() => (c.route?, None),
                _ => continue,
            };
            let own_mark = top_mark == Some(p + 1);
            if top_mark.is_some_and(|m| m > p + 1) {
                // An unclaimed container is being filled above it.
                return None;
            }
            let n = len - p - 1 - usize::from(own_mark);
            match list {
                Some(l) => {
                    if own_mark || n == 0 {
                        let index = l.appended.get().saturating_add(n);
                        return self
                            .visitor
                            .route(Parent::ListItem { route, index }, is_list);
                    }
                }
                None => {
                    if own_mark || n <= 1 {
                        let key = match self.stack.last() {
                            Some(Slot::Value(Value::Str(key))) if n % 2 == 1 => key.clone(),
                            _ => return None,
                        };
                        return self
                            .visitor
                            .route(Parent::DictKey { route, key: &key }, is_list);
                    }
                }
            }
        }
        None
    }

    fn check_child(&self, parent_depth: &Cell<u32>, child: &Value) -> Result<()> {
        let depth = child.depth().saturating_add(1);
        if depth > MAX_DEPTH {
            return self.err(format!("containers nested deeper than {MAX_DEPTH}"));
        }
        if depth > parent_depth.get() {
            parent_depth.set(depth);
        }
        Ok(())
    }

    /// Moves the stack's values from `start` (a MARK or the first value) into
    /// `list`, which sits below them.
    fn append_from(&mut self, list: &Value, start: usize) -> Result<()> {
        let list = self.open_list(list)?;
        // Taken out so the visitor can be handed the memo while items move.
        let mut stack = std::mem::take(&mut self.stack);
        let result = self.append_items(&list, stack.drain(start..).filter_map(slot_value));
        self.stack = stack;
        result
    }

    fn open_list(&self, list: &Value) -> Result<Rc<Container<Value>>> {
        let Value::List(list) = list else {
            return self.err("APPEND to something that is not a list");
        };
        if list.sealed.get() {
            return self.err("APPEND to a list already inside another container");
        }
        Ok(list.clone())
    }

    fn append_items(
        &mut self,
        list: &Rc<Container<Value>>,
        items: impl Iterator<Item = Value>,
    ) -> Result<()> {
        if list.route.is_none() {
            list.items.borrow_mut().reserve(items.size_hint().0);
        }
        for item in items {
            if matches!(&item, Value::List(c) if Rc::ptr_eq(c, list)) {
                return self.err("a list that contains itself");
            }
            self.check_child(&list.depth, &item)?;
            item.seal();
            list.appended.set(list.appended.get().saturating_add(1));
            if let Some(route) = list.route {
                match self.visitor.item(route, &item, &mut self.memo) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(message) => return self.err(message),
                }
            }
            list.items.borrow_mut().push(item);
        }
        Ok(())
    }

    fn open_dict(&self, dict: &Value) -> Result<Rc<Container<(Value, Value)>>> {
        let Value::Dict(dict) = dict else {
            return self.err("SETITEM on something that is not a dict");
        };
        if dict.sealed.get() {
            return self.err("SETITEM on a dict already inside another container");
        }
        Ok(dict.clone())
    }

    /// Checks keys and values (alternating) before they go into `dict`.
    fn check_pairs<'a>(
        &self,
        dict: &Rc<Container<(Value, Value)>>,
        values: impl ExactSizeIterator<Item = &'a Value>,
    ) -> Result<()> {
        if values.len() & 1 == 1 {
            return self.err("SETITEMS with an odd number of values");
        }
        for v in values {
            // As a value or as a key: either would make a reference cycle.
            if matches!(v, Value::Dict(c) if Rc::ptr_eq(c, dict)) {
                return self.err("a dict that contains itself");
            }
            self.check_child(&dict.depth, v)?;
            v.seal();
        }
        Ok(())
    }

    fn set_pairs(dict: &Container<(Value, Value)>, values: impl Iterator<Item = Value>) {
        let mut items = dict.items.borrow_mut();
        items.reserve(values.size_hint().0 / 2);
        let mut key = None;
        for v in values {
            match key.take() {
                None => key = Some(v),
                Some(k) => items.push((k, v)),
            }
        }
    }

    /// Moves the stack's keys and values from `mark` (a MARK or the first
    /// key) into `dict`, which sits below them.
    fn set_items_from(&mut self, dict: &Value, mark: usize) -> Result<()> {
        let dict = self.open_dict(dict)?;
        let first = match self.stack.get(mark) {
            Some(Slot::Mark) => mark + 1,
            _ => mark,
        };
        // Only the topmost MARK can be at `mark`: nothing above it is one.
        let n = self.stack.len() - first;
        if n & 1 == 1 {
            return self.err("SETITEMS with an odd number of values");
        }
        for slot in &self.stack[first..] {
            let Slot::Value(v) = slot else { continue };
            // As a value or as a key: either would make a reference cycle.
            if matches!(v, Value::Dict(c) if Rc::ptr_eq(c, &dict)) {
                return self.err("a dict that contains itself");
            }
            if !matches!(v, Value::List(_) | Value::Dict(_) | Value::Tuple(_)) {
                continue;
            }
            self.check_child(&dict.depth, v)?;
            v.seal();
        }
        let mut items = dict.items.borrow_mut();
        items.reserve(n / 2);
        let mut values = self.stack.drain(first..);
        while let (Some(Slot::Value(k)), Some(Slot::Value(v))) = (values.next(), values.next()) {
            items.push((k, v));
        }
        drop(values);
        self.stack.truncate(mark);
        Ok(())
    }

    fn tuple(&mut self, items: Vec<Value>) -> Result<()> {
        let depth = items.iter().map(Value::depth).max().unwrap_or(0);
        if depth >= MAX_DEPTH {
            return self.err(format!("containers nested deeper than {MAX_DEPTH}"));
        }
        items.iter().for_each(Value::seal);
        self.push(Value::Tuple(Rc::new(Tuple {
            items: items.into(),
            depth: depth + 1,
        })));
        Ok(())
    }

    /// A shortcut for the commonest shape of a large snapshot, a list of
    /// memo references to converted values (frames already interned):
    /// `MARK (BINGET | LONG_BINGET)* APPENDS` onto a plain list just below the
    /// MARK. When every reference in the buffered bytes is a handle, the
    /// items go straight into the list and the opcodes are taken; otherwise
    /// nothing is taken and the ordinary loop runs them, with the same result.
    fn append_handles(&mut self) {
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
    /// earlier item of the list waits on the stack, its pairs go straight
    /// to the visitor, with the memo and the list changed as the ordinary
    /// loop would (the dict's memo slot forgotten, as the visitor's `item`
    /// does). Otherwise nothing is taken or changed, and the ordinary loop
    /// runs the opcodes.
    fn record(&mut self) -> Result<bool> {
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
            || !self.visitor.records(route)
        {
            return Ok(false);
        }
        let list = list.clone();
        let mut pairs = std::mem::take(&mut self.record_pairs);
        let mut memoized = std::mem::take(&mut self.record_memo);
        let mut scratch = std::mem::take(&mut self.record_items);
        pairs.clear();
        memoized.clear();
        scratch.clear();
        // The dict's own memo id; the values memoized in it follow.
        let id = self.memo.dense.len() as u32;
        let mut taken = self.scan_record(route, id, &mut pairs, &mut memoized, &mut scratch);
        if taken.is_none() && self.input.buffered().len() < REFILL_AHEAD {
            // Perhaps cut by the buffer's end: once more with more bytes.
            let buffered = self.input.buffered().len();
            let ahead = self.input.len.saturating_sub(self.input.offset());
            if ahead as usize > buffered
                && self.input.refill(ahead.min(REFILL_AHEAD as u64)).is_ok()
            {
                pairs.clear();
                memoized.clear();
                scratch.clear();
                taken = self.scan_record(route, id, &mut pairs, &mut memoized, &mut scratch);
            }
        }
        let result = match taken {
            None => Ok(false),
            Some((taken, nested)) => {
                self.input.pos += taken;
                self.memo.dense.push(Packed::new(MemoSlot::Forgotten));
                for (i, v) in memoized.drain(..).enumerate() {
                    // Cannot fail: the memo has room for every byte scanned.
                    let _ = self.memo.put(id + 1 + i as u32, v);
                }
                let depth = if nested { 3 } else { 2 };
                if depth > list.depth.get() {
                    list.depth.set(depth);
                }
                list.appended.set(list.appended.get().saturating_add(1));
                match self.visitor.record(route, &pairs, &mut self.memo) {
                    Ok(()) => Ok(true),
                    Err(message) => self.err(message),
                }
            }
        };
        pairs.clear();
        memoized.clear();
        self.record_pairs = pairs;
        self.record_memo = memoized;
        scratch.clear();
        self.record_items = scratch;
        result
    }

    /// [`scan_record`] over the buffered bytes, the visitor offered the
    /// record's lists; `None` when the memo could not number every value
    /// the bytes might memoize.
    fn scan_record(
        &mut self,
        route: u32,
        id: u32,
        pairs: &mut Vec<Value>,
        memoized: &mut Vec<Value>,
        scratch: &mut Vec<u32>,
    ) -> Option<(usize, bool)> {
        let bytes = self.input.buffered();
        if self.memo.values.len() + bytes.len() >= MAX_HANDLE as usize {
            return None;
        }
        let visitor = &mut self.visitor;
        let mut as_handle = |key: &Value, handles: &[u32]| visitor.record_list(route, key, handles);
        scan_record(
            bytes,
            &self.memo,
            id,
            pairs,
            memoized,
            scratch,
            &mut as_handle,
        )
    }

    #[inline]
    fn memo_get(&mut self, id: u32) -> Result<()> {
        match self.memo.get(id) {
            Some(MemoSlot::Handle(h)) => {
                self.push(Value::Handle(h));
                Ok(())
            }
            Some(MemoSlot::Value(i)) => {
                let v = self.memo.values[i as usize].clone();
                self.push(v);
                Ok(())
            }
            Some(MemoSlot::Forgotten) => self.err(format!(
                "reference to memo entry {id}, a record already consumed (shared records \
                 are not expected there)"
            )),
            None => self.err(format!(
                "reference to memo entry {id}, which was never stored"
            )),
        }
    }

    fn memo_put(&mut self, id: u32) -> Result<()> {
        let v = self.top()?.clone();
        match self.memo.put(id, v) {
            Some(()) => Ok(()),
            None => self.err(format!(
                "more than {MAX_HANDLE} values memoized at once; not a snapshot"
            )),
        }
    }

    fn long(&mut self, n: u64) -> Result<Value> {
        self.take_with(n, |raw| {
            if raw.is_empty() {
                return Value::Int(0);
            }
            let negative = raw[raw.len() - 1] & 0x80 != 0;
            if raw.len() <= 8 {
                let mut buf = if negative { [0xffu8; 8] } else { [0u8; 8] };
                buf[..raw.len()].copy_from_slice(raw);
                return Value::Int(i64::from_le_bytes(buf));
            }
            // Two's complement little-endian of any length, approximated as f64.
            let mut value = 0f64;
            for &b in raw.iter().rev() {
                let b = if negative { !b } else { b };
                value = value * 256.0 + f64::from(b);
            }
            Value::BigInt(if negative { -(value + 1.0) } else { value })
        })
    }

    fn string(&mut self, n: u64) -> Result<()> {
        let v = self.take_with(n, str_value)?;
        self.push(v);
        Ok(())
    }

    fn bytes(&mut self, n: u64) -> Result<()> {
        let v = self.take_with(n, |raw| Value::Bytes(Rc::new(raw.into())))?;
        self.push(v);
        Ok(())
    }

    fn run(&mut self) -> Result<Value> {
        loop {
            self.op_offset = self.input.offset();
            let op = match self.input.next_byte() {
                Some(op) => op,
                None if self.input.at_end() => {
                    return self.err("truncated: the pickle ends before STOP")
                }
                None => self.u8()?,
            };
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if proto > 5 {
                        return self.err(format!("unsupported pickle protocol {proto}"));
                    }
                }
                // FRAME: a length hint for buffered readers; the bytes follow inline.
                0x95 => {
                    self.le::<8>()?;
                }
                b'.' => {
                    let top = self.pop()?;
                    return Ok(top);
                }
                b'(' => {
                    self.marks.push(self.stack.len());
                    self.stack.push(Slot::Mark);
                    self.append_handles();
                }
                b'0' => {
                    if let Some(Slot::Mark) = self.stack.pop() {
                        self.marks.pop();
                    }
                }
                b'1' => {
                    let start = self.pop_mark_start()?;
                    self.stack.truncate(start);
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.push(v);
                }
                b'N' => self.push(Value::None),
                0x88 => self.push(Value::Bool(true)),
                0x89 => self.push(Value::Bool(false)),
                b'J' => {
                    let v = i32::from_le_bytes(self.le()?);
                    self.push(Value::Int(i64::from(v)));
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(i64::from(v)));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.le()?);
                    self.push(Value::Int(i64::from(v)));
                }
                0x8a => {
                    let n = self.u8()?;
                    let v = self.long(u64::from(n))?;
                    self.push(v);
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.le()?);
                    let Ok(n) = u64::try_from(n) else {
                        return self.err("LONG4 with a negative length");
                    };
                    let v = self.long(n)?;
                    self.push(v);
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.le()?);
                    self.push(Value::Float(v));
                }
                // SHORT_BINUNICODE, and SHORT_BINSTRING (protocol-2 byte
                // strings, read as text).
                0x8c | b'U' => {
                    let n = self.u8()?;
                    self.string(u64::from(n))?;
                }
                // BINUNICODE, BINSTRING.
                b'X' | b'T' => {
                    let n = u32::from_le_bytes(self.le()?);
                    self.string(u64::from(n))?;
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.le()?);
                    self.string(n)?;
                }
                b'C' => {
                    let n = self.u8()?;
                    self.bytes(u64::from(n))?;
                }
                b'B' => {
                    let n = u32::from_le_bytes(self.le()?);
                    self.bytes(u64::from(n))?;
                }
                0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.le()?);
                    self.bytes(n)?;
                }
                b'}' if self.record()? => {}
                b']' | b'}' | 0x8f => {
                    let is_list = op != b'}';
                    let route = self.route_new(is_list);
                    let v = if is_list {
                        Value::List(Container::new(route, Vec::new()))
                    } else {
                        Value::Dict(Container::new(route, Vec::new()))
                    };
                    self.push_container(v);
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    let route = self.route_new(true);
                    let list = Container::new(route, Vec::new());
                    self.append_items(&list, items.into_iter())?;
                    self.push_container(Value::List(list));
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let route = self.route_new(false);
                    let dict = Container::new(route, Vec::new());
                    self.check_pairs(&dict, items.iter())?;
                    Self::set_pairs(&dict, items.into_iter());
                    self.push_container(Value::Dict(dict));
                }
                b')' => self.tuple(Vec::new())?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.tuple(items)?;
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.tuple(items)?;
                }
                b'a' => {
                    let start = self.stack.len().saturating_sub(1);
                    let item = self.pop()?;
                    let list = self.top()?.clone();
                    self.push(item);
                    self.append_from(&list, start)?;
                }
                b'e' | 0x90 => {
                    let mark = self.pop_mark_start()?;
                    let list = self.below_mark(mark)?;
                    self.append_from(&list, mark)?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.tuple(items)?;
                }
                b's' => {
                    // Value, key and dict must be values, checked in pop order.
                    let len = self.stack.len();
                    for i in 1..=3 {
                        match len.checked_sub(i).map(|i| &self.stack[i]) {
                            Some(Slot::Value(_)) => {}
                            Some(Slot::Mark) => {
                                return self.err("a MARK where a value was expected")
                            }
                            None => return self.err("stack underflow"),
                        }
                    }
                    let dict = self.below_mark(len - 2)?;
                    self.set_items_from(&dict, len - 2)?;
                }
                b'u' => {
                    let mark = self.pop_mark_start()?;
                    let dict = self.below_mark(mark)?;
                    self.set_items_from(&dict, mark)?;
                }
                0x94 => {
                    let id = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                    self.memo_put(id)?;
                }
                b'q' => {
                    let id = self.u8()?;
                    self.memo_put(u32::from(id))?;
                }
                b'r' => {
                    let id = u32::from_le_bytes(self.le()?);
                    self.memo_put(id)?;
                }
                b'h' => {
                    let id = self.u8()?;
                    self.memo_get(u32::from(id))?;
                }
                b'j' => {
                    let id = u32::from_le_bytes(self.le()?);
                    self.memo_get(id)?;
                }
                b'c' | 0x93 | b'R' | b'b' | b'i' | b'o' | 0x81 | 0x92 | b'P' | b'Q' | 0x82
                | 0x83 | 0x84 | 0x97 | 0x98 => {
                    return self.err(format!(
                        "opcode {} would import or call Python code; memtool reads only \
                         plain data and refuses it",
                        opcode_name(op)
                    ));
                }
                other => {
                    return self.err(format!(
                        "unsupported pickle opcode 0x{other:02x} ({})",
                        opcode_name(other)
                    ))
                }
            }
        }
    }
}

/// Reads a record's `MEMOIZE MARK (key value)* SETITEMS` from `bytes` (see
/// [`Machine::record`]) into `pairs`, and the values it memoizes into
/// `memoized` (memo ids `id + 1` on; `id` is the dict's). Returns the bytes
/// taken and whether a value is a list, or `None` when the bytes are not
/// in that shape (or end first).
fn scan_record(
    bytes: &[u8],
    memo: &Memo,
    id: u32,
    pairs: &mut Vec<Value>,
    memoized: &mut Vec<Value>,
    scratch: &mut Vec<u32>,
    as_handle: &mut dyn FnMut(&Value, &[u32]) -> Option<u32>,
) -> Option<(usize, bool)> {
    if bytes.get(..2)? != [0x94, b'('] {
        return None;
    }
    let mut at = 2;
    let mut nested = false;
    let mut no_lists = |_: &Value, _: &[u32]| None;
    loop {
        skip_frames(bytes, &mut at);
        if *bytes.get(at)? == b'u' {
            return Some((at + 1, nested));
        }
        // Keys are never lists.
        scan_value(
            bytes,
            &mut at,
            memo,
            id,
            memoized,
            scratch,
            pairs,
            &mut no_lists,
        )?;
        let list = scan_value(
            bytes, &mut at, memo, id, memoized, scratch, pairs, as_handle,
        )?;
        if let Some(Value::List(l)) = pairs.last() {
            l.sealed.set(true);
        }
        // A list taken as a handle nests as deep as the list would have.
        nested |= list;
    }
}

/// One value of a record at `*at`, and a MEMOIZE after it; see
/// [`scan_record`]. A list of handles is offered to `as_handle` with the
/// key before it (the last of `out`). Returns whether the value is a list.
#[inline]
#[allow(clippy::too_many_arguments)]
fn scan_value(
    bytes: &[u8],
    at: &mut usize,
    memo: &Memo,
    id: u32,
    memoized: &mut Vec<Value>,
    scratch: &mut Vec<u32>,
    out: &mut Vec<Value>,
    as_handle: &mut dyn FnMut(&Value, &[u32]) -> Option<u32>,
) -> Option<bool> {
    skip_frames(bytes, at);
    let mut i = *at + 1;
    let op = *bytes.get(*at)?;
    let mut is_list = false;
    if let b'h' | b'j' = op {
        // Pushed in place: values moved through the stack are slow (see
        // `scan_handles`), and most of a record is memo references.
        let (r, len) = memo_ref(bytes, *at)?;
        i = *at + len;
        record_ref(memo, id, memoized, r, out)?;
    } else {
        // Each value pushed where it is made: one built on the stack in
        // parts and then moved whole stalls on the read back.
        match op {
            b'K' => {
                i += 1;
                out.push(Value::Int(i64::from(*bytes.get(i - 1)?)));
            }
            b'M' => {
                i += 2;
                let b = bytes.get(i - 2..i)?;
                out.push(Value::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))));
            }
            b'J' => {
                i += 4;
                let b = bytes.get(i - 4..i)?;
                out.push(Value::Int(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))));
            }
            0x8a => {
                let n = usize::from(*bytes.get(i)?);
                if n == 0 || n > 8 {
                    return None;
                }
                let raw = bytes.get(i + 1..i + 1 + n)?;
                i += 1 + n;
                let negative = raw[n - 1] & 0x80 != 0;
                let mut buf = if negative { [0xffu8; 8] } else { [0u8; 8] };
                buf[..n].copy_from_slice(raw);
                out.push(Value::Int(i64::from_le_bytes(buf)));
            }
            b'N' => out.push(Value::None),
            0x88 => out.push(Value::Bool(true)),
            0x89 => out.push(Value::Bool(false)),
            b'G' => {
                i += 8;
                let b: [u8; 8] = bytes.get(i - 8..i)?.try_into().ok()?;
                out.push(Value::Float(f64::from_be_bytes(b)));
            }
            0x8c => {
                let n = usize::from(*bytes.get(i)?);
                let raw = bytes.get(i + 1..i + 1 + n)?;
                i += 1 + n;
                out.push(str_value(raw));
            }
            b']' => {
                is_list = true;
                // The list's memo id comes before its items', and its items
                // are memo references, which memoize nothing.
                let memoize = bytes.get(i) == Some(&0x94);
                if memoize {
                    i += 1;
                }
                scratch.clear();
                let n = scan_handles(bytes, &mut i, memo, scratch)?;
                if let Some(handle) = as_handle(out.last()?, scratch) {
                    scratch.clear();
                    if memoize {
                        memoized.push(Value::Handle(handle));
                    }
                    out.push(Value::Handle(handle));
                } else {
                    let list = Container::new(None, Vec::new());
                    if memoize {
                        memoized.push(Value::List(list.clone()));
                    }
                    let mut items = list.items.borrow_mut();
                    items.reserve_exact(n);
                    // From handles, not values moved through the stack: each
                    // value written there in two parts and read back whole
                    // stalls.
                    items.extend(scratch.drain(..).map(Value::Handle));
                    drop(items);
                    list.appended.set(n);
                    out.push(Value::List(list));
                }
            }
            _ => return None,
        }
    }
    if bytes.get(i) == Some(&0x94) {
        memoized.push(out.last()?.clone());
        i += 1;
    }
    *at = i;
    Some(is_list)
}

/// Steps over FRAME opcodes (a length hint, no-ops to the decoder), which
/// the pickler puts before any value.
#[inline]
fn skip_frames(bytes: &[u8], at: &mut usize) {
    while bytes.get(*at) == Some(&0x95) && bytes.len() >= *at + 9 {
        *at += 9;
    }
}

/// The items of the list just read in a record (see [`scan_value`]): runs
/// of `MARK (BINGET | LONG_BINGET)* APPENDS` and `(BINGET | LONG_BINGET)
/// APPEND` whose references are all handles, pushed to `out`. Returns how
/// many.
#[inline]
fn scan_handles(bytes: &[u8], at: &mut usize, memo: &Memo, out: &mut Vec<u32>) -> Option<usize> {
    let mut i = *at;
    let mut n = 0;
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
                loop {
                    let r = match *bytes.get(i)? {
                        b'h' => {
                            i += 2;
                            u32::from(*bytes.get(i - 1)?)
                        }
                        b'j' => {
                            i += 5;
                            let b = bytes.get(i - 4..i)?;
                            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                        }
                        b'e' => {
                            i += 1;
                            break;
                        }
                        0x95 => {
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
                    n += 1;
                }
            }
            Some(b'h' | b'j') => {
                let (r, len) = memo_ref(bytes, i)?;
                if bytes.get(i + len) != Some(&b'a') {
                    break;
                }
                out.push(handle(r)?);
                n += 1;
                i += len + 1;
            }
            _ => break,
        }
    }
    *at = i;
    Some(n)
}

/// A memo reference inside a record: not to a container (nor the record).
#[inline]
fn record_ref(
    memo: &Memo,
    id: u32,
    memoized: &[Value],
    r: u32,
    out: &mut Vec<Value>,
) -> Option<()> {
    let v = match r.checked_sub(id) {
        Some(0) => return None,
        Some(n) => memoized.get(n as usize - 1)?,
        None => match memo.get(r)? {
            MemoSlot::Handle(h) => {
                out.push(Value::Handle(h));
                return Some(());
            }
            MemoSlot::Value(i) => &memo.values[i as usize],
            MemoSlot::Forgotten => return None,
        },
    };
    match v {
        Value::List(_) | Value::Dict(_) | Value::Tuple(_) => None,
        v => {
            // Cloned into place: a clone built on the stack in parts and
            // then moved whole stalls on the read back.
            out.extend_from_slice(std::slice::from_ref(v));
            Some(())
        }
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

fn slot_value(slot: Slot) -> Option<Value> {
    match slot {
        Slot::Value(v) => Some(v),
        Slot::Mark => None,
    }
}

fn opcode_name(op: u8) -> &'static str {
    match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82..=0x84 => "EXT",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        b'I' => "INT (protocol 0)",
        b'L' => "LONG (protocol 0)",
        b'S' => "STRING (protocol 0)",
        b'V' => "UNICODE (protocol 0)",
        b'F' => "FLOAT (protocol 0)",
        b'p' => "PUT (protocol 0)",
        b'g' => "GET (protocol 0)",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(bytes: &[u8]) -> Result<Value> {
        decode(&bytes.to_vec(), &mut PlainData)
    }

    fn error(bytes: &[u8]) -> String {
        match plain(bytes) {
            Ok(v) => panic!("decoded {v:?}"),
            Err(e) => e.message,
        }
    }

    /// `pickle.dumps({'a': [1, 'x', None, True, 1.5], 'b': 2**40}, protocol=4)`
    /// without FRAME, plus a shared list referenced twice.
    #[test]
    fn decodes_plain_data_and_shares_memoized_containers() {
        let mut p = vec![0x80, 4, b'}', 0x94, b'('];
        p.extend([0x8c, 1, b'a', 0x94, b']', 0x94, b'(']);
        p.extend([b'K', 1, 0x8c, 1, b'x', 0x94, b'N', 0x88, b'G']);
        p.extend(1.5f64.to_be_bytes());
        p.extend([b'e', 0x8c, 1, b'b', 0x94, 0x8a, 6, 0, 0, 0, 0, 0, 1]);
        p.extend([0x8c, 1, b'c', 0x94, b'h', 2, b'u', b'.']);
        let v = plain(&p).unwrap();
        let a = v.get("a").unwrap().items().unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a[0].as_i64(), Some(1));
        assert_eq!(a[1].as_str(), Some("x"));
        assert!(matches!(a[2], Value::None));
        assert!(matches!(a[3], Value::Bool(true)));
        assert!(matches!(a[4], Value::Float(f) if f == 1.5));
        assert_eq!(v.get("b").unwrap().as_i64(), Some(1 << 40));
        let (Some(Value::List(x)), Some(Value::List(y))) = (v.get("a"), v.get("c")) else {
            panic!("lists expected");
        };
        assert!(Rc::ptr_eq(&x, &y), "a memo reference is the same list");
    }

    #[test]
    fn long_integers_of_any_length_decode() {
        // LONG1 of -1 (one byte 0xff), LONG1 of 2**64 (9 bytes), LONG4 of 2**80.
        assert_eq!(plain(&[0x8a, 1, 0xff, b'.']).unwrap().as_i64(), Some(-1));
        let mut p = vec![0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'.'];
        assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == 18446744073709551616.0));
        p = vec![0x8b, 11, 0, 0, 0];
        p.extend([0; 10]);
        p.extend([1, b'.']);
        assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == 2f64.powi(80)));
        // LONG1 of -2**64 - 1 in 9 bytes two's complement.
        let p = [
            0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, b'.',
        ];
        assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == -18446744073709551617.0));
    }

    #[test]
    fn code_execution_opcodes_are_refused() {
        // GLOBAL 'os\nsystem\n', then REDUCE.
        let mut p = vec![0x80, 2, b'c'];
        p.extend(b"os\nsystem\n");
        p.extend([b'X', 2, 0, 0, 0, b'l', b's', 0x85, b'R', b'.']);
        let e = error(&p);
        assert!(e.contains("GLOBAL") && e.contains("refuses"), "{e}");
        for (op, name) in [
            (b'R', "REDUCE"),
            (0x93, "STACK_GLOBAL"),
            (b'b', "BUILD"),
            (b'i', "INST"),
            (b'o', "OBJ"),
            (0x81, "NEWOBJ"),
            (0x92, "NEWOBJ_EX"),
            (b'Q', "BINPERSID"),
        ] {
            let e = error(&[0x80, 4, b'N', b'N', op, b'.']);
            assert!(e.contains(name), "{name}: {e}");
        }
    }

    #[test]
    fn missing_memo_entries_are_errors() {
        let e = error(&[0x80, 4, b']', b'h', 7, b'.']);
        assert!(e.contains("memo entry 7"), "{e}");
        let e = error(&[0x80, 4, b'j', 0xff, 0xff, 0xff, 0xff, b'.']);
        assert!(e.contains("memo entry 4294967295"), "{e}");
    }

    #[test]
    fn truncated_input_and_huge_claimed_lengths_are_errors() {
        assert!(error(&[0x80, 4, b']']).contains("ends before STOP"));
        assert!(error(&[0x80, 4, b'J', 1, 2]).contains("truncated"));
        // BINUNICODE8 claiming 2**63 bytes, BINBYTES8 claiming u64::MAX, LONG4
        // claiming 2 GiB: nothing is allocated for them.
        let mut p = vec![0x80, 4, 0x8d];
        p.extend((1u64 << 63).to_le_bytes());
        assert!(error(&p).contains("truncated"));
        let mut p = vec![0x80, 4, 0x8e];
        p.extend(u64::MAX.to_le_bytes());
        assert!(error(&p).contains("truncated"));
        let mut p = vec![0x80, 4, 0x8b];
        p.extend(0x7fff_ffffu32.to_le_bytes());
        assert!(error(&p).contains("truncated"));
        assert!(error(&[0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff]).contains("negative"));
        assert!(error(&[]).contains("ends before STOP"));
    }

    #[test]
    fn deep_nesting_and_self_reference_are_errors() {
        // [[[[...]]]] 100 deep: EMPTY_LIST x100, then APPEND x99.
        let mut p = vec![0x80, 4];
        p.extend([b']'; 100]);
        p.extend([b'a'; 99]);
        p.push(b'.');
        assert!(error(&p).contains("nested deeper"));
        // The same depth reached by appending into lists already placed.
        let mut p = vec![0x80, 4, b']', 0x94];
        for i in 0..100u8 {
            // get the innermost list, append a new one, memoize that one.
            p.extend([b'h', i, b']', 0x94, b'a', b'0']);
        }
        p.push(b'.');
        let e = error(&p);
        assert!(e.contains("already inside"), "{e}");
        // a = []; a.append(a)
        let e = error(&[0x80, 4, b']', 0x94, b'h', 0, b'a', b'.']);
        assert!(e.contains("contains itself"), "{e}");
        // d = {}; d[d] = None (found by the fuzzer: a cycle through the key)
        let e = error(&[0x80, 4, b'}', 0x94, b'h', 0, b'N', b's', b'.']);
        assert!(e.contains("contains itself"), "{e}");
        // d = {}; d[None] = d
        let e = error(&[0x80, 4, b'}', 0x94, b'N', b'h', 0, b's', b'.']);
        assert!(e.contains("contains itself"), "{e}");
        // Tuples nest too: TUPLE1 x100.
        let mut p = vec![0x80, 4, b'N'];
        p.extend([0x85; 100]);
        p.push(b'.');
        assert!(error(&p).contains("nested deeper"));
    }

    /// 600,000 small ints in batches of 1,000 and a 3 MiB string: several
    /// buffer refills, opcodes cut by the buffer's end, and an argument
    /// larger than the buffer.
    #[test]
    fn input_larger_than_the_buffer_streams_through_it() {
        let mut p = vec![0x80, 4, b']'];
        for _ in 0..600 {
            p.push(b'(');
            for i in 0..1000u32 {
                p.extend([b'K', (i % 251) as u8]);
            }
            p.push(b'e');
        }
        let big = "x".repeat(3 << 20);
        p.push(0x8d);
        p.extend((big.len() as u64).to_le_bytes());
        p.extend(big.as_bytes());
        p.extend([b'a', b'.']);
        let v = plain(&p).unwrap();
        let items = v.seq().unwrap();
        assert_eq!(items.len(), 600_001);
        assert_eq!(items[599_999].as_i64(), Some(999 % 251));
        assert_eq!(items[600_000].as_str().map(str::len), Some(3 << 20));
        drop(items);
        // Cut inside the string: its length is checked against what is left.
        let e = error(&p[..p.len() - 1000]);
        assert_eq!(
            e,
            "truncated: the opcode needs 3145728 bytes but 3144730 remain"
        );
    }

    #[test]
    fn bytes_after_stop_are_ignored_and_stack_errors_are_clean() {
        assert_eq!(
            plain(&[0x80, 4, b'K', 5, b'.', 0xde, 0xad])
                .unwrap()
                .as_i64(),
            Some(5)
        );
        assert!(error(&[0x80, 4, b'.']).contains("underflow"));
        assert!(error(&[0x80, 4, b'(', b'.']).contains("MARK"));
        assert!(error(&[0x80, 4, b'K', 1, b'e', b'.']).contains("MARK"));
        assert!(error(&[0x80, 4, b'K', 1, b'K', 2, b'a', b'.']).contains("not a list"));
        assert!(error(&[0x80, 9, b'N', b'.']).contains("protocol 9"));
        assert!(error(b"I1\n.").contains("unsupported"));
    }

    /// Collects the entries of the list at key `t` of the root dict, from
    /// `item` or, when `fast`, from `record`.
    struct Records {
        fast: bool,
        entries: Vec<String>,
        records: usize,
    }

    fn show(v: &Value) -> String {
        match v {
            Value::None => "None".into(),
            Value::Int(i) => i.to_string(),
            Value::Str(s) => format!("{s:?}"),
            Value::Handle(h) => format!("#{h}"),
            Value::Dict(_) => format!(
                "{{{}}}",
                v.pairs()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            v => format!("{v:?}"),
        }
    }

    impl Visitor for Records {
        fn route(&mut self, parent: Parent<'_>, is_list: bool) -> Option<u32> {
            match parent {
                Parent::Root => Some(0),
                Parent::DictKey { route: 0, key: "t" } if is_list => Some(1),
                _ => None,
            }
        }
        fn item(
            &mut self,
            route: u32,
            item: &Value,
            _: &mut Memo,
        ) -> std::result::Result<bool, String> {
            if route != 1 {
                return Ok(false);
            }
            self.entries.push(show(item));
            Ok(true)
        }
        fn records(&self, route: u32) -> bool {
            self.fast && route == 1
        }
        fn record(
            &mut self,
            _: u32,
            pairs: &[Value],
            _: &mut Memo,
        ) -> std::result::Result<(), String> {
            let pairs: Vec<String> = pairs
                .chunks_exact(2)
                .map(|kv| format!("{}: {}", show(&kv[0]), show(&kv[1])))
                .collect();
            self.entries.push(format!("{{{}}}", pairs.join(", ")));
            self.records += 1;
            Ok(())
        }
    }

    /// Records in CPython's shape (a FRAME inside one) go to `record`; one
    /// in another shape, and the rest of its batch, go the ordinary way;
    /// the visitor sees the same entries in the same order either way.
    #[test]
    fn records_are_read_straight_or_the_ordinary_way_alike() {
        let mut p = vec![
            0x80, 4, b'}', 0x94, b'(', 0x8c, 1, b't', 0x94, b']', 0x94, b'(',
        ];
        // Memo: root 0, 't' 1, list 2, then each dict and string in order.
        p.extend([b'}', 0x94, b'(', 0x8c, 6]);
        p.extend(b"action");
        p.extend([0x94, 0x8c, 5]);
        p.extend(b"alloc");
        p.extend([0x94, 0x8c, 4]);
        p.extend(b"size");
        p.extend([0x94, b'K', 7, b'u']);
        p.extend([
            b'}', 0x94, b'(', b'h', 4, b'h', 5, 0x95, 9, 0, 0, 0, 0, 0, 0, 0,
        ]);
        p.extend([b'h', 6, b'J', 1, 0, 0, 0, b'u']);
        // A dict as a value: not a record's shape.
        p.extend([b'}', 0x94, b'(', b'h', 4, b'}', b'u']);
        p.extend([b'}', 0x94, b'(', b'h', 6, 0x8a, 2, 0, 1, b'u', b'e']);
        p.extend([
            b'(', b'}', 0x94, b'(', b'h', 6, b'N', b'h', 4, b'h', 5, b'u', b'e',
        ]);
        p.extend([b'u', b'.']);
        let mut decoded = Vec::new();
        for fast in [false, true] {
            let mut v = Records {
                fast,
                entries: Vec::new(),
                records: 0,
            };
            decode(&p.clone(), &mut v).unwrap();
            assert_eq!(v.records, if fast { 3 } else { 0 });
            decoded.push(v.entries);
        }
        assert_eq!(decoded[0], decoded[1]);
        assert_eq!(
            decoded[1],
            [
                r#"{"action": "alloc", "size": 7}"#,
                r#"{"action": "alloc", "size": 1}"#,
                r#"{"action": {}}"#,
                r#"{"size": 256}"#,
                r#"{"size": None, "action": "alloc"}"#,
            ]
        );
    }
}
