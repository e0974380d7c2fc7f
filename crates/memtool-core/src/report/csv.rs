use std::io::{self, Write};

use super::{visible, Cell, Exporter, Report};

/// The report's detail table as CSV with a header row and exact values.
/// Text cells have their control characters made visible ([`visible`]), and
/// one that begins with `=`, `+`, `-` or `@` (an op or frame name) gets a
/// leading `'`, so a spreadsheet shows it rather than running it as a
/// formula; numbers are written as they are. A figure a table shows as
/// `n/a` is an empty field, as it is `null` (or absent) in JSON.
pub struct CsvExporter;

/// A cell as CSV writes it.
fn csv_cell(cell: &Cell) -> String {
    match cell {
        Cell::Text(text) if text == "n/a" => String::new(),
        Cell::Text(text) => {
            let text = visible(text);
            if text.starts_with(['=', '+', '-', '@']) {
                format!("'{text}")
            } else {
                text.into_owned()
            }
        }
        other => other.exact(),
    }
}

impl Exporter for CsvExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        let table = report.csv_table();
        let mut writer = ::csv::Writer::from_writer(out);
        writer.write_record(&table.columns)?;
        for row in &table.rows {
            writer.write_record(row.iter().map(csv_cell))?;
        }
        writer.flush()
    }
}
