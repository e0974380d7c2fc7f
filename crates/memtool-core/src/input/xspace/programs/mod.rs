//! Compiled programs in an XSpace: each module's XLA buffer assignment, read
//! the way XProf's Memory Viewer reads it.
//!
//! A module (one `xla.HloProto` found by [`plane`]) becomes one memory per
//! memory space (XLA memory color). Buffer allocations that live through the
//! whole program (entry parameters, outputs, constants) are live from the
//! start, one allocation each, named after their largest logical buffer. The temporary allocation's heap simulator trace becomes the event
//! stream, one event per trace event, so event `i` is at position `i` and the
//! replayed timeline is XProf's heap timeline: the bytes before each trace
//! event and after the last.
//!
//! Thread-local allocations (per-thread kernel scratch) are counted apart and
//! are never live, as in XProf 2.24.
//!
//! Buffers that share memory (`SHARE_WITH`) are reference counted on their
//! canonical buffer, as XProf does: the canonical buffer's bytes are live from
//! the first holder's allocation until the last holder frees it. Each such
//! period is one model allocation, named after the buffer that started it.

mod assignment;
mod plane;
mod shape;

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use assignment::{Decoded, LogicalBuffer, Trace};
use memtool_proto::xla::{
    BufferAllocationProto, HloInstructionProto, ShapeProto, StackFrameIndexProto,
};

use crate::error::Result;
use crate::input::source::ByteSource;
use crate::model::{
    AllocId, Allocation, Axis, Event, EventKind, Frame, FrameId, Memory, MemoryKind, Profile,
    ProgramBuffer, ProgramInfo, Site, SiteId, StackId, StrId,
};

/// Bytes one memory may hold in all its allocations together, so that no sum
/// of live bytes can overflow whatever a hostile file claims (64 PiB).
const MEMORY_CAP: u64 = 1 << 56;

/// Longest chain of shared buffers followed to its canonical buffer.
const MAX_CHAIN: usize = 1024;

const ALLOC: i32 = 0;
const FREE: i32 = 1;
const SHARE_WITH: i32 = 2;

/// Adds a memory per module and memory space of the XSpace's compiled
/// programs. An XSpace without any (TensorFlow, PyTorch/XLA host traces) adds
/// none; a module that does not decode is skipped with a warning.
pub(crate) fn read(profile: &mut Profile, path: &str, source: &dyn ByteSource) -> Result<()> {
    // The XSpace reader that runs first has recorded the input.
    let modules = plane::modules(path, source)?;
    for module in modules {
        match Decoded::parse(&module.hlo_proto) {
            Ok(hlo) => Module::new(&hlo, module.program_id).read_into(profile, path),
            Err(e) => profile.warn(
                path,
                format!(
                    "the HLO module with program id {} (at byte {}) is not a valid xla.HloProto \
                     and was skipped: {e}",
                    module.program_id, module.offset,
                ),
            ),
        }
    }
    Ok(())
}

/// How XProf names a buffer allocation's role.
fn category(a: &BufferAllocationProto) -> &'static str {
    if a.is_entry_computation_parameter {
        "Parameter"
    } else if a.maybe_live_out {
        "Output"
    } else if a.is_thread_local {
        "Thread-local"
    } else if a.is_constant {
        "Constant"
    } else {
        "Temporary"
    }
}

/// Allocations whose lifetime the heap simulator does not trace.
fn is_indefinite(a: &BufferAllocationProto) -> bool {
    a.is_thread_local || a.is_entry_computation_parameter || a.is_constant || a.maybe_live_out
}

fn size(bytes: i64) -> u64 {
    u64::try_from(bytes).unwrap_or(0)
}

/// A logical buffer that the buffer assignment placed in an allocation.
struct Buffer<'h> {
    proto: &'h LogicalBuffer,
    /// Position in `buffer_allocations`.
    allocation: usize,
    /// Where the buffer assignment placed it in its allocation.
    offset: u64,
    instruction: &'h HloInstructionProto,
    shape: Option<&'h ShapeProto>,
}

impl Buffer<'_> {
    fn bytes(&self) -> u64 {
        size(self.proto.size)
    }

    fn unpadded_bytes(&self) -> u64 {
        self.shape.map_or(self.bytes(), shape::unpadded_bytes)
    }

    fn shape_index(&self) -> &[i64] {
        &self.proto.shape_index
    }

    /// `name`, or `name{1,0}` for a tuple element, as XProf writes it.
    fn name(&self) -> String {
        let index = self.shape_index();
        if index.is_empty() {
            return self.instruction.name.clone();
        }
        let parts: Vec<String> = index.iter().map(i64::to_string).collect();
        format!("{}{{{}}}", self.instruction.name, parts.join(","))
    }
}

