//! The one model every input format is parsed into.
//!
//! A [`Profile`] is a set of [`Memory`]s: an allocator, a device, or a compiled
//! program's memory space. Each memory has
//! - its [`Allocation`]s (size, requested size, address, interned [`Site`]),
//! - an ordered stream of [`Event`]s (allocate / free) over an [`Axis`],
//! - the allocations live before the first event (`live_at_start`),
//! - and/or a sequence of [`Instant`]s, each a complete live set (a pprof
//!   snapshot is one instant; `memory1.prof … memory9.prof` are nine).
//!
//! Analyses never look at the input format: they ask a memory for its
//! timeline (`crate::analysis::replay`) and for the live set at a point of it.

mod category;
mod event;
mod intern;
mod phase;
mod sample;
mod xla_report;

pub use category::{CategorySource, CategorySources};
pub use event::{Event, EventKind};
pub(crate) use intern::IdIndex;
pub use intern::{
    BeforeRecording, Frame, FrameId, Names, Renames, Site, SiteId, StackFrames, StackId, StrId,
};
pub use phase::{Phase, PhaseSpan};
pub use sample::{AllocatorSample, AllocatorSamples};
pub use xla_report::{
    BfcDump, ChunksOfSize, LayoutSizes, ReportedAllocation, ReportedBytes, UsageLine, XlaOomReport,
    XlaReportKind,
};

use std::collections::BTreeMap;

use serde::Serialize;

/// Index of an allocation within its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocId(pub u32);

impl AllocId {
    /// The position in [`Memory::allocations`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The input formats memtool reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// pprof `profile.proto`, as written by `jax.profiler.save_device_memory_profile`.
    Pprof,
    /// XSpace (`*.xplane.pb`), written by the TensorFlow, JAX and PyTorch/XLA profilers.
    #[serde(rename = "xspace")]
    XSpace,
    /// PyTorch memory snapshot pickle (`torch.cuda.memory._dump_snapshot`).
    TorchSnapshot,
    /// PyTorch profiler Chrome trace (`*.pt.trace.json`) with `[memory]` events.
    TorchTrace,
    /// PyTorch `export_memory_timeline` output (`.json` or `.raw.json.gz`).
    TorchMemoryTimeline,
    /// A log or pasted text holding XLA out-of-memory reports.
    XlaReport,
    /// An `xla.HloProto` of an XLA dump (`*.hlo.pb`): a compiled module with
    /// its buffer assignment.
    HloProto,
    /// XLA's text buffer assignment of a dump without protos
    /// (`*-buffer-assignment.txt`).
    BufferAssignmentText,
}

impl Format {
    /// The name used in every output (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            Format::Pprof => "pprof",
            Format::XSpace => "xspace",
            Format::TorchSnapshot => "torch_snapshot",
            Format::TorchTrace => "torch_trace",
            Format::TorchMemoryTimeline => "torch_memory_timeline",
            Format::XlaReport => "xla_report",
            Format::HloProto => "hlo_proto",
            Format::BufferAssignmentText => "buffer_assignment_text",
        }
    }
}

/// One file that went into a profile.
#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// The path as the user gave it (`-` for standard input).
    pub path: String,
    /// The format detected from the file's bytes.
    pub format: Format,
    /// Compiled programs the file lists apart from buffers (pprof
    /// `kind=executable` samples, which carry no device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executables: Option<Executables>,
}

/// What a memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A device as a whole (pprof's `device` label).
    Device,
    /// One allocator (`GPU_0_bfc`, `mklcpu`, a CUDA caching allocator).
    Allocator,
    /// A memory space of a compiled program (XLA buffer assignment).
    ProgramSpace,
}

impl MemoryKind {
    /// The name used in every output (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::Allocator => "allocator",
            MemoryKind::ProgramSpace => "program_space",
        }
    }
}

