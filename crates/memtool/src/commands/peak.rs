use anyhow::Result;
use clap::Args;
use memtool_core::analysis::moment::Moment;
use memtool_core::analysis::{group_gate, peak};

use crate::cli::{
    parse_size, AnalysisArgs, FormatArg, GateArg, GroupKeyArg, InputArgs, OutputArgs, XprofArgs,
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
  memtool peak snapshot.pickle --by annotation              # by the record_function range it was made in
  memtool peak snapshot.pickle --by stream                  # which CUDA stream held what (and each stream's peak)
  memtool peak snapshot.pickle --by compiled-graph          # torch.compile graphs (recorded with compile_context=True)
  memtool peak trace.xplane.pb --module jit_train_step      # a compiled program's heap
  memtool peak trace.xplane.pb --budget 16GiB               # what must shrink to fit
  memtool peak snapshot.pickle --budget optimizer_state:2GiB # one category's bytes at the peak
  memtool peak snapshot.pickle --format pprof -o peak.pb.gz # then: go tool pprof -http=: peak.pb.gz
  memtool peak snapshot.pickle --at t+25ms                  # the live set 25 ms in, not at the peak
  memtool peak snapshot.pickle --at annotation:AdamW.step:end
  memtool peak snapshot.pickle --at-entry 1200              # after the 1200th alloc/free")]
pub struct PeakArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Check each peak against this size and list the largest buffers live at
    /// the peak that together cover the excess; exit 1 when a peak exceeds
    /// it, with one pass/fail line on stderr in every format. Accepts units:
    /// 16GiB, 500MB. `GROUP:BYTES` checks one group's bytes at each peak
    /// instead: a category (`optimizer_state:2GiB`), or a group of `--by`
    /// when it is not `stack`.
    #[arg(long, value_name = "[GROUP:]BYTES", value_parser = parse_budget, conflicts_with_all = ["at", "at_entry"])]
    pub budget: Option<GateArg<u64>>,
    /// Show the live set at this moment instead of the peak, grouped the
    /// same way: a time since the recording started (`t+25ms`, `t+1.5s`,
    /// `t+300us`: after every event up to it), or the START of an annotated
    /// range (`annotation:NAME`, `annotation:NAME:end` for its END; NAME is
    /// the whole name or what follows its `#`: `AdamW.step`). Memories
    /// without that moment are left out.
    #[arg(long, value_name = "MOMENT", value_parser = parse_moment, conflicts_with = "at_entry")]
    pub at: Option<(Moment, String)>,
    /// Show the live set after the first N allocation events (allocations
    /// and frees; 0: before the first) instead of the peak.
    #[arg(long, value_name = "N")]
    pub at_entry: Option<usize>,
    /// Break what was live at the peak down this one way only (default:
    /// every way the profile has data for).
    #[arg(long, value_enum, value_name = "KEY")]
    pub by: Option<GroupKeyArg>,
    #[command(flatten)]
    pub xprof: XprofArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_budget(text: &str) -> Result<GateArg<u64>, String> {
    GateArg::parse(text, parse_size)
}

pub fn run(args: &PeakArgs) -> Result<Outcome> {
    if let Some(b) = &args.budget {
        crate::output::warn_of_tiny_limit("--budget", b.limit);
    }
    output::check_pprof_destination("peak", &args.output)?;
    if matches!(args.output.format, FormatArg::Pprof)
        && (args.at.is_some() || args.at_entry.is_some())
    {
        // The pprof writer takes each memory's peak from the model.
        anyhow::bail!("--format pprof writes the live set at the peak; --at and --at-entry take table, json, csv or md");
    }
    let mut profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    inputs::require_timeline(&profile, "peak")?;
    inputs::group_by(&mut profile, args.by.map(Into::into));
    let mut options = args.analysis.report_options(args.output.format);
    args.xprof.apply(&mut options);
    let settings = peak::PeakSettings {
        budget: args
            .budget
            .as_ref()
            .filter(|b| b.group.is_none())
            .map(|b| b.limit),
        xprof_compat: args.xprof.xprof_compat,
        by: args.by.map(Into::into),
        at: args.at.clone().or_else(|| {
            args.at_entry
                .map(|n| (Moment::Entry(n), format!("entry {n}")))
        }),
    };
    let mut report = memtool_core::timings::time("analysis", || {
        peak::peak_with(&profile, &options, &settings)
    });
    if let Some((_, moment)) = &settings.at {
        if report.memories.is_empty() {
            anyhow::bail!(
                "no memory has the moment {moment}: no annotation of that name, no time axis, or past the last event"
            );
        }
    }
    if let Some(GateArg {
        group: Some(key),
        limit,
    }) = &args.budget
    {
        let gated = group_gate::GatedGroup {
            by: group_gate::grouping(settings.by),
            key: key.clone(),
        };
        let gate = group_gate::budget(&profile, &options, gated, *limit)
            .map_err(|e| anyhow::anyhow!("--budget: {e}"))?;
        report.gate = Some(gate);
    }
    match args.output.format {
        FormatArg::Pprof => output::write_pprof(&report, &args.output, &profile, &options)?,
        _ => output::write(&report, &args.output, &args.analysis)?,
    }
    output::gate_line(report.gate.as_ref());
    let over_budget = report.over_budget() || report.gate.as_ref().is_some_and(|g| !g.passed);
    inputs::free_at_exit((profile, report));
    Ok(if over_budget {
        Outcome::GateFailed
    } else {
        Outcome::Success
    })
}

/// `--at`'s text as a [`Moment`], kept with the text to state it.
fn parse_moment(text: &str) -> Result<(Moment, String), String> {
    Moment::parse(text).map(|m| (m, text.to_string()))
}