struct Module<'h> {
    hlo: &'h Decoded<'h>,
    name: String,
    allocations: &'h [BufferAllocationProto],
    traces: &'h [Trace<'h>],
    buffers: HashMap<i64, Buffer<'h>>,
    /// Allocation position → the trace that simulates it (XProf trusts the
    /// allocation of a trace's first event, not `buffer_allocation_index`).
    trace_of: HashMap<usize, usize>,
    /// Whether the module computes gradients, so op names can tell phases.
    has_backward: bool,
    missing: usize,
}

impl<'h> Module<'h> {
    fn new(hlo: &'h Decoded<'h>, program_id: u64) -> Module<'h> {
        let module = hlo.module.as_ref();
        let name = module.map_or("", |m| m.name.as_str());
        let instructions: HashMap<i64, &HloInstructionProto> = module
            .into_iter()
            .flat_map(|m| &m.computations)
            .flat_map(|c| &c.instructions)
            .map(|i| (i.id, i))
            .collect();
        let has_backward = instructions.values().any(|i| {
            i.metadata
                .as_ref()
                .is_some_and(|m| m.op_name.contains("transpose("))
        });
        let logical: HashMap<i64, &LogicalBuffer> =
            hlo.logical_buffers.iter().map(|b| (b.id, b)).collect();
        let allocations = &hlo.allocations[..];
        let traces = &hlo.traces[..];
        let mut buffers = HashMap::default();
        let mut missing = 0usize;
        for (position, allocation) in allocations.iter().enumerate() {
            for assigned in &allocation.assigned {
                let Some(&proto) = logical.get(&assigned.logical_buffer_id) else {
                    missing += 1;
                    continue;
                };
                let Some(&instruction) = proto.instruction_id.and_then(|id| instructions.get(&id))
                else {
                    missing += 1;
                    continue;
                };
                let index = &proto.shape_index[..];
                let shape = instruction
                    .shape
                    .as_ref()
                    .and_then(|s| shape::subshape(s, index));
                buffers.insert(
                    proto.id,
                    Buffer {
                        proto,
                        allocation: position,
                        offset: size(assigned.offset),
                        instruction,
                        shape,
                    },
                );
            }
        }
        let mut trace_of = HashMap::default();
        for (i, trace) in traces.iter().enumerate() {
            let first = trace.first_buffer_id().and_then(|id| buffers.get(&id));
            if let Some(buffer) = first {
                trace_of.insert(buffer.allocation, i);
            }
        }
        Module {
            hlo,
            name: format!("{name}({program_id})"),
            allocations,
            traces,
            buffers,
            trace_of,
            has_backward,
            missing,
        }
    }

    fn read_into(&self, profile: &mut Profile, path: &str) {
        if self.missing > 0 {
            profile.warn(
                path,
                format!(
                    "{}: {} assigned buffers name a logical buffer or instruction that is not \
                     in the module; they are left out",
                    self.name, self.missing
                ),
            );
        }
        let colors: BTreeSet<i64> = self.allocations.iter().map(|a| a.color).collect();
        for color in colors {
            let mut reader = SpaceReader::new(self, profile, path, color);
            reader.read_allocations();
            let chosen = self.trace_for(color);
            if let Some(trace) = chosen {
                reader.simulate(&self.traces[trace]);
            }
            let others = self.other_traces(color, chosen);
            if others > 0 {
                let message = format!(
                    "{}: {others} more heap simulator traces of memory space {color} (one per \
                     further temporary allocation) are not replayed; the timeline is the \
                     first one's, as in XProf",
                    self.name
                );
                reader.profile.warn(path, message);
            }
            let memory = reader.finish();
            profile.memories.push(memory);
        }
    }

    /// XProf's choice of trace for a memory color: the trace of the first
    /// temporary allocation of that color that has one, else the trace with
    /// the most events on buffers of that color.
    fn trace_for(&self, color: i64) -> Option<usize> {
        let by_allocation = self.allocations.iter().enumerate().find_map(|(i, a)| {
            (a.color == color && !is_indefinite(a))
                .then(|| self.trace_of.get(&i).copied())
                .flatten()
        });
        by_allocation.or_else(|| {
            let mut best: Option<(usize, usize)> = None;
            for (i, trace) in self.traces.iter().enumerate() {
                let count = trace
                    .events()
                    .filter(|e| {
                        self.buffers
                            .get(&e.buffer_id)
                            .is_some_and(|b| b.proto.color == color)
                    })
                    .count();
                if count > best.map_or(0, |b| b.1) {
                    best = Some((i, count));
                }
            }
            best.map(|b| b.0)
        })
    }

    /// Traces of other temporary allocations of this color than `chosen`.
    fn other_traces(&self, color: i64, chosen: Option<usize>) -> usize {
        let mut traces: Vec<usize> = self
            .allocations
            .iter()
            .enumerate()
            .filter(|(_, a)| a.color == color && !is_indefinite(a))
            .filter_map(|(i, _)| self.trace_of.get(&i).copied())
            .filter(|&t| Some(t) != chosen)
            .collect();
        traces.sort_unstable();
        traces.dedup();
        traces.len()
    }

    fn stack_frames(&self) -> Option<&'h StackFrameIndexProto> {
        self.hlo
            .module
            .as_ref()
            .and_then(|m| m.stack_frame_index.as_ref())
    }
}

