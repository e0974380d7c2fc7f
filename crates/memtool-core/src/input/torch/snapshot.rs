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
//! - Trace `size` is the requested size; allocations made in the window get
//!   `bytes = requested = size`. Blocks of the end state that the trace never
//!   allocated were allocated before the window (the trace is a ring buffer):
//!   they join `live_at_start` with the block's rounded size and request, as do
//!   allocations whose `free_completed` is in the window but their `alloc` is not.
//! - `segment_*` entries give `allocator_samples` of reserved bytes, anchored
//!   so the last sample equals the segments' total; the last sample also has
//!   the end state's largest free block. Samples carry no allocated bytes: the
//!   replay of the trace is the in-use figure, and torch's end-state rule (a
//!   live block counts its `requested_size`) is read from `segments`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::error::{Error, Result};
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, BlockState, Event, EventKind, Format, Frame,
    FrameId, InputInfo, MemoryKind, Profile, Segment, SegmentBlock, Site, StackId, Step, StrId,
};

use super::pickle::{self, Memo, Parent, Value, Visitor};

const ROUTE_ROOT: u32 = 0;
const ROUTE_SEGMENTS: u32 = 1;
const ROUTE_TRACES: u32 = 2;
/// `ROUTE_TRACE0 + i` is the trace of device `i`.
const ROUTE_TRACE0: u32 = 3;
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

/// One trace entry, as compact as the model needs it.
struct Entry {
    action: Action,
    addr: u64,
    size: u64,
    time_us: Option<i64>,
    stack: StackId,
    category: Option<StrId>,
}

/// One segment of the end state, with its device.
struct RawSegment {
    device: usize,
    segment: Segment,
    /// Stacks of the blocks, parallel to `segment.blocks`.
    block_stacks: Vec<StackId>,
}

#[derive(Clone, Copy)]
enum Handle {
    Stack(StackId),
    Frame(FrameId),
}

