//! Interning tables: every string, frame, call stack and allocation site is
//! stored once and referred to by a small id. Analyses compare ids, never
//! strings, so grouping a million allocations by stack is a hash of a `u32`.

use std::hash::{BuildHasher, Hash};

use rustc_hash::{FxBuildHasher, FxHashMap};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into its table.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// An interned string. `StrId(0)` is always the empty string.
    StrId
);
id_type!(
    /// An interned source frame.
    FrameId
);
id_type!(
    /// An interned call stack. `StackId(0)` is always the empty stack.
    StackId
);
id_type!(
    /// An interned allocation site (stack plus op, shape, dtype, category).
    SiteId
);

/// One frame of a call stack, as the profiler wrote it (Python names such as
/// `<module>` are kept verbatim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function's name.
    pub function: StrId,
    /// The file the function is in, as the profiler wrote it.
    pub file: StrId,
    /// 0 when unknown.
    pub line: u32,
}

/// A node of the stack trie: the leaf-most frame and the stack of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StackNode {
    frame: FrameId,
    caller: StackId,
}

/// Where an allocation was made: everything the profile says about it except
/// its size and address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Site {
    /// The call stack, leaf first (the empty stack when unknown).
    pub stack: StackId,
    /// Framework op (`jit(step)/dot_general`, `AddV2`, ...), if known.
    pub op: Option<StrId>,
    /// Shape as the framework prints it (`f32[512,1024]{1,0}`, `[256,1024]`).
    pub shape: Option<StrId>,
    /// Element type (`float32`, `bf16`), if known.
    pub dtype: Option<StrId>,
    /// Region or category (`output`, `temp`, `parameter`, `autograd_detail`...).
    pub category: Option<StrId>,
    /// The training phase it was made in, when the profile tells.
    pub phase: Option<super::Phase>,
    /// The innermost annotated range ([`super::Annotation`]) it was made
    /// in, set only for `--by annotation` (`analysis::annotation_group`):
    /// `None` before, and for memory made outside every range.
    pub annotation: Option<StrId>,
    /// The CUDA stream it was made for, its number as the file writes it
    /// (`0`: the default stream); recorded only by CUDA snapshots.
    pub stream: Option<StrId>,
    /// The `torch.compile` graph it was made in, as the snapshot's
    /// `compile_context` names it (`0/0`: frame 0, its first compile);
    /// `None` outside compiled code or when not recorded.
    pub compiled_graph: Option<StrId>,
}

/// Memory allocated before the recording began, which every format can
/// hold (a snapshot's ring buffer, a trace started mid-run, an allocator's
/// heap at its first event), split by what the recording saw of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BeforeRecording {
    /// Never freed during the recording: live from its start to its end.
    StillLive,
    /// Freed during the recording (the free is all that was recorded).
    Freed,
}

impl BeforeRecording {
    /// Its name in every output: the op of its sites and the root frame of
    /// their stacks.
    pub const fn name(self) -> &'static str {
        match self {
            BeforeRecording::StillLive => "<allocated before recording, still live>",
            BeforeRecording::Freed => "<allocated before recording, freed later>",
        }
    }

    /// The one of them `name` is, if it is one of their names.
    pub fn of_name(name: &str) -> Option<BeforeRecording> {
        [BeforeRecording::StillLive, BeforeRecording::Freed]
            .into_iter()
            .find(|b| b.name() == name)
    }
}

/// All interned names of one profile.
#[derive(Clone)]
pub struct Names {
    strings: Vec<Box<str>>,
    // Ids hash with Fx, not SipHash: a profile can hold millions of stacks,
    // and a profile is the user's own file, not a hash-flooding attack.
    string_ids: FxHashMap<Box<str>, StrId>,
    frames: Vec<Frame>,
    frame_ids: FxHashMap<Frame, FrameId>,
    stacks: Vec<StackNode>,
    stack_ids: IdIndex,
    sites: Vec<Site>,
    site_ids: FxHashMap<Site, SiteId>,
    /// By stack id: the site of that stack and nothing else (`u32::MAX`:
    /// none yet). Most sites of pprof and PyTorch profiles are just a
    /// stack, a million of them: a vector, not the hash table.
    stack_sites: Vec<SiteId>,
}

