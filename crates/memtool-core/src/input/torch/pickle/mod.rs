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

mod handle_lists;
mod input;
mod interpreter;
mod memo;
mod opcodes;
mod records;
mod value;
mod visitor;

pub(crate) use memo::{Memo, MAX_HANDLE};
pub(crate) use value::Value;
pub(crate) use visitor::{record_key, Parent, Visitor};

use crate::input::read_ahead;
use crate::input::source::ByteSource;
use input::Input;
use interpreter::Machine;

/// The chunk a pickle is read ahead by: what its decoder asks for at a time.
pub(crate) const READ_AHEAD: usize = input::CHUNK;

/// Containers nested deeper than this are refused; a PyTorch snapshot needs 6.
pub(crate) const MAX_DEPTH: u32 = 64;

/// Why a pickle could not be decoded, with the byte offset of the opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PickleError {
    pub offset: u64,
    pub message: String,
}

type Result<T> = std::result::Result<T, PickleError>;

/// Which paths the decoder may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paths {
    /// The records fast path where the bytes have CPython's layout, the
    /// opcode loop elsewhere.
    Fast,
    /// The opcode loop only, for checking that both give one result.
    GeneralOnly,
}

/// Decodes the pickle in `source` as plain data; the result is the top value
/// (claimed lists are empty in it). Bytes after STOP are ignored.
///
/// With `read_ahead` (a size: [`READ_AHEAD`] but in the tests), the
/// source's next chunks of that size are read on a thread of their own
/// while the pickle is decoded (see [`crate::input::read_ahead`]): the same
/// result.
pub(crate) fn decode<V: Visitor>(
    source: &dyn ByteSource,
    visitor: &mut V,
    paths: Paths,
    read_ahead: Option<usize>,
) -> Result<Value> {
    read_ahead::with_read_ahead(source, read_ahead, |source| {
        decode_from(Input::new(source), visitor, paths)
    })
}

fn decode_from<V: Visitor>(input: Input<'_>, visitor: &mut V, paths: Paths) -> Result<Value> {
    let mut m = Machine {
        fast_paths: paths == Paths::Fast,
        input,
        op_offset: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        claimed: Vec::new(),
        memo: Memo::default(),
        visitor,
        record_fields: Vec::new(),
        record_memo: Vec::new(),
        record_items: Vec::new(),
        handle_lists: Default::default(),
    };
    m.run()
}

#[cfg(test)]
mod tests;
