//! The opcode loop: the general path every pickle can take.

use std::cell::Cell;
use std::rc::Rc;

use super::input::{Input, TakeError};
use super::memo::{Memo, MemoSlot, MAX_HANDLE};
use super::opcodes::opcode_name;
use super::value::{str_value, Container, Tuple, Value};
use super::{Parent, PickleError, Result, Visitor, MAX_DEPTH};

// A stack slot is no larger than the value it holds.
const _: () = assert!(std::mem::size_of::<Slot>() == 16);

/// A claimed container being filled (see [`Machine::claimed_parent`]).
enum ClaimedParent {
    List { route: u32, index: usize },
    Dict { route: u32, key: Rc<Box<str>> },
}

pub(super) enum Slot {
    Mark,
    Value(Value),
}

pub(super) struct Machine<'s, 'v, V: Visitor> {
    /// Whether the records fast path may read what it recognises
    /// (`append_handles`, `record`); the opcode loop gives the same result.
    pub(super) fast_paths: bool,
    pub(super) input: Input<'s>,
    pub(super) op_offset: u64,
    pub(super) stack: Vec<Slot>,
    /// Stack positions of the MARKs, bottom to top.
    pub(super) marks: Vec<usize>,
    /// Stack positions where claimed containers were pushed (some may be
    /// stale; [`Machine::route_new`] checks them).
    pub(super) claimed: Vec<usize>,
    pub(super) memo: Memo,
    pub(super) visitor: &'v mut V,
    /// Scratch space for [`Machine::record`]: a record's fields, and the
    /// values it memoizes after the dict itself.
    pub(super) record_fields: Vec<Option<Value>>,
    pub(super) record_memo: Vec<Value>,
    /// The items of a list in a record, as they are read.
    pub(super) record_items: Vec<u32>,
    /// Lists of handles in records met before, by their bytes.
    pub(super) handle_lists: super::handle_lists::HandleLists,
}

fn slot_value(slot: Slot) -> Option<Value> {
    match slot {
        Slot::Value(v) => Some(v),
        Slot::Mark => None,
    }
}

impl<V: Visitor> Machine<'_, '_, V> {
    pub(super) fn err<T>(&self, message: impl Into<String>) -> Result<T> {
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
    pub(super) fn u8(&mut self) -> Result<u8> {
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

    pub(super) fn push(&mut self, v: Value) {
        self.stack.push(Slot::Value(v));
    }

    pub(super) fn pop(&mut self) -> Result<Value> {
        match self.stack.pop() {
            Some(Slot::Value(v)) => Ok(v),
            Some(Slot::Mark) => self.err("a MARK where a value was expected"),
            None => self.err("stack underflow"),
        }
    }

    pub(super) fn top(&self) -> Result<&Value> {
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
    /// sits on the stack (see [`Machine::claimed_parent`]).
    fn route_new(&mut self, is_list: bool) -> Option<u32> {
        if self.stack.is_empty() {
            return self.visitor.route(Parent::Root, is_list);
        }
        match self.claimed_parent()? {
            ClaimedParent::List { route, index } => self
                .visitor
                .route(Parent::ListItem { route, index }, is_list),
            ClaimedParent::Dict { route, key } => self
                .visitor
                .route(Parent::DictKey { route, key: &key }, is_list),
        }
    }

    /// The claimed container a value pushed now would go into. It is one
    /// still being filled: a list followed by its own MARK and complete
    /// items (or by nothing: a single APPEND), a dict followed by its MARK
    /// (or not) and keys and values ending with a key. A container followed
    /// by values but no MARK is complete, waiting to be added to the one
    /// below it.
    fn claimed_parent(&mut self) -> Option<ClaimedParent> {
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
                        return Some(ClaimedParent::List { route, index });
                    }
                }
                None => {
                    if own_mark || n <= 1 {
                        return match self.stack.last() {
                            Some(Slot::Value(Value::Str(key))) if n % 2 == 1 => {
                                Some(ClaimedParent::Dict {
                                    route,
                                    key: key.clone(),
                                })
                            }
                            _ => None,
                        };
                    }
                }
            }
        }
        None
    }

    /// Refuses a copy (DUP) of `value` about to be pushed as an item of a
    /// list the visitor reads records from while the container is still on
    /// the stack, unread: the visitor would read one record many times, so
    /// a byte per copy would ask for an allocation each and the stack would
    /// hold them all. Memo references to records are refused in
    /// `memo_get` (see `Container::record`).
    fn refuse_pending_record(&mut self, value: &Value) -> Result<()> {
        let pending = match value {
            Value::List(c) => !c.sealed.get(),
            Value::Dict(c) => !c.sealed.get(),
            _ => false,
        };
        if !pending {
            return Ok(());
        }
        match self.claimed_parent() {
            Some(ClaimedParent::List { route, .. }) if self.visitor.records(route) => self.err(
                "DUP of a record not yet read, listed again in its list (shared records \
                     are not expected there)",
            ),
            _ => Ok(()),
        }
    }

    /// Whether a value pushed now is an item of a list the visitor reads
    /// records from.
    fn at_record_position(&mut self) -> bool {
        matches!(
            self.claimed_parent(),
            Some(ClaimedParent::List { route, .. }) if self.visitor.records(route)
        )
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

    pub(super) fn append_items(
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

    pub(super) fn tuple(&mut self, items: Vec<Value>) -> Result<()> {
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

    #[inline]
    fn memo_get(&mut self, id: u32) -> Result<()> {
        match self.memo.get(id) {
            Some(MemoSlot::Handle(h)) => {
                self.push(Value::Handle(h));
                Ok(())
            }
            Some(MemoSlot::Value(i)) => {
                let v = self.memo.values[i as usize].clone();
                if matches!(&v, Value::Dict(c) if c.record.get()) {
                    return self.err(format!(
                        "reference to memo entry {id}, a record listed already (shared \
                         records are not expected there)"
                    ));
                }
                self.push(v);
                Ok(())
            }
            Some(MemoSlot::Forgotten) => self.err(format!(
                "reference to memo entry {id}, a record listed already (shared records \
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

    pub(super) fn string(&mut self, n: u64) -> Result<()> {
        let v = self.take_with(n, str_value)?;
        self.push(v);
        Ok(())
    }

    pub(super) fn bytes(&mut self, n: u64) -> Result<()> {
        let v = self.take_with(n, |raw| Value::Bytes(Rc::new(raw.into())))?;
        self.push(v);
        Ok(())
    }

    pub(super) fn run(&mut self) -> Result<Value> {
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
                    if self.fast_paths {
                        self.append_handles();
                    }
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
                    self.refuse_pending_record(&v)?;
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
                b'}' if self.fast_paths && self.record()? => {}
                b']' | b'}' | 0x8f => {
                    let is_list = op != b'}';
                    let route = self.route_new(is_list);
                    let v = if is_list {
                        Value::List(Container::new(route, Vec::new()))
                    } else {
                        let dict = Container::new(route, Vec::new());
                        dict.record.set(self.at_record_position());
                        Value::Dict(dict)
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
                    dict.record.set(self.at_record_position());
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
                    self.record_completed()?;
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
