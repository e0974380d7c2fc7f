use anyhow::Result;
use clap::Args;
use memtool_core::analysis::frag;

use crate::cli::{AnalysisArgs, InputArgs, OutputArgs};
use crate::{inputs, output, Outcome};

/// Fragmentation: the allocator's figure, unused reserved memory, address gaps.
///
/// The allocator's own fragmentation over time and its worst points with
/// what was live there; reserved memory the program was not using over time
/// (PyTorch traces and snapshots); and memtool's own figure from the gaps
/// between live allocations inside the address ranges the allocator holds
/// (a snapshot's segments at that moment, a compiled program's memory
/// space). Address space the allocator does not hold is never a gap.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool frag run.xplane.pb
  memtool frag logdir/ --top 5
  memtool frag run.xplane.pb --format json | jq '.memories[] | {id, allocator}'")]
pub struct FragArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &FragArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    inputs::require_timeline(&profile, "frag")?;
    let report = frag::frag(&profile, &args.analysis.options());
    output::write(&report, &args.output, &args.analysis)?;
    inputs::free_at_exit((profile, report));
    Ok(Outcome::Success)
}
