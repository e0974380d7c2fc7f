//! Arguments shared by every subcommand.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use memtool_core::analysis::category::CategoryRule;
use memtool_core::analysis::replay::Ties;
use memtool_core::analysis::{FrameFilter, GroupBy, Options};
use memtool_core::model::Profile;
use memtool_core::report::OutputFormat;

// Where options appear in `--help`, the man pages and their SYNOPSIS: what
// a user reaches for first (format, -o, which memory) before everything else;
// a command's own options (`--by`, gates) next, in the order declared (clap
// numbers options as they are added, so a new one lands here by itself);
// then the shared tuning of tables; last, under their own heading, what
// few need (decompression cap, hosts and runs of a logdir, XProf's rules).
const ORDER_FIRST: usize = 0;
const ORDER_LATER: usize = 500;
const ORDER_ADVANCED: usize = 900;
const ADVANCED: &str = "Advanced options";

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// Tables for the terminal, sizes in KiB/MiB/GiB.
    Table,
    /// One JSON document (schema memtool/COMMAND/v1, see docs/json/).
    Json,
    /// The detail rows with a header row, exact bytes.
    Csv,
    /// Markdown tables, for CI summaries and tickets.
    Md,
    /// What was live at each memory's peak as a gzipped pprof profile.proto,
    /// for go tool pprof, speedscope, Pyroscope (peak and summary only; see
    /// docs/pprof.md).
    Pprof,
    /// A self-contained HTML page, for `ranks` (one strip per rank, the
    /// outliers first; `memtool render` draws a profile's page). Give -o.
    Html,
    /// `memtool mcp`'s tool calls: the JSON document, a NUL byte (which JSON
    /// text never holds), then the Markdown tables of `--top` rows, the
    /// digest an agent reads. Not for people, so not listed.
    #[value(hide = true)]
    Mcp,
}

/// What a command that has no live set at a peak says to `--format pprof`.
pub const PPROF_ONLY: &str =
    "--format pprof is for peak and summary (what was live at each peak); \
     use table, json, csv or md here";

/// What a command other than `ranks` says to `--format html`.
pub const HTML_ONLY: &str = "--format html is for ranks (a page of every rank); \
     `memtool render FILE -o page.html` draws a profile's page";

impl FormatArg {
    /// Whether the output shows `--top` rows per table, not every row.
    pub fn shows_top_rows(self) -> bool {
        matches!(self, FormatArg::Table | FormatArg::Md)
    }

    /// The report exporter's format; `None` for pprof, which `peak` and
    /// `summary` write from the model, and for `ranks`'s page.
    pub fn report_format(self) -> Option<OutputFormat> {
        match self {
            FormatArg::Table => Some(OutputFormat::Table),
            FormatArg::Json | FormatArg::Mcp => Some(OutputFormat::Json),
            FormatArg::Csv => Some(OutputFormat::Csv),
            FormatArg::Md => Some(OutputFormat::Md),
            FormatArg::Pprof | FormatArg::Html => None,
        }
    }
}

/// A key that groups allocations: the rows of a diff (`--by`), the bands of a
/// rendered timeline (`--group-by`).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GroupKeyArg {
    Stack,
    UserFrame,
    Shape,
    Op,
    Dtype,
    Category,
    /// The training phase an allocation was made in (forward, backward,
    /// optimizer...).
    Phase,
    /// The innermost annotated range (`record_function`, a user
    /// annotation) an allocation was made in.
    Annotation,
    /// The CUDA stream an allocation was made for (CUDA snapshots).
    Stream,
    /// The torch.compile graph an allocation was made in (snapshots
    /// recorded with compile_context=True).
    #[value(alias = "compile")]
    CompiledGraph,
}

impl From<GroupKeyArg> for GroupBy {
    fn from(key: GroupKeyArg) -> GroupBy {
        match key {
            GroupKeyArg::Stack => GroupBy::Stack,
            GroupKeyArg::UserFrame => GroupBy::UserFrame,
            GroupKeyArg::Shape => GroupBy::Shape,
            GroupKeyArg::Op => GroupBy::Op,
            GroupKeyArg::Dtype => GroupBy::Dtype,
            GroupKeyArg::Category => GroupBy::Category,
            GroupKeyArg::Phase => GroupBy::Phase,
            GroupKeyArg::Annotation => GroupBy::Annotation,
            GroupKeyArg::Stream => GroupBy::Stream,
            GroupKeyArg::CompiledGraph => GroupBy::CompiledGraph,
        }
    }
}

