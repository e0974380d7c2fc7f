//! PyTorch profiler Chrome traces (`*.pt.trace.json`) with `[memory]`
//! instant events.
//!
//! The trace is read with serde as a stream from the input through a small
//! buffer: each element of `traceEvents` becomes a compact record (or
//! nothing) as it is parsed, into buffers reused from one event to the next,
//! so a trace of gigabytes is never held, neither as bytes nor as a JSON
//! value tree. Arguments other than the memory ones are skipped without being
//! stored.

mod deserialize;
pub(super) mod window;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufReader;

use serde::de;

use super::corrupt;
use super::phase::{frame_mark, profiler_frame, range_mark, Mark, Trail};
use crate::error::{Error, Result};
use crate::input::source::{ByteSource, SourceReader};
use crate::model::{
    Address, AllocId, Allocation, AllocatorSample, Annotation, Axis, BeforeRecording, Event,
    EventKind, Format, Frame, FrameId, InputInfo, MemoryKind, Names, Phase, Profile, Site, SiteId,
    StackId, Step, StrId,
};
use deserialize::{parse_with_serde, DeviceProperty, RawEvent};

/// A `[memory]` event, compact: millions of them are held until the trace
/// is read (it need not be in time order, and the operator spans that
/// attribute them may come later in the file).
struct MemoryRecord {
    ts: f64,
    bytes: i64,
    addr: u64,
    total_allocated: u64,
    total_reserved: u64,
    /// Index into `TraceState::threads`.
    thread: u32,
    /// Index into `TraceState::devices`.
    device: u32,
    /// The innermost operator span around the event, once attributed.
    op: Option<StrId>,
    /// The Python stack around the event (the `python_function` spans that
    /// enclose it), once attributed.
    stack: StackId,
    /// The training phase its stack and the ranges around it tell.
    phase: Option<Phase>,
    /// Which of `addr`, `total_allocated`, `total_reserved` the event has
    /// (`HAS_*` bits).
    present: u8,
}

const HAS_ADDR: u8 = 1;
const HAS_TOTAL_ALLOCATED: u8 = 2;
const HAS_TOTAL_RESERVED: u8 = 4;

impl MemoryRecord {
    fn addr(&self) -> Option<u64> {
        (self.present & HAS_ADDR != 0).then_some(self.addr)
    }
    fn total_allocated(&self) -> Option<u64> {
        (self.present & HAS_TOTAL_ALLOCATED != 0).then_some(self.total_allocated)
    }
    fn total_reserved(&self) -> Option<u64> {
        (self.present & HAS_TOTAL_RESERVED != 0).then_some(self.total_reserved)
    }
}

/// A CPU operator span, for attributing allocations.
struct OpRecord {
    start: f64,
    end: f64,
    thread: (i64, i64),
    /// Index into `TraceState::op_names` while parsing, then a [`StrId`].
    name: u32,
}

/// A span that may enclose memory events: a Python frame
/// (`python_function`) or a range whose name tells a phase
/// (`Optimizer.step#…`, `autograd::engine::evaluate_function: …`).
struct RangeRecord {
    start: f64,
    end: f64,
    /// Index into `TraceState::threads`.
    thread: u32,
    what: RangeKind,
}

#[derive(Clone, Copy)]
enum RangeKind {
    /// Index into `TraceState::python_names`.
    Frame(u32),
    Mark(Mark),
}

/// Distinct keys (threads, devices) numbered in order of first appearance,
/// so records hold a `u32` rather than the key.
#[derive(Default)]
struct KeyTable {
    keys: Vec<(i64, i64)>,
    ids: HashMap<(i64, i64), u32>,
}

impl KeyTable {
    fn id(&mut self, key: (i64, i64)) -> u32 {
        *self.ids.entry(key).or_insert_with(|| {
            self.keys.push(key);
            (self.keys.len() - 1) as u32
        })
    }

    fn key(&self, id: u32) -> (i64, i64) {
        self.keys.get(id as usize).copied().unwrap_or_default()
    }