/// What the positions of a memory's events and instants measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Picoseconds since the profile's start.
    TimePs,
    /// Microseconds since the epoch (PyTorch).
    TimeUs,
    /// Position in the event stream.
    EventIndex,
    /// Snapshot number, 1-based, in command-line order.
    Snapshot,
    /// Position in the compiled program's schedule.
    ProgramOrder,
}

impl Axis {
    /// The name used in every output (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            Axis::TimePs => "time_ps",
            Axis::TimeUs => "time_us",
            Axis::EventIndex => "event_index",
            Axis::Snapshot => "snapshot",
            Axis::ProgramOrder => "program_order",
        }
    }
}

/// One allocation (or, for pprof, one sample: `count` buffers of one site).
/// 32 bytes: a memory holds one per allocation, and every replay of its
/// events reads them (48 bytes, with a 16-byte `Option<u64>` address and an
/// 8-byte count, were over a third of the model of an XSpace's events and,
/// on the benchmark machine, where a fresh page costs ~0.7 ms per MiB, a
/// measurable part of reading one; see BENCHMARKS.md Run Z-compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Bytes the allocator handed out. PyTorch snapshots record only what
    /// the program asked for, and count that, as torch's own tools do.
    pub bytes: u64,
    /// Bytes the program asked for (equal to `bytes` when unknown).
    pub requested: u64,
    /// Where the allocator placed it, when the format records addresses
    /// ([`Allocation::address`] reads it as a number).
    pub address: Option<Address>,
    /// Where it was allocated: stack, op, shape, dtype, category.
    pub site: SiteId,
    /// Number of buffers this allocation stands for (1 but for pprof
    /// samples; a sample of more than `u32::MAX` is counted as that many,
    /// with a warning).
    pub count: u32,
}

// The size the model is measured by (BENCHMARKS.md): a field added here is
// paid for by every allocation of every profile.
const _: () = assert!(std::mem::size_of::<Allocation>() == 32);

impl Allocation {
    /// Where the allocator placed it, when the format records addresses.
    pub fn address(&self) -> Option<u64> {
        self.address.map(Address::get)
    }
}

/// An address an allocator handed out, in eight bytes with or without one
/// (`Option<Address>`): any address but `u64::MAX`, which no allocation can
/// start at (a file that claims it has its allocation read without an
/// address).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Address(std::num::NonZeroU64);

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Address({:#x})", self.get())
    }
}

impl Address {
    /// The address `address`; none for `u64::MAX`.
    pub fn new(address: u64) -> Option<Address> {
        // Held as its complement: address 0 is an address, `u64::MAX` none.
        std::num::NonZeroU64::new(!address).map(Address)
    }

    /// The address as a number.
    pub fn get(self) -> u64 {
        !self.0.get()
    }
}

/// A complete live set at one position (a snapshot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instant {
    /// Where it came from, e.g. the snapshot's file name.
    pub label: String,
    /// Position on the memory's [`Axis`] (the snapshot number for pprof).
    pub at: i64,
    /// The allocations live at this instant.
    pub live: Vec<AllocId>,
}

/// Compiled programs held by the runtime, reported apart from buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Executables {
    /// How many programs.
    pub count: u64,
    /// Their total size (signed: pprof sample values are).
    pub bytes: i64,
}

/// Events from `first_event` on (to the next run) that XProf's memory
/// profile puts in `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XprofStepRun {
    /// The run's first event (index in [`Memory::events`]).
    pub first_event: usize,
    /// XProf's step of every event of the run.
    pub step: i64,
}