/// The profiles a command reads and how it reads them. A command says what
/// its files mean with `#[command(mut_arg("files", ...))]`.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// Profile files, run directories or TensorBoard logdirs (`-` for
    /// stdin). Several files form a series, in the order given.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "table", display_order = ORDER_FIRST)]
    pub format: FormatArg,
    /// Write to FILE instead of stdout (atomically: never a partial file;
    /// a device or FIFO is written in place; `-` is stdout).
    #[arg(short, long, value_name = "FILE", display_order = ORDER_FIRST + 1)]
    pub output: Option<PathBuf>,
    /// Columns a table may take; long labels are shortened in the middle to
    /// fit (default for tables: $COLUMNS, else the terminal's width when
    /// stdout is one, else 100; Markdown keeps labels whole unless given one).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(20..), display_order = ORDER_LATER + 3)]
    pub width: Option<u16>,
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    /// Refuse to decompress an input past this size (default: 4 GiB, whatever
    /// the file's size), or to read a stream (stdin, a FIFO) past it.
    /// Accepts units: 8GiB, 500MB.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, help_heading = ADVANCED, display_order = ORDER_ADVANCED)]
    pub max_decompressed: Option<u64>,
    /// For a run directory or logdir holding several hosts' `.xplane.pb`:
    /// read only this host's (the file name without `.xplane.pb`).
    #[arg(long, value_name = "HOST", help_heading = ADVANCED, display_order = ORDER_ADVANCED + 1)]
    pub host: Option<String>,
    /// For a TensorBoard logdir: read this run (`2024_05_01_12_30_00`, or
    /// `train/2024_05_01_12_30_00` where Keras writes runs under `train/`
    /// and `validation/`) instead of the newest.
    #[arg(long, value_name = "NAME", help_heading = ADVANCED, display_order = ORDER_ADVANCED + 2)]
    pub run: Option<String>,
    /// List the runs of each TensorBoard logdir given, newest last, and exit.
    #[arg(long, help_heading = ADVANCED, display_order = ORDER_ADVANCED + 3)]
    pub list_runs: bool,
    /// Files read at once (the hosts of a logdir, the ranks of `ranks`, the
    /// snapshots of `summary`), each on a thread with its events in memory,
    /// threads decoding one XSpace's allocator events, and threads finding
    /// `summary`'s landmarks of a memory of many steps (default: every core).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..), display_order = ORDER_LATER + 4)]
    pub jobs: Option<u16>,
    /// Order the files before reading them: `natural` by the numbers in
    /// their names (memory2 before memory10, where a shell glob puts
    /// memory10 first); by default, the order given.
    #[arg(long, value_enum, value_name = "ORDER", display_order = ORDER_LATER + 5)]
    pub sort: Option<SortArg>,
}

impl ReadArgs {
    /// How the core reads each input: `--max-decompressed` and `--jobs`.
    pub fn load_options(&self) -> memtool_core::LoadOptions {
        memtool_core::LoadOptions {
            max_decompressed: self.max_decompressed,
            jobs: self.jobs.map_or(0, usize::from),
            ..memtool_core::LoadOptions::default()
        }
    }
}

/// How `--sort` orders the files given.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortArg {
    /// By the numbers in their names, the rest as text.
    Natural,
}

#[derive(Args, Debug)]
pub struct AnalysisArgs {
    /// Rows per table in table and md output (json and csv keep every row).
    #[arg(long, default_value_t = 10, value_name = "N", display_order = ORDER_LATER)]
    pub top: usize,
    /// Show every frame of each stack. By default library frames (files under
    /// site-packages or dist-packages, paths relative to them such as
    /// torch/nn/functional.py, and native C++ frames) are hidden so
    /// bytes land on your code; a stack with no frame of yours is named by its
    /// op and autograd node.
    #[arg(long, display_order = ORDER_LATER + 1)]
    pub all_frames: bool,
    /// Treat files whose path contains PATTERN as library code (repeatable;
    /// replaces the default site-packages, dist-packages and relative paths
    /// into torch, numpy, transformers and other frameworks).
    #[arg(
        long = "library",
        value_name = "PATTERN",
        conflicts_with = "all_frames",
        display_order = ORDER_LATER + 2
    )]
    pub library: Vec<String>,
    /// Only this memory (device or allocator id, e.g. cpu:0, or a compiled
    /// program's module, e.g. jit_step or jit_step(10)); repeatable.
    #[arg(
        long = "memory",
        visible_alias = "module",
        value_name = "ID",
        display_order = ORDER_FIRST + 2
    )]
    pub memories: Vec<String>,
    /// Your own category: allocations with a stack frame (function or file)
    /// or op matching REGEX are NAME in `--by category` and the page
    /// (repeatable; the first match wins, over the file's categories and
    /// memtool's inferred ones). Example: --category nccl='nccl|ProcessGroup'
    #[arg(long = "category", value_name = "NAME=REGEX", value_parser = parse_category, display_order = ORDER_LATER + 6)]
    pub category_rules: Vec<CategoryRule>,
    /// A file of your own categories, tried after any --category: one
    /// `name = 'regex'` per line, in order (TOML; see docs/categories.md).
    #[arg(long = "categories", value_name = "FILE", display_order = ORDER_LATER + 7)]
    pub categories_file: Option<PathBuf>,
}

