//! Output. Every command builds a report value; one [`Exporter`] per output
//! format turns any report into terminal tables, CSV, Markdown or JSON.
//!
//! JSON is the report's own `Serialize` (a documented, versioned schema, see
//! `docs/json/`); tables, CSV and Markdown all come from the same
//! [`Report::tables`], so the text formats can never disagree with each other.

mod csv;
mod fit;
mod json;
mod markdown;
mod terminal;
/// Sizes, counts and times as people read them (the crate's `units`, below
/// the loader, which words its messages with them too).
pub use crate::units;

use std::io::{self, Write};

pub use self::csv::CsvExporter;
pub(crate) use fit::fit_column;
pub use fit::shorten;
pub use json::JsonExporter;
pub use markdown::MarkdownExporter;
pub use terminal::TerminalExporter;

/// `text` with every control character (C0, DEL, C1) and every bidi
/// control written as a visible escape (`\u{1b}`), so a name from a profile
/// can neither drive the terminal (set its title, clear it, recolour the
/// output), nor split a table row or a CSV record, nor reorder what follows
/// it. Text without them is returned as it is.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.contains(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

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
    /// A part of a whole as a fraction in [0, 1] (`None` when undefined):
    /// a percentage in tables, the fraction itself in CSV, as in JSON.
    Fraction(Option<f64>),
    /// A figure in the units of a memory's axis (a position, an age): its
    /// `label` (`t+25.43 ms (step 3)`, `1.930 ms`) in tables, the figure
    /// itself in CSV, as in JSON (empty where JSON has `null`).
    Figure {
        /// The figure (µs since the epoch, ps since the profile's start, …).
        value: Option<i64>,
        /// How a person reads it.
        label: String,
    },
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
            Cell::Fraction(Some(f)) => f.to_string(),
            Cell::Figure { value, .. } => value.map_or_else(String::new, |v| v.to_string()),
            Cell::Percent(None) | Cell::Share(None) | Cell::Fraction(None) | Cell::Empty => {
                String::new()
            }
        }
    }

    /// The human form (terminal tables, Markdown), control characters made
    /// visible ([`visible`]).
    pub fn human(&self) -> String {
        match self {
            Cell::Text(s) => visible(s).into_owned(),
            Cell::Bytes(b) => units::bytes(*b),
            Cell::DeltaBytes(d) => units::delta_bytes(*d),
            Cell::Percent(Some(p)) => format!("{p:+.1}%").replace("+-", "-"),
            Cell::Percent(None) | Cell::Share(None) | Cell::Fraction(None) => "n/a".to_string(),
            Cell::Share(Some(p)) => format!("{p:.1}%"),
            Cell::Fraction(Some(f)) => format!("{:.1}%", f * 100.0),
            Cell::Figure { label, .. } => visible(label).into_owned(),
            other => other.exact(),
        }
    }

    fn is_numeric(&self) -> bool {
        !matches!(self, Cell::Text(_) | Cell::Empty)
    }

    /// Whether the cell holds no figure: empty, `n/a`, or an undefined
    /// percentage.
    fn says_nothing(&self) -> bool {
        match self {
            Cell::Empty | Cell::Percent(None) | Cell::Share(None) | Cell::Fraction(None) => true,
            Cell::Text(text) => text == "n/a",
            _ => false,
        }
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
    /// Prose printed under the table, a paragraph each: what a column
    /// would cut to fit (what a setting would change).
    pub notes: Vec<String>,
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
            notes: Vec::new(),
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
    /// some row has a number there and no row has text other than `n/a` (a
    /// figure a memory does not have, aligned with the others).
    pub fn numeric_columns(&self) -> Vec<bool> {
        (0..self.columns.len())
            .map(|c| {
                self.rows.iter().any(|r| r[c].is_numeric())
                    && self
                        .rows
                        .iter()
                        .all(|r| r[c].is_numeric() || r[c].says_nothing())
            })
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
    /// [`Report::tables`] for output that shows the first `top` rows of
    /// each ranked table ([`Table::shown_rows`]): a report may leave rows
    /// past them out of a ranked table, counted in its `omitted`, rather
    /// than make them. `None`: every row.
    fn tables_shown(&self, top: Option<usize>) -> Vec<Table> {
        let _ = top;
        self.tables()
    }
    /// The one table CSV carries: every detail row, with exact values.
    fn csv_table(&self) -> Table;
    /// One-line findings printed under the tables (verdicts, gate results).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// What the readers read around, one line each. The binary writes them
    /// to standard error in every format, so they never mix with a table or
    /// a CSV record; JSON also keeps them in the document.
    fn warnings(&self) -> Vec<String> {
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
    /// Columns a table may take: the terminal's width for terminal tables
    /// ([`DEFAULT_WIDTH`] when `None`); Markdown shortens labels only when
    /// it is given one.
    pub width: Option<usize>,
}

/// Columns a terminal table takes when no width is known (output to a file
/// or a pipe).
pub const DEFAULT_WIDTH: usize = 100;

/// The exporter for a format.
pub fn exporter(format: OutputFormat, presentation: Presentation) -> Box<dyn Exporter> {
    match format {
        OutputFormat::Table => Box::new(TerminalExporter {
            top: Some(presentation.top),
            width: presentation.width.unwrap_or(DEFAULT_WIDTH),
        }),
        OutputFormat::Json => Box::new(JsonExporter),
        OutputFormat::Csv => Box::new(CsvExporter),
        OutputFormat::Md => Box::new(MarkdownExporter {
            top: Some(presentation.top),
            width: presentation.width,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of one table, for the exporters' tests.
    pub(super) struct One(pub(super) Table);

    impl Report for One {
        fn write_json(&self, _: &mut dyn Write) -> serde_json::Result<()> {
            Ok(())
        }
        fn tables(&self) -> Vec<Table> {
            vec![self.0.clone()]
        }
        fn csv_table(&self) -> Table {
            self.0.clone()
        }
    }

    /// Names from a profile that would set the terminal's title, clear it,
    /// split a row, reorder text or run as a spreadsheet formula.
    fn hostile() -> Table {
        let mut t = Table::new("Ops \u{1b}]0;owned\u{7}", vec!["op", "bytes"]);
        for name in [
            "\u{1b}[2Jcleared",
            "two\nlines",
            "\u{202e}txt.exe",
            "=HYPERLINK(1)",
            "-1+2",
        ] {
            t.rows.push(vec![name.into(), Cell::DeltaBytes(-5)]);
        }
        t
    }

    fn export(exporter: &dyn Exporter) -> String {
        let mut out = Vec::new();
        exporter.export(&One(hostile()), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn control_and_bidi_characters_are_made_visible() {
        assert_eq!(visible("plain <- text"), "plain <- text");
        assert_eq!(
            visible("a\u{1b}[2Jb\nc\u{202e}d"),
            "a\\u{1b}[2Jb\\u{a}c\\u{202e}d"
        );
        for text in [
            export(&TerminalExporter::default()),
            export(&MarkdownExporter::default()),
            export(&CsvExporter),
        ] {
            assert!(!text.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{text:?}");
            assert!(text.contains("\\u{1b}[2Jcleared"), "{text}");
        }
    }

    #[test]
    fn csv_text_that_a_spreadsheet_would_run_is_quoted_as_text() {
        let csv = export(&CsvExporter);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "op,bytes");
        assert_eq!(lines[1], "\\u{1b}[2Jcleared,-5");
        assert_eq!(lines[2], "two\\u{a}lines,-5");
        assert_eq!(lines[4], "'=HYPERLINK(1),-5");
        assert_eq!(lines[5], "'-1+2,-5");
        assert_eq!(lines.len(), 6);
    }
}
