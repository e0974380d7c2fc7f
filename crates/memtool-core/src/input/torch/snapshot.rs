//! PyTorch CUDA caching-allocator snapshots (`torch.cuda.memory._dump_snapshot`).
//!
//! The pickle is decoded by [`super::pickle`]; this module claims the
//! `segments` list and each list of `device_traces`, turns every segment and
//! trace entry into a compact record as soon as it is complete, and builds one
//! [`Memory`] per device at the end:
//!
//! - `alloc` entries are allocations; `free_completed` is the free that counts
//!   (the block is reusable from then on; torch's own replay subtracts there),
//!   `free_requested` is only counted in `recorded_events`.
//! - Every allocation counts the bytes the program requested (`bytes =
//!   requested`), the one size the trace records: trace `size` is the request,
//!   and the block the allocator rounded it up to is not recorded. Blocks of
//!   the end state that the trace never allocated were allocated before the
//!   window (the trace is a ring buffer): they join `live_at_start` at their
//!   `requested_size`, as do allocations whose `free_completed` is in the
//!   window but their `alloc` is not (at the free's `size`). These are the
//!   rules of torch's MemoryViz ("Active Memory Timeline"), so the replayed
//!   peak is the one it draws; the rounded block sizes stay in `segments`
//!   (reserved, internal fragmentation).
//! - `segment_*` entries give `allocator_samples` of reserved bytes, anchored
//!   so the last sample equals the segments' total; the last sample also has
//!   the end state's largest free block. Samples carry no allocated bytes: the
//!   replay of the trace is the in-use figure, and torch's end-state rule (a
//!   live block counts its `requested_size`) is read from `segments`.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::model::{
    AddressRange, AllocId, Allocation, AllocatorSample, Axis, BeforeRecording, BlockState, Event,
    EventKind, Format, Frame, FrameId, HeldChange, InputInfo, MemoryKind, OutOfMemory, Profile,
    Segment, SegmentBlock, SeriesPart, Site, SiteId, StackId, StrId,
};

use super::phase::{profiler_frame, StackPhases};
use super::pickle::{self, Memo, Parent, Value, Visitor};
use crate::input::source::ByteSource;

const ROUTE_ROOT: u32 = 0;
const ROUTE_SEGMENTS: u32 = 1;
const ROUTE_TRACES: u32 = 2;
/// `ROUTE_TRACE0 + i` is the trace of device `i`.
const ROUTE_TRACE0: u32 = 3;
/// The keys of a trace entry that memtool reads, in the order
/// [`SnapshotVisitor::entry_fields`] takes their values.
const ENTRY_KEYS: [&str; 9] = [
    "action",
    "addr",
    "device_free",
    "size",
    "time_us",
    "frames",
    "category",
    "stream",
    "compile_context",
];
/// The index of `frames` in [`ENTRY_KEYS`].
const FRAMES: usize = 5;
/// What `compile_context` holds outside compiled code (torch's default).
const NO_COMPILE_CONTEXT: &str = "N/A";
/// The start of the name of the `record_function` range torch.compile opens
/// around a compiled graph, which the allocator records as the entry's
/// `compile_context` (`Torch-Compiled Region: 0/0`); the rest is the
/// graph's compile id.
const COMPILED_REGION: &str = "Torch-Compiled Region: ";
/// Device indices above this are not believed (a CUDA machine has a few).
const MAX_DEVICES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Other,
}

/// The actions counted by kind; names of the others are kept as written.
const KNOWN_ACTIONS: [(Action, &str); 8] = [
    (Action::Alloc, "alloc"),
    (Action::FreeRequested, "free_requested"),
    (Action::FreeCompleted, "free_completed"),
    (Action::SegmentAlloc, "segment_alloc"),
    (Action::SegmentFree, "segment_free"),
    (Action::SegmentMap, "segment_map"),
    (Action::SegmentUnmap, "segment_unmap"),
    (Action::Oom, "oom"),
];

