use std::io::{self, Write};

use super::{Exporter, Report};

/// Pretty-printed JSON, one document, ending in a newline.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn export(&self, report: &dyn Report, out: &mut dyn Write) -> io::Result<()> {
        report.write_json(out).map_err(io::Error::from)?;
        out.write_all(b"\n")
    }
}
