use std::io::{self, Write};

use comfy_table::{CellAlignment, ContentArrangement};

use super::{Cell, Exporter, Report, Table};

/// Tables for a terminal, fitted to `width` columns, sizes in binary units.
pub struct TerminalExporter {
    /// Columns a table may take.
    pub width: usize,
    /// Rows shown per ranked table; `None` for all.
    pub top: Option<usize>,
}

impl Default for TerminalExporter {
    fn default() -> Self {
        TerminalExporter {
            width: 100,
            top: None,
        }
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
/// never cut; text columns that fit their fair share keep their width and the
/// rest share what is left (water-filling), so a short label is never clipped
/// to make room for a long stack.
fn text_budgets(table: &Table, rows: &[Vec<Cell>], numeric: &[bool], width: usize) -> Vec<usize> {
    let natural: Vec<usize> = (0..table.columns.len())
        .map(|c| {
            let widest = rows
                .iter()
                .map(|r| r[c].human().chars().count())
                .max()
                .unwrap_or(0);
            widest.max(table.columns[c].len())
        })
        .collect();
    let mut left = width;
    for c in 0..natural.len() {
        left = left.saturating_sub(COLUMN_OVERHEAD + if numeric[c] { natural[c] } else { 0 });
    }
    let mut budgets = natural.clone();
    let mut open: Vec<usize> = (0..natural.len()).filter(|&c| !numeric[c]).collect();
    open.sort_by_key(|&c| natural[c]);
    while let Some(&c) = open.first() {
        let share = left / open.len();
        if natural[c] <= share {
            left -= natural[c];
            open.remove(0);
        } else {
            for &c in &open {
                budgets[c] = share.max(16);
            }
            break;
        }
    }
    budgets
}

fn render(table: &Table, rows: &[Vec<Cell>], width: usize) -> String {
    let numeric = table.numeric_columns();
    let budgets = text_budgets(table, rows, &numeric, width);
    let mut t = comfy_table::Table::new();
    t.load_preset(STYLE)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(table.columns.iter().map(|c| c.replace('_', " ")));
    for row in rows {
        t.add_row(row.iter().enumerate().map(|(c, cell)| {
            let text = match cell {
                Cell::Text(s) => clip(&super::visible(s), budgets[c]),
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
                writeln!(out, "{}", line.trim_end())?;
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
