use anyhow::Result;
use clap::Args;
use memtool_core::analysis::summary;

use crate::cli::{AnalysisArgs, CapacityArgs, FormatArg, InputArgs, OutputArgs, XprofArgs};
use crate::{inputs, output, Outcome};

/// Per device or allocator: peak, live buffers, executables, top stacks.
///
/// A profile with an out-of-memory failure (a PyTorch snapshot dumped by an
/// OOM observer) opens with its post-mortem, as `memtool oom` gives it.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool summary memory.prof
  memtool summary memory1.prof memory2.prof memory3.prof   # a series, in this order
  memtool summary memory.prof --format json | jq '.memories[] | {id, peak_bytes}'
  memtool summary trace.xplane.pb --format pprof -o peak.pb.gz   # the live set at each peak
  memtool summary snapshot.pickle --stages --format csv          # annotated ranges: live at start and end")]
pub struct SummaryArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub capacity: CapacityArgs,
    /// Only the annotation stages: each range the profile annotates
    /// (`record_function`, an optimizer's step) with the bytes live at its
    /// start and end and what it added, in every format (CSV: a row per
    /// stage; JSON is the whole summary either way).
    #[arg(long)]
    pub stages: bool,
    #[command(flatten)]
    pub xprof: XprofArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &SummaryArgs) -> Result<Outcome> {
    output::check_pprof_destination("summary", &args.output)?;
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    let mut options = args.analysis.report_options(args.output.format);
    args.xprof.apply(&mut options);
    args.capacity.apply(&mut options);
    options.jobs = args.input.read.load_options().jobs;
    let mut report =
        memtool_core::timings::time("analysis", || summary::summarize(&profile, &options));
    report.stages_only = args.stages;
    if args.stages
        && report
            .memories
            .iter()
            .all(|m| m.annotation_stages.is_empty())
    {
        crate::output::warn(&["warning: no memory of these files records annotated ranges (record_function, an optimizer's step): no stages to show".to_string()]);
    }
    match args.output.format {
        FormatArg::Pprof => output::write_pprof(&report, &args.output, &profile, &options)?,
        _ => output::write(&report, &args.output, &args.analysis)?,
    }
    inputs::free_at_exit((profile, report));
    Ok(Outcome::Success)
}
