use anyhow::Result;
use clap::Args;
use memtool_core::analysis::peak;

use crate::cli::{
    parse_size, AnalysisArgs, FormatArg, GroupKeyArg, InputArgs, OutputArgs, XprofArgs,
};
use crate::{inputs, output, Outcome};

/// What was live at the peak: by stack, by your own frame, by shape, op, dtype.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool peak memory.prof
  memtool peak memory1.prof memory2.prof memory3.prof   # the largest snapshot of a series
  memtool peak memory.prof --all-frames --top 20
  memtool peak memory.prof --format csv -o peak.csv
  memtool peak snapshot.pickle --by phase                   # forward, backward, optimizer
  memtool peak trace.xplane.pb --module jit_train_step      # a compiled program's heap
  memtool peak trace.xplane.pb --budget 16GiB               # what must shrink to fit
  memtool peak snapshot.pickle --format pprof -o peak.pb.gz # then: go tool pprof -http=: peak.pb.gz")]
pub struct PeakArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Check each peak against this size and list the largest buffers live at
    /// the peak that together cover the excess; exit 1 when a peak exceeds
    /// it, with one pass/fail line on stderr in every format. Accepts units:
    /// 16GiB, 500MB.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub budget: Option<u64>,
    /// Break what was live at the peak down this one way only (default:
    /// every way the profile has data for).
    #[arg(long, value_enum, value_name = "KEY")]
    pub by: Option<GroupKeyArg>,
    #[command(flatten)]
    pub xprof: XprofArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &PeakArgs) -> Result<Outcome> {
    if let Some(b) = args.budget {
        crate::output::warn_of_tiny_limit("--budget", b);
    }
    output::check_pprof_destination("peak", &args.output)?;
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    inputs::require_timeline(&profile, "peak")?;
    let mut options = args.analysis.report_options(args.output.format);
    args.xprof.apply(&mut options);
    let settings = peak::PeakSettings {
        budget: args.budget,
        xprof_compat: args.xprof.xprof_compat,
        by: args.by.map(Into::into),
    };
    let report = memtool_core::timings::time("analysis", || {
        peak::peak_with(&profile, &options, &settings)
    });
    match args.output.format {
        FormatArg::Pprof => output::write_pprof(&report, &args.output, &profile, &options)?,
        _ => output::write(&report, &args.output, &args.analysis)?,
    }
    output::gate_line(report.gate.as_ref());
    let over_budget = report.over_budget();
    inputs::free_at_exit((profile, report));
    Ok(if over_budget {
        Outcome::GateFailed
    } else {
        Outcome::Success
    })
}
