use anyhow::{Context, Result};
use clap::Args;
use memtool_core::analysis::diff::{self, GrowthLimit};
use memtool_core::analysis::group_gate;

use crate::cli::{AnalysisArgs, GateArg, GroupKeyArg, InputArgs, OutputArgs};
use crate::{inputs, output, Outcome};

/// Compare two profiles per call stack; gate CI on growth.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool diff base.prof new.prof
  memtool diff base.prof new.prof --fail-on-growth 5%      # exit 1 if total grew more than 5%
  memtool diff base.prof new.prof --fail-on-growth 64MiB --format md >> $GITHUB_STEP_SUMMARY
  memtool diff base.pickle new.pickle --fail-on-growth activation:5%   # one category only
  memtool diff base.pickle new.pickle --by op --fail-on-growth aten::mm:1GiB
  memtool diff base.pickle new.pickle --by compiled-graph  # per torch.compile graph
  memtool diff old.xplane.pb new.xplane.pb --module jit_train_step --by op

Exit codes: 0 ok, 1 the --fail-on-growth gate failed, 2 unreadable input or bad usage.")]
#[command(mut_arg("files", |a| a
    .value_names(["BASE", "NEW"])
    .num_args(2)
    .action(clap::ArgAction::Set)
    .help("The baseline profile, then the profile to compare with it (`-` for stdin)")))]
pub struct DiffArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Exit with code 1 when total live bytes grew by more than this: a size
    /// (1000000, 64MiB) or a percentage of the base (5%). `GROUP:LIMIT`
    /// judges one group's bytes at the peaks instead: a category
    /// (`activation:5%`), or a group of `--by` when it is not `stack`. One
    /// pass/fail line goes to stderr in every format.
    #[arg(long, value_name = "[GROUP:]BYTES|PCT", value_parser = parse_limit)]
    pub fail_on_growth: Option<GateArg<GrowthLimit>>,
    /// Compare per call stack (default) or per op, shape, dtype, category or
    /// user frame; `--by op` compares two compiles of a program op by op.
    #[arg(long, value_enum, default_value = "stack")]
    pub by: GroupKeyArg,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_limit(text: &str) -> Result<GateArg<GrowthLimit>, String> {
    GateArg::parse(text, |limit| {
        GrowthLimit::parse(limit).ok_or_else(|| {
            format!(
                "`{limit}` is neither a size (64MiB, 1000000) nor a percentage (5%); \
                 a group's limit is GROUP:LIMIT (activation:5%)"
            )
        })
    })
}

pub fn run(args: &DiffArgs) -> Result<Outcome> {
    if let Some(GrowthLimit::Bytes(b)) = args.fail_on_growth.as_ref().map(|g| g.limit) {
        crate::output::warn_of_tiny_limit("--fail-on-growth", b);
    }
    let (mut base, mut new) =
        inputs::load_pair(&args.input, &args.analysis, args.output.output.as_deref())?;
    inputs::group_by(&mut base, Some(args.by.into()));
    inputs::group_by(&mut new, Some(args.by.into()));
    let options = args.analysis.options();
    let whole = args
        .fail_on_growth
        .as_ref()
        .filter(|g| g.group.is_none())
        .map(|g| g.limit);
    let mut report = memtool_core::timings::time("analysis", || {
        diff::diff_by(&base, &new, &options, whole, args.by.into())
    });
    if let Some(GateArg {
        group: Some(key),
        limit,
    }) = &args.fail_on_growth
    {
        let gated = group_gate::GatedGroup {
            by: group_gate::grouping(Some(args.by.into())),
            key: key.clone(),
        };
        let gate = group_gate::growth(&base, &new, &options, gated, *limit)
            .map_err(|e| anyhow::anyhow!("--fail-on-growth: {e}"))?;
        report.gate = Some(gate);
    }
    output::write(&report, &args.output, &args.analysis).context("writing the diff")?;
    output::gate_line(report.gate.as_ref());
    let gate_failed = report.gate_failed();
    inputs::free_at_exit((base, new, report));
    Ok(if gate_failed {
        Outcome::GateFailed
    } else {
        Outcome::Success
    })
}
