//! Grouping allocations into a breakdown: by call stack, by the user's own
//! frame, by shape, op, dtype or category.
//!
//! Allocations are first summed per interned site (a `u32` hash), then each
//! site is labelled once, so the cost of labels is per site, not per buffer.

use rustc_hash::FxHashMap;

use serde::Serialize;

use crate::model::{AllocId, FrameId, Memory, Names, SiteId, StackId};

/// What to group allocations by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The call stack (library frames hidden unless [`FrameFilter::All`]).
    Stack,
    /// The innermost frame of the user's own code.
    UserFrame,
    Shape,
    Op,
    Dtype,
    Category,
}

impl GroupBy {
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Stack => "stack",
            GroupBy::UserFrame => "user_frame",
            GroupBy::Shape => "shape",
            GroupBy::Op => "op",
            GroupBy::Dtype => "dtype",
            GroupBy::Category => "category",
        }
    }
}

/// Which frames of a stack are shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameFilter {
    /// Every frame, as the profiler recorded it.
    All,
    /// Hide frames whose file contains one of these patterns (library code).
    /// A stack made only of library frames is shown whole.
    User { library_patterns: Vec<String> },
}

impl Default for FrameFilter {
    fn default() -> Self {
        FrameFilter::User {
            library_patterns: vec!["site-packages".into(), "dist-packages".into()],
        }
    }
}

impl FrameFilter {
    /// Library code: a file matching a library pattern, or a native frame
    /// (not a `.py` file: C++ frames of PyTorch, unwinder entries). The
    /// user's own code is Python.
    pub fn is_library(&self, names: &Names, frame: FrameId) -> bool {
        match self {
            FrameFilter::All => false,
            FrameFilter::User { library_patterns } => {
                let file = names.str(names.frame_of(frame).file);
                !file.ends_with(".py") || library_patterns.iter().any(|p| file.contains(p.as_str()))
            }
        }
    }

    /// The frames shown for a stack, leaf first: the user's frames; for a
    /// stack with none (a PyTorch autograd thread), its landmarks (the
    /// autograd node and the op it runs); else the whole stack.
    pub fn frames(&self, names: &Names, stack: StackId) -> Vec<FrameId> {
        let all: Vec<FrameId> = names.frames_of(stack).collect();
        let user: Vec<FrameId> = all
            .iter()
            .copied()
            .filter(|&f| !self.is_library(names, f))
            .collect();
        if !user.is_empty() {
            return user;
        }
        let landmarks = self.landmarks(names, &all);
        if landmarks.is_empty() {
            all
        } else {
            landmarks
        }
    }

    /// The innermost user frame, else the innermost landmark, else the leaf.
    pub fn user_frame(&self, names: &Names, stack: StackId) -> Option<FrameId> {
        let all: Vec<FrameId> = names.frames_of(stack).collect();
        all.iter()
            .copied()
            .find(|&f| !self.is_library(names, f))
            .or_else(|| self.landmarks(names, &all).first().copied())
            .or_else(|| all.first().copied())
    }

    /// Frames that say what a native stack is doing: an autograd node's
    /// `apply` and the dispatcher entry of an op (`at::_ops::mm::call`).
    /// Allocator and unwinder internals above them say nothing.
    fn landmarks(&self, names: &Names, frames: &[FrameId]) -> Vec<FrameId> {
        if *self == FrameFilter::All {
            return Vec::new();
        }
        let function = |f: FrameId| names.str(names.frame_of(f).function);
        let op = frames
            .iter()
            .copied()
            .find(|&f| function(f).starts_with("at::_ops::") && function(f).contains("::call("));
        let node = frames.iter().copied().find(|&f| {
            let name = function(f);
            name.contains("Backward") && name.contains("::apply(")
        });
        op.into_iter().chain(node).collect()
    }
}

/// Label of the group for allocations with no value for the key.
pub const NONE_LABEL: &str = "<none>";
/// Label of an empty call stack.
pub const NO_STACK_LABEL: &str = "<no stack>";

