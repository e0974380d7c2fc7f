//! Call trees of live memory (root = outermost caller), for the icicle graph
//! and for collapsed-stack (`folded`) output. A tree can hold one profile's
//! bytes or two (base and new) for a differential view.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::analysis::frames::FrameFilter;
use crate::analysis::group::{SiteTotals, NO_STACK_LABEL};
use crate::model::{Names, SiteId};

/// Bytes of one frame path, in one or two profiles.
#[derive(Debug, Default)]
pub(super) struct Tree {
    /// Bytes here and below (`[base, new]`; a single profile uses `new`).
    bytes: [u64; 2],
    /// Bytes allocated by this frame itself.
    own: [u64; 2],
    children: BTreeMap<String, Tree>,
}

/// A node as the page receives it: short keys keep the file small.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(super) struct Node {
    /// Frame label.
    pub n: String,
    /// The label as drawn, when shorter (`step optimizer.py:78`): shortened
    /// as the text tables shorten theirs, siblings kept apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// Bytes here and below.
    pub v: u64,
    /// Base bytes here and below (differential trees only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub c: Vec<Node>,
}

/// Characters of a frame label as drawn; the full label is in the tooltip.
pub(super) const LABEL_CHARS: usize = 40;

/// Bytes of frame labels a page's call tree keeps (each label is already
/// cut at [`super::escape::MAX_LABEL_BYTES`]).
const MAX_LABEL_BYTES: usize = 2 << 20;

/// Deepest path kept: deeper frames are folded into their ancestor at this
/// depth (a recursion gone wild must not make the page huge).
const MAX_DEPTH: usize = 128;

/// The path of `site` in a call tree, outermost caller first: its frames as
/// `filter` shows them, or, without a call stack (XSpace allocator events),
/// what the profile does say — category, op, shape — as the next best path.
/// At most [`MAX_DEPTH`] labels.
pub(super) fn path(names: &Names, site: SiteId, filter: &FrameFilter) -> Vec<String> {
    let site = names.site_of(site);
    if site.stack.0 == 0 {
        let known: Vec<String> = [site.category, site.op, site.shape]
            .into_iter()
            .flatten()
            .map(|s| super::escape::label(names.str(s)))
            .collect();
        if known.is_empty() {
            vec![NO_STACK_LABEL.to_string()]
        } else {
            known
        }
    } else {
        filter
            .frames(names, site.stack)
            .iter()
            .rev()
            .take(MAX_DEPTH)
            .map(|&f| super::escape::label(&names.frame_label(f)))
            .collect()
    }
}

impl Tree {
    /// Adds per-site totals to side 0 (base) or 1 (new).
    pub(super) fn add_sites(
        &mut self,
        names: &Names,
        by_site: &SiteTotals,
        filter: &FrameFilter,
        side: usize,
    ) {
        let side = side.min(1);
        for (site, totals) in by_site.iter() {
            if totals.bytes == 0 {
                continue;
            }
            let labels = path(names, site, filter);
            // Saturating: a differential tree sums every memory of a profile,
            // which a hostile file can push past u64.
            let mut node = &mut *self;
            node.bytes[side] = node.bytes[side].saturating_add(totals.bytes);
            for label in labels {
                node = node.children.entry(label).or_default();
                node.bytes[side] = node.bytes[side].saturating_add(totals.bytes);
            }
            node.own[side] = node.own[side].saturating_add(totals.bytes);
        }
    }

