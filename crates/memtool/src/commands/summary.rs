use anyhow::Result;
use clap::Args;
use memtool_core::analysis::replay::Ties;
use memtool_core::analysis::summary;

use crate::cli::{AnalysisArgs, OutputArgs, ReadArgs};
use crate::{inputs, output, Outcome};

/// Per device or allocator: peak, live buffers, executables, top stacks.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool summary memory.prof
  memtool summary memory1.prof memory2.prof memory3.prof   # a series, in this order
  memtool summary memory.prof --format json | jq '.memories[] | {id, peak_bytes}'")]
pub struct SummaryArgs {
    /// Profile files (`-` for stdin). Several files form a series, in the
    /// order given.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Report the peak as XProf's Memory Profile does where the two differ:
    /// of several equal peaks the last, not the first (see
    /// docs/xprof-differences.md).
    #[arg(long)]
    pub xprof_compat: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &SummaryArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.files, &args.read)?;
    crate::cli::check_selection(&profile, &args.analysis.options())?;
    let mut options = args.analysis.report_options(args.output.format);
    if args.xprof_compat {
        options.ties = Ties::Last;
    }
    let report = memtool_core::timings::time("analysis", || summary::summarize(&profile, &options));
    output::write(&report, &args.output)?;
    inputs::free_at_exit((profile, report));
    Ok(Outcome::Success)
}