/// The tables in id order; the hash indexes over them are left out (their
/// iteration order depends on capacity, not on what they hold), so two
/// `Names` that hold the same ids print alike.
impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Names")
            .field("strings", &self.strings)
            .field("frames", &self.frames)
            .field("stacks", &self.stacks)
            .field("sites", &self.sites)
            .field("stack_sites", &self.stack_sites)
            .finish()
    }
}

impl Default for Names {
    fn default() -> Self {
        let mut names = Names {
            strings: Vec::new(),
            string_ids: FxHashMap::default(),
            frames: Vec::new(),
            frame_ids: FxHashMap::default(),
            // Slot 0 is the empty stack; it has no node of its own.
            stacks: vec![StackNode {
                frame: FrameId(u32::MAX),
                caller: StackId(0),
            }],
            stack_ids: IdIndex::default(),
            sites: Vec::new(),
            site_ids: FxHashMap::default(),
            stack_sites: Vec::new(),
        };
        names.string("");
        names
    }
}

impl Names {
    /// Interns a string.
    pub fn string(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = StrId(self.strings.len() as u32);
        let boxed: Box<str> = s.into();
        self.strings.push(boxed.clone());
        self.string_ids.insert(boxed, id);
        id
    }

    /// Interns a string, `None` for an empty one.
    pub fn optional_string(&mut self, s: &str) -> Option<StrId> {
        (!s.is_empty()).then(|| self.string(s))
    }

    /// The string with this id.
    pub fn str(&self, id: StrId) -> &str {
        &self.strings[id.index()]
    }

    /// Interns a frame.
    pub fn frame(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(frame);
        self.frame_ids.insert(frame, id);
        id
    }

    /// The frame with this id.
    pub fn frame_of(&self, id: FrameId) -> Frame {
        self.frames[id.index()]
    }

    /// Pushes `frame` as the new leaf on top of `caller`.
    pub fn push_frame(&mut self, caller: StackId, frame: FrameId) -> StackId {
        let node = StackNode { frame, caller };
        StackId(
            self.stack_ids
                .find_or_push(&mut self.stacks, node, caller.0),
        )
    }

    /// Makes room for `additional` more stacks, so that a reader that knows
    /// about how many it will intern (a pprof profile's sample count) does
    /// not grow the table many times over.
    pub fn reserve_stacks(&mut self, additional: usize) {
        self.stacks.reserve(additional);
        self.stack_ids.reserve(&self.stacks, additional);
    }

    /// Room for `additional` sites of a stack each (a pprof profile's
    /// samples): their tables made that long at once, not grown by copy,
    /// as far as the memory can be had (what is not reserved grows as it
    /// fills).
    pub fn reserve_stack_sites(&mut self, additional: usize) {
        let _ = self.sites.try_reserve(additional);
        let _ = self.stack_sites.try_reserve(additional);
    }

    /// Interns a stack given leaf first (the order pprof, PyTorch and XLA use).
    pub fn stack_leaf_first(&mut self, frames: &[FrameId]) -> StackId {
        frames
            .iter()
            .rev()
            .fold(StackId(0), |caller, &frame| self.push_frame(caller, frame))
    }