/// Reference count of a logical buffer in the heap simulation.
#[derive(Default)]
struct Share {
    count: i64,
    canonical: Option<i64>,
}

/// Builds the memory of one memory space of one module.
struct SpaceReader<'m, 'h, 'p> {
    module: &'m Module<'h>,
    profile: &'p mut Profile,
    path: &'p str,
    memory: Memory,
    info: ProgramInfo,
    sites: HashMap<(i64, &'static str), (SiteId, ProgramBuffer)>,
    stacks: HashMap<i32, StackId>,
    /// Where each buffer allocation of this space starts (by position in
    /// `buffer_allocations`), the space's allocations laid end to end in
    /// index order; `None` for other spaces' and thread-local ones.
    bases: Vec<Option<u64>>,
    /// A zero-byte allocation that is never live: the event for trace events
    /// that change nothing, so positions stay aligned with the trace.
    no_op: Option<AllocId>,
    /// Bytes of every allocation so far, against [`MEMORY_CAP`].
    allocated: u64,
    clamped: bool,
}

impl<'m, 'h, 'p> SpaceReader<'m, 'h, 'p> {
    fn new(
        module: &'m Module<'h>,
        profile: &'p mut Profile,
        path: &'p str,
        color: i64,
    ) -> SpaceReader<'m, 'h, 'p> {
        let id = if color == 0 {
            module.name.clone()
        } else {
            format!("{}/S({color})", module.name)
        };
        SpaceReader {
            module,
            profile,
            path,
            memory: Memory::new(id, MemoryKind::ProgramSpace, Axis::ProgramOrder),
            info: ProgramInfo {
                module: module.name.clone(),
                memory_space: color,
                ..ProgramInfo::default()
            },
            sites: HashMap::default(),
            stacks: HashMap::default(),
            bases: bases(module.allocations, color),
            no_op: None,
            allocated: 0,
            clamped: false,
        }
    }

    fn finish(mut self) -> Memory {
        if self.clamped {
            let message = format!(
                "{}: buffer sizes add up to more than 64 PiB; sizes past that are cut to 0",
                self.memory.id
            );
            self.profile.warn(self.path, message);
        }
        self.info
            .buffers
            .resize(self.memory.allocations.len(), None);
        self.memory.program = Some(Box::new(self.info));
        self.memory
    }

    fn push(
        &mut self,
        bytes: u64,
        requested: u64,
        address: Option<u64>,
        named: Option<(SiteId, ProgramBuffer)>,
    ) -> AllocId {
        let site = match named {
            Some((site, _)) => site,
            None => self.profile.names.site(Site::default()),
        };
        let room = MEMORY_CAP - self.allocated;
        if bytes > room || requested > room {
            self.clamped = true;
        }
        let (bytes, requested) = (bytes.min(room), requested.min(room));
        self.allocated += bytes.max(requested);
        let id = self.memory.push_allocation(Allocation {
            bytes,
            requested,
            count: 1,
            address,
            site,
        });
        if let Some((_, buffer)) = named {
            self.info.buffers.resize(id.index(), None);
            self.info.buffers.push(Some(buffer));
        }
        id
    }

    /// Allocations of this color that live through the whole program.
    fn read_allocations(&mut self) {
        let color = self.info.memory_space;
        let allocations = self.module.allocations.iter().enumerate();
        for (position, allocation) in allocations.filter(|(_, a)| a.color == color) {
            let bytes = size(allocation.size);
            if allocation.is_thread_local {
                // Per-thread scratch of a kernel (small reductions on CPU),
                // not memory of the device: XProf 2.24 leaves it out too.
                self.info.thread_local_bytes = self.info.thread_local_bytes.saturating_add(bytes);
                continue;
            }
            self.info.total_allocation_bytes =
                self.info.total_allocation_bytes.saturating_add(bytes);
            if allocation.is_entry_computation_parameter {
                self.info.parameter_bytes = self.info.parameter_bytes.saturating_add(bytes);
            }
            if allocation.maybe_live_out {
                self.info.output_bytes = self.info.output_bytes.saturating_add(bytes);
            }
            if allocation.is_constant {
                self.info.constant_bytes = self.info.constant_bytes.saturating_add(bytes);
            }
            if !is_indefinite(allocation) {
                self.info.temporary_bytes = self.info.temporary_bytes.saturating_add(bytes);
                continue;
            }
            // Named after its largest logical buffer, the first of equals.
            let mut best: Option<&Buffer<'h>> = None;
            for assigned in &allocation.assigned {
                let Some(buffer) = self.module.buffers.get(&assigned.logical_buffer_id) else {
                    continue;
                };
                if buffer.bytes() > best.map_or(0, Buffer::bytes) {
                    best = Some(buffer);
                }
            }
            // XProf counts an allocation only through a named buffer.
            let Some(best) = best else { continue };
            let named = self.named(best, category(allocation));
            let address = self.base_of(position);
            let id = self.push(bytes, bytes, address, Some(named));
            self.memory.live_at_start.push(id);
        }
    }

    fn simulate(&mut self, trace: &Trace<'h>) {
        let mut shares: HashMap<i64, Share> = HashMap::default();
        // Canonical buffer id → the allocation holding its bytes now.
        let mut holding: HashMap<i64, AllocId> = HashMap::default();
        let mut step_ids: HashMap<&str, u32> = HashMap::default();
        let (mut over_freed, mut unknown_kind, mut unknown_buffer) = (0usize, 0usize, 0usize);
        for (i, event) in trace.events().enumerate() {
            let name = event.instruction_name;
            let step = (!name.is_empty()).then(|| {
                *step_ids.entry(name).or_insert_with(|| {
                    self.info.steps.push(name.to_string());
                    (self.info.steps.len() - 1) as u32
                })
            });
            self.info.event_steps.push(step);
            let applied = match self.module.buffers.get(&event.buffer_id) {
                None => {
                    unknown_buffer += 1;
                    None
                }
                Some(buffer) => match event.kind {
                    ALLOC => {
                        increment(&mut shares, buffer.proto.id);
                        let named = self.named(buffer, self.category_of(buffer));
                        let address = self.address_of(buffer);
                        let id = self.push(
                            buffer.bytes(),
                            buffer.unpadded_bytes(),
                            address,
                            Some(named),
                        );
                        holding.insert(buffer.proto.id, id);
                        Some((EventKind::Alloc, id))
                    }
                    FREE => {
                        let root = root(&shares, buffer.proto.id);
                        let share = shares.entry(root).or_default();
                        share.count -= 1;
                        match share.count {
                            0 => holding.remove(&root).map(|id| (EventKind::Free, id)),
                            c if c < 0 => {
                                over_freed += 1;
                                share.count = 0;
                                None
                            }
                            _ => None,
                        }
                    }
                    SHARE_WITH => self.share(
                        &mut shares,
                        &mut holding,
                        buffer,
                        event.share_with_canonical_id,
                    ),
                    _ => {
                        unknown_kind += 1;
                        None
                    }
                },
            };
            let (kind, alloc) = match applied {
                Some(applied) => applied,
                None => (EventKind::Free, self.no_op()),
            };
            self.memory.events.push(Event {
                at: i as i64,
                kind,
                alloc,
            });
        }
        let name = &self.memory.id;
        let mut notes = Vec::new();
        if over_freed > 0 {
            notes.push(format!("{over_freed} frees of buffers that were not allocated (XProf rejects such a trace)"));
        }
        if unknown_kind > 0 {
            notes.push(format!("{unknown_kind} events of an unknown kind"));
        }
        if unknown_buffer > 0 {
            notes.push(format!(
                "{unknown_buffer} events on buffers the assignment does not place"
            ));
        }
        if !notes.is_empty() {
            let message = format!(
                "{name}: heap simulator trace has {}; they change nothing",
                notes.join(", ")
            );
            self.profile.warn(self.path, message);
        }
    }

    /// `buffer` starts sharing the memory of `canonical_id`. When the
    /// canonical memory was free, this makes it live again.
    fn share(
        &mut self,
        shares: &mut HashMap<i64, Share>,
        holding: &mut HashMap<i64, AllocId>,
        buffer: &Buffer<'h>,
        canonical_id: i64,
    ) -> Option<(EventKind, AllocId)> {
        let canonical = self.module.buffers.get(&canonical_id)?;
        let root_id = root(shares, canonical.proto.id);
        if root_id == buffer.proto.id {
            return None;
        }
        shares.entry(buffer.proto.id).or_default().canonical = Some(canonical.proto.id);
        let count = increment(shares, root_id);
        if count != 1 {
            return None;
        }
        let root = self.module.buffers.get(&root_id)?;
        let named = self.named(buffer, self.category_of(buffer));
        let address = self.address_of(root);
        let id = self.push(root.bytes(), root.unpadded_bytes(), address, Some(named));
        holding.insert(root_id, id);
        Some((EventKind::Alloc, id))
    }

    /// Offset of an allocation in the space, as the address of the model
    /// allocation that stands for all of it.
    fn base_of(&self, position: usize) -> Option<u64> {
        self.bases.get(position).copied().flatten()
    }

    /// Offset of a buffer in the space: its allocation's start plus where
    /// the buffer assignment put it, so the address view shows how the heap
    /// simulator packed the temporary allocation.
    fn address_of(&self, buffer: &Buffer<'h>) -> Option<u64> {
        self.base_of(buffer.allocation)
            .map(|base| base.saturating_add(buffer.offset))
    }

    fn no_op(&mut self) -> AllocId {
        if let Some(id) = self.no_op {
            return id;
        }
        let id = self.push(0, 0, None, None);
        self.no_op = Some(id);
        id
    }

    fn category_of(&self, buffer: &Buffer<'h>) -> &'static str {
        self.module
            .allocations
            .get(buffer.allocation)
            .map_or("Temporary", category)
    }

    /// The site and program description of a buffer, interned once.
    fn named(&mut self, buffer: &Buffer<'h>, category: &'static str) -> (SiteId, ProgramBuffer) {
        let key = (buffer.proto.id, category);
        if let Some(&named) = self.sites.get(&key) {
            return named;
        }
        let instruction = buffer.instruction;
        let metadata = instruction.metadata.clone().unwrap_or_default();
        let stack = self.stack(
            &metadata.source_file,
            metadata.source_line,
            metadata.stack_frame_id,
        );
        let names = &mut self.profile.names;
        let op = names.optional_string(&metadata.op_name);
        let shape = buffer.shape.map(|s| names.string(&shape::human_string(s)));
        let dtype = buffer.shape.and_then(shape::dtype).map(|d| names.string(d));
        let category_id = Some(names.string(category));
        let site = names.site(Site {
            stack,
            op,
            shape,
            dtype,
            category: category_id,
        });
        let phase = phase(&metadata.op_name, self.module.has_backward, category);
        let program = ProgramBuffer {
            name: names.string(&buffer.name()),
            opcode: names.optional_string(&instruction.opcode),
            phase: phase.map(|p| names.string(p)),
            own_bytes: buffer.bytes(),
            own_unpadded_bytes: buffer.unpadded_bytes(),
        };
        self.sites.insert(key, (site, program));
        (site, program)
    }

    /// The instruction's Python stack, leaf first: the stack frame index when
    /// the module has one, else the single legacy source file and line.
    fn stack(&mut self, source_file: &str, source_line: i32, frame_id: i32) -> StackId {
        // Frame ids are per module; legacy file/line stacks (id 0) are not cached.
        if let Some(&stack) = self.stacks.get(&frame_id).filter(|_| frame_id != 0) {
            return stack;
        }
        let mut frames: Vec<FrameId> = Vec::new();
        if let Some(index) = self.module.stack_frames() {
            let mut next = frame_id;
            // Parents point anywhere in a hostile file: stop after every frame.
            for _ in 0..index.stack_frames.len() {
                let Some(frame) = one_based(next).and_then(|i| index.stack_frames.get(i)) else {
                    break;
                };
                next = frame.parent_frame_id;
                let location =
                    one_based(frame.file_location_id).and_then(|i| index.file_locations.get(i));
                let Some(location) = location else { continue };
                let lookup = |names: &[String], id: i32| {
                    one_based(id)
                        .and_then(|i| names.get(i))
                        .map_or("", String::as_str)
                        .to_string()
                };
                let file = lookup(&index.file_names, location.file_name_id);
                let function = lookup(&index.function_names, location.function_name_id);
                let names = &mut self.profile.names;
                let frame = Frame {
                    function: names.string(&function),
                    file: names.string(&file),
                    line: u32::try_from(location.line).unwrap_or(0),
                };
                frames.push(names.frame(frame));
            }
        }
        if frames.is_empty() && !source_file.is_empty() {
            let names = &mut self.profile.names;
            let frame = Frame {
                function: StrId(0),
                file: names.string(source_file),
                line: u32::try_from(source_line).unwrap_or(0),
            };
            frames.push(names.frame(frame));
        }
        let stack = self.profile.names.stack_leaf_first(&frames);
        if frame_id != 0 {
            self.stacks.insert(frame_id, stack);
        }
        stack
    }
}

