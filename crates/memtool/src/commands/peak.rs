use anyhow::Result;
use clap::Args;
use memtool_core::analysis::peak;

use crate::cli::{AnalysisArgs, OutputArgs, ReadArgs};
use crate::{inputs, output, Outcome};

/// What was live at the peak: by stack, by your own frame, by shape, op, dtype.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool peak memory.prof
  memtool peak memory1.prof memory2.prof memory3.prof   # the largest snapshot of a series
  memtool peak memory.prof --all-frames --top 20
  memtool peak memory.prof --format csv -o peak.csv")]
pub struct PeakArgs {
    /// Profile files (`-` for stdin). Several files form a series, in the
    /// order given.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &PeakArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.files, &args.read)?;
    let report = memtool_core::timings::time("analysis", || {
        peak::peak(&profile, &args.analysis.options())
    });
    output::write(&report, &args.output)?;
    Ok(Outcome::Success)
}