/// One allocator, device, or program memory space.
#[derive(Clone, Debug)]
pub struct Memory {
    /// Unique within the profile: `cuda:0`, `GPU_0_bfc`, `jit_step(10)`.
    pub id: String,
    /// The host that recorded it, when the format names one (XSpace).
    pub host: Option<String>,
    /// Device, allocator or program memory space.
    pub kind: MemoryKind,
    /// What event and instant positions measure.
    pub axis: Axis,
    /// Every allocation, indexed by [`AllocId`].
    pub allocations: Vec<Allocation>,
    /// Allocations and frees in axis order.
    pub events: Vec<Event>,
    /// Allocations live before the first event (made before the recording).
    pub live_at_start: Vec<AllocId>,
    /// Complete live sets at positions (pprof snapshots), in order.
    pub instants: Vec<Instant>,
    /// Total memory the device or allocator can hand out, when known.
    pub capacity: Option<u64>,
    /// What the allocator itself reported over time (reserved, free,
    /// fragmentation), in axis order; empty when the format has none. The
    /// input of `frag`. When there is one sample per event
    /// (`allocator_samples.len() == events.len()`), sample `i` is the
    /// allocator's state right after event `i`; otherwise samples are placed
    /// by `at`.
    pub allocator_samples: AllocatorSamples,
    /// The allocator's own high-water mark over its whole life (TSL
    /// `peak_bytes_in_use`), which can exceed every point the profile saw.
    pub allocator_peak_bytes: Option<u64>,
    /// Training or inference steps on the memory's axis, in order; empty
    /// when the profile marks none. Leak detection compares step boundaries.
    pub steps: Vec<Step>,
    /// Ranges the program annotated on the memory's axis (`record_function`
    /// and user annotations: a PyTorch snapshot's `external_annotations`
    /// other than `ProfilerStep#N`), in order of their start; empty when
    /// the profile records none.
    pub annotations: Vec<Annotation>,
    /// Whether `steps` are the training cycles the phases show
    /// ([`Memory::steps_from_phase_cycles`]) because the file marks none.
    pub steps_from_phases: bool,
    /// The step XProf's memory profile puts each event in, as runs in event
    /// order, where the format gives events a profiler group (`group_id`,
    /// XSpace allocators); empty otherwise. See [`Memory::xprof_step_of_event`].
    pub xprof_steps: Vec<XprofStepRun>,
    /// The training phases on the memory's axis, in order, worked out from
    /// its allocations' sites when the profile is loaded
    /// ([`Memory::find_phases`]); empty when no site names a phase.
    pub phases: Vec<PhaseSpan>,
    /// For a compiled program's memory space: which program, what its
    /// buffers are, and what the program was doing at each event.
    pub program: Option<Box<ProgramInfo>>,
    /// The allocator's layout at the end of the profile (PyTorch snapshot
    /// `segments`), when the format records it. An input of `frag`.
    pub segments: Vec<Segment>,
    /// Events per kind as the file records them (PyTorch trace actions
    /// `alloc`, `free_requested`, `segment_alloc`, ...), including kinds
    /// that are not allocation events of the model.
    pub recorded_events: BTreeMap<String, u64>,
    /// The address ranges the allocator holds at the end of the profile,
    /// when the format says (a PyTorch snapshot's segments, a compiled
    /// program's memory space); empty when unknown. Free memory between
    /// live allocations is only counted inside these: address space between
    /// them is not the allocator's.
    pub held: Vec<AddressRange>,
    /// How `held` changed during the profile (PyTorch `segment_*` trace
    /// entries), in order; undone from the end they give the ranges held at
    /// any point.
    pub held_changes: Vec<HeldChange>,
    /// When each file of a series holds a whole recording of the same
    /// device (per-step PyTorch `_dump_snapshot` dumps), which series and
    /// file this memory is: `leaks` compares the ends of the files as the
    /// points of one series. `None` for formats whose series are instants.
    pub series: Option<SeriesPart>,
    /// The position in [`Profile::inputs`] of the file it was read from:
    /// which run a compiled program belongs to when several runs are read
    /// together (its id, with a per-process compile counter, does not say).
    pub input: usize,
    /// Allocations the allocator failed to make (PyTorch `oom` trace
    /// entries), in axis order. The input of the OOM post-mortem.
    pub out_of_memory: Vec<OutOfMemory>,
    /// The allocator's settings as the file records them (a PyTorch
    /// snapshot's `allocator_settings`: `expandable_segments` → `True`,
    /// `PYTORCH_CUDA_ALLOC_CONF` → its text), values written as Python
    /// prints them; empty when the file records none. `oom` recommends no
    /// setting that is already on.
    pub allocator_settings: BTreeMap<String, String>,
    /// On a µs axis, where the recording of the whole input starts, when
    /// the reader knows (a PyTorch trace's first event, whichever memory it
    /// belongs to): the memories of one trace then count their times from
    /// the same moment, so one moment reads alike on the CPU and the GPU.
    pub recording_origin: Option<i64>,
    /// Who named each category its sites carry (the file, memtool's
    /// inference, the user's rules), filled by `analysis::category::assign`.
    pub category_sources: CategorySources,
    /// Whether each allocation is one category's running total, not a
    /// buffer (a PyTorch memory timeline): where tables count buffers they
    /// count categories.
    pub category_totals: bool,
    /// For a memory timeline: the bytes its file holds from before
    /// profiling (its pre-existing rows, else its first row), which the
    /// trace of the same run cannot see.
    pub made_before_profiling: Option<u64>,
}