    /// Each id's position when the keys are sorted.
    fn ranks(&self) -> Vec<u32> {
        let mut by_key: Vec<u32> = (0..self.keys.len() as u32).collect();
        by_key.sort_by_key(|&id| self.key(id));
        let mut ranks = vec![0u32; self.keys.len()];
        for (rank, &id) in by_key.iter().enumerate() {
            if let Some(slot) = ranks.get_mut(id as usize) {
                *slot = rank as u32;
            }
        }
        ranks
    }
}

/// What the parse keeps. It touches no profile, so a parse that gives up
/// half-way leaves nothing behind.
#[derive(Default)]
struct TraceState {
    memory: Vec<MemoryRecord>,
    /// Operator names in order of first appearance.
    op_names: Vec<Box<str>>,
    op_name_ids: HashMap<Box<str>, u32>,
    threads: KeyTable,
    devices: KeyTable,
    ops: Vec<OpRecord>,
    /// `python_function` names in order of first appearance.
    python_names: Vec<Box<str>>,
    python_name_ids: HashMap<Box<str>, u32>,
    ranges: Vec<RangeRecord>,
    /// `enumerate(DataLoader)#…` spans: loading data, no phase of a step.
    data_loading: Vec<(f64, f64)>,
    /// `ProfilerStep#N` spans: (N, start µs, end µs), from the CPU's
    /// annotation.
    steps: Vec<Step>,
    /// The GPU's copies of those spans (`gpu_user_annotation`), used only
    /// for steps the CPU did not annotate.
    gpu_steps: Vec<Step>,
    /// Every other CPU `user_annotation` span (`record_function`,
    /// `Optimizer.step#AdamW.step`): the memories' annotated ranges.
    annotations: Vec<Annotation>,
    device_properties: Vec<DeviceProperty>,
    /// `[memory]` events skipped because their `Bytes` or `ts` is not a
    /// number in range (an integer byte count, a finite time).
    unreadable_memory: u64,
}

/// Record indices are `u32` (as allocation ids are): past that many
/// `[memory]` events a trace is refused rather than miscounted.
const MAX_MEMORY_EVENTS: usize = u32::MAX as usize;