/// Start of each allocation of memory space `color` when the space's
/// allocations (thread-local ones aside) are laid end to end in index order.
fn bases(allocations: &[BufferAllocationProto], color: i64) -> Vec<Option<u64>> {
    let mut next = 0u64;
    allocations
        .iter()
        .map(|a| {
            (a.color == color && !a.is_thread_local).then(|| {
                let base = next;
                next = next.saturating_add(size(a.size));
                base
            })
        })
        .collect()
}

/// A 1-based index of the stack frame index (0 means none) as a position.
fn one_based(id: i32) -> Option<usize> {
    usize::try_from(id).ok()?.checked_sub(1)
}

/// The id whose reference count a buffer uses: the end of its chain of
/// canonical buffers.
fn root(shares: &HashMap<i64, Share>, id: i64) -> i64 {
    let mut current = id;
    // XLA's chains are a few buffers long; a hostile file's could be
    // endless, and each event walks one.
    for _ in 0..MAX_CHAIN {
        match shares.get(&current).and_then(|s| s.canonical) {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

fn increment(shares: &mut HashMap<i64, Share>, id: i64) -> i64 {
    let root = root(shares, id);
    let share = shares.entry(root).or_default();
    share.count += 1;
    share.count
}

/// Where in a training step a buffer is made, from JAX's op name: inside
/// `transpose(...)` is the backward pass, inside `jvp(...)` the forward pass,
/// and the rest of a module that has a backward pass is the update after it.
fn phase(op_name: &str, has_backward: bool, category: &str) -> Option<&'static str> {
    if !has_backward || category == "Parameter" {
        return None;
    }
    if op_name.contains("transpose(") {
        Some("backward")
    } else if op_name.contains("jvp(") {
        Some("forward")
    } else if op_name.starts_with("jit(") || op_name.starts_with("pmap(") {
        Some("update")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    //! XProf's own Memory Viewer unit tests
    //! (`hlo_proto_to_memory_visualization_utils_test.cc`), rebuilt.

    use super::*;
    use crate::analysis::replay;
    use memtool_proto::xla::buffer_allocation_proto::Assigned;
    use memtool_proto::xla::heap_simulator_trace::Event as TraceEvent;
    use memtool_proto::xla::logical_buffer_proto::Location;
    use memtool_proto::xla::{
        BufferAssignmentProto, HeapSimulatorTrace, HloComputationProto, HloModuleProto, HloProto,
        LogicalBufferProto, OpMetadata,
    };
    use prost::Message;

    const MIB: i64 = 1 << 20;
    const U64: i32 = 9;

    /// `fusion.1` … `fusion.4` (ids 0-3) each define a U64 in a tuple; logical
    /// buffers 1-4 of the given sizes share one temporary allocation of 1 MiB;
    /// `constant.1` fills a constant allocation of 1 MiB.
    fn module(sizes: &[i64], events: &[(i32, i64, i64)]) -> HloProto {
        let u64_in_tuple = ShapeProto {
            element_type: 13,
            tuple_shapes: vec![ShapeProto {
                element_type: U64,
                ..Default::default()
            }],
            ..Default::default()
        };
        let instruction = |id: i64, name: &str| HloInstructionProto {
            name: name.to_string(),
            opcode: "fusion".to_string(),
            shape: Some(u64_in_tuple.clone()),
            metadata: Some(OpMetadata {
                op_name: format!("jit(f)/transpose(jvp(op{id}))"),
                ..Default::default()
            }),
            id,
        };
        let mut instructions: Vec<_> = (0..sizes.len() as i64)
            .map(|i| instruction(i, &format!("fusion.{}", i + 1)))
            .collect();
        instructions.push(instruction(9, "constant.1"));
        let buffer = |id: i64, size: i64, instruction_id: i64| LogicalBufferProto {
            id,
            size,
            defined_at: Some(Location {
                instruction_id,
                shape_index: vec![0],
                ..Default::default()
            }),
            color: 0,
        };
        let mut logical_buffers: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| buffer(i as i64 + 1, size, i as i64))
            .collect();
        logical_buffers.push(buffer(10, MIB, 9));
        let assigned = |id: i64, size: i64| Assigned {
            logical_buffer_id: id,
            offset: 0,
            size,
        };
        HloProto {
            hlo_module: Some(HloModuleProto {
                name: "test_module".to_string(),
                computations: vec![HloComputationProto {
                    instructions,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            buffer_assignment: Some(BufferAssignmentProto {
                logical_buffers,
                buffer_allocations: vec![
                    BufferAllocationProto {
                        index: 0,
                        size: MIB,
                        assigned: sizes
                            .iter()
                            .enumerate()
                            .map(|(i, &s)| assigned(i as i64 + 1, s))
                            .collect(),
                        ..Default::default()
                    },
                    BufferAllocationProto {
                        index: 1,
                        size: MIB,
                        is_constant: true,
                        assigned: vec![assigned(10, MIB)],
                        ..Default::default()
                    },
                ],
                heap_simulator_traces: vec![HeapSimulatorTrace {
                    events: events
                        .iter()
                        .map(|&(kind, buffer_id, canonical)| TraceEvent {
                            kind,
                            buffer_id,
                            share_with_canonical_id: canonical,
                            instruction_name: format!("step{buffer_id}"),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
            }),
        }
    }

    fn read(hlo: &HloProto) -> Profile {
        let mut profile = Profile::default();
        let bytes = hlo.encode_to_vec();
        let decoded = Decoded::parse(&bytes).unwrap();
        Module::new(&decoded, 7).read_into(&mut profile, "test");
        profile
    }

    fn names_at_peak(profile: &Profile) -> Vec<String> {
        let memory = &profile.memories[0];
        let peak = replay::peak(memory).unwrap();
        let program = memory.program.as_ref().unwrap();
        let mut names: Vec<String> = replay::live_at(memory, peak.index)
            .into_iter()
            .map(|id| {
                profile
                    .names
                    .str(program.buffer(id).unwrap().name)
                    .to_string()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn buffers_are_placed_where_the_assignment_put_them() {
        let quarter = MIB / 4;
        let mut hlo = module(
            &[quarter, quarter, quarter],
            &[(ALLOC, 1, 0), (ALLOC, 2, 0), (FREE, 1, 0), (ALLOC, 3, 0)],
        );
        let assignment = hlo.buffer_assignment.as_mut().unwrap();
        // Buffer 3 reuses buffer 1's place; buffer 2 sits after it.
        assignment.buffer_allocations[0].assigned[1].offset = quarter;
        let profile = read(&hlo);
        let memory = &profile.memories[0];
        let program = memory.program.as_ref().unwrap();
        let address_of = |name: &str| {
            let (i, _) = program
                .buffers
                .iter()
                .enumerate()
                .find(|(_, b)| b.is_some_and(|b| profile.names.str(b.name) == name))
                .unwrap();
            memory.allocations[i].address
        };
        // The temporary allocation (index 0) starts the space, the constant
        // allocation (index 1) follows it.
        assert_eq!(address_of("fusion.1{0}"), Some(0));
        assert_eq!(address_of("fusion.2{0}"), Some(quarter as u64));
        assert_eq!(address_of("fusion.3{0}"), Some(0));
        assert_eq!(address_of("constant.1{0}"), Some(MIB as u64));
    }

    #[test]
    fn sharing_an_allocated_buffer_does_not_double_it() {
        let half = MIB / 2;
        let events = [
            (ALLOC, 1, 0),
            (SHARE_WITH, 2, 1),
            (FREE, 1, 0),
            (FREE, 2, 0),
        ];
        let profile = read(&module(&[half, half], &events));
        assert!(profile.warnings.is_empty(), "{:?}", profile.warnings);
        let memory = &profile.memories[0];
        assert_eq!(memory.id, "test_module(7)");
        let peak = replay::peak(memory).unwrap();
        // XProf: peak 1.5 MiB; unpadded 8 B (a U64) + 1 MiB of constants.
        assert_eq!(peak.bytes, (MIB + half) as u64);
        assert_eq!(peak.requested, MIB as u64 + 8);
        assert_eq!(peak.at, 0);
        let info = memory.program.as_ref().unwrap();
        assert_eq!(info.total_allocation_bytes, 2 * MIB as u64);
        assert_eq!(info.temporary_bytes, MIB as u64);
        assert_eq!(info.constant_bytes, MIB as u64);
        let mut timeline = Vec::new();
        replay::for_each_point(memory, |p| timeline.push(p.bytes));
        let (c, h) = (MIB as u64, half as u64);
        assert_eq!(timeline, vec![c, c + h, c + h, c + h, c]);
        assert_eq!(
            names_at_peak(&profile),
            vec!["constant.1{0}", "fusion.1{0}"]
        );
        assert_eq!(info.step(1), Some("step2"));
    }

    #[test]
    fn a_share_chain_after_free_reuses_the_root_once() {
        let half = MIB / 2;
        let events = [
            (ALLOC, 1, 0),
            (SHARE_WITH, 2, 1),
            (FREE, 1, 0),
            (FREE, 2, 0),
            (SHARE_WITH, 3, 2),
            (FREE, 3, 0),
        ];
        let profile = read(&module(&[half, half, half], &events));
        let peak = replay::peak(&profile.memories[0]).unwrap();
        // XProf: 0.5 MiB and one buffer at peak (plus the constant here).
        assert_eq!(peak.bytes, (MIB + half) as u64);
        assert_eq!(names_at_peak(&profile).len(), 2);
    }

    #[test]
    fn memory_reused_through_a_chain_is_named_after_its_current_holder() {
        let quarter = MIB / 4;
        let events = [
            (ALLOC, 1, 0),
            (SHARE_WITH, 2, 1),
            (FREE, 1, 0),
            (FREE, 2, 0),
            (ALLOC, 4, 0),
            (SHARE_WITH, 3, 2),
            (FREE, 3, 0),
            (FREE, 4, 0),
        ];
        let profile = read(&module(&[quarter, quarter, quarter, 2 * quarter], &events));
        let peak = replay::peak(&profile.memories[0]).unwrap();
        // XProf: 0.75 MiB at the SHARE_WITH C→B step, shown as fusion.3 and fusion.4.
        assert_eq!(peak.bytes, (MIB + 3 * quarter) as u64);
        assert_eq!(peak.at, 5);
        assert_eq!(
            names_at_peak(&profile),
            vec!["constant.1{0}", "fusion.3{0}", "fusion.4{0}"]
        );
    }

    #[test]
    fn over_freeing_and_unknown_buffers_warn_and_keep_positions() {
        let half = MIB / 2;
        let events = [
            (ALLOC, 1, 0),
            (FREE, 1, 0),
            (FREE, 1, 0),
            (ALLOC, 99, 0),
            (7, 2, 0),
        ];
        let profile = read(&module(&[half, half], &events));
        let memory = &profile.memories[0];
        assert_eq!(memory.events.len(), 5);
        let mut timeline = Vec::new();
        replay::for_each_point(memory, |p| timeline.push(p.bytes));
        let c = MIB as u64;
        assert_eq!(timeline, vec![c, c + half as u64, c, c, c, c]);
        let warning = &profile.warnings[0].message;
        assert!(warning.contains("1 frees") && warning.contains("1 events of an unknown kind"));
        assert!(warning.contains("1 events on buffers"), "{warning}");
    }

    #[test]
    fn further_traces_of_a_space_are_named_in_a_warning() {
        let half = MIB / 2;
        let mut hlo = module(&[half], &[(ALLOC, 1, 0), (FREE, 1, 0)]);
        let assignment = hlo.buffer_assignment.as_mut().unwrap();
        assignment.logical_buffers.push(LogicalBufferProto {
            id: 5,
            size: MIB,
            defined_at: Some(Location {
                instruction_id: 0,
                ..Default::default()
            }),
            color: 0,
        });
        assignment.buffer_allocations.push(BufferAllocationProto {
            index: 2,
            size: MIB,
            assigned: vec![Assigned {
                logical_buffer_id: 5,
                offset: 0,
                size: MIB,
            }],
            ..Default::default()
        });
        let event = |kind| TraceEvent {
            kind,
            buffer_id: 5,
            ..Default::default()
        };
        assignment.heap_simulator_traces.push(HeapSimulatorTrace {
            events: vec![event(ALLOC), event(FREE)],
            ..Default::default()
        });
        let profile = read(&hlo);
        let memory = &profile.memories[0];
        assert_eq!(replay::peak(memory).unwrap().bytes, (MIB + half) as u64);
        assert_eq!(
            memory.program.as_ref().unwrap().temporary_bytes,
            2 * MIB as u64
        );
        let warning = &profile.warnings[0].message;
        assert!(
            warning.contains("1 more heap simulator traces"),
            "{warning}"
        );
    }

    #[test]
    fn xprof_compat_shows_own_sizes_and_hides_whole_program_buffers_off_space_0() {
        use crate::analysis::peak::{peak_with, PeakSettings};
        use crate::analysis::Options;
        let quarter = MIB / 4;
        // B (0.125 MiB) reuses A's 0.25 MiB after A is freed, while C is live.
        let events = [
            (ALLOC, 1, 0),
            (FREE, 1, 0),
            (ALLOC, 3, 0),
            (SHARE_WITH, 2, 1),
            (FREE, 2, 0),
            (FREE, 3, 0),
        ];
        let mut hlo = module(&[quarter, quarter / 2, quarter], &events);
        let assignment = hlo.buffer_assignment.as_mut().unwrap();
        for a in &mut assignment.buffer_allocations {
            a.color = 1;
        }
        for b in &mut assignment.logical_buffers {
            b.color = 1;
        }
        let profile = read(&hlo);
        assert_eq!(profile.memories[0].id, "test_module(7)/S(1)");
        let settings = PeakSettings {
            budget: None,
            xprof_compat: true,
        };
        let report = peak_with(&profile, &Options::default(), &settings);
        let program = report.memories[0].program.as_ref().unwrap();
        // The heap holds C and A's 0.25 MiB (plus the constant's 1 MiB) ...
        assert_eq!(report.memories[0].peak_bytes, (MIB + 2 * quarter) as u64);
        // ... XProf lists B with its own size, and no constant in space 1.
        let rows: Vec<(&str, u64)> = program
            .buffers_at_peak
            .iter()
            .map(|b| (b.instruction.as_str(), b.bytes))
            .collect();
        let (q, e) = (quarter as u64, quarter as u64 / 2);
        assert_eq!(rows, vec![("fusion.3{0}", q), ("fusion.2{0}", e)]);
    }

    #[test]
    fn phases_follow_jax_op_names() {
        assert_eq!(
            phase("jit(f)/transpose(jvp(g))/dot", true, "Temporary"),
            Some("backward")
        );
        assert_eq!(
            phase("jit(f)/jvp(g)/dot", true, "Temporary"),
            Some("forward")
        );
        assert_eq!(phase("jit(f)/sub", true, "Output"), Some("update"));
        assert_eq!(phase("jit(f)/sub", false, "Output"), None);
        assert_eq!(phase("params['w']", true, "Parameter"), None);
    }
}
