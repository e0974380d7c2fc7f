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
    /// Text (a label); a terminal table clips a long one to fit.
    Text(String),
    /// A size: human units in tables, exact bytes in CSV.
    Bytes(u64),
    /// A signed size difference.
    DeltaBytes(i64),
    /// A count of things.
    Count(u64),
    /// A signed number (a step, a position).
    Int(i64),
    /// A signed percentage change (`None` when undefined, e.g. growth from zero).
    Percent(Option<f64>),
    /// A part of a whole, in percent (`None` when the whole is zero).
    Share(Option<f64>),
    /// Nothing.
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
    /// The heading printed above the table.
    pub title: String,
    /// Column names: snake_case, as CSV headers.
    pub columns: Vec<&'static str>,
    /// The rows; every row has a cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// Rows the report left out of this table (groups it did not label;
    /// shown as a note, JSON keeps all rows).
    pub omitted: usize,
    /// Whether the rows are ranked, most important first, so that output
    /// showing `--top` rows shows the first of them (the exporters cut it);
    /// an overview table (one row per memory, totals) is shown whole.
    pub ranked: bool,
    /// Rows at the start of a ranked table that are not ranked (a total)
    /// and always shown.
    pub leading_rows: usize,
}

impl Table {
    /// An overview table: every row is shown.
    pub fn new(title: impl Into<String>, columns: Vec<&'static str>) -> Table {
        Table {
            title: title.into(),
            columns,
            rows: Vec::new(),
            omitted: 0,
            ranked: false,
            leading_rows: 0,
        }
    }

    /// A ranked table: output that shows `--top` rows shows its first rows.
    pub fn ranked(title: impl Into<String>, columns: Vec<&'static str>) -> Table {
        Table {
            ranked: true,
            ..Table::new(title, columns)
        }
    }

    /// Per column, whether it holds numbers (aligned right, never clipped):
    /// the type of its first row's cell.
    pub fn numeric_columns(&self) -> Vec<bool> {
        (0..self.columns.len())
            .map(|c| self.rows.first().is_some_and(|r| r[c].is_numeric()))
            .collect()
    }

    /// The rows output that shows `top` rows per table shows, and how many
    /// it leaves out (those the report left out included).
    pub fn shown_rows(&self, top: Option<usize>) -> (&[Vec<Cell>], usize) {
        let shown = match top {
            Some(top) if self.ranked => self.leading_rows.saturating_add(top).min(self.rows.len()),
            _ => self.rows.len(),
        };
        (
            &self.rows[..shown],
            self.omitted + (self.rows.len() - shown),
        )
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
    /// Writes `report` to `out`.
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The output formats of `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Terminal tables.
    Table,
    /// One JSON document.
    Json,
    /// The detail rows as CSV.
    Csv,
    /// Markdown tables.
    Md,
}

/// How the text exporters present a report; data-only formats (JSON, CSV)
/// ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Presentation {
    /// Rows shown per ranked table (`--top`).
    pub top: usize,
}

/// The exporter for a format.
pub fn exporter(format: OutputFormat, presentation: Presentation) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Table => Box::new(TerminalExporter {
            top: Some(presentation.top),
            ..TerminalExporter::default()
        }),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
        OutputFormat::Md => Box::new(MarkdownExporter {
            top: Some(presentation.top),
        }),
    }
}
