use anyhow::Result;
use clap::Args;
use memtool_core::analysis::oom_report as oom;

use crate::cli::{AnalysisArgs, CapacityArgs, InputArgs, OutputArgs};
use crate::{inputs, output, Outcome};

/// Out-of-memory post-mortem: why an allocation failed, what would make it fit.
///
/// For each failed allocation of a PyTorch snapshot (an `oom` trace entry;
/// a snapshot dumped by an out-of-memory observer holds the allocator's
/// segments at that moment): the request, reserved, allocated, free inside
/// reserved segments and free on the device, the largest free block per pool
/// and stream, and the verdict — capacity (what was live plus the request
/// exceeds the device: the largest groups that must go), fragmentation (the
/// free memory was there but split: the allocator settings that address it)
/// or memory outside PyTorch (give the device's size with --capacity) — with
/// the failed allocation's stack and what was allocated just before it.
/// For each compiled program whose peak exceeds --capacity (or the capacity
/// the profile records): by how much, what was live at the peak by op, shape
/// and source line, and the layout padding in it. For a log or pasted text
/// holding XLA's out-of-memory reports (a program that never ran: the TPU
/// compiler's `Ran out of memory in memory space hbm` report, the one-line
/// `RESOURCE_EXHAUSTED: Allocation (size=…) would exceed memory`, the GPU's
/// `Out of memory while trying to allocate N bytes` with the BFC allocator's
/// dump): the report's capacity, excess and usage, the largest allocations
/// with each tiled layout's padding explained, and what would fit; with
/// --dump, each `#allocationN` it names found in the XLA dump of the same
/// compile (its op, shape and source line). Exits 0: the failure is the
/// input, not a gate.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool oom oom_snapshot.pickle
  memtool oom oom_snapshot.pickle --capacity 80GiB
  memtool oom trace.xplane.pb --capacity 16GiB
  memtool oom train.log                      # XLA's RESOURCE_EXHAUSTED report
  memtool oom train.log --dump xla_dump/     # #allocationN found in XLA_FLAGS=--xla_dump_to's dump
  pbpaste | memtool oom -
  memtool oom oom_snapshot.pickle --format json | jq '.oom[] | {verdict, request_bytes}'")]
pub struct OomArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub capacity: CapacityArgs,
    /// An XLA dump of the failed compile (`XLA_FLAGS=--xla_dump_to=DIR`: the
    /// folder, a `*.hlo.pb` or a `*-buffer-assignment.txt`), or an XSpace
    /// of it, in which to find each `#allocationN` that an out-of-memory
    /// report of the log names: its program, op, shape and source line.
    #[arg(long, value_name = "PATH")]
    pub dump: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &OomArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    let mut options = args.analysis.report_options(args.output.format);
    args.capacity.apply(&mut options);
    let dump = match &args.dump {
        Some(path) => {
            let paths = [path.clone()];
            let mut read = inputs::load_several(&[&paths], &args.input.read, None)?;
            Some(read.remove(0))
        }
        None => None,
    };
    let report = memtool_core::timings::time("analysis", || {
        oom::oom_with_dump(&profile, dump.as_ref(), &options)
    });
    output::write(&report, &args.output, &args.analysis)?;
    inputs::free_at_exit((profile, dump, report));
    Ok(Outcome::Success)
}
