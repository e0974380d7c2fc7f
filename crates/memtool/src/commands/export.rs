//! `memtool export`: every allocation as a Parquet row, for DuckDB, pandas,
//! Polars, Spark and BigQuery. The core builds the rows in batches; this
//! file writes each batch as a row group as soon as it fills.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use memtool_core::analysis::export::{
    AllocationTable, Batch, ColumnKind, ColumnSpec, MemoryTable, Values, ALLOCATION_COLUMNS,
    MEMORY_COLUMNS, SCHEMA,
};
use memtool_core::analysis::warning_notes;
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use crate::cli::{AnalysisArgs, InputArgs};
use crate::output::Replaced;
use crate::{inputs, output, Outcome};

/// Rows per row group unless `--row-group-rows` says otherwise: DuckDB's own
/// row group size, so a scan of a fleet splits across threads as DuckDB
/// expects, and each group's columns are a few megabytes in memory.
const DEFAULT_ROW_GROUP_ROWS: u32 = 122_880;

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
    .filter(|&path| output::is_stdout(path))
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
        inputs::categorize(&mut profile, &args.analysis)?;
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
    file.finish()
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
            failure = Some(e);
            io
        })
    });
    match written {
        Err(e) => Err(failure.take().unwrap_or(e)),
        Ok(()) => Ok(()),
    }
}

/// A Parquet file written to any `Write`: each batch becomes a row group,
/// passed on to the output as soon as it is encoded. The parquet crate
/// writes to a `Write + Send`, which standard output's lock is not, so it
/// writes into a buffer that is emptied into the output after each group
/// (the crate counts the bytes for the footer itself).
struct ParquetWriter<'o> {
    writer: SerializedFileWriter<Vec<u8>>,
    out: &'o mut dyn Write,
    /// Each label of the batch being written, encoded once, by id.
    labels: Vec<ByteArray>,
}

impl<'o> ParquetWriter<'o> {
    fn new(out: &'o mut dyn Write, columns: &[ColumnSpec]) -> Result<Self> {
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "memtool.schema".to_string(),
                SCHEMA.to_string(),
            )]))
            .build();
        let writer = SerializedFileWriter::new(
            Vec::new(),
            Arc::new(schema(columns)?),
            Arc::new(properties),
        )?;
        Ok(ParquetWriter {
            writer,
            out,
            labels: Vec::new(),
        })
    }

    /// Writes `batch` as one row group.
    fn write(&mut self, batch: &Batch) -> Result<()> {
        if batch.rows() == 0 {
            return Ok(());
        }
        // Each batch has labels of its own.
        self.labels.clear();
        for id in 0..batch.labels.len() {
            let text = batch.labels.get(id as u32);
            self.labels.push(ByteArray::from(text.as_bytes().to_vec()));
        }
        let mut group = self.writer.next_row_group()?;
        let mut texts = Vec::new();
        for column in &batch.columns {
            let mut writer = group
                .next_column()?
                .context("internal error: fewer Parquet columns than the table's")?;
            let defined = column.spec.nullable.then_some(&column.defined[..]);
            match &column.values {
                Values::Int64(values) => {
                    writer
                        .typed::<Int64Type>()
                        .write_batch(values, defined, None)?;
                }
                Values::Bool(values) => {
                    writer
                        .typed::<BoolType>()
                        .write_batch(values, defined, None)?;
                }
                Values::Text(ids) => {
                    texts.clear();
                    texts.extend(ids.iter().map(|&id| self.labels[id as usize].clone()));
                    writer
                        .typed::<ByteArrayType>()
                        .write_batch(&texts, defined, None)?;
                }
            }
            writer.close()?;
        }
        group.close()?;
        self.writer.flush()?;
        let encoded = self.writer.inner_mut();
        self.out.write_all(encoded)?;
        encoded.clear();
        Ok(())
    }

    /// Writes the footer.
    fn finish(self) -> Result<()> {
        let rest = self.writer.into_inner()?;
        self.out.write_all(&rest)?;
        Ok(())
    }
}

/// The Parquet schema of a table: INT64, BOOLEAN, or UTF-8 strings.
fn schema(columns: &[ColumnSpec]) -> Result<Type> {
    let fields = columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.kind {
                ColumnKind::Int64 => (PhysicalType::INT64, None),
                ColumnKind::Bool => (PhysicalType::BOOLEAN, None),
                ColumnKind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            };
            let repetition = if c.nullable {
                Repetition::OPTIONAL
            } else {
                Repetition::REQUIRED
            };
            Type::primitive_type_builder(c.name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
        })
        .collect::<parquet::errors::Result<Vec<_>>>()?;
    Ok(Type::group_type_builder("memtool")
        .with_fields(fields)
        .build()?)
}
