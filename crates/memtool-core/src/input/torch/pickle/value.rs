//! The values a pickle of plain data decodes to.

use std::cell::{Cell, Ref, RefCell};
use std::rc::Rc;

/// A list or dict under construction. `sealed` is set once the container is
/// placed inside another one; pickles of plain data never change it after that.
#[derive(Debug)]
pub(crate) struct Container<T> {
    pub items: RefCell<Vec<T>>,
    /// The visitor's tag for this container, when it claimed it.
    pub route: Option<u32>,
    /// The memo slot holding this container, if it was memoized.
    pub memo_id: Cell<Option<u32>>,
    /// What the visitor converted this container to (see [`Memo::convert`]):
    /// copies of it taken from the memo before the conversion find it here.
    pub(super) handle: Cell<Option<u32>>,
    /// Items appended so far, including those the visitor consumed.
    pub(super) appended: Cell<usize>,
    pub(super) depth: Cell<u32>,
    pub(super) sealed: Cell<bool>,
    /// A dict made as an item of a list the visitor reads records from: a
    /// memo reference to it is refused, as the records fast path refuses
    /// one to a record it has read.
    pub(super) record: Cell<bool>,
}

impl<T> Container<T> {
    pub(super) fn new(route: Option<u32>, items: Vec<T>) -> Rc<Self> {
        Rc::new(Container {
            items: RefCell::new(items),
            route,
            memo_id: Cell::new(None),
            handle: Cell::new(None),
            appended: Cell::new(0),
            depth: Cell::new(1),
            sealed: Cell::new(false),
            record: Cell::new(false),
        })
    }
}

/// A decoded value.
// Every payload at offset 8, so moving a value is two aligned words (with
// the default layout a `bool` at offset 1 makes each move a misaligned
// copy that stalls store forwarding).
#[derive(Clone, Debug)]
#[repr(C, u8)]
pub(crate) enum Value {
    None,
    // The decoder keeps every plain value a pickle holds; the snapshot
    // reader has no use for some of them (Debug prints them in tests).
    #[allow(dead_code)]
    Bool(bool),
    Int(i64),
    /// An integer too large for `i64`, approximated.
    #[allow(dead_code)]
    BigInt(f64),
    #[allow(dead_code)]
    Float(f64),
    // Boxed behind the `Rc` (thin pointers) so a value is 16 bytes: values
    // are moved on and off the stack a hundred million times.
    Str(Rc<Box<str>>),
    #[allow(dead_code)]
    Bytes(Rc<Box<[u8]>>),
    List(Rc<Container<Value>>),
    Dict(Rc<Container<(Value, Value)>>),
    Tuple(Rc<Tuple>),
    /// What the visitor put in place of a memoized value it converted.
    Handle(u32),
}

/// A tuple's items, and its nesting depth (computed once: tuples are immutable).
#[derive(Debug)]
pub(crate) struct Tuple {
    pub(super) items: Box<[Value]>,
    pub(super) depth: u32,
}

/// The items of a list or tuple, borrowed.
pub(crate) enum Items<'a> {
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

impl Value {
    pub(super) fn depth(&self) -> u32 {
        match self {
            Value::List(c) => c.depth.get(),
            Value::Dict(c) => c.depth.get(),
            Value::Tuple(t) => t.depth,
            _ => 0,
        }
    }

    pub(super) fn seal(&self) {
        match self {
            Value::List(c) => c.sealed.set(true),
            Value::Dict(c) => c.sealed.set(true),
            _ => {}
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an integer: ints and bools.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The value of `key` in a dict with string keys.
    pub(crate) fn get(&self, key: &str) -> Option<Value> {
        let Value::Dict(d) = self else { return None };
        let items = d.items.borrow();
        items
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    }

    /// The key-value pairs of a dict, borrowed.
    pub(crate) fn pairs(&self) -> Option<Ref<'_, Vec<(Value, Value)>>> {
        match self {
            Value::Dict(d) => Some(d.items.borrow()),
            _ => None,
        }
    }

    /// The items of a list or tuple, borrowed.
    pub(crate) fn seq(&self) -> Option<Items<'_>> {
        match self {
            Value::List(l) => Some(Items::List(l.items.borrow())),
            Value::Tuple(t) => Some(Items::Tuple(&t.items)),
            _ => None,
        }
    }

    /// The items of a list or tuple, cloned (cheap: values are reference counted).
    pub(crate) fn items(&self) -> Option<Vec<Value>> {
        self.seq().map(|items| items.to_vec())
    }

    /// The memo slot of a memoized list or dict.
    pub(crate) fn memo_id(&self) -> Option<u32> {
        match self {
            Value::List(c) => c.memo_id.get(),
            Value::Dict(c) => c.memo_id.get(),
            _ => None,
        }
    }

    /// The visitor's handle for this value: a [`Value::Handle`], or a list or
    /// dict it converted earlier.
    pub(crate) fn handle(&self) -> Option<u32> {
        match self {
            Value::Handle(h) => Some(*h),
            Value::List(c) => c.handle.get(),
            Value::Dict(c) => c.handle.get(),
            _ => None,
        }
    }
}

/// A string argument as text (invalid UTF-8 replaced, as protocol-2 byte
/// strings may be anything).
pub(super) fn str_value(raw: &[u8]) -> Value {
    Value::Str(match std::str::from_utf8(raw) {
        Ok(s) => Rc::new(s.into()),
        Err(_) => Rc::new(String::from_utf8_lossy(raw).into()),
    })
}