    /// The frames of a stack, leaf first.
    pub fn frames_of(&self, stack: StackId) -> StackFrames<'_> {
        StackFrames {
            names: self,
            next: stack,
        }
    }

    /// The leaf frame of a stack, if it has one.
    pub fn leaf(&self, stack: StackId) -> Option<FrameId> {
        (stack.0 != 0).then(|| self.stacks[stack.index()].frame)
    }

    /// The stack of the leaf frame's caller (the empty stack for the empty stack).
    pub fn caller(&self, stack: StackId) -> StackId {
        self.stacks[stack.index()].caller
    }

    /// How many strings are interned: every [`StrId`] is below it.
    pub fn string_count(&self) -> usize {
        self.strings.len()
    }

    /// Every interned site, by id.
    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// Whether any site names a training phase (an XSpace's never do):
    /// without one, no event is of a phase, and walks looking for phases
    /// need not look at the events.
    pub fn any_site_has_phase(&self) -> bool {
        self.sites.iter().any(|s| s.phase.is_some())
    }

    /// Interns a site.
    pub fn site(&mut self, site: Site) -> SiteId {
        let stack_only = Site {
            stack: site.stack,
            ..Site::default()
        };
        if site == stack_only {
            let slot = site.stack.index();
            if let Some(&id) = self.stack_sites.get(slot).filter(|id| id.0 != u32::MAX) {
                return id;
            }
            let id = SiteId(self.sites.len() as u32);
            self.sites.push(site);
            if self.stack_sites.len() <= slot {
                self.stack_sites.resize(slot + 1, SiteId(u32::MAX));
            }
            self.stack_sites[slot] = id;
            return id;
        }
        if let Some(&id) = self.site_ids.get(&site) {
            return id;
        }
        let id = SiteId(self.sites.len() as u32);
        self.sites.push(site);
        self.site_ids.insert(site, id);
        id
    }

    /// The site with this id.
    pub fn site_of(&self, id: SiteId) -> &Site {
        &self.sites[id.index()]
    }

    /// The site of memory allocated before the recording: its op is the
    /// [`BeforeRecording`] name, and its stack is `stack` (leaf first: the
    /// free's for freed memory, the allocation's where the file kept it for
    /// a block still live) under a root frame of that name. So a breakdown
    /// by op, stack or user frame, a call tree and a folded stack all show
    /// it under the one name, with the frames the file recorded beneath.
    pub fn before_recording_site(
        &mut self,
        which: BeforeRecording,
        stack: StackId,
        shape: Option<StrId>,
        dtype: Option<StrId>,
        category: Option<StrId>,
    ) -> SiteId {
        let name = self.string(which.name());
        let root = self.frame(Frame {
            function: name,
            file: StrId(0),
            line: 0,
        });
        let mut frames: Vec<FrameId> = self.frames_of(stack).collect();
        frames.push(root);
        let stack = self.stack_leaf_first(&frames);
        self.site(Site {
            stack,
            op: Some(name),
            shape,
            dtype,
            category,
            phase: None,
            annotation: None,
            stream: None,
            compiled_graph: None,
        })
    }

    /// Which memory allocated before the recording an op names, if it is
    /// one of the [`BeforeRecording`] names.
    pub fn before_recording_op(&self, op: Option<StrId>) -> Option<BeforeRecording> {
        op.and_then(|op| BeforeRecording::of_name(self.str(op)))
    }

    /// Which memory allocated before the recording a frame is the root of,
    /// if it is such a root frame.
    pub fn before_recording_frame(&self, frame: FrameId) -> Option<BeforeRecording> {
        let f = self.frame_of(frame);
        if f.file != StrId(0) || f.line != 0 {
            return None;
        }
        BeforeRecording::of_name(self.str(f.function))
    }

    /// Whether a stack is only the root frame of memory allocated before
    /// the recording: no frame the file recorded.
    pub fn is_before_recording_only(&self, stack: StackId) -> bool {
        self.caller(stack).0 == 0
            && self
                .leaf(stack)
                .is_some_and(|f| self.before_recording_frame(f).is_some())
    }

    /// `function file:line`, the way stacks are written in every output.
    pub fn frame_label(&self, id: FrameId) -> String {
        let f = self.frame_of(id);
        let (func, file) = (self.str(f.function), self.str(f.file));
        match (file.is_empty(), f.line) {
            (true, _) => func.to_string(),
            (false, 0) => format!("{func} {file}"),
            (false, line) => format!("{func} {file}:{line}"),
        }
    }

    /// A whole stack, leaf first, frames joined by ` <- `.
    pub fn stack_label(&self, stack: StackId) -> String {
        let mut out = String::new();
        for (i, frame) in self.frames_of(stack).enumerate() {
            if i > 0 {
                out.push_str(" <- ");
            }
            out.push_str(&self.frame_label(frame));
        }
        out
    }
}

