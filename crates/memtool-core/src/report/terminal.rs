use std::io::{self, Write};

use comfy_table::{CellAlignment, ContentArrangement};

use super::{Cell, Exporter, Report, Table};

/// Tables for a terminal, fitted to `width` columns, sizes in binary units.
pub struct TerminalExporter {
    pub width: usize,
}

impl Default for TerminalExporter {
    fn default() -> Self {
        TerminalExporter { width: 100 }
    }
}

/// A line under the header and nothing else: quiet, and easy to copy from.
const STYLE: &str = "     ──            ";
/// Characters of padding and separation comfy-table adds per column.
const COLUMN_OVERHEAD: usize = 3;

/// Long labels (call stacks) keep their start, the most specific part.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// How wide each text column may be so the table fits in `width`: numbers are
/// never cut, text columns share what is left.
fn text_budget(table: &Table, width: usize) -> usize {
    let mut fixed = 0;
    let mut text_columns = 0;
    for (c, name) in table.columns.iter().enumerate() {
        let numeric = table.rows.first().is_some_and(|r| r[c].is_numeric());
        if numeric {
            let widest = table
                .rows
                .iter()
                .map(|r| r[c].human().chars().count())
                .max()
                .unwrap_or(0);
            fixed += widest.max(name.len()) + COLUMN_OVERHEAD;
        } else {
            text_columns += 1;
        }
    }
    let left = width.saturating_sub(fixed + COLUMN_OVERHEAD * text_columns);
    (left / text_columns.max(1)).max(16)
}

fn render(table: &Table, width: usize) -> String {
    let budget = text_budget(table, width);
    let mut t = comfy_table::Table::new();
    t.load_preset(STYLE)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(table.columns.iter().map(|c| c.replace('_', " ")));
    for row in &table.rows {
        t.add_row(row.iter().map(|cell| {
            let text = match cell {
                Cell::Text(s) => clip(s, budget),
                other => other.human(),
            };
            let c = comfy_table::Cell::new(text);
            if cell.is_numeric() {
                c.set_alignment(CellAlignment::Right)
            } else {
                c
            }
        }));
    }
    // Right-align the headers of numeric columns too.
    for (c, column) in t.column_iter_mut().enumerate() {
        if table.rows.first().is_some_and(|r| r[c].is_numeric()) {
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
            writeln!(out, "{}", table.title)?;
            if table.rows.is_empty() {
                writeln!(out, "  (nothing)")?;
                continue;
            }
            let text = render(table, self.width);
            for line in text.lines() {
                writeln!(out, "{}", line.trim_end())?;
            }
            if table.omitted > 0 {
                writeln!(
                    out,
                    "… {} more rows (raise --top, or use --format json)",
                    table.omitted
                )?;
            }
        }
        let notes = report.notes();
        if !notes.is_empty() {
            writeln!(out)?;
        }
        for note in notes {
            writeln!(out, "{note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct One(Table);

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

    #[test]
    fn long_labels_are_clipped_to_fit_the_width() {
        let mut t = Table::new("T", vec!["stack", "bytes"]);
        t.rows
            .push(vec![Cell::Text("x".repeat(300)), Cell::Bytes(84_000_000)]);
        let mut out = Vec::new();
        TerminalExporter { width: 100 }
            .export(&One(t), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("80.11 MiB"));
        assert!(text.contains('…'));
    }
}