struct SnapshotVisitor<'p> {
    profile: &'p mut Profile,
    segments: Vec<RawSegment>,
    traces: Vec<Vec<Entry>>,
    actions: Vec<BTreeMap<String, u64>>,
    /// What each [`Value::Handle`] the visitor put into the memo stands for.
    handles: Vec<Handle>,
    /// Memo slot of a converted frames list or frame → its handle, for
    /// references taken before the memo entry was replaced (within a batch).
    converted: HashMap<u32, Handle>,
    /// Memo slots of blocks lists already read.
    blocks_seen: HashSet<u32>,
    traces_seen: usize,
    has_category: bool,
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
                self.segment(item, memo);
                Ok(true)
            }
            ROUTE_TRACES => {
                // Entries of a claimed list were consumed already; a list the
                // decoder could not claim arrives whole and is read here.
                let device = self.traces_seen;
                self.traces_seen += 1;
                if device < MAX_DEVICES {
                    for entry in item.items().unwrap_or_default() {
                        self.entry(device, &entry, memo);
                    }
                }
                Ok(true)
            }
            r if r >= ROUTE_TRACE0 => {
                self.entry((r - ROUTE_TRACE0) as usize, item, memo);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl SnapshotVisitor<'_> {
    fn int(&mut self, v: Option<Value>) -> Option<i64> {
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

    fn size(&mut self, v: Option<Value>) -> u64 {
        match self.int(v) {
            Some(i) => u64::try_from(i).unwrap_or_else(|_| {
                self.bad_values += 1;
                0
            }),
            None => 0,
        }
    }

    fn string(&mut self, v: Option<Value>) -> Option<StrId> {
        match v {
            Some(Value::Str(s)) => Some(self.profile.names.string(&s)),
            _ => None,
        }
    }

    fn frame(&mut self, v: &Value, memo: &mut Memo) -> Option<FrameId> {
        if let Value::Handle(h) = v {
            return match self.handles.get(*h as usize) {
                Some(Handle::Frame(f)) => Some(*f),
                _ => None,
            };
        }
        if let Some(Handle::Frame(f)) = v.memo_id().and_then(|slot| self.converted.get(&slot)) {
            return Some(*f);
        }
        let name = v.get("name");
        let file = v.get("filename");
        let line = v.get("line").and_then(|l| l.as_i64());
        let name = name.as_ref().and_then(Value::as_str).unwrap_or("");
        let file = file.as_ref().and_then(Value::as_str).unwrap_or("");
        let line = line.and_then(|l| u32::try_from(l).ok()).unwrap_or(0);
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
        if let Some(slot) = v.memo_id() {
            memo.replace(slot, Value::Handle(self.handles.len() as u32));
            self.handles.push(Handle::Frame(id));
            self.converted.insert(slot, Handle::Frame(id));
        }
        Some(id)
    }

    /// A frames list (leaf first) as an interned stack; a list the pickle
    /// shares through its memo is converted once.
    fn stack(&mut self, v: Option<Value>, memo: &mut Memo) -> StackId {
        let Some(v) = v else {
            return StackId(0);
        };
        if let Value::Handle(h) = v {
            return match self.handles.get(h as usize) {
                Some(Handle::Stack(s)) => *s,
                _ => StackId(0),
            };
        }
        if let Some(Handle::Stack(s)) = v.memo_id().and_then(|slot| self.converted.get(&slot)) {
            return *s;
        }
        let Some(items) = v.items() else {
            return StackId(0);
        };
        let frames: Vec<FrameId> = items.iter().filter_map(|f| self.frame(f, memo)).collect();
        let stack = self.profile.names.stack_leaf_first(&frames);
        if let Some(slot) = v.memo_id() {
            memo.replace(slot, Value::Handle(self.handles.len() as u32));
            self.handles.push(Handle::Stack(stack));
            self.converted.insert(slot, Handle::Stack(stack));
        }
        stack
    }

    fn entry(&mut self, device: usize, v: &Value, memo: &mut Memo) {
        let action_name = v.get("action");
        let action_name = action_name.as_ref().and_then(Value::as_str).unwrap_or("");
        if self.traces.len() <= device {
            self.traces.resize_with(device + 1, Vec::new);
            self.actions.resize_with(device + 1, BTreeMap::new);
        }
        let counts = &mut self.actions[device];
        match counts.get_mut(action_name) {
            Some(n) => *n += 1,
            None => {
                counts.insert(action_name.to_string(), 1);
            }
        }
        let action = Action::parse(action_name);
        // An `oom` entry keeps the device's free bytes where others keep the address.
        let addr_key = if action == Action::Oom {
            "device_free"
        } else {
            "addr"
        };
        let addr = self.int(v.get(addr_key)).unwrap_or(0) as u64;
        let size = self.size(v.get("size"));
        let time_us = self.int(v.get("time_us"));
        let stack = self.stack(v.get("frames"), memo);
        let category = self.string(v.get("category"));
        self.has_category |= category.is_some();
        self.traces[device].push(Entry {
            action,
            addr,
            size,
            time_us,
            stack,
            category,
        });
        if let Some(slot) = v.memo_id() {
            memo.forget(slot);
        }
    }

    fn segment(&mut self, v: &Value, memo: &mut Memo) {
        let device = self.int(v.get("device")).unwrap_or(0);
        let device = usize::try_from(device)
            .ok()
            .filter(|&d| d < MAX_DEVICES)
            .unwrap_or(0);
        let address = self
            .int(v.get("address"))
            .and_then(|a| u64::try_from(a).ok());
        let bytes = self.size(v.get("total_size"));
        let stream = self.int(v.get("stream"));
        let pool = self.string(v.get("segment_type"));
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
            let size = self.size(b.get("size"));
            // Old snapshots give no block address: blocks tile the segment in order.
            let address = self
                .int(b.get("address"))
                .and_then(|a| u64::try_from(a).ok())
                .or(next_address);
            next_address = address.and_then(|a| a.checked_add(size));
            // torch's `_block_extra`: old snapshots keep frames and the
            // request under `history[0]`.
            let (requested, stack) = if b.get("frames").is_some() {
                let requested = b.get("requested_size");
                let requested = if requested.is_some() {
                    self.size(requested)
                } else {
                    size
                };
                (requested, self.stack(b.get("frames"), memo))
            } else if let Some(first) = b.get("history").and_then(|h| {
                if let Some(slot) = h.memo_id() {
                    memo.forget(slot);
                }
                h.items().and_then(|h| h.into_iter().next())
            }) {
                let real = first.get("real_size");
                let requested = if real.is_some() {
                    self.size(real)
                } else {
                    size
                };
                (requested, self.stack(first.get("frames"), memo))
            } else {
                let requested = b.get("requested_size");
                let requested = if requested.is_some() {
                    self.size(requested)
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
    }
}

pub(crate) fn read(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let mut visitor = SnapshotVisitor {
        profile,
        segments: Vec::new(),
        traces: Vec::new(),
        actions: Vec::new(),
        handles: Vec::new(),
        converted: HashMap::new(),
        blocks_seen: HashSet::new(),
        traces_seen: 0,
        has_category: false,
        bad_values: 0,
    };
    let root = pickle::decode(bytes, &mut visitor).map_err(|e| Error::Corrupt {
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
    let SnapshotVisitor {
        profile,
        segments,
        traces,
        actions,
        has_category,
        bad_values,
        ..
    } = visitor;
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
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, _)| i),
    );
    let mut segments_by_device: BTreeMap<usize, Vec<RawSegment>> = BTreeMap::new();
    for s in segments {
        segments_by_device.entry(s.device).or_default().push(s);
    }
    let steps = annotated_steps(&root);
    let mut traces = traces;
    let mut actions = actions;
    for device in devices {
        let trace = traces
            .get_mut(device)
            .map(std::mem::take)
            .unwrap_or_default();
        let counts = actions
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
        let device_steps = steps.get(&(device as i64)).cloned().unwrap_or_default();
        build_memory(profile, path, &id, trace, counts, segs);
        // build_memory always adds the memory last.
        if let Some(m) = profile.memories.last_mut() {
            m.steps = device_steps;
        }
    }
    Ok(())
}

/// `ProfilerStep#N` spans among the snapshot's `external_annotations`
/// (`{stage: START|END, name, device, time_us}`), per device.
fn annotated_steps(root: &Value) -> BTreeMap<i64, Vec<Step>> {
    let mut open: HashMap<(i64, i64), i64> = HashMap::new();
    let mut out: BTreeMap<i64, Vec<Step>> = BTreeMap::new();
    let Some(annotations) = root.get("external_annotations").and_then(|a| a.items()) else {
        return out;
    };
    for a in annotations {
        let name = a.get("name");
        let Some(number) = name
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|n| n.strip_prefix("ProfilerStep#"))
            .and_then(|n| n.trim().parse::<i64>().ok())
        else {
            continue;
        };
        let (Some(at), device) = (
            a.get("time_us").and_then(|t| t.as_i64()),
            a.get("device").and_then(|d| d.as_i64()).unwrap_or(0),
        ) else {
            continue;
        };
        match a.get("stage").as_ref().and_then(Value::as_str) {
            Some("START") => {
                open.insert((device, number), at);
            }
            Some("END") => {
                if let Some(start) = open.remove(&(device, number)) {
                    out.entry(device).or_default().push(Step {
                        id: number,
                        start,
                        end: at.max(start),
                    });
                }
            }
            _ => {}
        }
    }
    for steps in out.values_mut() {
        steps.sort_by_key(|s| (s.start, s.id));
    }
    out
}

fn build_memory(
    profile: &mut Profile,
    path: &str,
    id: &str,
    trace: Vec<Entry>,
    counts: BTreeMap<String, u64>,
    segments: Vec<RawSegment>,
) {
    let timed = trace
        .iter()
        .filter(|e| matches!(e.action, Action::Alloc | Action::FreeCompleted))
        .all(|e| e.time_us.is_some());
    let axis = if timed {
        Axis::TimeUs
    } else {
        Axis::EventIndex
    };
    let before_window = profile.names.string("(allocated before the trace window)");
    let before_window_site = profile.names.site(Site {
        op: Some(before_window),
        ..Site::default()
    });
    let site_of = |profile: &mut Profile, stack: StackId, category: Option<StrId>| {
        profile.names.site(Site {
            stack,
            category,
            ..Site::default()
        })
    };
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut live_at_start: Vec<AllocId> = Vec::new();
    // Reserved bytes relative to the start, per segment event.
    let mut relative: Vec<(i64, i128)> = Vec::new();
    let mut live: HashMap<u64, AllocId> = HashMap::new();
    let mut reserved: i128 = 0;
    let mut freed_before_window = 0u64;
    let mut realloc_without_free = 0u64;
    let mut ooms: Vec<String> = Vec::new();
    let mut last_at = 0i64;
    let new_alloc = |allocations: &mut Vec<Allocation>, a: Allocation| {
        let id = AllocId(allocations.len() as u32);
        allocations.push(a);
        id
    };
    for (index, e) in trace.iter().enumerate() {
        let at = if timed {
            e.time_us.unwrap_or(0)
        } else {
            index as i64
        };
        last_at = at;
        match e.action {
            Action::Alloc => {
                if let Some(old) = live.remove(&e.addr) {
                    realloc_without_free += 1;
                    events.push(Event {
                        at,
                        kind: EventKind::Free,
                        alloc: old,
                    });
                }
                let site = site_of(profile, e.stack, e.category);
                let alloc = new_alloc(
                    &mut allocations,
                    Allocation {
                        bytes: e.size,
                        requested: e.size,
                        count: 1,
                        address: Some(e.addr),
                        site,
                    },
                );
                live.insert(e.addr, alloc);
                events.push(Event {
                    at,
                    kind: EventKind::Alloc,
                    alloc,
                });
            }
            Action::FreeCompleted => {
                let alloc = match live.remove(&e.addr) {
                    Some(alloc) => alloc,
                    None => {
                        freed_before_window += 1;
                        let alloc = new_alloc(
                            &mut allocations,
                            Allocation {
                                bytes: e.size,
                                requested: e.size,
                                count: 1,
                                address: Some(e.addr),
                                site: before_window_site,
                            },
                        );
                        live_at_start.push(alloc);
                        alloc
                    }
                };
                events.push(Event {
                    at,
                    kind: EventKind::Free,
                    alloc,
                });
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                reserved += i128::from(e.size);
                relative.push((at, reserved));
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                reserved -= i128::from(e.size);
                relative.push((at, reserved));
            }
            Action::Oom => ooms.push(format!(
                "{} requested with {} free on the device at {at}",
                crate::report::units::bytes(e.size),
                crate::report::units::bytes(e.addr)
            )),
            Action::FreeRequested | Action::Other => {}
        }
    }

    // The end state: blocks the trace did not allocate were allocated before it.
    let mut end_reserved: u64 = 0;
    let mut largest_free: u64 = 0;
    let mut blocks_before_window = 0u64;
    let mut blocks_without_address = 0u64;
    let mut still_held: BTreeSet<u64> = BTreeSet::new();
    let mut model_segments = Vec::with_capacity(segments.len());
    for raw in segments {
        end_reserved = end_reserved.saturating_add(raw.segment.bytes);
        for (block, &stack) in raw.segment.blocks.iter().zip(&raw.block_stacks) {
            match block.state {
                BlockState::Free => largest_free = largest_free.max(block.bytes),
                BlockState::PendingFree => {
                    if let Some(a) = block.address {
                        still_held.insert(a);
                    }
                }
                BlockState::Allocated => {
                    let Some(address) = block.address else {
                        blocks_without_address += 1;
                        continue;
                    };
                    still_held.insert(address);
                    if live.contains_key(&address) {
                        continue;
                    }
                    blocks_before_window += 1;
                    let site = site_of(profile, stack, None);
                    let alloc = new_alloc(
                        &mut allocations,
                        Allocation {
                            bytes: block.bytes,
                            requested: block.requested,
                            count: 1,
                            address: Some(address),
                            site,
                        },
                    );
                    live_at_start.push(alloc);
                }
            }
        }
        model_segments.push(raw.segment);
    }
    let has_segments = !model_segments.is_empty();
    let not_in_segments = if has_segments && blocks_without_address == 0 {
        live.keys().filter(|a| !still_held.contains(a)).count()
    } else {
        0
    };

    let mut samples: Vec<AllocatorSample> = Vec::new();
    if has_segments || !relative.is_empty() {
        // Anchor the running reserved total so that it ends at the segments' total.
        let offset = i128::from(end_reserved) - reserved;
        let clamp = |r: i128| u64::try_from(r.max(0)).unwrap_or(u64::MAX);
        let first_at = trace
            .iter()
            .enumerate()
            .find_map(|(i, e)| if timed { e.time_us } else { Some(i as i64) })
            .unwrap_or(0);
        samples.push(AllocatorSample::new(first_at).with_reserved_bytes(Some(clamp(offset))));
        samples.extend(
            relative.iter().map(|&(at, r)| {
                AllocatorSample::new(at).with_reserved_bytes(Some(clamp(r + offset)))
            }),
        );
        if has_segments {
            // No `allocated_bytes`: the trace is complete within the window, so
            // the replay is the in-use figure; torch's end-state "allocated"
            // (requested sizes) is in `segments`.
            samples.push(
                AllocatorSample::new(last_at)
                    .with_reserved_bytes(Some(end_reserved))
                    .with_largest_free_block(Some(largest_free)),
            );
        }
    }

    if trace.is_empty() && blocks_before_window > 0 {
        profile.warn(
            path,
            format!(
                "{id}: no allocation history was recorded (record it with \
                 torch.cuda.memory._record_memory_history()); only the {blocks_before_window} \
                 blocks live at the end are known"
            ),
        );
    } else if freed_before_window > 0 || blocks_before_window > 0 {
        profile.warn(
            path,
            format!(
                "{id}: the trace is a ring buffer that starts after the program did: \
                 {freed_before_window} frees and {blocks_before_window} live blocks belong to \
                 allocations made before the window; they are counted as live at the start"
            ),
        );
    }
    if realloc_without_free > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {realloc_without_free} allocations reuse an address whose free is not \
                 in the trace; the earlier allocation is taken as freed there"
            ),
        );
    }
    if not_in_segments > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {not_in_segments} allocations the trace leaves live are not in the \
                 segments (a trimmed or inconsistent snapshot); they stay live at the end"
            ),
        );
    }
    if blocks_without_address > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {blocks_without_address} live blocks have no address, so the end state \
                 cannot be matched with the trace (a profiler-made snapshot)"
            ),
        );
    }
    if !ooms.is_empty() {
        let shown: Vec<&str> = ooms.iter().take(3).map(String::as_str).collect();
        profile.warn(
            path,
            format!(
                "{id}: {} out-of-memory events in the trace: {}{}",
                ooms.len(),
                shown.join("; "),
                if ooms.len() > shown.len() {
                    "; ..."
                } else {
                    ""
                }
            ),
        );
    }

    // A second snapshot of the same device (several files) stays apart.
    let id = if profile.memories.iter().any(|m| m.id == id) {
        format!("{id} ({path})")
    } else {
        id.to_string()
    };
    let memory = profile.memory_mut(&id, MemoryKind::Allocator, axis);
    memory.recorded_events = counts;
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    memory.allocator_samples = samples;
    memory.segments = model_segments;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{'segments': [{'blocks': L}, {'blocks': L}]}` with L one shared list
    /// of one block: the second reference is read as empty, with a warning.
    #[test]
    fn a_blocks_list_shared_between_segments_is_read_once() {
        let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 8];
        p.extend(b"segments");
        p.extend([0x94, b']', 0x94, b'(', b'}', 0x94, b'(', 0x8c, 6]);
        p.extend(b"blocks");
        p.extend([0x94, b']', 0x94, b'}', 0x94, b'(', 0x8c, 4]);
        p.extend(b"size");
        p.extend([0x94, b'K', 200, 0x8c, 5]);
        p.extend(b"state");
        p.extend([0x94, 0x8c, 8]);
        p.extend(b"inactive");
        p.extend([0x94, b'u', b'a', b'u']);
        p.extend([b'}', 0x94, b'(', b'h', 4, b'h', 5, b'u', b'e', b'u', b'.']);
        let mut profile = Profile::default();
        read(&mut profile, "s.pickle", &p).unwrap();
        let m = &profile.memories[0];
        let blocks: Vec<usize> = m.segments.iter().map(|s| s.blocks.len()).collect();
        assert_eq!(blocks, [1, 0]);
        assert_eq!(m.segments[0].blocks[0].bytes, 200);
        assert!(profile.warnings[0].message.contains("shared"));
    }
}

/// Snapshots made from a profiler run (`_profile_to_snapshot`) write a Python
/// frame as one name, `torch/nn/functional.py(6711): linear`, with the file
/// `none`: split it so it is a frame like any other (function, file, line).
fn profiler_frame<'n>(name: &'n str, file: &str) -> Option<(&'n str, &'n str, u32)> {
    if !matches!(file, "" | "none" | "??") {
        return None;
    }
    let (location, function) = name.split_once("): ")?;
    let (path, line) = location.rsplit_once('(')?;
    let line: u32 = line.parse().ok()?;
    (path.ends_with(".py") && !function.is_empty()).then_some((function, path, line))
}

#[cfg(test)]
mod profiler_frame_tests {
    use super::profiler_frame;

    #[test]
    fn profiler_frames_are_split_into_function_file_and_line() {
        assert_eq!(
            profiler_frame(
                "torch/nn/functional.py(6711): multi_head_attention_forward",
                "none"
            ),
            Some((
                "multi_head_attention_forward",
                "torch/nn/functional.py",
                6711
            ))
        );
        assert_eq!(
            profiler_frame("torch_train.py(16): <module>", "none"),
            Some(("<module>", "torch_train.py", 16))
        );
        // Anything else is kept as written.
        assert_eq!(profiler_frame("nn.Module: Linear_0", "none"), None);
        assert_eq!(profiler_frame("<built-in function linear>", "none"), None);
        assert_eq!(profiler_frame("f.py(3): g", "real.py"), None);
        assert_eq!(profiler_frame("f.py(x): g", "none"), None);
    }
}