/// A range of addresses: `bytes` from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AddressRange {
    /// The first address.
    pub start: u64,
    /// Its length.
    pub bytes: u64,
}

impl AddressRange {
    /// One past the last address (saturating at the top of the address space).
    pub fn end(self) -> u64 {
        self.start.saturating_add(self.bytes)
    }
}

/// The allocator took or gave back a range of addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldChange {
    /// How many of the memory's events came before it: it happened after
    /// timeline point `events_before` and before the next event.
    pub events_before: usize,
    /// Position on the memory's axis.
    pub at: i64,
    /// The range.
    pub range: AddressRange,
    /// Taken (`segment_alloc`, `segment_map`) or given back (`segment_free`,
    /// `segment_unmap`).
    pub reserved: bool,
}

/// The op and region of a device's stack reservation (TPU
/// `bytes_reserved` in an XSpace), as XProf names it: one allocation, live
/// while reserved, with no address.
pub const STACK_RESERVATION: &str = "stack";

impl Names {
    /// Whether `site` is a stack reservation's ([`STACK_RESERVATION`] as
    /// its op and region).
    pub fn is_stack_reservation(&self, site: SiteId) -> bool {
        let site = self.site_of(site);
        let named = |s: Option<StrId>| s.is_some_and(|s| self.str(s) == STACK_RESERVATION);
        named(site.op) && named(site.category)
    }
}

/// One file's recording of a device that several files of a series record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesPart {
    /// The device, the same in every file (`cuda:0`).
    pub device: String,
    /// The file's name, as the series' points are labelled.
    pub file: String,
}

/// An allocation that failed for want of memory, as the allocator recorded
/// it. The memory's `segments` are its state at the failure when the file
/// was written by an out-of-memory observer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// Position on the memory's [`Axis`].
    pub at: i64,
    /// Bytes asked for (PyTorch records the size rounded by the allocator).
    pub requested_bytes: u64,
    /// Free device memory the driver reported at the failure, when recorded.
    pub device_free_bytes: Option<u64>,
    /// The stream the allocation was for, when recorded.
    pub stream: Option<i64>,
    /// Where it was asked for (the stack; PyTorch records no op).
    pub site: SiteId,
    /// How many of the memory's events came before it: the failure lies
    /// between `events[events_before - 1]` and `events[events_before]`.
    pub events_before: usize,
}

/// One step of a training or serving loop, as a span of the memory's axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The step number the program gave (`step_num`).
    pub id: i64,
    /// First position of the step on the memory's axis.
    pub start: i64,
    /// Last position of the step on the memory's axis.
    pub end: i64,
}

/// A range the program annotated (`record_function("name")`, an
/// optimizer's `Optimizer.step#AdamW.step`), as a span of the memory's axis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Annotation {
    /// The name the program gave the range.
    pub name: String,
    /// Where it starts (its `START` mark) on the memory's axis.
    pub start: i64,
    /// Where it ends (its `END` mark).
    pub end: i64,
}

