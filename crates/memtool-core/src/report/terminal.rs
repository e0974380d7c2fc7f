use std::io::{self, Write};

use comfy_table::{CellAlignment, ContentArrangement};

use super::fit::fit;
use super::{Cell, Exporter, Report, Table};

/// Tables for a terminal, fitted to `width` columns (see the `fit` module),
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

/// The columns of a table left out of its text because they say nothing,
/// each named under it.
#[derive(Default)]
struct LeftOut {
    /// `n/a` or empty in every row.
    empty: Vec<&'static str>,
    /// One value in every row: `stream 0`.
    constant: Vec<String>,
    /// Equal to an earlier column in every row: `requested (as bytes)`.
    repeated: Vec<String>,
}

/// Whether a cell shows nothing: no figure, or a placeholder.
fn blank(cell: &Cell) -> bool {
    cell.says_nothing() || matches!(cell, Cell::Text(t) if t.is_empty() || t == "-")
}

/// `table` without the columns that say nothing for `rows`, so the columns
/// that do say something fit the width: columns empty (`n/a`, blank, `-`)
/// in every row; with two rows or more, text columns of one value in every
/// row (named with it under the table), a requested or unpadded size equal
/// to an earlier column in every row (`unpadded bytes` = `bytes`), and
/// `dtype` where every row's
/// shape already spells it (`f32[1024,1024]`). The first column (what a
/// row is) always stays. Returns the remaining table, its rows, what was
/// left out, and the first cell of each row left out because it says
/// nothing in any kept column.
fn without_empty_columns(
    table: &Table,
    rows: &[Vec<Cell>],
) -> (Table, Vec<Vec<Cell>>, LeftOut, Vec<String>) {
    let columns = table.columns.len();
    let numeric = table.numeric_columns();
    let text = |r: usize, c: usize| rows[r][c].human();
    let mut keep = vec![true; columns];
    let mut left_out = LeftOut::default();
    let shape = table.columns.iter().position(|&c| c == "shape");
    for c in 1..columns {
        if rows.is_empty() {
            break;
        }
        if rows.iter().all(|r| blank(&r[c])) {
            keep[c] = false;
            left_out.empty.push(table.columns[c]);
            continue;
        }
        if rows.len() < 2 {
            continue;
        }
        let name = table.columns[c].replace('_', " ");
        // A constant figure is often the answer (a total equal to its only
        // part): only text columns that repeat one value are left out.
        // Blank cells (a folded row of small memories) do not break it; a
        // position (`peak at`) counts as text.
        let texty = !numeric[c] || rows.iter().any(|r| matches!(r[c], Cell::Figure { .. }));
        let shown: Vec<usize> = (0..rows.len()).filter(|&r| !blank(&rows[r][c])).collect();
        if texty && shown.len() >= 2 && shown.iter().all(|&r| text(r, c) == text(shown[0], c)) {
            keep[c] = false;
            left_out
                .constant
                .push(format!("{name} {}", text(shown[0], c)));
            continue;
        }
        // A variant of the bytes column (requested, unpadded) equal to it
        // in every row says nothing more; other figures equal by chance do.
        let variant = ["requested", "unpadded"]
            .iter()
            .any(|v| table.columns[c].starts_with(v));
        if let Some(d) = (0..c)
            .find(|&d| variant && keep[d] && (0..rows.len()).all(|r| text(r, c) == text(r, d)))
        {
            keep[c] = false;
            left_out.repeated.push(format!(
                "{name} (as {})",
                table.columns[d].replace('_', " ")
            ));
            continue;
        }
        if let (true, Some(s)) = (table.columns[c] == "dtype", shape) {
            let spelt = (0..rows.len()).all(|r| {
                let dtype = text(r, c);
                dtype.is_empty() || text(r, s).contains(dtype.as_str())
            });
            if spelt {
                keep[c] = false;
                left_out.repeated.push("dtype (in the shape)".to_string());
            }
        }
    }
    let pick = |row: &Vec<Cell>| -> Vec<Cell> {
        row.iter()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|(cell, _)| cell.clone())
            .collect()
    };
    // A row with no figure in any column kept (a CPU allocator beside the
    // GPU one, where only the GPU reports fragmentation) says nothing either;
    // it is named under the table.
    let (rows, empty_rows): (Vec<Vec<Cell>>, Vec<Vec<Cell>>) = rows
        .iter()
        .map(pick)
        .partition(|row| row.len() < 2 || !row[1..].iter().all(Cell::says_nothing));
    let empty_rows: Vec<String> = empty_rows
        .iter()
        .map(|row| row.first().map(Cell::human).unwrap_or_default())
        .collect();
    let informative = Table {
        title: table.title.clone(),
        columns: table
            .columns
            .iter()
            .zip(&keep)
            .filter(|(_, keep)| **keep)
            .map(|(name, _)| *name)
            .collect(),
        rows: rows.clone(),
        omitted: table.omitted,
        ranked: table.ranked,
        leading_rows: table.leading_rows,
        notes: table.notes.clone(),
    };
    (informative, rows, left_out, empty_rows)
}