/// The ids of a vector's values, found by value: a hash table of 4-byte
/// ids that hashes each value where it lies in the vector, instead of a map
/// holding a second copy of every value. Tens of millions of stack nodes
/// make a table no cache holds; a third of the bytes is a third of the
/// misses. Only values pushed through [`IdIndex::find_or_push`] are found
/// (a vector's sentinel in slot 0 is not), and every push to the vector
/// goes through it.
///
/// New ids wait in a small table the caches hold and go into the large one
/// [`STAGED`] at a time. A trie node whose parent is still waiting is new
/// for certain (the parent has no children but those waiting with it), so
/// the large table is not even looked at for it: a pprof sample's stack
/// below the part it shares with earlier samples costs one look into the
/// large table, not one per frame.
#[derive(Clone, Default)]
pub(crate) struct IdIndex {
    ids: hashbrown::HashTable<u32>,
    /// `(hash, id)` of the ids from `staged_from` on, not yet in `ids`.
    staged: hashbrown::HashTable<(u64, u32)>,
    staged_from: u32,
}

/// Ids that wait in [`IdIndex`]'s small table (about 2 MiB of it).
const STAGED: usize = 1 << 16;

impl std::fmt::Debug for IdIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdIndex({} ids)", self.ids.len() + self.staged.len())
    }
}

impl IdIndex {
    /// The index of `value` in `values`, pushed there if it is not yet.
    /// `parent` is the value's parent in a trie (its caller), or 0.
    pub(crate) fn find_or_push<T: Copy + Eq + Hash>(
        &mut self,
        values: &mut Vec<T>,
        value: T,
        parent: u32,
    ) -> u32 {
        let hash = FxBuildHasher.hash_one(value);
        let eq = |id: u32| values.get(id as usize) == Some(&value);
        if let Some(&(_, id)) = self.staged.find(hash, |&(_, id)| eq(id)) {
            return id;
        }
        if self.staged.is_empty() {
            self.staged_from = values.len() as u32;
        }
        if parent < self.staged_from {
            if let Some(&id) = self.ids.find(hash, |&id| eq(id)) {
                return id;
            }
        }
        let id = values.len() as u32;
        values.push(value);
        self.staged
            .insert_unique(hash, (hash, id), |&(hash, _)| hash);
        if self.staged.len() >= STAGED {
            self.flush(values);
        }
        id
    }

    /// Moves the waiting ids into the large table.
    fn flush<T: Hash>(&mut self, values: &[T]) {
        let rehash = |&id: &u32| FxBuildHasher.hash_one(&values[id as usize]);
        self.ids.reserve(self.staged.len(), rehash);
        for &(hash, id) in self.staged.iter() {
            self.ids.insert_unique(hash, id, rehash);
        }
        // `find_or_push` starts the next range when it stages again.
        self.staged.clear();
    }

    /// Makes room for `additional` more ids of `values`.
    pub(crate) fn reserve<T: Hash>(&mut self, values: &[T], additional: usize) {
        self.ids.reserve(additional, |&id| {
            FxBuildHasher.hash_one(&values[id as usize])
        });
    }
}

/// Where the ids of one [`Names`] went when it was imported into another.
#[derive(Debug, Default)]
pub struct Renames {
    strings: Vec<StrId>,
    sites: Vec<SiteId>,
}

impl Renames {
    /// The id in the importing table of the imported table's string `id`.
    pub fn string(&self, id: StrId) -> StrId {
        self.strings.get(id.index()).copied().unwrap_or_default()
    }