impl TraceState {
    fn event<E: de::Error>(&mut self, e: &RawEvent) -> std::result::Result<(), E> {
        let name = e.name.get().unwrap_or("");
        let ph = e.ph.get().unwrap_or("");
        if name == "[memory]" {
            let args = &e.args;
            let (Some(bytes), Some(ts)) = (args.bytes.int(), e.ts.float()) else {
                self.unreadable_memory += 1;
                return Ok(());
            };
            if self.memory.len() >= MAX_MEMORY_EVENTS {
                return Err(E::custom(format_args!(
                    "more than {MAX_MEMORY_EVENTS} [memory] events; memtool reads at most that many"
                )));
            }
            let addr = args.addr.int().and_then(|a| u64::try_from(a).ok());
            let total_allocated = args
                .total_allocated
                .int()
                .and_then(|a| u64::try_from(a).ok());
            let total_reserved = args
                .total_reserved
                .int()
                .and_then(|a| u64::try_from(a).ok());
            let present = [
                (addr.is_some(), HAS_ADDR),
                (total_allocated.is_some(), HAS_TOTAL_ALLOCATED),
                (total_reserved.is_some(), HAS_TOTAL_RESERVED),
            ]
            .iter()
            .filter(|(has, _)| *has)
            .fold(0, |bits, (_, bit)| bits | bit);
            let thread = self.threads.id((e.pid.key(), e.tid.key()));
            let device = self.devices.id((
                args.device_type.int().unwrap_or(0),
                args.device_id.int().unwrap_or(-1),
            ));
            self.memory.push(MemoryRecord {
                ts,
                bytes,
                addr: addr.unwrap_or(0),
                total_allocated: total_allocated.unwrap_or(0),
                total_reserved: total_reserved.unwrap_or(0),
                thread,
                device,
                op: None,
                stack: StackId(0),
                phase: None,
                present,
            });
            return Ok(());
        }
        if ph != "X" {
            return Ok(());
        }
        let cat = e.cat.get().unwrap_or("");
        if let Some(number) = name.strip_prefix("ProfilerStep#") {
            if let (Some(id), Some(start), Some(dur)) =
                (number.trim().parse().ok(), e.ts.float(), e.dur.float())
            {
                let step = Step {
                    id,
                    start: start.round() as i64,
                    end: (start + dur.max(0.0)).round() as i64,
                };
                // Recent PyTorch records each step twice: the CPU's
                // annotation and the GPU's copy of it, which spans the
                // step's kernels. Memory events carry CPU times, so the
                // CPU's span is the step.
                if cat == "gpu_user_annotation" {
                    self.gpu_steps.push(step);
                } else {
                    self.steps.push(step);
                }
            }
            return Ok(());
        }
        let (Some(start), Some(dur)) = (e.ts.float(), e.dur.float()) else {
            return Ok(());
        };
        let end = start + dur.max(0.0);
        if cat == "user_annotation" {
            self.annotations.push(Annotation {
                name: name.to_string(),
                start: start.round() as i64,
                end: end.round() as i64,
            });
        }
        if name.starts_with("enumerate(DataLoader)") {
            self.data_loading.push((start, end));
        }
        let range = if cat == "python_function" {
            let id = match self.python_name_ids.get(name) {
                Some(&id) => id,
                None => {
                    let id = self.python_names.len() as u32;
                    self.python_names.push(name.into());
                    self.python_name_ids.insert(name.into(), id);
                    id
                }
            };
            Some(RangeKind::Frame(id))
        } else {
            range_mark(name).map(RangeKind::Mark)
        };
        if let Some(what) = range {
            let thread = self.threads.id((e.pid.key(), e.tid.key()));
            self.ranges.push(RangeRecord {
                start,
                end,
                thread,
                what,
            });
        }
        // `cpu_op` in Kineto traces; `Operator` in PyTorch 1.9-era ones.
        if cat != "cpu_op" && cat != "Operator" {
            return Ok(());
        }
        let name = match self.op_name_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = self.op_names.len() as u32;
                self.op_names.push(name.into());
                self.op_name_ids.insert(name.into(), id);
                id
            }
        };
        self.ops.push(OpRecord {
            start,
            end,
            thread: (e.pid.key(), e.tid.key()),
            name,
        });
        Ok(())
    }
}

/// How much of the trace is buffered at a time.
const READ_BUFFER: usize = 256 << 10;