/// A compiled program's memory space (XLA buffer assignment): which module,
/// the sizes its compiler decided, and names for its buffers and steps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgramInfo {
    /// The module with its program id, `jit_train_step(34)`.
    pub module: String,
    /// The memory space (XLA memory color); 0 is the device's main memory.
    pub memory_space: i64,
    /// The entry computation's parameter and result shapes (`(f32[8]{0}) ->
    /// f32[8]{0}`), when the module records them: what tells two compiles
    /// of one name apart across runs, whatever their compile counters.
    #[serde(skip)]
    pub signature: Option<String>,
    /// Sizes of the space's buffer allocations by kind, as XProf counts
    /// them: an allocation can be both a parameter and an output.
    pub parameter_bytes: u64,
    /// Allocations that may be live after the program ends.
    pub output_bytes: u64,
    /// Allocations holding constants of the program.
    pub constant_bytes: u64,
    /// Allocations reused within the program (the simulated heap).
    pub temporary_bytes: u64,
    /// All allocations of the space together, but thread-local ones.
    pub total_allocation_bytes: u64,
    /// Per-thread scratch allocations of kernels: not device memory, not in
    /// the total, never live in the memory's timeline.
    pub thread_local_bytes: u64,
    /// Per allocation (indexed by [`AllocId`]): the buffer's name and how it
    /// is computed; `None` for allocations the program does not name.
    #[serde(skip)]
    pub buffers: Vec<Option<ProgramBuffer>>,
    /// The program's steps (instruction names) that events refer to.
    #[serde(skip)]
    pub steps: Vec<String>,
    /// Per event (indexed like [`Memory::events`]): the index in `steps` of
    /// the step being executed when the event happened, if known.
    #[serde(skip)]
    pub event_steps: Vec<Option<u32>>,
    /// The space's buffer allocations by XLA's index (what an error's
    /// `#allocationN` names), each with its largest buffer; thread-local
    /// ones and those holding no named buffer left out.
    #[serde(skip)]
    pub allocations: Vec<ProgramAllocation>,
}

/// One buffer allocation of a compiled program, as XLA's buffer assignment
/// numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramAllocation {
    /// XLA's index (`allocation 7`, `#allocation7` in an error).
    pub index: i64,
    /// Its size.
    pub bytes: u64,
    /// Its largest buffer's op, shape, category and source line.
    pub site: SiteId,
    /// Its largest buffer.
    pub buffer: ProgramBuffer,
}

/// What the program says about one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramBuffer {
    /// The instruction that defines the buffer, with its tuple index when it
    /// is part of a tuple: `dot.1`, `fusion.3{1}`.
    pub name: StrId,
    /// What the instruction does (`fusion`, `dot`, `parameter`).
    pub opcode: Option<StrId>,
    /// The buffer's own size and its size without padding. The allocation
    /// can hold more: a whole-program allocation is sized for its largest
    /// buffer, and memory reused through sharing for the buffer that first
    /// held it.
    pub own_bytes: u64,
    /// The buffer's size without layout padding.
    pub own_unpadded_bytes: u64,
}

impl ProgramInfo {
    /// The buffer description of an allocation, if the program has one.
    pub fn buffer(&self, id: AllocId) -> Option<&ProgramBuffer> {
        self.buffers.get(id.index()).and_then(Option::as_ref)
    }

    /// The program step of event `index`, if known.
    pub fn step(&self, index: usize) -> Option<&str> {
        let step = self.event_steps.get(index).copied().flatten()?;
        self.steps.get(step as usize).map(String::as_str)
    }
}

/// A range the allocator reserved from the device (a PyTorch segment) and
/// how it is split into blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Start address of the segment, when recorded.
    pub address: Option<u64>,
    /// Bytes reserved from the device.
    pub bytes: u64,
    /// The CUDA stream the segment serves, when recorded.
    pub stream: Option<i64>,
    /// The allocator's pool or segment type (`large`, `small`), when known.
    pub pool: Option<StrId>,
    /// Blocks in address order as the file lists them.
    pub blocks: Vec<SegmentBlock>,
}

