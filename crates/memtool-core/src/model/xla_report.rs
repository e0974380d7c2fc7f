//! XLA's out-of-memory reports, as a log or pasted text holds them: what a
//! program that never ran asked for. The reader (`input/xla_report`) fills
//! these; `analysis::xla_report` turns them into post-mortems.
//!
//! Sizes in the reports are printed rounded (`17.60G`, `980.0K`): each is a
//! [`ReportedBytes`], the nearest byte count with the rounding it carries, so
//! a figure memtool computes (a tiled shape's padded size) can be checked
//! against it.

use serde::Serialize;

/// Which of XLA's messages a report was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum XlaReportKind {
    /// The TPU compiler's report: `Ran out of memory in memory space hbm.
    /// Used … of … hbm. Exceeded hbm capacity by …`, the usage breakdown and
    /// the largest program allocations.
    CompileTime,
    /// The one-line `Allocation (size=…) would exceed memory (size=…) ::
    /// #allocationN [shape = '…', space=…, size = …, tag = '…']`.
    Allocation,
    /// The GPU runtime's `Out of memory while trying to allocate N bytes`,
    /// with the BFC allocator's dump when the log holds it.
    GpuAllocator,
}

impl XlaReportKind {
    /// The name used in every output (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            XlaReportKind::CompileTime => "compile_time",
            XlaReportKind::Allocation => "allocation",
            XlaReportKind::GpuAllocator => "gpu_allocator",
        }
    }
}

/// A size as a report prints it: `bytes` is the figure read back (exact when
/// the report prints bytes), `rounding` the most the true size can be away
/// from it (half a unit of the last digit printed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportedBytes {
    /// The nearest byte count.
    pub bytes: u64,
    /// How far the true size may be from `bytes` (0 when exact).
    #[serde(skip)]
    pub rounding: u64,
    /// The figure as written (`17.60G`).
    #[serde(skip)]
    pub text: String,
}

impl ReportedBytes {
    /// An exact byte count.
    pub fn exact(bytes: u64) -> ReportedBytes {
        ReportedBytes {
            bytes,
            rounding: 0,
            text: bytes.to_string(),
        }
    }

    /// Whether `bytes` prints as this figure: within its rounding.
    pub fn agrees_with(&self, bytes: u64) -> bool {
        self.bytes.abs_diff(bytes) <= self.rounding
    }
}

/// One line of a usage breakdown (`reserved 528.00M`, `arguments unknown
/// size`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsageLine {
    /// What it counts (`reserved`, `program`, `arguments`, `output`,
    /// `global`, `scoped`, `HLO temp`).
    pub name: String,
    /// Its size; `None` where the report says `unknown size`.
    pub size: Option<ReportedBytes>,
    /// What the report adds after the size (`92.8% utilization, 0.3%
    /// fragmentation (53.61M)`; `shares 0B with arguments`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One of the allocations a report lists.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportedAllocation {
    /// Its rank in the report's list (1 = largest), when listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// XLA's allocation name (`#allocation7`), in the one-line report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<String>,
    /// Its size (`Size:`), padded.
    pub size: Option<ReportedBytes>,
    /// Its size without layout padding (`Unpadded size:`), when stated.
    pub unpadded_size: Option<ReportedBytes>,
    /// What the report says padding costs (`Extra memory due to padding`).
    pub padding: Option<ReportedBytes>,
    /// The shape with its layout (`f32[4,128]{1,0:T(8,128)}`).
    pub shape: Option<String>,
    /// The framework op type (`OneHot`), from `Operator:`.
    pub op_type: Option<String>,
    /// The framework op name (`jit(step)/one_hot`), from `Operator:`.
    pub op_name: Option<String>,
    /// The source line (`train.py:42`), when the metadata names it.
    pub source: Option<String>,
    /// The HLO instruction (`fusion.1668`), from `XLA label:`.
    pub instruction: Option<String>,
    /// What the instruction does (`fusion`, `dot`), from `XLA label:`.
    pub opcode: Option<String>,
    /// `HLO temp`, `Parameter`, `Output`, … (`Allocation type:`), or the
    /// one-line report's `tag`.
    pub allocation_type: Option<String>,
    /// The sizes memtool computes from `shape` and its layout, when it parses.
    pub layout: Option<LayoutSizes>,
}

/// A shape's sizes as memtool computes them from its dimensions and layout
/// (XLA's `ShapeUtil::ArraySize`: the first tile pads the minor dimensions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutSizes {
    /// Elements times element size.
    pub unpadded_bytes: u64,
    /// With every tiled dimension rounded up to its tile.
    pub padded_bytes: u64,
    /// The layout in words: which dimensions the tiles pad, to what, and
    /// how sub-tiles pack elements.
    pub explanation: String,
}