/// Reads a Chrome trace from `data`. A trace read from a file goes through
/// the window fast path unless `force_general_path` (serde's streaming
/// reader, which the window falls back to, gives the same profile).
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    data: &dyn ByteSource,
    force_general_path: bool,
) -> Result<()> {
    let state = {
        let _span = crate::timings::span("torch trace: parse");
        match data.as_bytes() {
            // Gunzipped traces are in memory already: parse them in place.
            Some(bytes) => parse_with_serde(&mut serde_json::Deserializer::from_slice(bytes)),
            None => match window::parse(data).filter(|_| !force_general_path) {
                Some(state) => Ok(state),
                // The fast pass gave up (a malformed trace, an unusual layout,
                // a read error): serde's own streaming reader decides, and
                // words any error.
                None => {
                    let reader = BufReader::with_capacity(READ_BUFFER, SourceReader::new(data));
                    parse_with_serde(&mut serde_json::Deserializer::from_reader(reader))
                }
            },
        }
        .map_err(|e| corrupt(path, "PyTorch trace JSON", e))?
    };
    let _span = crate::timings::span("torch trace: timelines");
    let TraceState {
        mut memory,
        op_names,
        op_name_ids,
        threads,
        devices,
        mut ops,
        python_names,
        python_name_ids,
        mut ranges,
        mut data_loading,
        mut steps,
        gpu_steps,
        mut annotations,
        device_properties,
        unreadable_memory,
    } = state;
    drop(python_name_ids);
    drop(op_name_ids);
    // Interned in order of first appearance, as if interned while parsing.
    let op_ids: Vec<StrId> = op_names.iter().map(|n| profile.names.string(n)).collect();
    for op in &mut ops {
        op.name = op_ids.get(op.name as usize).map_or(0, |id| id.0);
    }
    let annotated: HashSet<i64> = steps.iter().map(|s| s.id).collect();
    steps.extend(gpu_steps.into_iter().filter(|s| !annotated.contains(&s.id)));
    steps.sort_by_key(|s| (s.start, s.id));
    steps.dedup();
    annotations.sort_by(|a, b| (a.start, a.end, &a.name).cmp(&(b.start, b.end, &b.name)));
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::TorchTrace,
        executables: None,
    });
    if memory.is_empty() {
        return Err(Error::NoData {
            path: path.to_string(),
            message: match xprof_json(data) {
                Some(page) => format!(
                    "this is XProf's {page} JSON, made from an XSpace; give memtool the \
                     .xplane.pb it was made from (or its run directory or logdir)"
                ),
                None if unreadable_memory > 0 => format!(
                    "none of the trace's {unreadable_memory} [memory] events has a Bytes that \
                     is an integer in range (at most 2^63 - 1 in size) and a finite ts"
                ),
                None => "the trace has no [memory] events; record it with \
                         torch.profiler.profile(profile_memory=True)"
                    .into(),
            },
        });
    }
    if unreadable_memory > 0 {
        profile.warn(
            path,
            format!(
                "{unreadable_memory} [memory] events were skipped: their Bytes is not an \
                 integer in range (at most 2^63 - 1 in size) or their ts is not a finite number"
            ),
        );
    }
    // Chrome traces need not be in time order; keep file order among equals
    // (the sort is stable).
    memory.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    ops.sort_by(|a, b| {
        a.thread
            .cmp(&b.thread)
            .then(a.start.total_cmp(&b.start))
            .then(b.end.total_cmp(&a.end))
    });
    // The trace's first moment, whichever memory or operator it belongs
    // to: every memory of the trace counts its times from it.
    let origin = ops
        .iter()
        .map(|o| o.start)
        .chain(memory.first().map(|m| m.ts))
        .chain(steps.first().map(|s| s.start as f64))
        .fold(f64::INFINITY, f64::min);
    let origin = origin.is_finite().then(|| origin.round() as i64);
    attribute_ops(&mut memory, &threads, &ops);
    drop(ops);
    ranges.sort_by(|a, b| {
        a.thread
            .cmp(&b.thread)
            .then(a.start.total_cmp(&b.start))
            .then(b.end.total_cmp(&a.end))
    });
    attribute_stacks(profile, &mut memory, &ranges, &python_names);
    drop(ranges);
    data_loading.sort_by(|a, b| a.0.total_cmp(&b.0));
    infer_forward(&mut memory, &steps, &data_loading);

    // Record indices grouped by device in key order, in time order within
    // each (the sort is stable).
    let device_rank = devices.ranks();
    let rank = |m: &MemoryRecord| device_rank.get(m.device as usize).copied();
    let mut by_device: Vec<u32> = (0..memory.len() as u32).collect();
    by_device.sort_by_key(|&i| memory.get(i as usize).and_then(rank));
    let capacity: HashMap<i64, u64> = device_properties
        .iter()
        .filter_map(|d| {
            Some((
                d.id.int()?,
                d.total_global_mem
                    .int()
                    .and_then(|m| u64::try_from(m).ok())?,
            ))
        })
        .collect();
    for indices in by_device.chunk_by(|&a, &b| {
        let device = |i: u32| memory.get(i as usize).map(|m| m.device);
        device(a) == device(b)
    }) {
        let Some(first) = indices.first().and_then(|&i| memory.get(i as usize)) else {
            continue;
        };
        let (device_type, device_id) = devices.key(first.device);
        // c10::DeviceType: CPU 0, CUDA 1, HIP 6. PyTorch built for ROCm
        // names its AMD GPUs `cuda` (`torch.device("cuda:0")`, the
        // `torch.cuda` API), so HIP memory is `cuda:N` too, with the same
        // figures; only a trace that records both kinds on one id names
        // the HIP one `hip:N`.
        let both = device_type == DEVICE_TYPE_HIP
            && devices
                .keys
                .iter()
                .any(|&(t, i)| t == DEVICE_TYPE_CUDA && i == device_id);
        let id = match device_type {
            0 => "cpu".to_string(),
            DEVICE_TYPE_HIP if both => format!("hip:{device_id}"),
            DEVICE_TYPE_CUDA | DEVICE_TYPE_HIP => format!("cuda:{device_id}"),
            t => format!("device{t}:{device_id}"),
        };
        let is_gpu = matches!(device_type, DEVICE_TYPE_CUDA | DEVICE_TYPE_HIP);
        let records = indices.iter().filter_map(|&i| memory.get(i as usize));
        let cap = is_gpu.then(|| capacity.get(&device_id).copied()).flatten();
        let device = TraceDevice {
            id: &id,
            is_gpu,
            capacity: cap,
            steps: &steps,
            annotations: &annotations,
            origin,
        };
        build_trace_memory(profile, path, device, records);
    }
    Ok(())
}

