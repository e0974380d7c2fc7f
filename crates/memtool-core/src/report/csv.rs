use std::io::{self, Write};

use super::{Exporter, Report};

/// The report's detail table as CSV with a header row and exact values.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        let table = report.csv_table();
        let mut writer = ::csv::Writer::from_writer(out);
        writer.write_record(&table.columns)?;
        for row in &table.rows {
            writer.write_record(row.iter().map(|c| c.exact()))?;
        }
        writer.flush()
    }
}