/// One block of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentBlock {
    /// Start address of the block, when recorded.
    pub address: Option<u64>,
    /// Bytes of the block (rounded by the allocator).
    pub bytes: u64,
    /// Bytes the program asked for; equal to `bytes` when unknown.
    pub requested: u64,
    /// Whether the program holds it, it waits for stream work, or it is free.
    pub state: BlockState,
}

/// The state of a segment's block in the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    /// Handed out to the program.
    Allocated,
    /// Freed by the program, not yet reusable (pending stream work).
    PendingFree,
    /// Free for reuse.
    Free,
}

impl Memory {
    /// An empty memory.
    pub fn new(id: impl Into<String>, kind: MemoryKind, axis: Axis) -> Memory {
        Memory {
            id: id.into(),
            host: None,
            kind,
            axis,
            allocations: Vec::new(),
            events: Vec::new(),
            live_at_start: Vec::new(),
            instants: Vec::new(),
            capacity: None,
            allocator_samples: AllocatorSamples::new(),
            allocator_peak_bytes: None,
            steps: Vec::new(),
            annotations: Vec::new(),
            steps_from_phases: false,
            xprof_steps: Vec::new(),
            phases: Vec::new(),
            program: None,
            segments: Vec::new(),
            recorded_events: BTreeMap::new(),
            held: Vec::new(),
            held_changes: Vec::new(),
            series: None,
            input: 0,
            out_of_memory: Vec::new(),
            allocator_settings: BTreeMap::new(),
            recording_origin: None,
            category_sources: CategorySources::new(),
            category_totals: false,
            made_before_profiling: None,
        }
    }

    /// Points the memory's ids at the table its names were imported into.
    pub fn rename(&mut self, renames: &Renames) {
        for a in &mut self.allocations {
            a.site = renames.site(a.site);
        }
        if let Some(program) = &mut self.program {
            for b in program.buffers.iter_mut().flatten() {
                b.name = renames.string(b.name);
                b.opcode = b.opcode.map(|s| renames.string(s));
            }
        }
        for segment in &mut self.segments {
            segment.pool = segment.pool.map(|s| renames.string(s));
        }
        for oom in &mut self.out_of_memory {
            oom.site = renames.site(oom.site);
        }
    }

    /// Adds an allocation and returns its id.
    pub fn push_allocation(&mut self, allocation: Allocation) -> AllocId {
        let id = AllocId(self.allocations.len() as u32);
        self.allocations.push(allocation);
        id
    }

    /// The allocation with this id (ids come from this memory).
    pub fn allocation(&self, id: AllocId) -> &Allocation {
        &self.allocations[id.index()]
    }

    /// The step XProf's memory profile puts event `index` in (its
    /// `UpdateStepId`): the event's `group_id`, else one more than the last
    /// `group_id` before it (0 before any). `None` where the format gives no
    /// groups. `--xprof-compat` takes it; memtool's own rule is
    /// [`Memory::step_at`], which does not move an event between steps by
    /// whether its thread was grouped.
    pub fn xprof_step_of_event(&self, index: usize) -> Option<i64> {
        let runs = self.xprof_steps.partition_point(|r| r.first_event <= index);
        runs.checked_sub(1).map(|r| self.xprof_steps[r].step)
    }

    /// Where the recording starts on the memory's axis: a ps axis counts
    /// from the profile's start; a µs axis (PyTorch's clock since the
    /// epoch) starts at [`Memory::recording_origin`] or the memory's
    /// earliest record — event, allocator sample, step or failure — if
    /// earlier; event and program positions at 0; `None` for snapshots.
    pub fn recording_start(&self) -> Option<i64> {
        match self.axis {
            Axis::TimePs | Axis::EventIndex | Axis::ProgramOrder => Some(0),
            Axis::TimeUs => [
                self.recording_origin,
                self.events.first().map(|e| e.at),
                self.allocator_samples.first().map(|s| s.at),
                self.steps.first().map(|s| s.start),
                self.out_of_memory.iter().map(|o| o.at).min(),
            ]
            .into_iter()
            .flatten()
            .min(),
            Axis::Snapshot => None,
        }
    }