/// The group label of one site.
pub fn label(names: &Names, site: SiteId, by: GroupBy, filter: &FrameFilter) -> String {
    let site = names.site_of(site);
    let text = |s: Option<crate::model::StrId>| match s {
        Some(id) => names.str(id).to_string(),
        None => NONE_LABEL.to_string(),
    };
    match by {
        GroupBy::Stack => {
            let frames = filter.frames(names, site.stack);
            if frames.is_empty() {
                return NO_STACK_LABEL.to_string();
            }
            let labels: Vec<String> = frames.iter().map(|&f| names.frame_label(f)).collect();
            labels.join(" <- ")
        }
        GroupBy::UserFrame => match filter.user_frame(names, site.stack) {
            Some(f) => names.frame_label(f),
            None => NO_STACK_LABEL.to_string(),
        },
        GroupBy::Shape => text(site.shape),
        GroupBy::Op => text(site.op),
        GroupBy::Dtype => text(site.dtype),
        GroupBy::Category => text(site.category),
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
    pub bytes: u64,
    pub requested_bytes: u64,
    /// Buffers (an allocation's `count` each).
    pub count: u64,
}

impl Totals {
    pub fn add(&mut self, other: Totals) {
        self.bytes += other.bytes;
        self.requested_bytes += other.requested_bytes;
        self.count += other.count;
    }
}

/// One row of a breakdown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    pub key: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// Totals per site. Sites are interned ids: Fx hashing, not SipHash (a
/// million sites in a pprof profile).
pub type SiteTotals = FxHashMap<SiteId, Totals>;

/// Sums the given allocations per site.
pub fn totals_by_site(memory: &Memory, ids: &[AllocId]) -> SiteTotals {
    let mut by_site = SiteTotals::default();
    for &id in ids {
        let a = memory.allocation(id);
        by_site.entry(a.site).or_default().add(Totals {
            bytes: a.bytes,
            requested_bytes: a.requested,
            count: a.count,
        });
    }
    by_site
}

/// Merges per-site totals into labelled groups, largest first (ties by label).
pub fn breakdown(
    names: &Names,
    by_site: &SiteTotals,
    by: GroupBy,
    filter: &FrameFilter,
) -> Vec<Group> {
    let mut labeller = Labeller::new(names, filter);
    let mut groups: FxHashMap<String, Totals> = FxHashMap::default();
    groups.reserve(by_site.len());
    for (&site, &totals) in by_site {
        groups
            .entry(labeller.label(site, by))
            .or_default()
            .add(totals);
    }
    let mut rows: Vec<Group> = groups
        .into_iter()
        .map(|(key, totals)| Group { key, totals })
        .collect();
    // Keys are unique, so an unstable sort gives the one order `sort_groups`
    // gives.
    rows.sort_unstable_by(|a, b| {
        b.totals
            .bytes
            .cmp(&a.totals.bytes)
            .then_with(|| a.key.cmp(&b.key))
    });
    rows
}

/// [`label`] for many sites of one profile: a profile with a million stacks
/// has far fewer frames, so each frame's text and whether it is library code
/// are worked out once.
struct Labeller<'a> {
    names: &'a Names,
    filter: &'a FrameFilter,
    /// By frame id: its label, once made.
    frame_text: Vec<Option<Box<str>>>,
    /// By frame id: whether it is library code, once known.
    library: Vec<Option<bool>>,
    /// The stack being labelled, leaf first (kept to reuse its buffer).
    frames: Vec<FrameId>,
}

impl<'a> Labeller<'a> {
    fn new(names: &'a Names, filter: &'a FrameFilter) -> Self {
        Labeller {
            names,
            filter,
            frame_text: Vec::new(),
            library: Vec::new(),
            frames: Vec::new(),
        }
    }

    fn is_library(&mut self, frame: FrameId) -> bool {
        if self.library.len() <= frame.index() {
            self.library.resize(frame.index() + 1, None);
        }
        *self.library[frame.index()]
            .get_or_insert_with(|| self.filter.is_library(self.names, frame))
    }

    fn push_text(&mut self, frame: FrameId, out: &mut String) {
        if self.frame_text.len() <= frame.index() {
            self.frame_text.resize(frame.index() + 1, None);
        }
        let names = self.names;
        out.push_str(
            self.frame_text[frame.index()].get_or_insert_with(|| names.frame_label(frame).into()),
        );
    }