impl Action {
    fn parse(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "oom" => Action::Oom,
            _ => Action::Other,
        }
    }
}

/// The site of one of a device's allocations before it is interned: the
/// model's site ids follow the order of first use, which is only known once
/// the whole file is read (see [`build_memory`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct SiteKey {
    stack: StackId,
    category: Option<StrId>,
    /// The CUDA stream, as the entry numbers it.
    stream: Option<i64>,
    /// The compiled graph the entry was recorded in (see [`COMPILED_REGION`]).
    compiled_graph: Option<StrId>,
    /// Freed in the window, allocated before it: `stack` is the free's.
    freed_before_window: bool,
}

/// One segment of the end state, with its device.
struct RawSegment {
    device: usize,
    segment: Segment,
    /// Stacks of the blocks, parallel to `segment.blocks`.
    block_stacks: Vec<StackId>,
}

/// Memo handles (see [`Memo::convert`]) are stack ids, or frame ids with
/// this bit set; ids that would need the bit are never made handles, so
/// every handle fits the memo ([`pickle::MAX_HANDLE`]).
const FRAME_HANDLE: u32 = 1 << 29;
const _: () = assert!(FRAME_HANDLE | (FRAME_HANDLE - 1) == pickle::MAX_HANDLE);

struct SnapshotVisitor<'p> {
    profile: &'p mut Profile,
    segments: Vec<RawSegment>,
    /// Where each trace entry goes to be built into its device's trace.
    entries: &'p mut EntrySink,
    /// Entries of actions memtool does not know, by device and name.
    other_actions: Vec<BTreeMap<String, u64>>,
    /// Frames lists seen, by their frames: most lists are new objects (one
    /// per allocation) repeating a stack seen before. Keyed by the frames' handles (see [`FRAME_HANDLE`]), as a trace
    /// entry's `frames` list hands them over, so a list met before is found
    /// without its frames being converted.
    stacks_by_frames: FxHashMap<Box<[u32]>, StackId>,
    /// Scratch space for the handles of one list's frames.
    frame_handles: Vec<u32>,
    /// Scratch space for the frames of one list.
    frames: Vec<FrameId>,
    /// Memo slots of blocks lists already read.
    blocks_seen: HashSet<u32>,
    /// Memo slots of device trace lists already read.
    traces_lists_seen: HashSet<u32>,
    traces_seen: usize,
    has_category: bool,
    /// The last `compile_context` read and its graph: entries in a row
    /// mostly share one, so it is interned once per run of them.
    last_compile_context: Option<(Rc<Box<str>>, Option<StrId>)>,
    /// The known actions' strings met so far: a pickle memoizes each
    /// action's name once and refers to it after, so an entry's action is
    /// mostly one of these objects, found without comparing text.
    action_strings: Vec<(Rc<Box<str>>, Action)>,
    bad_values: u64,
}