/// Sets each memory event's `op` to the innermost operator span on its
/// thread that contains it: one sweep per thread with a stack of open spans.
/// `memory` is in time order; `ops` sorted by thread, start, longest first.
fn attribute_ops(memory: &mut [MemoryRecord], threads: &KeyTable, ops: &[OpRecord]) {
    let thread_rank = threads.ranks();
    let rank = |m: &MemoryRecord| thread_rank.get(m.thread as usize).copied();
    let mut by_thread: Vec<u32> = (0..memory.len() as u32).collect();
    by_thread.sort_by_key(|&i| memory.get(i as usize).and_then(rank));
    let thread_lengths: Vec<usize> = by_thread
        .chunk_by(|&a, &b| {
            let thread = |i: u32| memory.get(i as usize).map(|m| m.thread);
            thread(a) == thread(b)
        })
        .map(<[u32]>::len)
        .collect();
    let mut rest = by_thread.as_slice();
    for length in thread_lengths {
        let (events, after) = rest.split_at(length.min(rest.len()));
        rest = after;
        let Some(thread) = events
            .first()
            .and_then(|&i| memory.get(i as usize))
            .map(|m| threads.key(m.thread))
        else {
            continue;
        };
        let first = ops.partition_point(|o| o.thread < thread);
        let last = ops.partition_point(|o| o.thread <= thread);
        let spans = ops.get(first..last).unwrap_or_default();
        let mut open: Vec<&OpRecord> = Vec::new();
        let mut next = 0;
        for &i in events {
            let Some(m) = memory.get_mut(i as usize) else {
                continue;
            };
            let ts = m.ts;
            while let Some(span) = spans.get(next).filter(|s| s.start <= ts) {
                while open.last().is_some_and(|o| o.end < span.start) {
                    open.pop();
                }
                open.push(span);
                next += 1;
            }
            while open.last().is_some_and(|o| o.end < ts) {
                open.pop();
            }
            if let Some(op) = open.last() {
                m.op = Some(StrId(op.name));
            }
        }
    }
}

