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
mod id_map;
mod phase;
mod plane;
mod replay;
pub(crate) mod shape;
mod short_path;

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use assignment::{Decoded, Trace};
use id_map::IdMap;
use memtool_proto::xla::{
    BufferAllocationProto, HloInstructionProto, HloModuleProto, ShapeProto, StackFrameIndexProto,
};
use replay::SpaceReader;
use short_path::LogicalBuffer;

use crate::error::Result;
use crate::input::source::ByteSource;
use crate::model::Profile;

/// Adds a memory per module and memory space of the XSpace's compiled
/// programs. An XSpace without any (TensorFlow, PyTorch/XLA host traces) adds
/// none; a module that does not decode is skipped with a warning.
pub(crate) fn read(profile: &mut Profile, path: &str, source: &dyn ByteSource) -> Result<()> {
    // The XSpace reader that runs first has recorded the input.
    let plane::Modules {
        modules,
        conflicting,
    } = plane::modules(path, source)?;
    for id in conflicting {
        profile.warn(
            path,
            format!(
                "two different HLO modules have program id {id}; the first is read, the other \
                 left out (as in XProf)"
            ),
        );
    }
    if modules.is_empty() {
        return Ok(());
    }
    let first = profile.memories.len();
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
    // The device's memory bounds each program's main memory space.
    if let Some(capacity) = plane::device_capacity(path, source)? {
        for memory in &mut profile.memories[first..] {
            if memory.program.as_ref().is_some_and(|p| p.memory_space == 0) {
                memory.capacity = Some(capacity);
            }
        }
    }
    Ok(())
}

/// Adds the memories of one serialized `xla.HloProto` (an XLA dump's
/// `*.hlo.pb`), read as a module of an XSpace is, under its module id; the
/// reason it is not a valid one otherwise.
pub(crate) fn read_hlo_proto(
    profile: &mut Profile,
    path: &str,
    bytes: &[u8],
) -> std::result::Result<(), String> {
    let hlo = Decoded::parse(bytes)?;
    let id = hlo.module.as_ref().map_or(0, |m| m.id);
    Module::new(&hlo, u64::try_from(id).unwrap_or(0)).read_into(profile, path);
    Ok(())
}

/// A buffer assignment read from XLA's text dump
/// (`input::xla_dump::buffer_assignment`): the module holds one instruction
/// per value (its name and shape; no metadata), each value is a logical
/// buffer defined by the instruction of its id, and there is no heap
/// simulator trace.
#[derive(Debug)]
pub(crate) struct TextAssignment {
    pub module: HloModuleProto,
    pub buffers: Vec<TextBuffer>,
    pub allocations: Vec<BufferAllocationProto>,
}

/// One value of a text buffer assignment: its id (also its instruction's),
/// size and memory space.
#[derive(Debug)]
pub(crate) struct TextBuffer {
    pub id: i64,
    pub size: i64,
    pub color: i64,
}

/// Adds the memories of a text buffer assignment, read as a module of an
/// XSpace is, except that each temporary allocation, whose trace the text
/// lacks, counts whole for the whole program.
pub(crate) fn read_text_assignment(profile: &mut Profile, path: &str, text: TextAssignment) {
    let program_id = u64::try_from(text.module.id).unwrap_or(0);
    let hlo = Decoded {
        module: Some(text.module),
        logical_buffers: text
            .buffers
            .iter()
            .map(|b| LogicalBuffer {
                id: b.id,
                size: b.size,
                color: b.color,
                instruction_id: Some(b.id),
                shape_index: Box::new([]),
            })
            .collect(),
        allocations: text.allocations,
        traces: Vec::new(),
    };
    let mut module = Module::new(&hlo, program_id);
    module.temporaries_whole = true;
    module.read_into(profile, path);
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

impl<'h> Buffer<'h> {
    fn bytes(&self) -> u64 {
        size(self.proto.size)
    }

    fn unpadded_bytes(&self) -> u64 {
        self.shape.map_or(self.bytes(), shape::unpadded_bytes)
    }

    fn shape_index(&self) -> &'h [i64] {
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
    /// By logical buffer id.
    buffers: IdMap<Buffer<'h>>,
    /// Allocation position → the trace that simulates it (XProf trusts the
    /// allocation of a trace's first event, not `buffer_allocation_index`).
    trace_of: HashMap<usize, usize>,
    /// Whether the module computes gradients, so op names can tell phases.
    has_backward: bool,
    missing: usize,
    /// Whether temporary allocations count whole, live from the start: the
    /// module has no heap simulator trace to replay (a text dump).
    temporaries_whole: bool,
}

impl<'h> Module<'h> {
    /// The entry computation's parameter and result shapes, as XLA prints
    /// them: the module's fingerprint across runs.
    fn signature(&self) -> Option<String> {
        let program = self.hlo.module.as_ref()?.host_program_shape.as_ref()?;
        let parameters: Vec<String> = program.parameters.iter().map(shape::human_string).collect();
        let result = program
            .result
            .as_ref()
            .map_or_else(String::new, shape::human_string);
        Some(format!("({}) -> {result}", parameters.join(", ")))
    }

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
        let logical: IdMap<&LogicalBuffer> =
            hlo.logical_buffers.iter().map(|b| (b.id, b)).collect();
        let allocations = &hlo.allocations[..];
        let traces = &hlo.traces[..];
        let mut buffers = IdMap::for_entries(hlo.logical_buffers.len());
        let mut missing = 0usize;
        for (position, allocation) in allocations.iter().enumerate() {
            for assigned in &allocation.assigned {
                let Some(&proto) = logical.get(assigned.logical_buffer_id) else {
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
            let first = trace.first_buffer_id().and_then(|id| buffers.get(id));
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
            temporaries_whole: false,
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
                    .iter()
                    .filter(|e| {
                        self.buffers
                            .get(e.buffer_id)
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

#[cfg(test)]
mod tests;
