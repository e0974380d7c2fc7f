use anyhow::{Context, Result};
use clap::Args;
use memtool_core::analysis::diff::{self, GrowthLimit};

use crate::cli::{AnalysisArgs, GroupKeyArg, InputArgs, OutputArgs};
use crate::{inputs, output, Outcome};

/// Compare two profiles per call stack; gate CI on growth.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool diff base.prof new.prof
  memtool diff base.prof new.prof --fail-on-growth 5%      # exit 1 if total grew more than 5%
  memtool diff base.prof new.prof --fail-on-growth 64MiB --format md >> $GITHUB_STEP_SUMMARY
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
    /// (1000000, 64MiB) or a percentage of the base (5%). One pass/fail line
    /// goes to stderr in every format.
    #[arg(long, value_name = "BYTES|PCT", value_parser = parse_limit)]
    pub fail_on_growth: Option<GrowthLimit>,
    /// Compare per call stack (default) or per op, shape, dtype, category or
    /// user frame; `--by op` compares two compiles of a program op by op.
    #[arg(long, value_enum, default_value = "stack")]
    pub by: GroupKeyArg,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_limit(text: &str) -> Result<GrowthLimit, String> {
    GrowthLimit::parse(text)
        .ok_or_else(|| format!("`{text}` is neither a size (64MiB, 1000000) nor a percentage (5%)"))
}

pub fn run(args: &DiffArgs) -> Result<Outcome> {
    if let Some(GrowthLimit::Bytes(b)) = args.fail_on_growth {
        crate::output::warn_of_tiny_limit("--fail-on-growth", b);
    }
    let (base, new) =
        inputs::load_pair(&args.input, &args.analysis, args.output.output.as_deref())?;
    let report = memtool_core::timings::time("analysis", || {
        diff::diff_by(
            &base,
            &new,
            &args.analysis.options(),
            args.fail_on_growth,
            args.by.into(),
        )
    });
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
