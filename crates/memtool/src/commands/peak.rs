use anyhow::Result;
use clap::Args;
use memtool_core::analysis::peak;
use memtool_core::analysis::replay::Ties;

use crate::cli::{parse_size, AnalysisArgs, OutputArgs, ReadArgs};
use crate::{inputs, output, Outcome};

/// What was live at the peak: by stack, by your own frame, by shape, op, dtype.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool peak memory.prof
  memtool peak memory1.prof memory2.prof memory3.prof   # the largest snapshot of a series
  memtool peak memory.prof --all-frames --top 20
  memtool peak memory.prof --format csv -o peak.csv
  memtool peak trace.xplane.pb --module jit_train_step      # a compiled program's heap
  memtool peak trace.xplane.pb --budget 16GiB               # what must shrink to fit")]
pub struct PeakArgs {
    /// Profile files (`-` for stdin). Several files form a series, in the
    /// order given.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Check each peak against this size and list the largest buffers live at
    /// the peak that together cover the excess; exit 1 when a peak exceeds
    /// it. Accepts units: 16GiB, 500MB.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub budget: Option<u64>,
    /// Report as XProf does, to check memtool against its UI: of several
    /// equal peaks the last; a compiled program's buffers at the peak in
    /// allocation order, buffers under 16 KiB summed into one row (see
    /// docs/xprof-differences.md).
    #[arg(long)]
    pub xprof_compat: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &PeakArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.files, &args.read)?;
    crate::cli::check_selection(&profile, &args.analysis.options())?;
    let mut options = args.analysis.report_options(args.output.format);
    if args.xprof_compat {
        options.ties = Ties::Last;
    }
    let settings = peak::PeakSettings {
        budget: args.budget,
        xprof_compat: args.xprof_compat,
    };
    let report = memtool_core::timings::time("analysis", || {
        peak::peak_with(&profile, &options, &settings)
    });
    output::write(&report, &args.output)?;
    let over_budget = report.over_budget();
    inputs::free_at_exit((profile, report));
    Ok(if over_budget {
        Outcome::GateFailed
    } else {
        Outcome::Success
    })
}