/// Sets each memory event's Python stack (the `python_function` spans on
/// its thread that enclose it, innermost first) and the phase they and the
/// marked ranges around it tell: one sweep per thread with a stack of open
/// spans, as [`attribute_ops`] does. A span's stack is interned only when an
/// event inside it needs it, once. `memory` is in time order; `ranges`
/// sorted by thread, start, longest first.
fn attribute_stacks(
    profile: &mut Profile,
    memory: &mut [MemoryRecord],
    ranges: &[RangeRecord],
    python_names: &[Box<str>],
) {
    /// An open span: where it ends, its frame (none for a marked range),
    /// its stack once interned, and the marks from the outermost span in.
    struct Open {
        end: f64,
        frame: Option<FrameId>,
        stack: Option<StackId>,
        trail: Trail,
    }
    if ranges.is_empty() {
        return;
    }
    let names = &mut profile.names;
    // By python name: its frame and what the frame says of the phase.
    let mut frames: Vec<Option<(FrameId, Option<Mark>)>> = vec![None; python_names.len()];
    let mut frame_of = |names: &mut Names, name: u32| -> (Option<FrameId>, Option<Mark>) {
        let Some(slot) = frames.get_mut(name as usize) else {
            return (None, None);
        };
        let (frame, mark) = *slot.get_or_insert_with(|| {
            let text = &python_names[name as usize];
            let (function, file, line) = profiler_frame(text, "").unwrap_or((text, "", 0));
            let frame = Frame {
                function: names.string(function),
                file: names.string(file),
                line,
            };
            (names.frame(frame), frame_mark(function, file))
        });
        (Some(frame), mark)
    };
    let mut by_thread: Vec<u32> = (0..memory.len() as u32).collect();
    // Stable: time order within each thread.
    by_thread.sort_by_key(|&i| memory[i as usize].thread);
    let thread_of: Vec<u32> = by_thread
        .iter()
        .map(|&i| memory[i as usize].thread)
        .collect();
    let mut open: Vec<Open> = Vec::new();
    let mut rest = by_thread.as_slice();
    for same in thread_of.chunk_by(|a, b| a == b) {
        let (events, after) = rest.split_at(same.len());
        rest = after;
        let thread = same[0];
        let first = ranges.partition_point(|r| r.thread < thread);
        let last = ranges.partition_point(|r| r.thread <= thread);
        let spans = &ranges[first..last];
        open.clear();
        let mut next = 0;
        for &i in events {
            let m = &mut memory[i as usize];
            while let Some(span) = spans.get(next).filter(|s| s.start <= m.ts) {
                while open.last().is_some_and(|o| o.end < span.start) {
                    open.pop();
                }
                let below = open.last().map_or(Trail::default(), |o| o.trail);
                let (frame, mark) = match span.what {
                    RangeKind::Frame(name) => frame_of(names, name),
                    RangeKind::Mark(mark) => (None, Some(mark)),
                };
                open.push(Open {
                    end: span.end,
                    frame,
                    stack: None,
                    trail: below.enter(mark),
                });
                next += 1;
            }
            while open.last().is_some_and(|o| o.end < m.ts) {
                open.pop();
            }
            let Some(top) = open.last() else {
                continue;
            };
            m.phase = top.trail.phase();
            // Intern the stacks of the spans opened since an event last
            // needed one, outermost first.
            let known = open.iter().rposition(|o| o.stack.is_some());
            let mut stack = known.and_then(|k| open[k].stack).unwrap_or(StackId(0));
            for o in &mut open[known.map_or(0, |k| k + 1)..] {
                if let Some(frame) = o.frame {
                    stack = names.push_frame(stack, frame);
                }
                o.stack = Some(stack);
            }
            m.stack = stack;
        }
    }
}

/// In a trace without Python stacks, nothing names the forward pass: what a
/// step allocates with no stack and no phase before its loss or backward
/// pass, after its last optimizer step or `zero_grad` before them, and
/// outside data loading, is the forward pass. `memory` is in time order,
/// `steps` and `data_loading` by start.
fn infer_forward(memory: &mut [MemoryRecord], steps: &[Step], data_loading: &[(f64, f64)]) {
    let mut loading = data_loading.iter().peekable();
    for step in steps {
        let (start, end) = (step.start as f64, step.end as f64);
        let first = memory.partition_point(|m| m.ts < start);
        let last = memory.partition_point(|m| m.ts <= end).max(first);
        let events = &mut memory[first..last];
        let Some(after_forward) = events
            .iter()
            .position(|m| matches!(m.phase, Some(Phase::Loss | Phase::Backward)))
        else {
            continue;
        };
        let from = events[..after_forward]
            .iter()
            .rposition(|m| matches!(m.phase, Some(Phase::Optimizer | Phase::ZeroGrad)))
            .map_or(0, |i| i + 1);
        for m in &mut events[from..after_forward] {
            while loading.peek().is_some_and(|&&(_, end)| end < m.ts) {
                loading.next();
            }
            let in_loading = loading.peek().is_some_and(|&&(start, _)| start <= m.ts);
            if m.phase.is_none() && m.stack.0 == 0 && !in_loading {
                m.phase = Some(Phase::Forward);
            }
        }
    }
}