/// `text` as lines of at most `width` columns (a longer word takes a line
/// of its own), `- ` before the first and an indent before the others.
fn paragraph(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::from(" -");
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if line.chars().count() + 1 + word.chars().count() > width && line.trim() != "-" {
            lines.push(std::mem::replace(&mut line, String::from("  ")));
        }
        line.push(' ');
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// A line of prose (a note, what a table left out) wrapped at `width`, its
/// lines after the first indented by one space.
fn aside(out: &mut dyn Write, text: &str, width: usize) -> io::Result<()> {
    let text = super::visible(text);
    for (i, line) in paragraph(&text, width).iter().enumerate() {
        let prefix = if i == 0 { " - " } else { "  " };
        writeln!(out, "{}", line.strip_prefix(prefix).unwrap_or(line))?;
    }
    Ok(())
}

impl Exporter for TerminalExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        // Made once: a summary's tables hold a row per step (30,000 for
        // 660,000 XSpace events), and asking twice made them twice.
        let tables = report.tables_shown(self.top);
        for (i, table) in tables.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(out, "{}", super::visible(&table.title))?;
            if table.rows.is_empty() {
                writeln!(out, "  (nothing)")?;
                continue;
            }
            let (rows, omitted) = table.shown_rows(self.top);
            let (informative, rows, left_out, empty_rows) = without_empty_columns(table, rows);
            if (informative.columns.len() == 1 && !left_out.empty.is_empty()) || rows.is_empty() {
                writeln!(
                    out,
                    "  (no figure for any row; --format json has every field)"
                )?;
                continue;
            }
            let text = render(&informative, &rows, self.width);
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
            let mut said: Vec<String> = Vec::new();
            if !left_out.empty.is_empty() {
                said.push(format!(
                    "n/a for every row: {}; --format json has every field",
                    left_out.empty.join(", ").replace('_', " ")
                ));
            }
            if !left_out.constant.is_empty() {
                said.push(format!(
                    "the same in every row: {}",
                    left_out.constant.join(", ")
                ));
            }
            if !left_out.repeated.is_empty() {
                said.push(left_out.repeated.join(", "));
            }
            if !said.is_empty() {
                aside(out, &format!("(left out, {})", said.join("; ")), self.width)?;
            }
            if !empty_rows.is_empty() {
                let said = format!("(left out, n/a in every column: {})", empty_rows.join(", "));
                aside(out, &said, self.width)?;
            }
            for note in &table.notes {
                for line in paragraph(&super::visible(note), self.width) {
                    writeln!(out, "{line}")?;
                }
            }
        }
        let notes = report.notes();
        if tables.is_empty() && notes.is_empty() {
            writeln!(out, "(the input holds no memory to report)")?;
        }
        if !notes.is_empty() {
            writeln!(out)?;
        }
        // A note is prose: wrapped at the width, its lines after the first
        // indented, so no line of a CI log runs past it.
        for note in notes {
            aside(out, &note, self.width)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::One;
    use super::*;

    #[test]
    fn notes_under_a_table_wrap_at_the_width() {
        let text = "expandable_segments:True: segments grow in place instead of being made in \
                    fixed sizes, and free pages are unmapped and mapped again where needed";
        let lines = paragraph(text, 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[0].starts_with(" - expandable_segments:True:"));
        assert!(lines[1..].iter().all(|l| l.starts_with("   ")));
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words[1..].join(" "), text);
    }

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
