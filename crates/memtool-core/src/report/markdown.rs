use std::io::{self, Write};

use super::fit::fit;
use super::{Exporter, Report};

/// GitHub-flavoured Markdown: a heading and a table per section, for CI
/// summaries and tickets.
#[derive(Default)]
pub struct MarkdownExporter {
    /// Rows shown per ranked table; `None` for all.
    pub top: Option<usize>,
    /// Characters a table's text columns may take together with the
    /// numbers, as in a terminal; `None` leaves labels whole.
    pub width: Option<usize>,
}

fn escape(text: &str) -> String {
    super::visible(text)
        .replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Exporter for MarkdownExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        // Made once, and only the rows shown where a report can leave
        // the others out.
        let tables = report.tables_shown(self.top);
        for (i, table) in tables.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(out, "### {}\n", escape(&table.title))?;
            writeln!(out, "| {} |", table.columns.join(" | "))?;
            let align: Vec<&str> = table
                .numeric_columns()
                .into_iter()
                .map(|numeric| if numeric { "---:" } else { "---" })
                .collect();
            writeln!(out, "| {} |", align.join(" | "))?;
            let (rows, omitted) = table.shown_rows(self.top);
            for row in fit(table, rows, self.width).cells {
                let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
                writeln!(out, "| {} |", cells.join(" | "))?;
            }
            if omitted > 0 {
                writeln!(out, "\n{omitted} more rows (see --top, or --format json)")?;
            }
            if !table.notes.is_empty() {
                writeln!(out)?;
                for note in &table.notes {
                    writeln!(out, "- {}", escape(note))?;
                }
            }
        }
        let notes = report.notes();
        if tables.is_empty() && notes.is_empty() {
            // The warnings saying why are on stderr; the document is not empty.
            writeln!(out, "(the input holds no memory to report)")?;
        }
        if !notes.is_empty() {
            writeln!(out)?;
            for note in notes {
                writeln!(out, "- {}", escape(&note))?;
            }
        }
        Ok(())
    }
}
