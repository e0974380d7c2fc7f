//! Output. Every command builds a report value; one [`Exporter`] per output
//! format turns any report into terminal tables, CSV, Markdown or JSON.
//!
//! JSON is the report's own `Serialize` (a documented, versioned schema, see
//! `docs/json/`); tables, CSV and Markdown all come from the same
//! [`Report::tables`], so the text formats can never disagree with each other.

mod csv;
mod json;
mod markdown;
mod terminal;
pub mod units;

use std::io::{self, Write};

pub use self::csv::CsvExporter;
pub use json::JsonExporter;
pub use markdown::MarkdownExporter;
pub use terminal::TerminalExporter;

/// One value of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    /// A size: human units in tables, exact bytes in CSV.
    Bytes(u64),
    /// A signed size difference.
    DeltaBytes(i64),
    Count(u64),
    Int(i64),
    /// A signed percentage change (`None` when undefined, e.g. growth from zero).
    Percent(Option<f64>),
    /// A part of a whole, in percent (`None` when the whole is zero).
    Share(Option<f64>),
    Empty,
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Text(s.to_string())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Text(s)
    }
}

impl Cell {
    /// The exact, machine-readable form (CSV).
    pub fn exact(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Bytes(b) | Cell::Count(b) => b.to_string(),
            Cell::DeltaBytes(d) | Cell::Int(d) => d.to_string(),
            Cell::Percent(Some(p)) | Cell::Share(Some(p)) => format!("{p:.2}"),
            Cell::Percent(None) | Cell::Share(None) | Cell::Empty => String::new(),
        }
    }

    /// The human form (terminal tables, Markdown).
    pub fn human(&self) -> String {
        match self {
            Cell::Bytes(b) => units::bytes(*b),
            Cell::DeltaBytes(d) => units::delta_bytes(*d),
            Cell::Percent(Some(p)) => format!("{p:+.1}%").replace("+-", "-"),
            Cell::Percent(None) | Cell::Share(None) => "n/a".to_string(),
            Cell::Share(Some(p)) => format!("{p:.1}%"),
            other => other.exact(),
        }
    }

    fn is_numeric(&self) -> bool {
        !matches!(self, Cell::Text(_) | Cell::Empty)
    }
}

/// A titled table.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub title: String,
    /// Column names: snake_case, as CSV headers.
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
    /// Rows left out of this table (shown as a note; JSON keeps all rows).
    pub omitted: usize,
}

impl Table {
    pub fn new(title: impl Into<String>, columns: Vec<&'static str>) -> Table {
        Table {
            title: title.into(),
            columns,
            rows: Vec::new(),
            omitted: 0,
        }
    }
}

/// What every command's output is.
pub trait Report {
    /// The JSON document (with its `schema`), written by serde.
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()>;
    /// The tables for the terminal and Markdown, in reading order.
    fn tables(&self) -> Vec<Table>;
    /// The one table CSV carries: every detail row, with exact values.
    fn csv_table(&self) -> Table;
    /// One-line findings printed under the tables (verdicts, gate results).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Writes a report in one output format.
pub trait Exporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The output formats of `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
    Csv,
    Md,
}

/// The exporter for a format.
pub fn exporter(format: OutputFormat) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Table => Box::new(TerminalExporter::default()),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
        OutputFormat::Md => Box::new(MarkdownExporter),
    }
}