    /// The id in the importing table of the imported table's site `id`.
    pub fn site(&self, id: SiteId) -> SiteId {
        self.sites.get(id.index()).copied().unwrap_or_default()
    }
}

impl Names {
    /// Interns everything `other` holds, table by table in `other`'s id
    /// order. Readers intern in an order that does not depend on what the
    /// table already holds, so a profile read alone and imported gets the
    /// very ids it would have had if it had been read into this table.
    pub fn import(&mut self, other: &Names) -> Renames {
        let strings: Vec<StrId> = other.strings.iter().map(|s| self.string(s)).collect();
        let rename = |id: StrId| strings.get(id.index()).copied().unwrap_or_default();
        let frames: Vec<FrameId> = other
            .frames
            .iter()
            .map(|f| {
                self.frame(Frame {
                    function: rename(f.function),
                    file: rename(f.file),
                    line: f.line,
                })
            })
            .collect();
        // A node's caller is always an earlier node, so one pass in order
        // renames every caller before it is needed.
        let mut stacks = vec![StackId(0); other.stacks.len()];
        for (i, node) in other.stacks.iter().enumerate().skip(1) {
            let caller = stacks.get(node.caller.index()).copied().unwrap_or_default();
            let frame = frames.get(node.frame.index()).copied();
            stacks[i] = frame.map_or(caller, |frame| self.push_frame(caller, frame));
        }
        let sites = other
            .sites
            .iter()
            .map(|site| {
                self.site(Site {
                    stack: stacks.get(site.stack.index()).copied().unwrap_or_default(),
                    op: site.op.map(rename),
                    shape: site.shape.map(rename),
                    dtype: site.dtype.map(rename),
                    category: site.category.map(rename),
                    phase: site.phase,
                    annotation: None,
                    stream: site.stream.map(rename),
                    compiled_graph: site.compiled_graph.map(rename),
                })
            })
            .collect();
        Renames { strings, sites }
    }
}

/// Iterator over a stack's frames, leaf first.
pub struct StackFrames<'a> {
    names: &'a Names,
    next: StackId,
}