    /// The tree for the page: children smaller than `min_share` of the root
    /// are left out (their bytes stay in their parent's total), so the number
    /// of nodes is bounded whatever the profile; so are their labels' bytes
    /// ([`MAX_LABEL_BYTES`]: kept level by level, largest first, the frames
    /// below the last level that fits are left out the same way).
    pub(super) fn nodes(&self, root_label: &str, differential: bool, min_share: f64) -> Node {
        let biggest = self.bytes[0].max(self.bytes[1]);
        let min_bytes = ((biggest as f64) * min_share).ceil().max(1.0) as u64;
        // Breadth first, so that a few deep paths of long frames do not
        // crowd out the frames every path starts with.
        let mut kept: HashSet<*const Tree> = HashSet::new();
        let mut level: Vec<&Tree> = vec![self];
        let mut budget = MAX_LABEL_BYTES;
        'levels: while !level.is_empty() {
            let mut next = Vec::new();
            for tree in level {
                for (label, kid) in tree.kids(min_bytes) {
                    if label.len() > budget {
                        break 'levels;
                    }
                    budget -= label.len();
                    kept.insert(kid);
                    next.push(kid);
                }
            }
            level = next;
        }
        self.node(root_label, None, differential, min_bytes, &kept)
    }

    /// The children drawn: at least `min_bytes`, largest first.
    fn kids(&self, min_bytes: u64) -> Vec<(&String, &Tree)> {
        let mut kids: Vec<(&String, &Tree)> = self
            .children
            .iter()
            .filter(|(_, t)| t.bytes[0].max(t.bytes[1]) >= min_bytes)
            .collect();
        kids.sort_by(|a, b| {
            b.1.bytes[1]
                .max(b.1.bytes[0])
                .cmp(&a.1.bytes[1].max(a.1.bytes[0]))
                .then_with(|| a.0.cmp(b.0))
        });
        kids
    }

    fn node(
        &self,
        label: &str,
        short: Option<String>,
        differential: bool,
        min_bytes: u64,
        kept: &HashSet<*const Tree>,
    ) -> Node {
        let mut kids = self.kids(min_bytes);
        kids.retain(|(_, t)| kept.contains(&(*t as *const Tree)));
        let labels: Vec<&str> = kids.iter().map(|(l, _)| l.as_str()).collect();
        let shorts = crate::report::fit_column(&labels, LABEL_CHARS);
        Node {
            n: label.to_string(),
            s: short,
            v: self.bytes[1],
            b: differential.then_some(self.bytes[0]),
            c: kids
                .into_iter()
                .zip(shorts)
                .map(|((l, t), short)| {
                    let short = (short != *l).then_some(short);
                    t.node(l, short, differential, min_bytes, kept)
                })
                .collect(),
        }
    }

    /// Collapsed stacks, `frame;frame;frame bytes`, one line per frame path
    /// that allocated, sorted by path (what flamegraph.pl and speedscope read).
    pub(super) fn folded(&self, out: &mut String) {
        let mut path: Vec<&str> = Vec::new();
        self.fold(&mut path, out);
    }

    fn fold<'a>(&'a self, path: &mut Vec<&'a str>, out: &mut String) {
        if self.own[1] > 0 && !path.is_empty() {
            // `;` separates frames and a newline ends the record: neither may
            // appear inside a frame.
            let joined: Vec<String> = path
                .iter()
                .map(|p| crate::report::visible(p).replace(';', " "))
                .collect();
            out.push_str(&joined.join(";"));
            out.push(' ');
            out.push_str(&self.own[1].to_string());
            out.push('\n');
        }
        for (label, child) in &self.children {
            path.push(label);
            child.fold(path, out);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::group::Totals;
    use crate::model::{Frame, Site, SiteId};

    fn site(names: &mut Names, frames: &[&str]) -> SiteId {
        let ids: Vec<_> = frames
            .iter()
            .map(|f| {
                let function = names.string(f);
                names.frame(Frame {
                    function,
                    file: crate::model::StrId(0),
                    line: 0,
                })
            })
            .collect();
        let stack = names.stack_leaf_first(&ids);
        names.site(Site {
            stack,
            ..Site::default()
        })
    }

    fn totals(bytes: u64) -> Totals {
        Totals {
            bytes,
            requested_bytes: bytes,
            count: 1,
        }
    }

    #[test]
    fn builds_root_first_trees_and_folds_them() {
        let mut names = Names::default();
        let a = site(&mut names, &["leaf1", "mid", "main"]);
        let b = site(&mut names, &["leaf2", "mid", "main"]);
        let c = site(&mut names, &["main"]);
        let tiny = site(&mut names, &["tiny", "main"]);
        let by_site: SiteTotals = [
            (a, totals(600)),
            (b, totals(300)),
            (c, totals(100)),
            (tiny, totals(1)),
        ]
        .into_iter()
        .collect();
        let mut tree = Tree::default();
        tree.add_sites(&names, &by_site, &FrameFilter::All, 1);
        let root = tree.nodes("all", false, 0.01);
        assert_eq!(root.v, 1001);
        assert_eq!(root.c.len(), 1);
        let main = &root.c[0];
        assert_eq!((main.n.as_str(), main.v), ("main", 1001));
        // `tiny` is under 1% and left out; `mid` holds both leaves.
        assert_eq!(main.c.len(), 1);
        assert_eq!(
            main.c[0].c.iter().map(|n| n.v).collect::<Vec<_>>(),
            vec![600, 300]
        );
        let mut folded = String::new();
        tree.folded(&mut folded);
        assert_eq!(
            folded,
            "main 100\nmain;mid;leaf1 600\nmain;mid;leaf2 300\nmain;tiny 1\n"
        );
    }

    /// A frame name cannot split a record, add a frame, or drive the
    /// terminal a folded file is printed on.
    #[test]
    fn folded_frames_keep_to_their_record() {
        let mut names = Names::default();
        let hostile = site(&mut names, &["a;b\nc 9\u{1b}]0;t\u{7}", "main"]);
        let by_site: SiteTotals = [(hostile, totals(5))].into_iter().collect();
        let mut tree = Tree::default();
        tree.add_sites(&names, &by_site, &FrameFilter::All, 1);
        let mut folded = String::new();
        tree.folded(&mut folded);
        assert_eq!(folded, "main;a b\\u{a}c 9\\u{1b}]0 t\\u{7} 5\n");
    }

    #[test]
    fn sites_without_stacks_fall_back_to_category_op_shape() {
        let mut names = Names::default();
        let (cat, op, shape) = (
            names.string("output"),
            names.string("AddV2"),
            names.string("[256,1024]"),
        );
        let with = names.site(Site {
            op: Some(op),
            shape: Some(shape),
            category: Some(cat),
            ..Site::default()
        });
        let bare = names.site(Site::default());
        let mut tree = Tree::default();
        tree.add_sites(
            &names,
            &[(with, totals(1024)), (bare, totals(10))]
                .into_iter()
                .collect(),
            &FrameFilter::All,
            1,
        );
        let mut folded = String::new();
        tree.folded(&mut folded);
        assert_eq!(folded, "<no stack> 10\noutput;AddV2;[256,1024] 1024\n");
    }

    #[test]
    fn differential_trees_carry_both_sides() {
        let mut names = Names::default();
        let a = site(&mut names, &["grow", "main"]);
        let b = site(&mut names, &["shrink", "main"]);
        let mut tree = Tree::default();
        tree.add_sites(
            &names,
            &[(a, totals(100)), (b, totals(500))].into_iter().collect(),
            &FrameFilter::All,
            0,
        );
        tree.add_sites(
            &names,
            &[(a, totals(400)), (b, totals(200))].into_iter().collect(),
            &FrameFilter::All,
            1,
        );
        let root = tree.nodes("all", true, 0.0);
        assert_eq!((root.v, root.b), (600, Some(600)));
        let main = &root.c[0];
        let kids: Vec<_> = main.c.iter().map(|n| (n.n.as_str(), n.b, n.v)).collect();
        assert_eq!(
            kids,
            vec![("shrink", Some(500), 200), ("grow", Some(100), 400)]
        );
    }
}
