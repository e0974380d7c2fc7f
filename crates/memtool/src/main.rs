//! memtool: where did my accelerator memory go?
//!
//! A thin binary over `memtool-core`: it parses arguments, reads files, and
//! maps results to exit codes (0 ok, 1 a CI gate failed, 2 input or usage).

#![forbid(unsafe_code)]

mod cli;
mod commands;
mod destination;
mod inputs;
mod mcp;
mod output;
mod phases;
mod supervise;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "memtool",
    version,
    about = "Where did my GPU/TPU memory go? Peak, leaks and diffs for accelerator memory profiles.",
    long_about = None,
    after_help = "Inputs (recognized by content, not by name; gzip is read transparently):
  JAX device memory profiles from jax.profiler.save_device_memory_profile (pprof)
  XProf/TensorBoard .xplane.pb (a file, a run directory or a logdir):
    allocator events (TensorFlow, JAX/PyTorch-XLA on GPU/TPU) and compiled
    programs' buffer assignment (XLA, CPU too)
  PyTorch CUDA memory snapshots from torch.cuda.memory._dump_snapshot (pickle)
  PyTorch profiler traces (*.pt.trace.json[.gz], profile_memory=True)
  PyTorch memory timelines from prof.export_memory_timeline (.json, .raw.json.gz)

Examples:
  memtool summary memory.prof
  memtool peak memory.prof --top 20
  memtool leaks memory1.prof memory2.prof memory3.prof
  memtool diff base.prof new.prof --fail-on-growth 5%
  memtool frag logdir/
  memtool oom oom_snapshot.pickle --capacity 80GiB
  memtool render memory.prof -o report.html
  memtool export runs/*/memory.prof -o allocations.parquet
  memtool ranks snapshots/ --jobs 8

Exit codes: 0 success, 1 a CI gate failed, 2 unreadable input or bad usage."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Summary(commands::summary::SummaryArgs),
    Peak(commands::peak::PeakArgs),
    Leaks(commands::leaks::LeaksArgs),
    Diff(commands::diff::DiffArgs),
    Frag(commands::frag::FragArgs),
    Oom(commands::oom::OomArgs),
    Render(commands::render::RenderArgs),
    Export(commands::export::ExportArgs),
    Ranks(commands::ranks::RanksArgs),
    Mcp(commands::mcp::McpArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(commands::shell::CompletionsArgs),
    /// Print memtool's manual page, or a command's, in roff (for `man -l -`)
    Man(commands::shell::ManArgs),
}

impl Command {
    /// The files a command reads, for the commands that read profiles.
    fn input(&self) -> Option<&cli::InputArgs> {
        match self {
            Command::Summary(a) => Some(&a.input),
            Command::Peak(a) => Some(&a.input),
            Command::Leaks(a) => Some(&a.input),
            Command::Diff(a) => Some(&a.input),
            Command::Frag(a) => Some(&a.input),
            Command::Oom(a) => Some(&a.input),
            Command::Render(a) => Some(&a.input),
            Command::Export(a) => Some(&a.input),
            Command::Ranks(a) => Some(&a.input),
            // The server runs each tool call as a supervised child.
            Command::Mcp(_) | Command::Completions(_) | Command::Man(_) => None,
        }
    }
}

impl Command {
    /// The files `-o` (and `export --memories`) write, for the supervisor
    /// to clean up after a killed child.
    fn outputs(&self) -> Vec<&std::path::Path> {
        fn report(o: &cli::OutputArgs) -> Option<&std::path::Path> {
            o.output.as_deref()
        }
        let paths = match self {
            Command::Summary(a) => vec![report(&a.output)],
            Command::Peak(a) => vec![report(&a.output)],
            Command::Leaks(a) => vec![report(&a.output)],
            Command::Diff(a) => vec![report(&a.output)],
            Command::Frag(a) => vec![report(&a.output)],
            Command::Oom(a) => vec![report(&a.output)],
            Command::Ranks(a) => vec![report(&a.output)],
            Command::Render(a) => vec![a.output.as_deref()],
            Command::Export(a) => vec![a.output.as_deref(), a.memories_file.as_deref()],
            Command::Mcp(_) | Command::Completions(_) | Command::Man(_) => vec![],
        };
        paths.into_iter().flatten().collect()
    }

    /// Whether `--format pprof` was given to a command whose report has no
    /// live set at a peak to write (refused before any input is read).
    fn refuses_pprof(&self) -> bool {
        let output = match self {
            Command::Leaks(a) => &a.output,
            Command::Diff(a) => &a.output,
            Command::Frag(a) => &a.output,
            Command::Oom(a) => &a.output,
            Command::Ranks(a) => &a.output,
            _ => return false,
        };
        matches!(output.format, cli::FormatArg::Pprof)
    }

    /// Whether `--format html` was given to a command other than `ranks`
    /// (refused before any input is read).
    fn refuses_html(&self) -> bool {
        let output = match self {
            Command::Summary(a) => &a.output,
            Command::Peak(a) => &a.output,
            Command::Leaks(a) => &a.output,
            Command::Diff(a) => &a.output,
            Command::Frag(a) => &a.output,
            Command::Oom(a) => &a.output,
            _ => return false,
        };
        matches!(output.format, cli::FormatArg::Html)
    }
}

/// How a command ended, when it did not fail.
pub enum Outcome {
    Success,
    GateFailed,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if let Some(input) = cli.command.input() {
        if let Some(end) = supervise::supervise(&input.files, &cli.command.outputs()) {
            return end;
        }
    }
    if std::env::var_os("MEMTOOL_TEST_PANIC").is_some() {
        // memtool has no known panic: tests reach the panic report with it.
        panic!("MEMTOOL_TEST_PANIC is set");
    }
    phases::init();
    let total = memtool_core::timings::span("total");
    let result = match cli.command.input().filter(|input| input.read.list_runs) {
        Some(input) => inputs::list_runs(input),
        None => run(&cli.command),
    };
    drop(total);
    phases::print();
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::GateFailed) => ExitCode::from(1),
        Err(e) => {
            // `memtool ... | head` closes stdout early: that is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            let mut stderr = io::stderr().lock();
            let _ = writeln!(stderr, "memtool: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// Runs one command.
fn run(command: &Command) -> anyhow::Result<Outcome> {
    if command.refuses_pprof() {
        anyhow::bail!(cli::PPROF_ONLY);
    }
    if command.refuses_html() {
        anyhow::bail!(cli::HTML_ONLY);
    }
    match command {
        Command::Summary(a) => commands::summary::run(a),
        Command::Peak(a) => commands::peak::run(a),
        Command::Leaks(a) => commands::leaks::run(a),
        Command::Diff(a) => commands::diff::run(a),
        Command::Frag(a) => commands::frag::run(a),
        Command::Oom(a) => commands::oom::run(a),
        Command::Render(a) => commands::render::run(a),
        Command::Export(a) => commands::export::run(a),
        Command::Ranks(a) => commands::ranks::run(a),
        Command::Mcp(a) => commands::mcp::run(a),
        Command::Completions(a) => commands::shell::completions(a),
        Command::Man(a) => commands::shell::man(a),
    }
}

/// The error and its causes on one line, each said once. Names from files
/// and file names (a memory, a run folder, a path) may hold terminal
/// escapes: they are shown as `\u{1b}`, as the tables show them, so no
/// profile or logdir can drive the terminal through an error.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    memtool_core::report::visible(&parts.join(": ")).into_owned()
}