    /// How long the memory had been recorded at `at`, in axis units.
    pub fn recorded_before(&self, at: i64) -> Option<i64> {
        self.recording_start().map(|start| at.saturating_sub(start))
    }

    /// Picoseconds from the start of the recording to `at`, for a memory on
    /// a time axis (`None` on other axes), so times read `t+25.43 ms`, not
    /// `1773270053884337 us`.
    pub fn since_start_ps(&self, at: i64) -> Option<i64> {
        let since = self.recorded_before(at).unwrap_or(0);
        match self.axis {
            Axis::TimePs => Some(since),
            Axis::TimeUs => Some(since.saturating_mul(1_000_000)),
            Axis::EventIndex | Axis::Snapshot | Axis::ProgramOrder => None,
        }
    }

    /// The step a position belongs to: the step whose span holds it, else
    /// the next step to start (work between two steps prepares the next),
    /// else none.
    pub fn step_at(&self, at: i64) -> Option<&Step> {
        // Steps are sorted by start; the candidate is the last one starting
        // at or before `at`.
        let after = self.steps.partition_point(|s| s.start <= at);
        if let Some(step) = after.checked_sub(1).and_then(|i| self.steps.get(i)) {
            if at <= step.end {
                return Some(step);
            }
        }
        self.steps.get(after)
    }
}

/// Something in the input that memtool read around rather than failing on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The input it concerns.
    pub path: String,
    /// What was read around, in one sentence.
    pub message: String,
    /// Whether it only says what the input is (JAX on CPU records no
    /// allocator events), not that something was read around: written once
    /// per run as a `note:`, not per file as a `warning:`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub note: bool,
}

/// Everything read from the inputs of one command.
#[derive(Debug, Default)]
pub struct Profile {
    /// The files read, in command-line order.
    pub inputs: Vec<InputInfo>,
    /// Interned strings, frames, stacks and sites, shared by all memories.
    pub names: Names,
    /// Every allocator, device and program memory space, in the order read.
    pub memories: Vec<Memory>,
    /// What the readers read around instead of failing.
    pub warnings: Vec<Warning>,
    /// XLA out-of-memory reports read from text (a program that never ran
    /// has no memory to profile: the report is what there is).
    pub xla_reports: Vec<XlaOomReport>,
    /// Where [`Profile::memory_mut`] finds a memory by id.
    memory_index: MemoryIndex,
}

/// Positions in [`Profile::memories`] by memory id, so that a reader which
/// looks its memory up once per sample or event stays linear in the number
/// of memories (a pprof may name 10^5 devices). `memories` is a public
/// vector that readers also push to and reorder: an entry is checked against
/// the memory it points at, and the index is rebuilt when it is stale or
/// misses memories. (A reader that renames a memory in place does so before
/// it pushes it, so an index that holds as many ids as there are memories
/// holds them all.)
#[derive(Default)]
struct MemoryIndex(rustc_hash::FxHashMap<Box<str>, usize>);

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemoryIndex({} ids)", self.0.len())
    }
}

impl MemoryIndex {
    /// The position of the memory `id` in `memories`, if there is one.
    fn find(&mut self, memories: &[Memory], id: &str) -> Option<usize> {
        let fresh = |pos: usize| memories.get(pos).is_some_and(|m| m.id == id);
        match self.0.get(id) {
            Some(&pos) if fresh(pos) => return Some(pos),
            None if self.0.len() == memories.len() => return None,
            _ => {}
        }
        self.0.clear();
        for (pos, m) in memories.iter().enumerate() {
            // The first of two memories with one id is the one found, as a
            // search from the front finds it.
            self.0.entry(m.id.as_str().into()).or_insert(pos);
        }
        self.0.get(id).copied().filter(|&pos| fresh(pos))
    }
}

