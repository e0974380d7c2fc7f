use std::io::{self, Write};

use super::{Exporter, Report};

/// GitHub-flavoured Markdown: a heading and a table per section, for CI
/// summaries and tickets.
pub struct MarkdownExporter;

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

impl Exporter for MarkdownExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        for (i, table) in report.tables().iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            writeln!(out, "### {}\n", escape(&table.title))?;
            writeln!(out, "| {} |", table.columns.join(" | "))?;
            let align: Vec<&str> = (0..table.columns.len())
                .map(|c| {
                    let numeric = table.rows.first().is_some_and(|r| r[c].is_numeric());
                    if numeric {
                        "---:"
                    } else {
                        "---"
                    }
                })
                .collect();
            writeln!(out, "| {} |", align.join(" | "))?;
            for row in &table.rows {
                let cells: Vec<String> = row.iter().map(|c| escape(&c.human())).collect();
                writeln!(out, "| {} |", cells.join(" | "))?;
            }
            if table.omitted > 0 {
                writeln!(
                    out,
                    "\n{} more rows (see --top, or --format json)",
                    table.omitted
                )?;
            }
        }
        let notes = report.notes();
        if !notes.is_empty() {
            writeln!(out)?;
            for note in notes {
                writeln!(out, "- {}", escape(&note))?;
            }
        }
        Ok(())
    }
}