/// What the GPU's BFC allocator logged at the failure.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BfcDump {
    /// The allocator (`GPU_0_bfc`).
    pub allocator: Option<String>,
    /// `Limit:`, the memory it may hold.
    pub limit_bytes: Option<u64>,
    /// `InUse:`.
    pub in_use_bytes: Option<u64>,
    /// `MaxInUse:`.
    pub max_in_use_bytes: Option<u64>,
    /// `NumAllocs:`.
    pub num_allocs: Option<u64>,
    /// `MaxAllocSize:`.
    pub max_alloc_size_bytes: Option<u64>,
    /// Bytes in its regions (`Total bytes in pool`).
    pub pool_bytes: Option<u64>,
    /// What it could still take from the device (`available bytes`).
    pub available_bytes: Option<u64>,
    /// Free chunks listed (`Free at … of size N`): how many, their bytes and
    /// the largest.
    pub free_chunks: u64,
    /// Their bytes.
    pub free_chunk_bytes: u64,
    /// The largest of them.
    pub largest_free_chunk_bytes: u64,
    /// `N Chunks of size S totalling …`, in the order listed.
    pub in_use_by_size: Vec<ChunksOfSize>,
}

/// Chunks in use of one size, as the BFC allocator's summary lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChunksOfSize {
    /// The chunk size.
    pub chunk_bytes: u64,
    /// How many chunks of it are in use.
    pub chunks: u64,
}

impl BfcDump {
    /// Whether any line of the dump was read.
    pub fn is_empty(&self) -> bool {
        *self == BfcDump::default()
    }
}

/// One out-of-memory report found in a log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct XlaOomReport {
    /// Which message it is.
    pub kind: XlaReportKind,
    /// The line of the input it starts on (1-based).
    pub line: u64,
    /// Later lines where the same report is repeated (a log and the
    /// exception that carries it).
    pub repeated_at_lines: Vec<u64>,
    /// The memory space (`hbm`, `vmem`) or the allocator (`GPU_0_bfc`).
    pub memory_space: Option<String>,
    /// What the program needed (`Used 17.60G`).
    pub used: Option<ReportedBytes>,
    /// The memory's size (`of 16.00G`; the one-line report's `exceed memory
    /// (size=…)`; the BFC allocator's `Limit`).
    pub capacity: Option<ReportedBytes>,
    /// `Exceeded … capacity by`.
    pub over: Option<ReportedBytes>,
    /// The allocation that failed (one-line report, GPU).
    pub request: Option<ReportedBytes>,
    /// `Total hbm usage >= …`: reserved, program, arguments, output.
    pub usage: Vec<UsageLine>,
    /// `Program hbm requirement …`: global, scoped, HLO temp.
    pub program: Vec<UsageLine>,
    /// The HLO temp's `Unpadded (…) Padded (…)`, where the report states them.
    pub hlo_temp_unpadded_padded: Option<(ReportedBytes, ReportedBytes)>,
    /// The allocations listed, largest first (the one-line report's one).
    pub allocations: Vec<ReportedAllocation>,
    /// The BFC allocator's dump, for a GPU failure that logged one.
    pub bfc: Option<BfcDump>,
    /// The instruction named after the last `::` of a one-line report.
    pub instruction: Option<String>,
}

impl XlaOomReport {
    /// An empty report of `kind` starting on `line`.
    pub fn new(kind: XlaReportKind, line: u64) -> XlaOomReport {
        XlaOomReport {
            kind,
            line,
            repeated_at_lines: Vec::new(),
            memory_space: None,
            used: None,
            capacity: None,
            over: None,
            request: None,
            usage: Vec::new(),
            program: Vec::new(),
            hlo_temp_unpadded_padded: None,
            allocations: Vec::new(),
            bfc: None,
            instruction: None,
        }
    }

    /// Whether `other` says the same thing (the same failure logged twice):
    /// equal but where it is.
    pub fn same_failure(&self, other: &XlaOomReport) -> bool {
        let XlaOomReport {
            kind,
            line: _,
            repeated_at_lines: _,
            memory_space,
            used,
            capacity,
            over,
            request,
            usage,
            program,
            hlo_temp_unpadded_padded,
            allocations,
            bfc,
            instruction,
        } = self;
        *kind == other.kind
            && *memory_space == other.memory_space
            && *used == other.used
            && *capacity == other.capacity
            && *over == other.over
            && *request == other.request
            && *usage == other.usage
            && *program == other.program
            && *hlo_temp_unpadded_padded == other.hlo_temp_unpadded_padded
            && *allocations == other.allocations
            && *bfc == other.bfc
            && *instruction == other.instruction
    }
}
