//! memtool-gen: scales a real memory profile to any size for benchmarks.
//!
//! Each generator takes a real fixture as its pattern (`--from`), repeats its
//! events shifted in time and address until the output has N of them, and
//! streams the result, so a 10^7-event or >2 GiB file needs only the
//! pattern's memory.

#![forbid(unsafe_code)]

mod hlo;
mod pickle;
mod pprof;
mod torch_snapshot;
mod torch_trace;
mod xspace;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "memtool-gen",
    about = "Scale a real memory profile to N events (benchmark inputs for memtool)",
    after_help = "Patterns default to ../shared/fixtures beside the repository.

Examples:
  memtool-gen xspace --events 1000000 -o big.xplane.pb
  memtool-gen hlo --buffers 1000000 -o big-module.xplane.pb
  memtool-gen torch-snapshot --entries 1000000 -o big.pickle
  memtool-gen torch-trace --events 1000000 -o big.pt.trace.json
  memtool-gen pprof --samples 100000 --snapshots 9 -o series/"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// XSpace (.xplane.pb) with N allocator events (MemoryAllocation/Deallocation).
    Xspace {
        #[arg(long, value_name = "N")]
        events: u64,
        /// Pattern XSpace with allocator events.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// XSpace with one compiled program (Memory Viewer input) whose heap
    /// simulator trace covers about N logical buffers.
    Hlo {
        #[arg(long, value_name = "N")]
        buffers: u64,
        /// Pattern XSpace with compiled programs (JAX).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// PyTorch `_dump_snapshot` pickle with N device trace entries.
    TorchSnapshot {
        #[arg(long, value_name = "N")]
        entries: u64,
        /// Pattern snapshot pickle.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// PyTorch profiler Chrome trace (JSON) with N `[memory]` events.
    TorchTrace {
        #[arg(long, value_name = "N")]
        events: u64,
        /// Deal the `[memory]` events to D CUDA devices (`cuda:0`…) by
        /// address, an allocation and its free on one device, each with its
        /// own running totals: traces of many memories (N / D events each);
        /// 0 keeps the pattern's devices.
        #[arg(long, value_name = "D", default_value_t = 0)]
        devices: u64,
        /// Pattern trace (.json or .json.gz).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// JAX device-memory pprof: K snapshots memory1.prof… of N samples each,
    /// one stack growing from each snapshot to the next when K > 1.
    Pprof {
        #[arg(long, value_name = "N")]
        samples: u64,
        #[arg(long, value_name = "K", default_value_t = 1)]
        snapshots: u64,
        /// Deal the samples round-robin to D devices (`dev:0`…), for
        /// profiles of many memories; 0 keeps the pattern's devices.
        #[arg(long, value_name = "D", default_value_t = 0)]
        devices: u64,
        /// Pattern pprof (gzipped or not).
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Output directory.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures")
        .join(rel)
}

fn read_pattern(from: &Option<PathBuf>, default: &str) -> Result<Vec<u8>> {
    let path = from.clone().unwrap_or_else(|| fixture(default));
    let bytes =
        std::fs::read(&path).with_context(|| format!("{}: cannot read pattern", path.display()))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut out)
            .with_context(|| format!("{}: invalid gzip", path.display()))?;
        return Ok(out);
    }
    Ok(bytes)
}

/// Writes through a temporary file renamed at the end, so an interrupted run
/// leaves no half file that looks complete.
fn write_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> Result<u64>) -> Result<u64> {
    let tmp = path.with_extension("partial");
    let file =
        std::fs::File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let n = body(&mut out)?;
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(n)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Xspace {
            events,
            from,
            output,
        } => {
            let pattern = read_pattern(&from, "xspace/tf_cnn.xplane.pb")?;
            let n = write_file(&output, |out| xspace::generate(&pattern, events, out))?;
            eprintln!("{}: {events} allocator events, {n} bytes", output.display());
        }
        Command::Hlo {
            buffers,
            from,
            output,
        } => {
            let pattern = read_pattern(&from, "xspace/jax_transformer_small.xplane.pb")?;
            let n = write_file(&output, |out| hlo::generate(&pattern, buffers, out))?;
            eprintln!("{}: ~{buffers} buffers, {n} bytes", output.display());
        }
        Command::TorchSnapshot {
            entries,
            from,
            output,
        } => {
            let pattern = read_pattern(&from, "torch/bcrafton_memory_snapshot.pickle")?;
            let n = write_file(&output, |out| {
                torch_snapshot::generate(&pattern, entries, out)
            })?;
            eprintln!("{}: {entries} trace entries, {n} bytes", output.display());
        }
        Command::TorchTrace {
            events,
            devices,
            from,
            output,
        } => {
            let pattern = read_pattern(&from, "torch/torch_cpu_transformer.pt.trace.json.gz")?;
            let n = write_file(&output, |out| {
                torch_trace::generate(&pattern, events, devices, out)
            })?;
            eprintln!("{}: {events} [memory] events, {n} bytes", output.display());
        }
        Command::Pprof {
            samples,
            snapshots,
            devices,
            from,
            output,
        } => {
            let pattern = read_pattern(&from, "pprof/sharded.prof")?;
            let paths = pprof::generate_series(&pattern, samples, snapshots, devices, &output)?;
            eprintln!(
                "{}: {} snapshot(s) of {samples} samples",
                output.display(),
                paths.len()
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memtool-gen: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
