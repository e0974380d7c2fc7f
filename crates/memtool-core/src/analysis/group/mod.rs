//! Grouping allocations into a breakdown: by call stack, by the user's own
//! frame, by shape, op, dtype or category.
//!
//! Allocations are first summed per interned site (a `u32` hash), then each
//! site is labelled once, so the cost of labels is per site, not per buffer.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use serde::Serialize;

use super::annotation_group;
use crate::model::{
    AllocId, BeforeRecording, FrameId, IdIndex, Memory, Names, Phase, SiteId, StackId,
};

pub use super::frames::FrameFilter;

/// What to group allocations by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The call stack (library frames hidden unless [`FrameFilter::All`]).
    Stack,
    /// The innermost frame of the user's own code.
    UserFrame,
    /// By the allocation's shape (`f32[512,1024]`).
    Shape,
    /// By the framework op that allocated it.
    Op,
    /// By element type.
    Dtype,
    /// By category or region (`parameter`, `temp`, `output`).
    Category,
    /// By the training phase it was made in (`forward`, `backward`,
    /// `optimizer`).
    Phase,
    /// By the innermost annotated range (`record_function`, a user
    /// annotation) it was made in; memory made outside every range is
    /// [`annotation_group::OUTSIDE_LABEL`]. Sites carry it only after
    /// [`annotation_group::assign`].
    Annotation,
    /// By the CUDA stream it was made for (CUDA snapshots record it).
    Stream,
    /// By the `torch.compile` graph it was made in (snapshots recorded with
    /// `compile_context=True`); `<none>` outside compiled code.
    CompiledGraph,
}

impl GroupBy {
    /// The name used in every output (`user_frame`, `op`).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Stack => "stack",
            GroupBy::UserFrame => "user_frame",
            GroupBy::Shape => "shape",
            GroupBy::Op => "op",
            GroupBy::Dtype => "dtype",
            GroupBy::Category => "category",
            GroupBy::Phase => "phase",
            GroupBy::Annotation => "annotation",
            GroupBy::Stream => "stream",
            GroupBy::CompiledGraph => "compiled_graph",
        }
    }
}

/// Label of the group for allocations with no value for the key.
pub const NONE_LABEL: &str = "<none>";
/// Label of an empty call stack.
pub const NO_STACK_LABEL: &str = "<no stack>";

/// Whether a breakdown's groups say nothing: there are some and every one
/// is the label of allocations with no value for the key (`<no stack>`,
/// `<none>`), so its table would only repeat the total. Tables leave such a
/// breakdown out; JSON keeps it.
pub fn says_nothing<'a>(keys: impl IntoIterator<Item = &'a str>) -> bool {
    let mut any = false;
    for key in keys {
        if key != NONE_LABEL && key != NO_STACK_LABEL {
            return false;
        }
        any = true;
    }
    any
}

/// The group label of one site.
pub fn label(names: &Names, site: SiteId, by: GroupBy, filter: &FrameFilter) -> String {
    let site = names.site_of(site);
    let text = |s: Option<crate::model::StrId>| match s {
        Some(id) => names.str(id).to_string(),
        None => NONE_LABEL.to_string(),
    };
    match by {
        GroupBy::Stack if names.before_recording_op(site.op) == Some(BeforeRecording::Freed) => {
            // The free's stack is no allocation's: the name alone.
            BeforeRecording::Freed.name().to_string()
        }
        GroupBy::Stack => {
            let frames = filter.frames(names, site.stack);
            if frames.is_empty() {
                return NO_STACK_LABEL.to_string();
            }
            let labels: Vec<String> = frames
                .iter()
                .map(|&f| filter.frame_text(names, f))
                .collect();
            labels.join(" <- ")
        }
        GroupBy::UserFrame => match filter.user_frame(names, site.stack) {
            Some(f) => filter.frame_text(names, f),
            None => NO_STACK_LABEL.to_string(),
        },
        GroupBy::Shape => text(site.shape),
        GroupBy::Op => text(site.op),
        GroupBy::Dtype => text(site.dtype),
        GroupBy::Category => text(site.category),
        GroupBy::Phase => phase_label(names, site).to_string(),
        GroupBy::Annotation => annotation_group::label(names, site),
        GroupBy::Stream => text(site.stream),
        GroupBy::CompiledGraph => text(site.compiled_graph),
    }
}

