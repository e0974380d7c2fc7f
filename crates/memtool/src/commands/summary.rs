use anyhow::Result;
use clap::Args;
use memtool_core::analysis::summary::{self, SummaryReport};
use memtool_core::analysis::summary_parts;
use memtool_core::model::Profile;

use crate::cli::{AnalysisArgs, CapacityArgs, FormatArg, InputArgs, OutputArgs, XprofArgs};
use crate::{inputs, output, Outcome};

/// Per device or allocator: peak, live buffers, executables, top stacks.
///
/// A profile with an out-of-memory failure (a PyTorch snapshot dumped by an
/// OOM observer) opens with its post-mortem, as `memtool oom` gives it.
///
/// Several PyTorch snapshots (a snapshot per rank or per step) are read by a
/// pool of --jobs threads, each reduced to its memories' summaries and its
/// events dropped before the next is taken: memory stays about that of the
/// files being read, however many there are. A pprof series (one memory
/// across its files), gzip'd snapshots, `--memory` and `--format pprof`
/// read every file's events at once.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool summary memory.prof
  memtool summary memory1.prof memory2.prof memory3.prof   # a series, in this order
  memtool summary snapshots/rank_*.pickle --jobs 8 --format json   # a snapshot per rank, 8 at a time
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
    let mut options = args.analysis.report_options(args.output.format);
    args.xprof.apply(&mut options);
    args.capacity.apply(&mut options);
    if let Some(report) = summarize_apart(args, &options)? {
        return finish(args, report, None, &options);
    }
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    // One profile read whole: its landmarks may take every core (files
    // read apart above keep one thread each, the pool's).
    options.jobs = args.input.read.load_options().jobs;
    let report = memtool_core::timings::time("analysis", || summary::summarize(&profile, &options));
    finish(args, report, Some(profile), &options)
}

/// The summary of a series of snapshot files read a file at a time, each
/// reduced to its memories' summaries on the `--jobs` pool and its events
/// dropped before the next (`summary_parts`): the report reading them
/// whole gives, in the memory of a few files. None where the files must be
/// read whole: one file, other formats (a pprof series is one memory across
/// its files), `--memory`, standard input, `--format pprof` (the live sets
/// themselves).
fn summarize_apart(
    args: &SummaryArgs,
    options: &memtool_core::analysis::Options,
) -> Result<Option<SummaryReport>> {
    if args.input.files.len() < 2
        || args.input.files.iter().any(|f| f == "-")
        || matches!(args.output.format, FormatArg::Pprof)
    {
        return Ok(None);
    }
    let sources = inputs::open(&args.input, args.output.output.as_deref())?;
    if !summary_parts::reads_apart(&sources, options) {
        return Ok(None);
    }
    let parts = inputs::reduce_each(sources, &args.input.read, &args.analysis, |profile| {
        summary_parts::reduce(profile, options)
    })?;
    Ok(memtool_core::timings::time("merge", || {
        summary_parts::merge(parts)
    }))
}

/// Writes `report`; `profile` is the profile it was made of, where it was
/// read whole.
fn finish(
    args: &SummaryArgs,
    mut report: SummaryReport,
    profile: Option<Profile>,
    options: &memtool_core::analysis::Options,
) -> Result<Outcome> {
    report.stages_only = args.stages;
    if args.stages
        && report
            .memories
            .iter()
            .all(|m| m.annotation_stages.is_empty())
    {
        crate::output::warn(&["warning: no memory of these files records annotated ranges (record_function, an optimizer's step): no stages to show".to_string()]);
    }
    match (args.output.format, &profile) {
        (FormatArg::Pprof, Some(profile)) => {
            output::write_pprof(&report, &args.output, profile, options)?
        }
        _ => output::write(&report, &args.output, &args.analysis)?,
    }
    inputs::free_at_exit((profile, report));
    Ok(Outcome::Success)
}
