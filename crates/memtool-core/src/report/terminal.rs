use std::io::{self, Write};

use comfy_table::{CellAlignment, ContentArrangement};

use super::fit::fit;
use super::{Cell, Exporter, Report, Table};

/// Tables for a terminal, fitted to `width` columns (see [`super::fit`]),
/// sizes in binary units.
pub struct TerminalExporter {
    /// Columns a table may take.
    pub width: usize,
    /// Rows shown per ranked table; `None` for all.
    pub top: Option<usize>,
}

impl Default for TerminalExporter {
    fn default() -> Self {
        TerminalExporter {
            width: super::DEFAULT_WIDTH,
            top: None,
        }
    }
}

/// A line under the header and nothing else: quiet, and easy to copy from.
const STYLE: &str = "     ──            ";

fn render(table: &Table, rows: &[Vec<Cell>], width: usize) -> String {
    let numeric = table.numeric_columns();
    let fitted = fit(table, rows, Some(width));
    let mut t = comfy_table::Table::new();
    t.load_preset(STYLE)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(fitted.headers);
    for row in fitted.cells {
        t.add_row(row.into_iter().enumerate().map(|(c, text)| {
            let cell = comfy_table::Cell::new(text);
            if numeric[c] {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    // Right-align the headers of numeric columns too.
    for (c, column) in t.column_iter_mut().enumerate() {
        if numeric[c] {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

impl Exporter for TerminalExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        for (i, table) in report.tables().iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(out, "{}", super::visible(&table.title))?;
            if table.rows.is_empty() {
                writeln!(out, "  (nothing)")?;
                continue;
            }
            let (rows, omitted) = table.shown_rows(self.top);
            let text = render(table, rows, self.width);
            for line in text.lines() {
                // The rule under the header runs through the last column's
                // padding; end it where the widest row ends.
                let line = line.trim_end();
                let line = match line.strip_suffix('─') {
                    Some(rule) if rule.trim_start().starts_with('─') => rule,
                    _ => line,
                };
                writeln!(out, "{line}")?;
            }
            if omitted > 0 {
                writeln!(
                    out,
                    "… {omitted} more rows (raise --top, or use --format json)"
                )?;
            }
        }
        let notes = report.notes();
        if report.tables().is_empty() && notes.is_empty() {
            writeln!(out, "(the input holds no memory to report)")?;
        }
        if !notes.is_empty() {
            writeln!(out)?;
        }
        for note in notes {
            writeln!(out, "{}", super::visible(&note))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::One;
    use super::*;

    #[test]
    fn long_labels_are_clipped_to_fit_the_width() {
        let mut t = Table::new("T", vec!["stack", "bytes"]);
        t.rows
            .push(vec![Cell::Text("x".repeat(300)), Cell::Bytes(84_000_000)]);
        let mut out = Vec::new();
        TerminalExporter::default()
            .export(&One(t), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("80.11 MiB"));
        assert!(text.contains('…'));
    }
}
