//! What a pickle's reader is told: which containers it claims, and their items.

use super::{Memo, Value};

/// Where a new container sits, for [`Visitor::route`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Parent<'a> {
    /// The first value of the pickle (nothing below it on the stack).
    Root,
    /// The value of `key` in a dict the visitor claimed with `route`.
    DictKey { route: u32, key: &'a str },
    /// Item `index` of a list the visitor claimed with `route`.
    ListItem { route: u32, index: usize },
}

/// Claims containers and consumes the items of claimed lists.
pub(crate) trait Visitor {
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
    /// fields to [`Visitor::record`] as soon as they are read, building no
    /// dict, in place of handing the dict to `item`.
    fn records(&self, route: u32) -> bool {
        let _ = route;
        false
    }

    /// The keys a record's visitor reads (see [`Visitor::records`]), in
    /// the order [`Visitor::record`] is given their values. At most
    /// [`MAX_RECORD_KEYS`]; other keys are stepped over.
    const RECORD_KEYS: &'static [&'static str] = &[];

    /// A list inside a record (see [`Visitor::records`]) under the key
    /// `RECORD_KEYS[key]` (`None`: another key), all of whose items are
    /// handles, as one handle of the visitor's: the list is then never
    /// built, the record holds [`Value::Handle`] in its place, and memo
    /// references to it get the handle, as if the visitor had converted it
    /// ([`Memo::convert`]). `None` builds the list. The same list may be
    /// asked about more than once, and an answer other than `None` must be
    /// the same for the same key and handles every time, whatever the
    /// route: the decoder may reuse it for a list of the same bytes without
    /// asking (see `handle_lists.rs`).
    fn record_list(&mut self, route: u32, key: Option<usize>, handles: &[u32]) -> Option<u32> {
        let _ = (route, key, handles);
        None
    }

    /// A record (see [`Visitor::records`]): `fields[k]` is the value of
    /// `RECORD_KEYS[k]` as `item` would find it in the dict (the first of
    /// the key's values when it is given twice), `None` when the dict has
    /// no such key. Values of other keys are read (and memoized) but not
    /// handed over.
    fn record(
        &mut self,
        route: u32,
        fields: &[Option<Value>],
        memo: &mut Memo,
    ) -> std::result::Result<(), String> {
        let _ = (route, fields, memo);
        Ok(())
    }
}

/// The most keys a visitor's records may name ([`Visitor::RECORD_KEYS`]):
/// a key's code is a byte of the memo.
pub(crate) const MAX_RECORD_KEYS: usize = 64;

/// Which of `keys` a dict key is: its index, `None` for a key that is not
/// a string or not one of them. The one test both paths use, so a record
/// read straight and one read the ordinary way give the visitor one set of
/// fields.
pub(crate) fn record_key(keys: &[&str], key: &Value) -> Option<usize> {
    let key = key.as_str()?;
    keys.iter().position(|k| *k == key)
}