/// The phase group of a site: its phase, else for memory allocated before
/// the recording that name (its phase is unknown, and it is no unnamed
/// allocation of the recording), else [`NONE_LABEL`].
fn phase_label(names: &Names, site: &crate::model::Site) -> &'static str {
    match (site.phase, names.before_recording_op(site.op)) {
        (Some(phase), _) => phase.name(),
        (None, Some(before)) => before.name(),
        (None, None) => NONE_LABEL,
    }
}

/// The group of a site when no breakdown is chosen (leaks, diff, frag): its
/// call stack, or for sites without one (allocator events) its op and shape,
/// e.g. `AddV2 [256,1024]`.
pub fn stack_or_op_shape(names: &Names, site: SiteId, filter: &FrameFilter) -> String {
    let s = names.site_of(site);
    if s.stack.0 != 0 || (s.op.is_none() && s.shape.is_none()) {
        return label(names, site, GroupBy::Stack, filter);
    }
    let parts: Vec<&str> = [s.op, s.shape]
        .into_iter()
        .flatten()
        .map(|id| names.str(id))
        .collect();
    parts.join(" ")
}

/// Sizes summed over a group of allocations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Bytes the allocator handed out.
    pub bytes: u64,
    /// Bytes the program asked for.
    pub requested_bytes: u64,
    /// Buffers (an allocation's `count` each).
    pub count: u64,
}

impl Totals {
    /// Adds `other`, saturating (a capped figure, never a wrapped one).
    pub fn add(&mut self, other: Totals) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.requested_bytes = self.requested_bytes.saturating_add(other.requested_bytes);
        self.count = self.count.saturating_add(other.count);
    }
}

/// One row of a breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Shared: the groups of several memories (the devices of one program)
    /// are mostly the same stacks.
    pub key: Arc<str>,
    /// Its live totals.
    #[serde(flatten)]
    pub totals: Totals,
}

/// Totals per site, in site order: each site once, ids ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteTotals {
    sites: Vec<(SiteId, Totals)>,
}

impl SiteTotals {
    /// Each site and its totals, in site order.
    pub fn iter(&self) -> impl Iterator<Item = (SiteId, Totals)> + '_ {
        self.sites.iter().copied()
    }

    /// The sites, in site order.
    pub fn keys(&self) -> impl Iterator<Item = SiteId> + '_ {
        self.sites.iter().map(|&(site, _)| site)
    }

    /// Their totals, in site order.
    pub fn values(&self) -> impl Iterator<Item = Totals> + '_ {
        self.sites.iter().map(|&(_, totals)| totals)
    }

    /// The totals of `site`, if it has any.
    pub fn get(&self, site: SiteId) -> Option<Totals> {
        let at = self.sites.binary_search_by_key(&site, |&(s, _)| s).ok()?;
        Some(self.sites[at].1)
    }
}

/// Sums the totals of each site.
impl FromIterator<(SiteId, Totals)> for SiteTotals {
    fn from_iter<I: IntoIterator<Item = (SiteId, Totals)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut sums = DenseSums::with_room(iter.size_hint().0);
        for (site, totals) in iter {
            sums.add(site.0, totals);
        }
        SiteTotals {
            sites: sums
                .into_sorted()
                .into_iter()
                .map(|(site, totals)| (SiteId(site), totals))
                .collect(),
        }
    }
}

/// Sums the given allocations per site.
pub fn totals_by_site(memory: &Memory, ids: &[AllocId]) -> SiteTotals {
    ids.iter()
        .map(|&id| {
            let a = memory.allocation(id);
            (
                a.site,
                Totals {
                    bytes: a.bytes,
                    requested_bytes: a.requested,
                    count: u64::from(a.count),
                },
            )
        })
        .collect()
}

/// The fields that describe an allocation apart from its stack, in the
/// order [`Grouper::descriptive_keys`] gives them.
pub const DESCRIPTIVE_FIELDS: [GroupBy; 4] = [
    GroupBy::Op,
    GroupBy::Shape,
    GroupBy::Dtype,
    GroupBy::Category,
];