impl Visitor for SnapshotVisitor<'_> {
    fn route(&mut self, parent: Parent<'_>, is_list: bool) -> Option<u32> {
        match (parent, is_list) {
            (Parent::Root, false) => Some(ROUTE_ROOT),
            // Old snapshots are a bare list of segments.
            (Parent::Root, true) => Some(ROUTE_SEGMENTS),
            (
                Parent::DictKey {
                    route: ROUTE_ROOT,
                    key: "segments",
                },
                true,
            ) => Some(ROUTE_SEGMENTS),
            (
                Parent::DictKey {
                    route: ROUTE_ROOT,
                    key: "device_traces",
                },
                true,
            ) => Some(ROUTE_TRACES),
            (
                Parent::ListItem {
                    route: ROUTE_TRACES,
                    index,
                },
                true,
            ) if index < MAX_DEVICES => Some(ROUTE_TRACE0 + index as u32),
            _ => None,
        }
    }

    fn item(
        &mut self,
        route: u32,
        item: &Value,
        memo: &mut Memo,
    ) -> std::result::Result<bool, String> {
        match route {
            ROUTE_SEGMENTS => {
                self.segment(item, memo)?;
                Ok(true)
            }
            ROUTE_TRACES => {
                // Entries of a claimed list were consumed already; a list the
                // decoder could not claim arrives whole and is read here.
                let device = self.traces_seen;
                self.traces_seen += 1;
                // A snapshot never lists one trace twice; a list stored once
                // and referenced again is read once, so hostile sharing costs
                // no more than the bytes that hold it (4096 references to one
                // list of 10^4 entries would be 4 * 10^7 entries).
                if let Some(slot) = item.memo_id() {
                    if !self.traces_lists_seen.insert(slot) {
                        self.bad_values += 1;
                        return Ok(true);
                    }
                }
                if device < MAX_DEVICES {
                    for entry in item.items().unwrap_or_default() {
                        self.entry(device, &entry, memo)?;
                    }
                }
                Ok(true)
            }
            r if r >= ROUTE_TRACE0 => {
                self.entry((r - ROUTE_TRACE0) as usize, item, memo)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn records(&self, route: u32) -> bool {
        route >= ROUTE_TRACE0
    }

    const RECORD_KEYS: &'static [&'static str] = &ENTRY_KEYS;

    /// A trace entry's new `frames` list of frames met before (the common
    /// case: one list per entry, its frames shared) becomes its stack's
    /// handle without the list being built, as [`SnapshotVisitor::stack`]
    /// would convert it.
    fn record_list(&mut self, _route: u32, key: Option<usize>, handles: &[u32]) -> Option<u32> {
        if key != Some(FRAMES) {
            return None;
        }
        if !handles.iter().all(|&h| h & FRAME_HANDLE != 0) {
            return None;
        }
        Some(self.stack_of_handles(handles).0).filter(|&s| s < FRAME_HANDLE)
    }

    fn record(
        &mut self,
        route: u32,
        fields: &[Option<Value>],
        memo: &mut Memo,
    ) -> std::result::Result<(), String> {
        let fields = std::array::from_fn(|k| fields.get(k).and_then(Option::as_ref));
        self.entry_fields((route - ROUTE_TRACE0) as usize, fields, memo);
        Ok(())
    }
}

impl SnapshotVisitor<'_> {
    fn int(&mut self, v: Option<&Value>) -> Option<i64> {
        match v {
            None | Some(Value::None) => None,
            Some(v) => {
                let i = v.as_i64();
                if i.is_none() {
                    self.bad_values += 1;
                }
                i
            }
        }
    }

    fn size(&mut self, v: Option<&Value>) -> u64 {
        match self.int(v) {
            Some(i) => u64::try_from(i).unwrap_or_else(|_| {
                self.bad_values += 1;
                0
            }),
            None => 0,
        }
    }

    fn string(&mut self, v: Option<&Value>) -> Option<StrId> {
        match v {
            Some(Value::Str(s)) => Some(self.profile.names.string(s)),
            _ => None,
        }
    }

    fn frame(&mut self, v: &Value, memo: &mut Memo) -> Option<FrameId> {
        match v.handle() {
            Some(h) if h & FRAME_HANDLE != 0 => return Some(FrameId(h & !FRAME_HANDLE)),
            // A stack handle where a frame was expected.
            Some(_) if matches!(v, Value::Handle(_)) => return None,
            _ => {}
        }
        let (mut name, mut file, mut line) = (None, None, None);
        let pairs = v.pairs();
        for (k, v) in pairs.iter().flat_map(|p| p.iter()) {
            let slot = match k.as_str() {
                Some("name") => &mut name,
                Some("filename") => &mut file,
                Some("line") => &mut line,
                _ => continue,
            };
            slot.get_or_insert(v);
        }
        let name = name.and_then(Value::as_str).unwrap_or("");
        let file = file.and_then(Value::as_str).unwrap_or("");
        let line = line
            .and_then(Value::as_i64)
            .and_then(|l| u32::try_from(l).ok())
            .unwrap_or(0);
        let (name, file, line) = match profiler_frame(name, file) {
            Some(parsed) => parsed,
            None => (name, file, line),
        };
        let names = &mut self.profile.names;
        let frame = Frame {
            function: names.string(name),
            file: names.string(file),
            line,
        };
        let id = names.frame(frame);
        drop(pairs);
        if id.0 < FRAME_HANDLE && v.handle().is_none() {
            memo.convert(v, id.0 | FRAME_HANDLE);
        }
        Some(id)
    }

    /// The interned stack of the frames whose handles are `handles`, leaf
    /// first.
    fn stack_of_handles(&mut self, handles: &[u32]) -> StackId {
        if let Some(&stack) = self.stacks_by_frames.get(handles) {
            return stack;
        }
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        frames.extend(handles.iter().map(|&h| FrameId(h & !FRAME_HANDLE)));
        let stack = self.profile.names.stack_leaf_first(&frames);
        self.frames = frames;
        self.stacks_by_frames.insert(handles.into(), stack);
        stack
    }

    /// The interned stack of frames, leaf first.
    fn stack_of_frames(&mut self, frames: &[FrameId]) -> StackId {
        if frames.iter().any(|f| f.0 >= FRAME_HANDLE) {
            // Frames that have no handle: interned, not kept by their handles.
            return self.profile.names.stack_leaf_first(frames);
        }
        let mut handles = std::mem::take(&mut self.frame_handles);
        handles.clear();
        handles.extend(frames.iter().map(|f| f.0 | FRAME_HANDLE));
        let stack = self.stack_of_handles(&handles);
        self.frame_handles = handles;
        stack
    }

    /// A frames list (leaf first) as an interned stack; a list the pickle
    /// shares through its memo is converted once.
    fn stack(&mut self, v: Option<&Value>, memo: &mut Memo) -> StackId {
        let Some(v) = v else {
            return StackId(0);
        };
        if let Some(h) = v.handle() {
            return if h & FRAME_HANDLE == 0 {
                StackId(h)
            } else {
                StackId(0)
            };
        }
        let Some(items) = v.seq() else {
            return StackId(0);
        };
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for f in items.iter() {
            // Frames met before are handles: the common case, kept short.
            let frame = match f {
                Value::Handle(h) if h & FRAME_HANDLE != 0 => Some(FrameId(h & !FRAME_HANDLE)),
                _ => self.frame(f, memo),
            };
            if let Some(frame) = frame {
                frames.push(frame);
            }
        }
        drop(items);
        let stack = self.stack_of_frames(&frames);
        self.frames = frames;
        if stack.0 < FRAME_HANDLE {
            memo.convert(v, stack.0);
        }
        stack
    }

    fn entry(
        &mut self,
        device: usize,
        v: &Value,
        memo: &mut Memo,
    ) -> std::result::Result<(), String> {
        refuse_read_again(v, memo, "a trace entry")?;
        let pairs = v.pairs();
        // The fields, each its first occurrence, read in one pass.
        let mut fields = [None; ENTRY_KEYS.len()];
        for (k, v) in pairs.iter().flat_map(|p| p.iter()) {
            if let Some(field) = pickle::record_key(&ENTRY_KEYS, k).and_then(|i| fields.get_mut(i))
            {
                field.get_or_insert(v);
            }
        }
        self.entry_fields(device, fields, memo);
        drop(pairs);
        if let Some(slot) = v.memo_id() {
            memo.forget(slot);
        }
        Ok(())
    }

    /// One trace entry from its fields, the values of [`ENTRY_KEYS`].
    fn entry_fields(
        &mut self,
        device: usize,
        fields: [Option<&Value>; ENTRY_KEYS.len()],
        memo: &mut Memo,
    ) {
        let [action, addr, device_free, size, time_us, frames, category, stream, compile_context] =
            fields;
        let action_name = action.and_then(Value::as_str).unwrap_or("");
        let action = match action {
            Some(Value::Str(s)) => self.action(s),
            _ => Action::parse(action_name),
        };
        if action == Action::Other {
            if self.other_actions.len() <= device {
                self.other_actions.resize_with(device + 1, BTreeMap::new);
            }
            *self.other_actions[device]
                .entry(action_name.to_string())
                .or_default() += 1;
        }
        let addr = self.int(addr).unwrap_or(0) as u64;
        let size = self.size(size);
        let time_us = self.int(time_us);
        let stack = self.stack(frames, memo);
        let category = match category {
            Some(Value::Str(s)) => Some(self.profile.names.string(super::category_name(s))),
            _ => None,
        };
        self.has_category |= category.is_some();
        let stream = self.int(stream);
        let compiled_graph = match compile_context {
            Some(Value::Str(s)) => self.compiled_graph(s),
            _ => None,
        };
        // Only an `oom` entry has the device's free bytes (where others keep the address).
        let device_free = match action {
            Action::Oom => self.int(device_free).and_then(|f| u64::try_from(f).ok()),
            _ => None,
        };
        self.entries.push(Entry {
            device,
            action,
            addr,
            size,
            time_us,
            site: SiteKey {
                stack,
                category,
                stream,
                compiled_graph,
                freed_before_window: false,
            },
            device_free,
        });
    }

    /// The action an entry's `action` string names; the strings of known
    /// actions are kept (a handful), so one met again is found by identity.
    fn action(&mut self, name: &Rc<Box<str>>) -> Action {
        if let Some(&(_, action)) = self
            .action_strings
            .iter()
            .find(|(s, _)| Rc::ptr_eq(s, name))
        {
            return action;
        }
        let action = Action::parse(name);
        // At most the known actions' names twice over: a pickle that
        // writes each anew is parsed entry by entry, as without them.
        if action != Action::Other && self.action_strings.len() < 2 * KNOWN_ACTIONS.len() {
            self.action_strings.push((Rc::clone(name), action));
        }
        action
    }

    /// The compiled graph a `compile_context` names: its compile id
    /// (`0/0`, `1/0_1`), or the text whole if it is not torch.compile's
    /// region name; `None` outside compiled code (`N/A`, empty).
    fn compiled_graph(&mut self, context: &Rc<Box<str>>) -> Option<StrId> {
        if let Some((last, graph)) = &self.last_compile_context {
            // The same object (memoized once, referred to after) or the same text.
            if Rc::ptr_eq(last, context) || **last == **context {
                return *graph;
            }
        }
        let text: &str = context;
        let graph = match text {
            "" | NO_COMPILE_CONTEXT => None,
            _ => {
                let id = text.strip_prefix(COMPILED_REGION).unwrap_or(text);
                Some(self.profile.names.string(id))
            }
        };
        self.last_compile_context = Some((Rc::clone(context), graph));
        graph
    }

    fn segment(&mut self, v: &Value, memo: &mut Memo) -> std::result::Result<(), String> {
        refuse_read_again(v, memo, "a segment")?;
        let device = self.int(v.get("device").as_ref()).unwrap_or(0);
        let device = usize::try_from(device)
            .ok()
            .filter(|&d| d < MAX_DEVICES)
            .unwrap_or(0);
        let address = self
            .int(v.get("address").as_ref())
            .and_then(|a| u64::try_from(a).ok());
        let bytes = self.size(v.get("total_size").as_ref());
        let stream = self.int(v.get("stream").as_ref());
        let pool = self.string(v.get("segment_type").as_ref());
        let mut blocks = Vec::new();
        let mut block_stacks = Vec::new();
        let mut next_address = address;
        let mut blocks_value = v.get("blocks");
        // A snapshot never shares a blocks list between segments; reading a
        // shared one once keeps hostile sharing from costing quadratic time.
        if let Some(slot) = blocks_value.as_ref().and_then(Value::memo_id) {
            memo.forget(slot);
            if !self.blocks_seen.insert(slot) {
                self.bad_values += 1;
                blocks_value = None;
            }
        }
        for b in blocks_value.and_then(|b| b.items()).unwrap_or_default() {
            refuse_read_again(&b, memo, "a block")?;
            let size = self.size(b.get("size").as_ref());
            // Old snapshots give no block address: blocks tile the segment in order.
            let address = self
                .int(b.get("address").as_ref())
                .and_then(|a| u64::try_from(a).ok())
                .or(next_address);
            next_address = address.and_then(|a| a.checked_add(size));
            // torch's `_block_extra`: old snapshots keep frames and the
            // request under `history[0]`.
            let (requested, stack) = if b.get("frames").is_some() {
                let requested = b.get("requested_size");
                let requested = if requested.is_some() {
                    self.size(requested.as_ref())
                } else {
                    size
                };
                (requested, self.stack(b.get("frames").as_ref(), memo))
            } else if let Some(first) = b.get("history").and_then(|h| {
                if let Some(slot) = h.memo_id() {
                    memo.forget(slot);
                }
                h.items().and_then(|h| h.into_iter().next())
            }) {
                let real = first.get("real_size");
                let requested = if real.is_some() {
                    self.size(real.as_ref())
                } else {
                    size
                };
                (requested, self.stack(first.get("frames").as_ref(), memo))
            } else {
                let requested = b.get("requested_size");
                let requested = if requested.is_some() {
                    self.size(requested.as_ref())
                } else {
                    size
                };
                (requested, StackId(0))
            };
            let state = match b.get("state").as_ref().and_then(Value::as_str) {
                Some("active_allocated") => BlockState::Allocated,
                Some("active_pending_free") => BlockState::PendingFree,
                _ => BlockState::Free,
            };
            blocks.push(SegmentBlock {
                address,
                bytes: size,
                requested,
                state,
            });
            block_stacks.push(stack);
            if let Some(slot) = b.memo_id() {
                memo.forget(slot);
            }
        }
        if let Some(slot) = v.memo_id() {
            memo.forget(slot);
        }
        self.segments.push(RawSegment {
            device,
            segment: Segment {
                address,
                bytes,
                stream,
                pool,
                blocks,
            },
            block_stacks,
        });
        Ok(())
    }
}

