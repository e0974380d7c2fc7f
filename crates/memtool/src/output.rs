//! Writing a report to stdout or, atomically, to a file.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use memtool_core::report::{exporter, Report};

use crate::cli::OutputArgs;

pub fn write(report: &dyn Report, args: &OutputArgs) -> Result<()> {
    let _span = memtool_core::timings::span("output");
    let exporter = exporter(args.format.into());
    match &args.output {
        None => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            exporter.export(report, &mut out)?;
            out.flush()?;
            Ok(())
        }
        Some(path) => write_atomically(path, |out| exporter.export(report, out)),
    }
}

/// Writes to a temporary file beside `path`, then renames it over `path`, so
/// a killed run or a full disk never leaves a half-written file.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.memtool-{}.tmp", std::process::id()));
    let result = (|| -> io::Result<()> {
        let file = fs::File::create(&tmp)?;
        let mut out = BufWriter::new(file);
        fill(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("{}: cannot write output", path.display()))
}