/// Sites alike in every field a table of sites shows (op, shape, dtype,
/// category and shown stack), summed: a row of [`Grouper::site_rows`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteRow {
    /// The op, when the site has one.
    pub op: Option<Arc<str>>,
    /// The shape, when the site has one.
    pub shape: Option<Arc<str>>,
    /// The element type, when the site has one.
    pub dtype: Option<Arc<str>>,
    /// The category, when the site has one.
    pub category: Option<Arc<str>>,
    /// The shown stack, as [`label`] writes it for [`GroupBy::Stack`].
    pub stack: Arc<str>,
    /// The user's frame, as [`label`] writes it for [`GroupBy::UserFrame`].
    pub user_frame: Arc<str>,
    /// The row's first site (the lowest id).
    pub site: SiteId,
    /// Live totals of the row's sites.
    pub totals: Totals,
}

/// The first groups of a breakdown, and how many more there are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopGroups {
    /// The groups kept, largest first.
    pub groups: Vec<Group>,
    /// Groups past the kept ones, counted but not labelled.
    pub omitted: usize,
}

/// The bytes of the `keep`-th largest of `summed` (0 where it has no
/// more): no group smaller is among its `keep` largest.
fn kept_least_bytes(summed: &[(u32, Totals)], keep: usize) -> u64 {
    if keep == 0 || keep >= summed.len() {
        return 0;
    }
    let mut bytes: Vec<u64> = summed.iter().map(|(_, t)| t.bytes).collect();
    let (_, &mut least, _) = bytes.select_nth_unstable_by(keep - 1, |a, b| b.cmp(a));
    least
}

/// Totals summed by small dense ids (sites, group keys): an index by id
/// into the sums, not a hash table. At ten million distinct sites a hash
/// table is half a gigabyte probed at random. Ids mostly come in
/// ascending order (sites and keys are handed out in the order a reader
/// meets them): until one does not, the sums are appended and no index is
/// kept at all.
#[derive(Default)]
struct DenseSums {
    /// Whether `slot_of` is kept; until then `sums` is strictly ascending.
    indexed: bool,
    /// By id: its position in `sums` + 1 (0: not seen).
    slot_of: Vec<u32>,
    /// In the order ids were first seen.
    sums: Vec<(u32, Totals)>,
}

impl DenseSums {
    /// With room for `ids` sums (an estimate: sums made that long at once
    /// are not copied as they grow, as far as the memory can be had).
    fn with_room(ids: usize) -> DenseSums {
        let mut sums = DenseSums::default();
        let _ = sums.sums.try_reserve_exact(ids);
        sums
    }

    fn add(&mut self, id: u32, totals: Totals) {
        if !self.indexed {
            match self.sums.last_mut() {
                Some((last, sum)) if *last == id => return sum.add(totals),
                Some((last, _)) if *last > id => self.index(),
                _ => return self.sums.push((id, totals)),
            }
        }
        let at = id as usize;
        if self.slot_of.len() <= at {
            // Ids are bounded by the profile's tables (a site or a key each).
            self.slot_of.resize((at + 1).max(self.slot_of.len() * 2), 0);
        }
        match self.slot_of[at].checked_sub(1) {
            Some(slot) => self.sums[slot as usize].1.add(totals),
            None => {
                self.sums.push((id, totals));
                self.slot_of[at] = self.sums.len() as u32;
            }
        }
    }

    /// Starts keeping the index, for an id out of order.
    fn index(&mut self) {
        self.indexed = true;
        let bound = self.sums.last().map_or(0, |&(id, _)| id as usize + 1);
        self.slot_of = vec![0; bound];
        for (slot, &(id, _)) in self.sums.iter().enumerate() {
            self.slot_of[id as usize] = slot as u32 + 1;
        }
    }

    /// The sums, ids ascending.
    fn into_sorted(mut self) -> Vec<(u32, Totals)> {
        if !self.sums.is_sorted_by_key(|&(id, _)| id) {
            self.sums.sort_unstable_by_key(|&(id, _)| id);
        }
        self.sums
    }
}

/// Merges per-site totals into labelled groups, largest first (ties by label).
pub fn breakdown(
    names: &Names,
    by_site: &SiteTotals,
    by: GroupBy,
    filter: &FrameFilter,
) -> Vec<Group> {
    Grouper::new(names, filter).breakdown(by_site, by)
}