/// Refuses a record the snapshot gives one owner (a segment, a block, a trace
/// entry) when it was read already: each is forgotten from the memo once
/// read, so a reference to it later is refused where it is met, and one
/// taken before it was read (`MARK BINGET BINGET ... APPENDS`) arrives
/// here again. Read again, a record referenced a million times in a pickle
/// of two bytes per reference would be a million records.
fn refuse_read_again(v: &Value, memo: &Memo, what: &str) -> std::result::Result<(), String> {
    match v.memo_id().filter(|&slot| memo.is_forgotten(slot)) {
        Some(slot) => Err(format!(
            "memo entry {slot}, {what} already read, is listed again (shared records are \
             not expected there)"
        )),
        None => Ok(()),
    }
}

/// Reads a snapshot with one job (see [`read_with_jobs`]).
#[cfg(test)]
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    paths: pickle::Paths,
) -> Result<()> {
    read_with_jobs(profile, path, source, paths, 1, 0)
}

/// Reads a snapshot into `profile`; with more than one job, the traces are
/// built from the entries on a second thread while the pickle is decoded,
/// and the file is read ahead of the decoder on a third, in chunks of
/// `chunk` bytes (0: [`pickle::READ_AHEAD`]) — the same result.
pub(crate) fn read_with_jobs(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    paths: pickle::Paths,
    jobs: usize,
    chunk: u64,
) -> Result<()> {
    let read_ahead = (jobs > 1).then(|| match usize::try_from(chunk) {
        Ok(0) | Err(_) => pickle::READ_AHEAD,
        Ok(chunk) => chunk,
    });
    let (decoded, mut traces) = with_builder(jobs, |entries| {
        let mut visitor = SnapshotVisitor {
            profile: &mut *profile,
            segments: Vec::new(),
            entries,
            other_actions: Vec::new(),
            stacks_by_frames: FxHashMap::default(),
            frame_handles: Vec::new(),
            frames: Vec::new(),
            blocks_seen: HashSet::new(),
            traces_lists_seen: HashSet::new(),
            traces_seen: 0,
            has_category: false,
            last_compile_context: None,
            action_strings: Vec::new(),
            bad_values: 0,
        };
        let root = pickle::decode(source, &mut visitor, paths, read_ahead);
        let SnapshotVisitor {
            segments,
            other_actions,
            has_category,
            bad_values,
            ..
        } = visitor;
        root.map(|root| (root, segments, other_actions, has_category, bad_values))
    });
    let (root, segments, other_actions, has_category, bad_values) =
        decoded.map_err(|e| Error::Corrupt {
            path: path.to_string(),
            format: "PyTorch snapshot pickle",
            message: e.message,
            offset: Some(e.offset),
        })?;
    if !matches!(root, Value::Dict(_) | Value::List(_)) {
        return Err(Error::NoData {
            path: path.to_string(),
            message: "the pickle holds neither a snapshot dict nor a list of segments, so it \
                      is not a PyTorch memory snapshot"
                .into(),
        });
    }
    // Every entry of an unknown action was also built into its trace.
    for (trace, names) in traces.iter_mut().zip(other_actions) {
        trace.counts.other = names;
    }
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::TorchSnapshot,
        executables: None,
    });
    if bad_values > 0 {
        profile.warn(
            path,
            format!(
                "{bad_values} values have an unexpected type, are negative, or are shared \
                 where a snapshot never shares them; read as 0 or empty"
            ),
        );
    }
    let mut devices: BTreeSet<usize> = segments.iter().map(|s| s.device).collect();
    devices.extend(
        traces
            .iter()
            .enumerate()
            .filter(|(_, t)| t.entries > 0)
            .map(|(i, _)| i),
    );
    let mut segments_by_device: BTreeMap<usize, Vec<RawSegment>> = BTreeMap::new();
    for s in segments {
        segments_by_device.entry(s.device).or_default().push(s);
    }
    let mut annotated = annotated(&root);
    let settings = allocator_settings(&root);
    for device in devices {
        let trace = traces
            .get_mut(device)
            .map(std::mem::take)
            .unwrap_or_default();
        let segs = segments_by_device.remove(&device).unwrap_or_default();
        // Profiler-made snapshots (`_profile_to_snapshot`) carry a category
        // per entry and may describe the CPU: do not call them CUDA.
        let id = if has_category {
            format!("device:{device}")
        } else {
            format!("cuda:{device}")
        };
        let device_annotations = annotated.remove(&(device as i64)).unwrap_or_default();
        build_memory(profile, path, &id, trace, segs);
        // build_memory always adds the memory last.
        if let Some(m) = profile.memories.last_mut() {
            m.steps = device_annotations.steps;
            m.annotations = device_annotations.ranges;
            m.allocator_settings = settings.clone();
        }
    }
    Ok(())
}

/// The snapshot's `allocator_settings` (`{expandable_segments: True, ...}`,
/// one for every device), scalars written as Python prints them; nested
/// values (`roundup_power2_divisions`) are left out.
fn allocator_settings(root: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(Value::Dict(d)) = root.get("allocator_settings") else {
        return out;
    };
    for (k, v) in d.items.borrow().iter() {
        let Some(key) = k.as_str() else { continue };
        let text = match v {
            Value::Bool(true) => "True".to_string(),
            Value::Bool(false) => "False".to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format!("{f:?}"),
            Value::Str(s) => s.to_string(),
            _ => continue,
        };
        out.insert(key.to_string(), text);
    }
    out
}

mod annotations;
mod build;
mod entry_index;
#[cfg(test)]
mod tests;
mod trace;

use annotations::annotated;
use build::build_memory;
use entry_index::EntryIndices;
use trace::{with_builder, Entry, EntrySink, Trace};
