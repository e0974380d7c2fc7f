use anyhow::Result;
use clap::Args;
use memtool_core::analysis::leaks;

use crate::cli::{AnalysisArgs, InputArgs, OutputArgs};
use crate::{inputs, output, Outcome};

/// Stacks whose live bytes keep growing (leaks) or grew and stopped (caches).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool leaks memory1.prof memory2.prof memory3.prof memory4.prof
  memtool leaks memory*.prof --sort natural   # memory2 before memory10 (a glob sorts as text)
  memtool leaks memory{1..9}.prof --format json | jq '.memories[].findings[0]'
  memtool leaks step1.pickle step2.pickle step3.pickle   # torch _dump_snapshot once per step
  memtool leaks trace.xplane.pb --fail-on-leak           # compares the ends of the steps")]
#[command(mut_arg("files", |a| a.help("A series of snapshots, oldest first: pprof files, or PyTorch snapshot pickles dumped once per step (`-` for stdin)")))]
pub struct LeaksArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// Exit with code 1 when a group grows steadily, net of what other groups
    /// freed, over 3 or more snapshots or step ends (a leak), for CI; the
    /// verdict is printed on stderr in every format.
    #[arg(long)]
    pub fail_on_leak: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &LeaksArgs) -> Result<Outcome> {
    let profile = inputs::load(&args.input, &args.analysis, args.output.output.as_deref())?;
    inputs::require_timeline(&profile, "leaks")?;
    let mut report = memtool_core::timings::time("analysis", || {
        leaks::leaks(&profile, &args.analysis.options())
    });
    if args.fail_on_leak {
        report.check_gate();
    }
    output::write(&report, &args.output, &args.analysis)?;
    output::gate_line(report.gate.as_ref());
    let failed = report.gate.as_ref().is_some_and(|g| !g.passed);
    inputs::free_at_exit((profile, report));
    Ok(if failed {
        Outcome::GateFailed
    } else {
        Outcome::Success
    })
}