    /// The same text as [`label`].
    fn label(&mut self, site: SiteId, by: GroupBy) -> String {
        let stack = self.names.site_of(site).stack;
        match by {
            GroupBy::Stack => {
                let mut frames = std::mem::take(&mut self.frames);
                frames.clear();
                frames.extend(self.names.frames_of(stack));
                frames.retain(|&f| !self.is_library(f));
                if frames.is_empty() {
                    // No user frame: landmarks or the whole stack, as
                    // `FrameFilter::frames` picks them.
                    frames = self.filter.frames(self.names, stack);
                }
                let mut out = String::new();
                for (i, &frame) in frames.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" <- ");
                    }
                    self.push_text(frame, &mut out);
                }
                self.frames = frames;
                if out.is_empty() && self.frames.is_empty() {
                    return NO_STACK_LABEL.to_string();
                }
                out
            }
            GroupBy::UserFrame => {
                let user = self
                    .names
                    .frames_of(stack)
                    .find(|&f| !self.is_library(f))
                    .or_else(|| self.filter.user_frame(self.names, stack));
                match user {
                    Some(f) => {
                        let mut out = String::new();
                        self.push_text(f, &mut out);
                        out
                    }
                    None => NO_STACK_LABEL.to_string(),
                }
            }
            _ => label(self.names, site, by, self.filter),
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
/// profile without shapes would be one `<none>` row).
pub fn has_values(names: &Names, by_site: &SiteTotals, by: GroupBy) -> bool {
    by_site.keys().any(|&s| {
        let site = names.site_of(s);
        match by {
            GroupBy::Stack | GroupBy::UserFrame => site.stack.0 != 0,
            GroupBy::Shape => site.shape.is_some(),
            GroupBy::Op => site.op.is_some(),
            GroupBy::Dtype => site.dtype.is_some(),
            GroupBy::Category => site.category.is_some(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Frame;

    fn stack(names: &mut Names, frames: &[(&str, &str)]) -> StackId {
        let ids: Vec<FrameId> = frames
            .iter()
            .map(|(function, file)| {
                let frame = Frame {
                    function: names.string(function),
                    file: names.string(file),
                    line: 7,
                };
                names.frame(frame)
            })
            .collect();
        names.stack_leaf_first(&ids)
    }

    #[test]
    fn breakdown_labels_every_kind_of_stack_as_label_does() {
        let mut names = Names::default();
        let stacks = [
            // user frames under library ones
            stack(
                &mut names,
                &[
                    ("forward", "/venv/site-packages/torch/nn/linear.py"),
                    ("train_step", "/home/me/train.py"),
                ],
            ),
            // native only, with landmarks
            stack(
                &mut names,
                &[
                    ("at::_ops::mm::call(at::Tensor const&)", "??"),
                    ("torch::autograd::generated::MmBackward0::apply()", "??"),
                ],
            ),
            // native only, no landmark
            stack(&mut names, &[("malloc", "libc.so"), ("start", "")]),
            // the same frames as the first, but a distinct frame id each
            stack(&mut names, &[("train_step", "/home/me/train.py")]),
            StackId(0),
        ];
        let mut by_site = SiteTotals::default();
        let sites: Vec<SiteId> = stacks
            .iter()
            .enumerate()
            .map(|(i, &stack)| {
                let site = names.site(crate::model::Site {
                    stack,
                    ..Default::default()
                });
                by_site.insert(
                    site,
                    Totals {
                        bytes: 100 * (i as u64 % 2),
                        requested_bytes: 1,
                        count: 1,
                    },
                );
                site
            })
            .collect();
        for filter in [FrameFilter::default(), FrameFilter::All] {
            for by in [GroupBy::Stack, GroupBy::UserFrame, GroupBy::Op] {
                // What the plain labels and sums give, sorted as documented.
                let mut expected: Vec<Group> = Vec::new();
                for &site in &sites {
                    let key = label(&names, site, by, &filter);
                    match expected.iter_mut().find(|g| g.key == key) {
                        Some(g) => g.totals.add(by_site[&site]),
                        None => expected.push(Group {
                            key,
                            totals: by_site[&site],
                        }),
                    }
                }
                sort_groups(&mut expected);
                assert_eq!(breakdown(&names, &by_site, by, &filter), expected);
            }
        }
    }

    #[test]
    fn user_frames_are_python_outside_site_packages() {
        let mut names = Names::default();
        let s = stack(
            &mut names,
            &[
                (
                    "c10::cuda::CUDACachingAllocator::malloc",
                    "CUDACachingAllocator.cpp",
                ),
                (
                    "forward",
                    "/venv/lib/python3.11/site-packages/torch/nn/linear.py",
                ),
                ("train_step", "/home/me/train.py"),
                ("<module>", "/home/me/train.py"),
            ],
        );
        let filter = FrameFilter::default();
        let user = filter.user_frame(&names, s).unwrap();
        assert_eq!(names.frame_label(user), "train_step /home/me/train.py:7");
        assert_eq!(filter.frames(&names, s).len(), 2);
        assert_eq!(FrameFilter::All.frames(&names, s).len(), 4);
    }

    #[test]
    fn native_only_stacks_are_named_by_their_op_and_autograd_node() {
        let mut names = Names::default();
        let s = stack(
            &mut names,
            &[
                ("torch::unwind::unwind()", "??"),
                (
                    "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)",
                    "??",
                ),
                (
                    "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)",
                    "??",
                ),
                ("clone", "??"),
            ],
        );
        let filter = FrameFilter::default();
        let labels: Vec<String> = filter
            .frames(&names, s)
            .iter()
            .map(|&f| names.frame_label(f))
            .collect();
        assert_eq!(
            labels,
            [
                "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&) ??:7",
                "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&) ??:7"
            ]
        );
        let user = filter.user_frame(&names, s).unwrap();
        assert!(names.frame_label(user).starts_with("at::_ops::bmm::call"));
    }
}