impl Profile {
    /// The memory with this id and kind, created empty if it does not exist yet.
    pub fn memory_mut(&mut self, id: &str, kind: MemoryKind, axis: Axis) -> &mut Memory {
        let pos = self.memory_position(id, kind, axis);
        &mut self.memories[pos]
    }

    /// The position in `memories` of [`Profile::memory_mut`]'s memory.
    pub fn memory_position(&mut self, id: &str, kind: MemoryKind, axis: Axis) -> usize {
        match self.memory_index.find(&self.memories, id) {
            Some(pos) => pos,
            None => {
                self.memories.push(Memory::new(id, kind, axis));
                let pos = self.memories.len() - 1;
                self.memory_index.0.insert(id.into(), pos);
                pos
            }
        }
    }

    /// Forgets where memories are, after their ids changed in place.
    pub(crate) fn reindex_memories(&mut self) {
        self.memory_index.0.clear();
    }

    /// Whether nothing has been read into it yet.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
            && self.memories.is_empty()
            && self.warnings.is_empty()
            && self.names.string_count() <= 1
    }

    /// Records a warning about the input `path`.
    pub fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            path: path.to_string(),
            message: message.into(),
            note: false,
        });
    }

    /// Records what the input `path` is, where a user may wonder (see
    /// [`Warning::note`]).
    pub fn note(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(Warning {
            path: path.to_string(),
            message: message.into(),
            note: true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by id in constant time: 10^5 memories looked up 10 times each
    /// would be 5 * 10^10 string comparisons by a linear search.
    #[test]
    fn memories_are_found_by_id_among_many() {
        let mut profile = Profile::default();
        let ids: Vec<String> = (0..100_000).map(|i| format!("device:{i}")).collect();
        for _ in 0..10 {
            for id in &ids {
                profile
                    .memory_mut(id, MemoryKind::Device, Axis::Snapshot)
                    .capacity = Some(1);
            }
        }
        assert_eq!(profile.memories.len(), ids.len());
        assert!(profile.memories.iter().zip(&ids).all(|(m, id)| &m.id == id));
    }

    /// Every address but `u64::MAX` is kept as it was, 0 included, in
    /// eight bytes with or without one.
    #[test]
    fn an_address_is_kept_whole_in_eight_bytes() {
        for address in [0, 1, 0x7f00_0000_1000, 1 << 63, u64::MAX - 1] {
            assert_eq!(Address::new(address).map(Address::get), Some(address));
        }
        assert_eq!(Address::new(u64::MAX), None);
        assert_eq!(std::mem::size_of::<Option<Address>>(), 8);
        assert_eq!(format!("{:?}", Address::new(16)), "Some(Address(0x10))");
        let a = Allocation {
            bytes: 8,
            requested: 8,
            address: Address::new(0),
            site: SiteId(0),
            count: 1,
        };
        assert_eq!(a.address(), Some(0));
    }

    #[test]
    fn memories_pushed_or_reordered_by_hand_are_still_found() {
        let mut profile = Profile::default();
        profile.memory_mut("a", MemoryKind::Device, Axis::Snapshot);
        profile
            .memories
            .push(Memory::new("b", MemoryKind::Device, Axis::Snapshot));
        profile.memories.reverse();
        profile
            .memory_mut("a", MemoryKind::Device, Axis::Snapshot)
            .capacity = Some(7);
        profile
            .memory_mut("b", MemoryKind::Device, Axis::Snapshot)
            .capacity = Some(8);
        profile.memory_mut("c", MemoryKind::Device, Axis::Snapshot);
        let found: Vec<(&str, Option<u64>)> = profile
            .memories
            .iter()
            .map(|m| (m.id.as_str(), m.capacity))
            .collect();
        assert_eq!(found, [("b", Some(8)), ("a", Some(7)), ("c", None)]);
    }
}
