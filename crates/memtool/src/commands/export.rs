//! `memtool export`: every allocation as a Parquet row, for DuckDB, pandas,
//! Polars, Spark and BigQuery. The core builds the rows in batches; this
//! file writes each batch as a row group as soon as it fills, through
//! `memtool-parquet` (which the Python module shares).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use memtool_core::analysis::export::{
    AllocationTable, Batch, ColumnSpec, MemoryTable, ALLOCATION_COLUMNS, MEMORY_COLUMNS,
};
use memtool_core::analysis::warning_notes;
use memtool_parquet::{ParquetWriter, DEFAULT_ROW_GROUP_ROWS};

use crate::cli::{AnalysisArgs, InputArgs};
use crate::output::Replaced;
use crate::{inputs, output, Outcome};

/// Every allocation as a row of a Parquet file, for DuckDB, pandas, Polars,
/// Spark and BigQuery.
///
/// One row per allocation (per interval it was live): memory, host, bytes,
/// requested, address, when it was made and freed, op, shape, dtype,
/// category, step, phase, stack and your own frame, whether it is live at the
/// memory's peak, and the input file it came from, so the exports of a fleet
/// of runs concatenate into one table. `--memories` writes a second file, a
/// row per memory (capacity, peak, final bytes, events). Each FILE is read and
/// written in turn, row groups as they fill, so only one profile is in memory.
/// Columns: docs/export.md.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool export memory.prof -o allocations.parquet
  memtool export runs/*/memory.prof -o allocations.parquet --memories memories.parquet
  duckdb -c \"SELECT op, sum(bytes) FROM 'allocations.parquet' WHERE live_at_peak GROUP BY op ORDER BY 2 DESC\"

Each FILE is exported on its own (the `input` column tells them apart): a
series of snapshots becomes one row set per file.")]
#[command(mut_arg("files", |a| a.help("Profile files, run directories or TensorBoard logdirs (`-` for stdin), each exported on its own")))]
#[command(mut_arg("top", |a| a.hide(true)))]
pub struct ExportArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Write the allocations to FILE (Parquet; atomically: never a partial
    /// file; `-` is stdout, which must not be a terminal).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the memories table to FILE: a row per memory of each input
    /// (capacity, peak, final bytes, events).
    #[arg(long = "memories", value_name = "FILE")]
    pub memories_file: Option<PathBuf>,
    /// Rows per Parquet row group (1 to 10000000): the rows held in memory
    /// at once.
    #[arg(long, default_value_t = DEFAULT_ROW_GROUP_ROWS, value_name = "ROWS",
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub row_group_rows: u32,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

pub fn run(args: &ExportArgs) -> Result<Outcome> {
    let to_stdout = [
        Some(args.output.as_deref()),
        args.memories_file.as_deref().map(Some),
    ]
    .into_iter()
    .flatten()
    .filter(|&path| crate::destination::is_stdout(path))
    .count();
    if to_stdout > 1 {
        bail!("the allocations and --memories cannot both go to stdout; give one of them a file");
    }
    // Checked before the inputs are read, as `render` does for its page.
    output::refuse_terminal(
        "export",
        args.output.as_deref(),
        "Parquet",
        "allocations.parquet",
    )?;
    if let Some(memories) = args.memories_file.as_deref() {
        output::refuse_terminal("export", Some(memories), "Parquet", "memories.parquet")?;
    }
    let options = args.analysis.options();
    let memories_file = Replaced::of(args.memories_file.as_deref());
    let mut memories = MemoryTable::default();
    let mut failure = None;
    let written = output::write_to(args.output.as_deref(), |out| {
        export_allocations(args, &options, memories_file.as_ref(), &mut memories, out).map_err(
            |e| {
                let io = io::Error::other(e.to_string());
                failure = Some(e);
                io
            },
        )
    });
    if let Err(e) = written {
        return Err(failure.take().unwrap_or(e));
    }
    if let Some(path) = &args.memories_file {
        write_file(path, MEMORY_COLUMNS, memories.batch())?;
    }
    Ok(Outcome::Success)
}

/// Reads each input in turn and writes its allocations to `out`; fills
/// `memories` on the way.
fn export_allocations(
    args: &ExportArgs,
    options: &memtool_core::analysis::Options,
    memories_file: Option<&Replaced>,
    memories: &mut MemoryTable,
    out: &mut dyn Write,
) -> Result<()> {
    let mut file = ParquetWriter::new(out, ALLOCATION_COLUMNS)?;
    let mut table = AllocationTable::new(args.row_group_rows as usize);
    let mut unmatched: Vec<&str> = options.memories.iter().map(String::as_str).collect();
    for path in &args.input.files {
        if let Some(replaced) = memories_file {
            refuse_overwrite(replaced, path)?;
        }
        let one = std::slice::from_ref(path);
        let mut profile = inputs::load_several(&[one], &args.input.read, args.output.as_deref())?
            .pop()
            .ok_or_else(|| anyhow!("internal error: one profile expected"))?;
        inputs::categorize(&mut profile, &args.analysis, &args.input.read)?;
        output::warn(&warning_notes(&profile.warnings));
        let not_here = options.unmatched(&profile);
        unmatched.retain(|name| not_here.contains(name));
        let input = if path == "-" {
            "<stdin>"
        } else {
            path.as_str()
        };
        let rows = table.add(&profile, input, options, &mut |batch| file.write(batch))?;
        memories.add(&profile, input, options, &rows);
        // Dropped before the next input is read: one profile at a time.
        drop(profile);
    }
    if !unmatched.is_empty() {
        bail!(
            "no memory or module named {} in any input",
            unmatched
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    table.finish(&mut |batch| file.write(batch))?;
    Ok(file.finish()?)
}

/// Fails when the input `path` is the file `--memories` would replace.
fn refuse_overwrite(replaced: &Replaced, path: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) => replaced.check(path, meta.dev(), meta.ino()),
        Err(_) => Ok(()),
    }
}

/// Writes one table, held whole, to `path`.
fn write_file(path: &Path, columns: &[ColumnSpec], batch: &Batch) -> Result<()> {
    let mut failure = None;
    let written = output::write_to(Some(path), |out| {
        let result = ParquetWriter::new(out, columns).and_then(|mut file| {
            file.write(batch)?;
            file.finish()
        });
        result.map_err(|e| {
            let io = io::Error::other(e.to_string());
            failure = Some(anyhow::Error::from(e));
            io
        })
    });
    match written {
        Err(e) => Err(failure.take().unwrap_or(e)),
        Ok(()) => Ok(()),
    }
}