/// Finds which group each site falls in without making its label, then
/// labels each group once: [`label`] for many sites of one profile. A pprof
/// profile can hold millions of distinct stacks, and hashing a million long
/// labels costs more than the rest of the analysis.
///
/// Keys stand for labels: frames that print alike share one text id, and a
/// shown stack is a node of a trie of text ids (leaf on top of its caller,
/// as in [`Names`]), so stacks that print alike share a node. Only a frame
/// name containing ` <- `, or a name that is literally `<none>` or `<no
/// stack>`, could make two keys print alike; no profiler writes those.
pub struct Grouper<'a> {
    names: &'a Names,
    filter: &'a FrameFilter,
    /// By frame id: its text id + 1 (0: not worked out yet).
    frame_text: Vec<u32>,
    texts: Vec<Box<str>>,
    text_ids: FxHashMap<Box<str>, u32>,
    /// By frame id: whether it is library code, once known.
    library: Vec<Option<bool>>,
    /// The shown-stack trie: `(text id, caller node)`; node 0 is the empty
    /// stack.
    nodes: Vec<(u32, u32)>,
    node_ids: IdIndex,
    /// By stack id: the node of its user frames + 1 (0: not worked out yet).
    user_node: Vec<u32>,
    /// By stack id: the node shown for a stack without user frames + 1.
    fallback_node: Vec<u32>,
    /// Stacks waiting for their caller's node (kept to reuse its buffer).
    pending: Vec<StackId>,
    /// By [`GroupBy`], then by key: its label, once made.
    labels: [Vec<Option<Arc<str>>>; GROUP_BYS],
}

/// How many [`GroupBy`] values there are.
const GROUP_BYS: usize = 10;
const _: () = assert!(GroupBy::CompiledGraph as usize + 1 == GROUP_BYS);

impl<'a> Grouper<'a> {
    /// Merges per-site totals into labelled groups, largest first (ties by
    /// label). What one call works out about stacks serves the next: make
    /// one grouper for all the memories of a profile.
    pub fn breakdown(&mut self, by_site: &SiteTotals, by: GroupBy) -> Vec<Group> {
        self.top_groups(by_site, by, None).groups
    }

    /// [`Grouper::breakdown`]'s first `keep` groups (all for `None`), the
    /// rest only counted: a table of ten rows from ten million stacks
    /// labels ten.
    pub fn top_groups(
        &mut self,
        by_site: &SiteTotals,
        by: GroupBy,
        keep: Option<usize>,
    ) -> TopGroups {
        // In site order: sites made one after the other have neighbouring
        // stacks, so working out their keys walks the profile's tables in
        // order instead of jumping about in them.
        let keys = crate::timings::span("group: keys");
        // At most a key per site (a stack each, on a pprof profile).
        let mut sums = DenseSums::with_room(by_site.sites.len());
        for (site, totals) in by_site.iter() {
            let key = self.key(site, by);
            sums.add(key, totals);
        }
        drop(keys);
        let _order = crate::timings::span("group: labels and order");
        // The sort below orders the groups whole: no need to sort the keys.
        let summed = sums.sums;
        let total = summed.len();
        let keep = keep.unwrap_or(total).min(total);
        let groups = if by == GroupBy::Stack {
            self.top_stack_groups(summed, keep)
        } else {
            let mut rows: Vec<Group> = summed
                .into_iter()
                .map(|(key, totals)| Group {
                    key: self.shared_label(key, by),
                    totals,
                })
                .collect();
            // Keys are unique, so an unstable sort gives the one order
            // `sort_groups` gives.
            rows.sort_unstable_by(|a, b| {
                b.totals
                    .bytes
                    .cmp(&a.totals.bytes)
                    .then_with(|| a.key.cmp(&b.key))
            });
            rows.truncate(keep);
            rows
        };
        TopGroups {
            groups,
            omitted: total - keep,
        }
    }

