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
