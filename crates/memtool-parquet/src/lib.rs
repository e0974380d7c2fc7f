//! memtool's export tables (`memtool_core::analysis::export`) written as
//! Parquet: each batch of rows the core hands over becomes a row group, with
//! the `parquet` crate's low-level column writers and no Arrow. The CLI's
//! `memtool export` and the Python module's `memtool.allocations` both write
//! through [`ParquetWriter`], so the two give the same file.
//!
//! This crate writes to any `Write` it is given; it opens no file (the binary
//! chooses where output goes, the Python module returns bytes).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::io::Write;
use std::sync::Arc;

use memtool_core::analysis::export::{
    AllocationTable, Batch, ColumnKind, ColumnSpec, Values, ALLOCATION_COLUMNS, SCHEMA,
};
use memtool_core::analysis::Options;
use memtool_core::model::Profile;
use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int64Type};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

/// Rows per row group unless the caller says otherwise: DuckDB's own row
/// group size, so a scan of a fleet splits across threads as DuckDB expects,
/// and each group's columns are a few megabytes in memory.
pub const DEFAULT_ROW_GROUP_ROWS: u32 = 122_880;

/// The allocations table of one profile as a whole Parquet file in memory,
/// its rows' `input` column set to `input`: what `memtool export FILE`
/// writes for that one file.
pub fn allocations_file(
    profile: &Profile,
    input: &str,
    options: &Options,
    row_group_rows: usize,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut file = ParquetWriter::new(&mut out, ALLOCATION_COLUMNS)?;
    let mut table = AllocationTable::new(row_group_rows.max(1));
    table.add(profile, input, options, &mut |batch| file.write(batch))?;
    table.finish(&mut |batch| file.write(batch))?;
    file.finish()?;
    Ok(out)
}

/// A Parquet file written to any `Write`: each batch becomes a row group,
/// passed on to the output as soon as it is encoded. The parquet crate
/// writes to a `Write + Send`, which standard output's lock is not, so it
/// writes into a buffer that is emptied into the output after each group
/// (the crate counts the bytes for the footer itself).
pub struct ParquetWriter<'o> {
    writer: SerializedFileWriter<Vec<u8>>,
    out: &'o mut dyn Write,
    /// Each label of the batch being written, encoded once, by id.
    labels: Vec<ByteArray>,
}

impl<'o> ParquetWriter<'o> {
    /// A file of the table whose columns are `columns` (the core's
    /// `ALLOCATION_COLUMNS` or `MEMORY_COLUMNS`), written to `out`; its
    /// key-value metadata `memtool.schema` names the columns' version.
    pub fn new(out: &'o mut dyn Write, columns: &[ColumnSpec]) -> Result<Self> {
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
    pub fn write(&mut self, batch: &Batch) -> Result<()> {
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
            let mut writer = group.next_column()?.ok_or_else(|| {
                ParquetError::General(
                    "internal error: fewer Parquet columns than the table's".to_string(),
                )
            })?;
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
    pub fn finish(self) -> Result<()> {
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
        .collect::<Result<Vec<_>>>()?;
    Type::group_type_builder("memtool")
        .with_fields(fields)
        .build()
}