    /// The first `keep` stack groups, largest first, ties by label as
    /// [`sort_groups`] orders them, but with ties mostly settled without
    /// making the labels: a million groups of one size (a model's layers)
    /// would compare a million labels that no cache holds twenty times
    /// each. A stack's label is its frames' texts joined leaf first, so two
    /// labels compare as the texts where their frames first differ, unless
    /// one of those texts begins the other (then the labels' bytes are
    /// compared, walked from the trie). Only the kept groups are labelled.
    fn top_stack_groups(&mut self, summed: Vec<(u32, Totals)>, keep: usize) -> Vec<Group> {
        /// Frames compared inline; deeper ties walk the trie.
        const INLINE: usize = 4;
        struct Row {
            bytes: u64,
            /// Text ranks of the first frames (0: the label ended).
            ranks: [u32; INLINE],
            key: u32,
            totals: Totals,
        }
        // Only groups at least as large as the `keep`-th largest can be
        // kept: rows (56 bytes each, a million on a pprof profile of a
        // million stacks, all of them memory faulted in anew) are made for
        // those alone, and the ties at that size.
        let least = kept_least_bytes(&summed, keep);
        // The texts of the rows' first frames (text id + 1; 0: the label
        // ended), then each one's rank among those texts + 1 and whether it
        // begins another of them (the next in order begins with it if any
        // does). Only these texts: the table holds every memory's, and
        // ranking it whole for each memory made a profile of 10^5 devices
        // quadratic.
        let mut rows: Vec<Row> = summed
            .into_iter()
            .filter(|(_, totals)| totals.bytes >= least)
            .map(|(key, totals)| {
                let mut ranks = [0; INLINE];
                let mut node = key;
                for r in &mut ranks {
                    if node == 0 {
                        break;
                    }
                    let (text, caller) = self.nodes[node as usize];
                    *r = text + 1;
                    node = caller;
                }
                Row {
                    bytes: totals.bytes,
                    ranks,
                    key,
                    totals,
                }
            })
            .collect();
        let mut order: Vec<u32> = rows
            .iter()
            .flat_map(|r| r.ranks)
            .filter(|&t| t != 0)
            .map(|t| t - 1)
            .collect();
        order.sort_unstable();
        order.dedup();
        order.sort_unstable_by(|&a, &b| self.texts[a as usize].cmp(&self.texts[b as usize]));
        let mut rank: FxHashMap<u32, u32> = FxHashMap::default();
        // By rank; rank 0 (the end of a label) begins nothing.
        let mut begins_another = vec![false; order.len() + 1];
        for (i, &text) in order.iter().enumerate() {
            rank.insert(text, i as u32 + 1);
            begins_another[i + 1] = order.get(i + 1).is_some_and(|&next| {
                self.texts[next as usize].starts_with(&*self.texts[text as usize])
            });
        }
        for row in &mut rows {
            for r in row.ranks.iter_mut().filter(|r| **r != 0) {
                *r = rank[&(*r - 1)];
            }
        }
        let this = &*self;
        let by_label = |a: &Row, b: &Row| {
            // The empty stack's label is not made of frames.
            if a.key != 0 && b.key != 0 {
                for (&x, &y) in a.ranks.iter().zip(&b.ranks) {
                    if x != y {
                        if begins_another[x as usize] || begins_another[y as usize] {
                            break;
                        }
                        return x.cmp(&y);
                    }
                }
            }
            this.compare_stack_labels(a.key, b.key)
        };
        let order = |a: &Row, b: &Row| b.bytes.cmp(&a.bytes).then_with(|| by_label(a, b));
        if keep == 0 {
            rows.clear();
        } else if keep < rows.len() {
            rows.select_nth_unstable_by(keep - 1, order);
            rows.truncate(keep);
        }
        rows.sort_unstable_by(order);
        rows.into_iter()
            .map(|row| Group {
                key: self.shared_label(row.key, GroupBy::Stack),
                totals: row.totals,
            })
            .collect()
    }

    /// The order of two stack keys' labels, without making them.
    fn compare_stack_labels(&self, a: u32, b: u32) -> std::cmp::Ordering {
        if a == b {
            return std::cmp::Ordering::Equal;
        }
        if a == 0 || b == 0 {
            return self
                .label(a, GroupBy::Stack)
                .cmp(&self.label(b, GroupBy::Stack));
        }
        let bytes = |key| self.stack_label_parts(key).flat_map(str::bytes);
        bytes(a).cmp(bytes(b))
    }