/// `c10::DeviceType::CUDA`.
const DEVICE_TYPE_CUDA: i64 = 1;
/// `c10::DeviceType::HIP`: an AMD GPU under ROCm.
const DEVICE_TYPE_HIP: i64 = 6;

/// What a trace says of one device beyond its `[memory]` events.
struct TraceDevice<'a> {
    /// The memory's id (`cpu`, `cuda:0`).
    id: &'a str,
    /// A GPU (CUDA or HIP), whose events' `Total Reserved` is its caching
    /// allocator's, rather than the CPU.
    is_gpu: bool,
    /// Its memory, from the trace's `deviceProperties`.
    capacity: Option<u64>,
    /// The trace's `ProfilerStep#N` spans, in time order.
    steps: &'a [Step],
    /// The trace's other CPU annotations, in order of their start.
    annotations: &'a [Annotation],
    /// The trace's first moment ([`crate::model::Memory::recording_origin`]).
    origin: Option<i64>,
}

fn build_trace_memory<'a>(
    profile: &mut Profile,
    path: &str,
    device: TraceDevice<'_>,
    records: impl Iterator<Item = &'a MemoryRecord>,
) {
    let TraceDevice {
        id,
        is_gpu,
        capacity,
        steps,
        annotations,
        origin,
    } = device;
    // The op around a free is not the one that allocated: memory from
    // before the trace is named, with the free's stack beneath.
    let mut freed_before_sites: HashMap<StackId, SiteId> = HashMap::new();
    let mut sites: HashMap<(Option<StrId>, StackId, Option<Phase>), SiteId> = HashMap::new();
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut live_at_start: Vec<AllocId> = Vec::new();
    let mut samples: Vec<AllocatorSample> = Vec::new();
    let mut live: HashMap<u64, AllocId> = HashMap::new();
    // Traces without `Addr` (PyTorch 1.9): frees are paired with the most
    // recent live allocation of the same size.
    let mut live_by_size: HashMap<u64, Vec<AllocId>> = HashMap::new();
    let mut without_addr = 0u64;
    let mut freed_before = 0u64;
    let mut before_bytes: u64 = 0;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let push = |allocations: &mut Vec<Allocation>, a: Allocation| {
        let id = AllocId(allocations.len() as u32);
        allocations.push(a);
        id
    };
    let mut first = None;
    for m in records {
        first.get_or_insert(m);
        let op = m.op;
        let at = m.ts.round() as i64;
        let size = m.bytes.unsigned_abs();
        if m.addr().is_none() {
            without_addr += 1;
        }
        if m.bytes >= 0 {
            *counts.entry("alloc".into()).or_insert(0) += 1;
            let site = *sites.entry((op, m.stack, m.phase)).or_insert_with(|| {
                profile.names.site(Site {
                    stack: m.stack,
                    op,
                    phase: m.phase,
                    ..Site::default()
                })
            });
            if let Some(old) = m.addr().and_then(|a| live.remove(&a)) {
                events.push(Event::new(at, EventKind::Free, old));
            }
            let alloc = push(
                &mut allocations,
                Allocation {
                    bytes: size,
                    requested: size,
                    count: 1,
                    address: m.addr().and_then(Address::new),
                    site,
                },
            );
            match m.addr() {
                Some(a) => {
                    live.insert(a, alloc);
                }
                None => live_by_size.entry(size).or_default().push(alloc),
            }
            events.push(Event::new(at, EventKind::Alloc, alloc));
        } else {
            *counts.entry("free".into()).or_insert(0) += 1;
            let found = match m.addr() {
                Some(a) => live.remove(&a),
                None => live_by_size.get_mut(&size).and_then(Vec::pop),
            };
            let alloc = found.unwrap_or_else(|| {
                freed_before += 1;
                let freed_before_site = *freed_before_sites.entry(m.stack).or_insert_with(|| {
                    profile.names.before_recording_site(
                        BeforeRecording::Freed,
                        m.stack,
                        None,
                        None,
                        None,
                    )
                });
                before_bytes = before_bytes.saturating_add(size);
                let alloc = push(
                    &mut allocations,
                    Allocation {
                        bytes: size,
                        requested: size,
                        count: 1,
                        address: m.addr().and_then(Address::new),
                        site: freed_before_site,
                    },
                );
                live_at_start.push(alloc);
                alloc
            });
            events.push(Event::new(at, EventKind::Free, alloc));
        }
        if m.total_allocated().is_some() || m.total_reserved().is_some() {
            samples.push(
                AllocatorSample::new(at)
                    .with_reserved_bytes(m.total_reserved().filter(|_| is_gpu))
                    .with_allocated_bytes(m.total_allocated()),
            );
        }
    }
    // `Total Allocated` after the first event tells what was live before
    // the trace began; what the frees did not reveal is one allocation.
    if let Some(first) = first {
        if let Some(total) = first.total_allocated() {
            let start = i128::from(total) - i128::from(first.bytes);
            let unseen = start - i128::from(before_bytes);
            if unseen > 0 {
                let bytes = u64::try_from(unseen).unwrap_or(u64::MAX);
                let site = profile.names.before_recording_site(
                    BeforeRecording::StillLive,
                    StackId(0),
                    None,
                    None,
                    None,
                );
                let alloc = push(
                    &mut allocations,
                    Allocation {
                        bytes,
                        requested: bytes,
                        count: 1,
                        address: None,
                        site,
                    },
                );
                live_at_start.push(alloc);
            } else if unseen < 0 {
                profile.warn(
                    path,
                    format!(
                        "{id}: frees of allocations made before the trace exceed the first \
                         `Total Allocated`; live bytes may be off by {}",
                        -unseen
                    ),
                );
            }
        }
    }
    if without_addr > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {without_addr} [memory] events have no Addr (an old profiler); frees \
                 are paired with the latest live allocation of the same size"
            ),
        );
    }
    if freed_before > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {freed_before} frees are of allocations made before the trace; they are \
                 counted as live at the start"
            ),
        );
    }
    let axis = Axis::TimeUs;
    // Every memory of a trace is one device's as the profiler saw it, the
    // CPU's included (docs/json/README.md: the `kind` rule).
    let memory = profile.memory_mut(id, MemoryKind::Device, axis);
    // The memory is in hand here: finding it again by id per device would
    // make a trace of many devices quadratic.
    memory.steps = steps.to_vec();
    memory.annotations = annotations.to_vec();
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    memory.allocator_samples = samples.into();
    memory.recorded_events = counts;
    memory.capacity = capacity;
    memory.recording_origin = origin;
}

/// Which XProf page's JSON `data` is, when it is one: users hand memtool the
/// JSON XProf shows (its first keys say which) instead of the profile.
fn xprof_json(data: &dyn ByteSource) -> Option<&'static str> {
    let mut head = vec![0u8; data.len().min(256) as usize];
    data.read_exact_at(0, &mut head).ok()?;
    let head = String::from_utf8_lossy(&head);
    let key = head.trim_start().strip_prefix('{')?.trim_start();
    [
        ("\"memoryProfilePerAllocator\"", "Memory Profile"),
        ("\"memoryIds\"", "Memory Profile"),
        ("\"numHosts\"", "Memory Profile"),
        ("\"heapSizes\"", "Memory Viewer"),
        ("\"unpaddedHeapSizes\"", "Memory Viewer"),
        ("\"maxHeap\"", "Memory Viewer"),
    ]
    .into_iter()
    .find(|(first, _)| key.starts_with(first))
    .map(|(_, page)| page)
}