impl Iterator for StackFrames<'_> {
    type Item = FrameId;

    fn next(&mut self) -> Option<FrameId> {
        if self.next.0 == 0 {
            return None;
        }
        let node = self.names.stacks[self.next.index()];
        self.next = node.caller;
        Some(node.frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_found_again_whether_waiting_or_in_the_large_table() {
        // More stacks than wait in the small table: the first ones are
        // moved to the large table while the later ones wait.
        let mut names = Names::default();
        let frames: Vec<FrameId> = (0..300u32)
            .map(|i| {
                let function = names.string(&format!("f{i}"));
                names.frame(Frame {
                    function,
                    file: StrId(0),
                    line: i,
                })
            })
            .collect();
        let mut made = Vec::new();
        for a in 0..300 {
            for b in (0..300).step_by(1 + a % 3) {
                let leaf_first = [frames[b], frames[(a + b) % 300], frames[a]];
                made.push((leaf_first, names.stack_leaf_first(&leaf_first)));
            }
        }
        let count = names.stacks.len();
        assert!(count > STAGED, "{count} stacks");
        for (leaf_first, stack) in &made {
            assert_eq!(names.stack_leaf_first(leaf_first), *stack);
            assert_eq!(names.frames_of(*stack).collect::<Vec<_>>(), leaf_first);
        }
        assert_eq!(names.stacks.len(), count, "no stack made twice");
        let distinct: std::collections::HashSet<_> = made.iter().map(|(f, _)| *f).collect();
        let ids: std::collections::HashSet<_> = made.iter().map(|&(_, s)| s).collect();
        assert_eq!(distinct.len(), ids.len());
    }

    #[test]
    fn an_imported_table_gets_the_ids_it_would_have_had() {
        // What a reader does: intern a site with a two-frame stack.
        let read = |names: &mut Names, function: &str, op: &str| {
            let function = names.string(function);
            let file = names.string("model.py");
            let leaf = names.frame(Frame {
                function,
                file,
                line: 3,
            });
            let caller = names.frame(Frame {
                function: file,
                file,
                line: 1,
            });
            let stack = names.stack_leaf_first(&[leaf, caller]);
            let op = names.optional_string(op);
            names.site(Site {
                stack,
                op,
                ..Site::default()
            })
        };
        // Sequentially into one table...
        let mut one = Names::default();
        read(&mut one, "first", "add");
        let second_in_one = read(&mut one, "second", "mul");
        // ...and the second read alone, then imported.
        let mut merged = Names::default();
        read(&mut merged, "first", "add");
        let mut alone = Names::default();
        let second_alone = read(&mut alone, "second", "mul");
        let renames = merged.import(&alone);
        assert_eq!(renames.site(second_alone), second_in_one);
        let site = *merged.site_of(second_in_one);
        assert_eq!(merged.stack_label(site.stack), one.stack_label(site.stack));
        assert_eq!(
            merged.stack_label(site.stack),
            "second model.py:3 <- model.py model.py:1"
        );
        assert_eq!(merged.strings.len(), one.strings.len());
        assert_eq!(merged.frames, one.frames);
        assert_eq!(merged.stacks, one.stacks);
        assert_eq!(merged.sites, one.sites);
    }

    #[test]
    fn a_site_is_one_id_whether_it_is_a_stack_alone_or_more() {
        let mut names = Names::default();
        let main = names.string("main");
        let frame = names.frame(Frame {
            function: main,
            file: main,
            line: 1,
        });
        let stack = names.stack_leaf_first(&[frame]);
        let add = names.string("add");
        let bare = |stack| Site {
            stack,
            ..Site::default()
        };
        let with_op = Site {
            stack,
            op: Some(add),
            ..Site::default()
        };
        let (a, b, c) = (
            names.site(bare(stack)),
            names.site(with_op),
            names.site(bare(StackId(0))),
        );
        assert_eq!(names.site(bare(stack)), a);
        assert_eq!(names.site(with_op), b);
        assert_eq!(names.site(bare(StackId(0))), c);
        assert_eq!((a, b, c), (SiteId(0), SiteId(1), SiteId(2)));
        assert_eq!(*names.site_of(a), bare(stack));
        assert_eq!(*names.site_of(b), with_op);
        // Imported into a table that has them in another order: same sites.
        let mut other = Names::default();
        other.site(bare(StackId(0)));
        let renames = other.import(&names);
        assert_eq!(renames.site(c), SiteId(0));
        assert_eq!(
            other.site_of(renames.site(b)).op.map(|s| other.str(s)),
            Some("add")
        );
        assert_eq!(
            other.stack_label(other.site_of(renames.site(a)).stack),
            "main main:1"
        );
    }

    #[test]
    fn stacks_share_their_callers() {
        let mut names = Names::default();
        let f = |n: &mut Names, s: &str| {
            let function = n.string(s);
            let file = n.string("a.py");
            n.frame(Frame {
                function,
                file,
                line: 1,
            })
        };
        let (main, g, h) = (
            f(&mut names, "main"),
            f(&mut names, "g"),
            f(&mut names, "h"),
        );
        let s1 = names.stack_leaf_first(&[g, main]);
        let s2 = names.stack_leaf_first(&[h, main]);
        let s3 = names.stack_leaf_first(&[g, main]);
        assert_eq!(s1, s3);
        assert_ne!(s1, s2);
        assert_eq!(names.frames_of(s2).collect::<Vec<_>>(), vec![h, main]);
        assert_eq!(names.stack_label(s1), "g a.py:1 <- main a.py:1");
        assert_eq!(names.stack_label(StackId(0)), "");
        assert_eq!(names.str(StrId(0)), "");
    }
}