    /// The pieces of a stack key's label (not the empty stack's): its
    /// frames' texts, leaf first, with ` <- ` between them.
    fn stack_label_parts(&self, key: u32) -> impl Iterator<Item = &str> + '_ {
        let nodes = std::iter::successors(Some(key), |&node| {
            Some(self.nodes[node as usize].1).filter(|&caller| caller != 0)
        });
        nodes.enumerate().flat_map(|(i, node)| {
            let separator = if i == 0 { "" } else { " <- " };
            [
                separator,
                &*self.texts[self.nodes[node as usize].0 as usize],
            ]
        })
    }

    /// A site's op, shape, dtype and category as group keys (0: the site
    /// has none), for grouping by those fields together; equal keys are
    /// equal texts. [`Grouper::field_label`] gives their texts.
    pub fn descriptive_keys(&mut self, site: SiteId) -> [u32; 4] {
        DESCRIPTIVE_FIELDS.map(|by| self.key(site, by))
    }

    /// The text of a key of one of the [`DESCRIPTIVE_FIELDS`]; `None` for 0.
    pub fn field_label(&mut self, key: u32, by: GroupBy) -> Option<Arc<str>> {
        (key != 0).then(|| self.shared_label(key, by))
    }

    /// One row per distinct (op, shape, dtype, category, shown stack) of
    /// the sites, largest first, ties by those fields in that order (a
    /// missing field first).
    pub fn site_rows(&mut self, by_site: &SiteTotals) -> Vec<SiteRow> {
        const FIELDS: [GroupBy; 5] = [
            GroupBy::Op,
            GroupBy::Shape,
            GroupBy::Dtype,
            GroupBy::Category,
            GroupBy::Stack,
        ];
        // Rows in the order of their first site, so that rows whose fields
        // print alike still come out in one order.
        let mut row_of: FxHashMap<[u32; 5], usize> = FxHashMap::default();
        let mut summed: Vec<([u32; 5], SiteId, Totals)> = Vec::new();
        for (site, totals) in by_site.iter() {
            let key = FIELDS.map(|by| self.key(site, by));
            match row_of.entry(key) {
                std::collections::hash_map::Entry::Occupied(row) => {
                    summed[*row.get()].2.add(totals)
                }
                std::collections::hash_map::Entry::Vacant(row) => {
                    row.insert(summed.len());
                    summed.push((key, site, totals));
                }
            }
        }
        let mut rows = Vec::with_capacity(summed.len());
        for ([op, shape, dtype, category, stack], site, totals) in summed {
            let user_frame = self.key(site, GroupBy::UserFrame);
            let mut field = |key: u32, by| (key != 0).then(|| self.shared_label(key, by));
            rows.push(SiteRow {
                op: field(op, GroupBy::Op),
                shape: field(shape, GroupBy::Shape),
                dtype: field(dtype, GroupBy::Dtype),
                category: field(category, GroupBy::Category),
                stack: self.shared_label(stack, GroupBy::Stack),
                user_frame: self.shared_label(user_frame, GroupBy::UserFrame),
                site,
                totals,
            });
        }
        type Fields<'r> = (
            Option<&'r str>,
            Option<&'r str>,
            Option<&'r str>,
            Option<&'r str>,
            &'r str,
        );
        fn fields(r: &SiteRow) -> Fields<'_> {
            (
                r.op.as_deref(),
                r.shape.as_deref(),
                r.dtype.as_deref(),
                r.category.as_deref(),
                &r.stack,
            )
        }
        rows.sort_by(|a, b| {
            b.totals
                .bytes
                .cmp(&a.totals.bytes)
                .then_with(|| fields(a).cmp(&fields(b)))
        });
        rows
    }

    /// A grouper of the sites of `names`, showing frames as `filter` says.
    pub fn new(names: &'a Names, filter: &'a FrameFilter) -> Self {
        Grouper {
            names,
            filter,
            frame_text: Vec::new(),
            texts: Vec::new(),
            text_ids: FxHashMap::default(),
            library: Vec::new(),
            nodes: vec![(u32::MAX, 0)],
            node_ids: IdIndex::default(),
            user_node: Vec::new(),
            fallback_node: Vec::new(),
            pending: Vec::new(),
            labels: Default::default(),
        }
    }

    /// [`Grouper::label`], made once per key for all the memories.
    fn shared_label(&mut self, key: u32, by: GroupBy) -> Arc<str> {
        let labels = &self.labels[by as usize];
        if let Some(Some(label)) = labels.get(key as usize) {
            return label.clone();
        }
        let label: Arc<str> = self.label(key, by).into();
        let labels = &mut self.labels[by as usize];
        if labels.len() <= key as usize {
            labels.resize(key as usize + 1, None);
        }
        labels[key as usize] = Some(label.clone());
        label
    }

    fn is_library(&mut self, frame: FrameId) -> bool {
        if self.library.len() <= frame.index() {
            self.library.resize(frame.index() + 1, None);
        }
        *self.library[frame.index()]
            .get_or_insert_with(|| self.filter.is_library(self.names, frame))
    }

    fn text_id(&mut self, frame: FrameId) -> u32 {
        if self.frame_text.len() <= frame.index() {
            self.frame_text.resize(frame.index() + 1, 0);
        }
        if let Some(id) = self.frame_text[frame.index()].checked_sub(1) {
            return id;
        }
        let text: Box<str> = self.filter.frame_text(self.names, frame).into();
        let id = match self.text_ids.get(&text) {
            Some(&id) => id,
            None => {
                let id = self.texts.len() as u32;
                self.texts.push(text.clone());
                self.text_ids.insert(text, id);
                id
            }
        };
        self.frame_text[frame.index()] = id + 1;
        id
    }

    fn node(&mut self, text: u32, caller: u32) -> u32 {
        self.node_ids
            .find_or_push(&mut self.nodes, (text, caller), caller)
    }

    /// The node of a stack's user frames (0 when it has none), worked out
    /// from its caller's: once per stack of the profile, however many sites
    /// share it.
    fn user_node(&mut self, stack: StackId) -> u32 {
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let mut at = stack;
        let mut node = loop {
            if at.0 == 0 {
                break 0;
            }
            if let Some(known) = self
                .user_node
                .get(at.index())
                .and_then(|n| n.checked_sub(1))
            {
                break known;
            }
            pending.push(at);
            at = self.names.caller(at);
        };
        for &at in pending.iter().rev() {
            if let Some(frame) = self.names.leaf(at) {
                if !self.is_library(frame) {
                    let text = self.text_id(frame);
                    node = self.node(text, node);
                }
            }
            if self.user_node.len() <= at.index() {
                self.user_node.resize(at.index() + 1, 0);
            }
            self.user_node[at.index()] = node + 1;
        }
        self.pending = pending;
        node
    }

    /// The node of the frames [`FrameFilter::frames`] shows for a stack.
    fn shown_node(&mut self, stack: StackId) -> u32 {
        let user = self.user_node(stack);
        if user != 0 || stack.0 == 0 {
            return user;
        }
        if let Some(known) = self
            .fallback_node
            .get(stack.index())
            .and_then(|n| n.checked_sub(1))
        {
            return known;
        }
        // No user frame: landmarks or the whole stack.
        let mut node = 0;
        for frame in self.filter.frames(self.names, stack).into_iter().rev() {
            let text = self.text_id(frame);
            node = self.node(text, node);
        }
        if self.fallback_node.len() <= stack.index() {
            self.fallback_node.resize(stack.index() + 1, 0);
        }
        self.fallback_node[stack.index()] = node + 1;
        node
    }

    /// The group of a site: a node for stacks, a text id + 1 for user
    /// frames, a string id + 1 for the other keys (0: none).
    fn key(&mut self, site: SiteId, by: GroupBy) -> u32 {
        let site = *self.names.site_of(site);
        let string = |s: Option<crate::model::StrId>| s.map_or(0, |id| id.0 + 1);
        match by {
            GroupBy::Stack => match self.names.before_recording_op(site.op) {
                // The stack of memory freed during the recording but
                // allocated before it is the free's: grouped under its
                // name alone, never as an allocation's stack.
                Some(BeforeRecording::Freed) => self
                    .filter
                    .user_frame(self.names, site.stack)
                    .map_or(0, |root| {
                        let text = self.text_id(root);
                        self.node(text, 0)
                    }),
                _ => self.shown_node(site.stack),
            },
            GroupBy::UserFrame => {
                let names = self.names;
                let user = if names.before_recording_op(site.op).is_some() {
                    self.filter.user_frame(names, site.stack)
                } else {
                    names
                        .frames_of(site.stack)
                        .find(|&f| !self.is_library(f))
                        .or_else(|| self.filter.user_frame(names, site.stack))
                };
                user.map_or(0, |f| self.text_id(f) + 1)
            }
            GroupBy::Shape => string(site.shape),
            GroupBy::Op => string(site.op),
            GroupBy::Dtype => string(site.dtype),
            GroupBy::Category => string(site.category),
            GroupBy::Annotation => string(site.annotation),
            GroupBy::Phase => PHASE_LABELS
                .iter()
                .position(|&l| l == phase_label(self.names, &site))
                .map_or(0, |i| i as u32 + 1),
            GroupBy::Stream => string(site.stream),
            GroupBy::CompiledGraph => string(site.compiled_graph),
        }
    }

    /// When the oldest allocation of each group of `by` that is already
    /// labelled (kept by [`Grouper::top_groups`]) was made, from each live
    /// allocation's site and the position it was made at (`None`: before
    /// the recording, older than any position); groups not labelled are
    /// left out, so no label is made here.
    pub fn oldest_by_label(
        &mut self,
        made: impl Iterator<Item = (SiteId, Option<i64>)>,
        by: GroupBy,
    ) -> FxHashMap<Arc<str>, Option<i64>> {
        let mut by_site: FxHashMap<SiteId, Option<i64>> = FxHashMap::default();
        for (site, at) in made {
            by_site
                .entry(site)
                .and_modify(|oldest| *oldest = (*oldest).min(at))
                .or_insert(at);
        }
        let mut oldest: FxHashMap<Arc<str>, Option<i64>> = FxHashMap::default();
        for (site, at) in by_site {
            let key = self.key(site, by);
            let Some(Some(label)) = self.labels[by as usize].get(key as usize) else {
                continue;
            };
            oldest
                .entry(label.clone())
                .and_modify(|o| *o = (*o).min(at))
                .or_insert(at);
        }
        oldest
    }

    /// The text of a key: the same text as [`label`] for its sites.
    fn label(&self, key: u32, by: GroupBy) -> String {
        match by {
            GroupBy::Stack => {
                if key == 0 {
                    return NO_STACK_LABEL.to_string();
                }
                self.stack_label_parts(key).collect()
            }
            GroupBy::UserFrame => match key.checked_sub(1) {
                Some(text) => self.texts[text as usize].to_string(),
                None => NO_STACK_LABEL.to_string(),
            },
            GroupBy::Phase => key
                .checked_sub(1)
                .and_then(|i| PHASE_LABELS.get(i as usize))
                .unwrap_or(&NONE_LABEL)
                .to_string(),
            GroupBy::Annotation => match key.checked_sub(1) {
                Some(id) => self.names.str(crate::model::StrId(id)).to_string(),
                None => annotation_group::OUTSIDE_LABEL.to_string(),
            },
            _ => match key.checked_sub(1) {
                Some(id) => self.names.str(crate::model::StrId(id)).to_string(),
                None => NONE_LABEL.to_string(),
            },
        }
    }
}