impl AnalysisArgs {
    /// [`AnalysisArgs::options`] for a report written as `format`: output
    /// that shows `--top` rows keeps only that many groups per breakdown.
    pub fn report_options(&self, format: FormatArg) -> Options {
        let mut options = self.options();
        if format.shows_top_rows() {
            options.keep_groups = Some(options.top);
        }
        options
    }

    pub fn options(&self) -> Options {
        let frames = if self.all_frames {
            FrameFilter::All
        } else if self.library.is_empty() {
            FrameFilter::default()
        } else {
            FrameFilter::User {
                library_patterns: self.library.clone(),
                library_packages: Vec::new(),
            }
        };
        Options {
            frames,
            top: self.top,
            memories: self.memories.clone(),
            ..Options::default()
        }
    }
}

/// `--capacity`, for the commands that give out-of-memory post-mortems.
#[derive(Args, Debug)]
pub struct CapacityArgs {
    /// The device's memory (e.g. 80GiB): an out-of-memory failure is weighed
    /// against it (a PyTorch snapshot does not record it, so without it
    /// memory held outside PyTorch cannot be told apart), and every compiled
    /// program whose peak exceeds it gets a post-mortem. Default: what the
    /// profile records.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub capacity: Option<u64>,
}

impl CapacityArgs {
    /// Sets the capacity of `options`.
    pub fn apply(&self, options: &mut Options) {
        options.capacity = self.capacity;
    }
}

/// `--xprof-compat`, for the commands whose figures XProf's UI shows.
#[derive(Args, Debug)]
pub struct XprofArgs {
    /// Report as XProf does, to check memtool against its UI: of an
    /// allocator's equal peaks the last, not the first, at the allocator's
    /// own figure (a compiled program's stays the first, as XProf's Memory
    /// Viewer takes it); in `peak`, a compiled program's
    /// buffers at the peak in allocation order, buffers under 16 KiB summed
    /// into one row (see docs/xprof-differences.md).
    #[arg(long, help_heading = ADVANCED, display_order = ORDER_ADVANCED + 4)]
    pub xprof_compat: bool,
}

impl XprofArgs {
    /// Makes `options` follow XProf's rules when `--xprof-compat` is given.
    pub fn apply(&self, options: &mut Options) {
        if self.xprof_compat {
            options.ties = Ties::Last;
        }
    }
}

/// `--category NAME=REGEX`, as clap parses it.
pub fn parse_category(text: &str) -> Result<CategoryRule, String> {
    CategoryRule::parse(text)
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    memtool_core::report::units::parse_bytes(text)
        .ok_or_else(|| format!("`{text}` is not a size (examples: 1000, 64KiB, 2GiB, 500MB)"))
}

/// A gate's limit, on the whole or on one group: `5%`, `64MiB`,
/// `activation:5%`, `optimizer_state:2GiB`.
#[derive(Clone, Debug)]
pub struct GateArg<L> {
    /// The group it judges (a category, or a group of `--by`), if any.
    pub group: Option<String>,
    /// The limit.
    pub limit: L,
}

impl<L> GateArg<L> {
    /// Parses `[GROUP:]LIMIT`, the limit by `parse`.
    pub fn parse(text: &str, parse: impl Fn(&str) -> Result<L, String>) -> Result<Self, String> {
        let (group, limit) = memtool_core::analysis::group_gate::split(text);
        Ok(GateArg {
            group: group.map(str::to_string),
            limit: parse(limit)?,
        })
    }
}

/// Fails when a `--memory` / `--module` name selects nothing in any of
/// `profiles` (a diff's sides: a memory that only one side has is a change to
/// report), listing what there is, rather than printing empty tables.
pub fn check_selection(profiles: &[&Profile], options: &Options) -> anyhow::Result<()> {
    let unmatched: Vec<&str> = options
        .memories
        .iter()
        .map(String::as_str)
        .filter(|name| {
            profiles
                .iter()
                .all(|profile| options.unmatched(profile).contains(name))
        })
        .collect();
    if unmatched.is_empty() {
        return Ok(());
    }
    let mut available: Vec<&str> = Vec::new();
    for memory in profiles.iter().flat_map(|p| &p.memories) {
        if !available.contains(&memory.id.as_str()) {
            available.push(memory.id.as_str());
        }
    }
    anyhow::bail!(
        "no memory or module named {} (there are: {})",
        unmatched
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if available.is_empty() {
            "none".to_string()
        } else {
            available.join(", ")
        }
    )
}
