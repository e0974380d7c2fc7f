use anyhow::Result;
use clap::Args;
use memtool_core::analysis::peak;
use memtool_core::analysis::replay::Ties;

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
    /// Of several equal peaks report the last, as XProf does (see
    /// docs/xprof-differences.md).
    #[arg(long)]
    pub xprof_compat: bool,
    /// List the fewest groups live at the peak that would have to go for it
    /// to fit in BYTES (e.g. 16GiB).
    #[arg(long, value_name = "BYTES", value_parser = crate::cli::parse_size)]
    pub budget: Option<u64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &PeakArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.files, &args.read)?;
    let mut options = args.analysis.options();
    if args.xprof_compat {
        options.ties = Ties::Last;
    }
    let mut report = peak::peak(&profile, &options);
    if let Some(budget) = args.budget {
        report = report.with_budget(budget);
    }
    output::write(&report, &args.output)?;
    Ok(Outcome::Success)
}