/// Largest first; ties broken by label so output is deterministic.
pub fn sort_groups(rows: &mut [Group]) {
    rows.sort_by(|a, b| {
        b.totals
            .bytes
            .cmp(&a.totals.bytes)
            .then_with(|| a.key.cmp(&b.key))
    });
}

/// Whether any live site has a value for this key (a shape column for a
/// profile without shapes would be one `<none>` row). Streams count only
/// when there are two: every allocation of a single-stream program is on
/// the default stream, which tells nothing.
pub fn has_values(names: &Names, by_site: &SiteTotals, by: GroupBy) -> bool {
    if by == GroupBy::Stream {
        let mut streams = by_site.keys().filter_map(|s| names.site_of(s).stream);
        let first = streams.next();
        return first.is_some_and(|first| streams.any(|s| s != first));
    }
    by_site.keys().any(|s| {
        let site = names.site_of(s);
        match by {
            // The root frame alone (memory allocated before the recording
            // in a format without stacks) is no stack the profile recorded.
            GroupBy::Stack | GroupBy::UserFrame => {
                site.stack.0 != 0 && !names.is_before_recording_only(site.stack)
            }
            GroupBy::Shape => site.shape.is_some(),
            // Memory from before the recording is named by its op alone.
            GroupBy::Op => site.op.is_some() && names.before_recording_op(site.op).is_none(),
            GroupBy::Dtype => site.dtype.is_some(),
            GroupBy::Category => site.category.is_some(),
            GroupBy::Phase => site.phase.is_some(),
            GroupBy::Annotation => site.annotation.is_some(),
            GroupBy::Stream => site.stream.is_some(),
            GroupBy::CompiledGraph => site.compiled_graph.is_some(),
        }
    })
}

/// Every label of a phase group but [`NONE_LABEL`]: a [`Grouper`]'s key for
/// [`GroupBy::Phase`] is the position here + 1.
const PHASE_LABELS: [&str; 7] = [
    Phase::ALL[0].name(),
    Phase::ALL[1].name(),
    Phase::ALL[2].name(),
    Phase::ALL[3].name(),
    Phase::ALL[4].name(),
    BeforeRecording::StillLive.name(),
    BeforeRecording::Freed.name(),
];

#[cfg(test)]
mod tests;
