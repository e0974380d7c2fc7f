//! Writing a report to stdout or, atomically, to a file.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use memtool_core::report::{exporter, Report};

use crate::cli::OutputArgs;

/// Writes `report` in the format and to the place `args` name.
pub fn write(report: &dyn Report, args: &OutputArgs) -> Result<()> {
    let _span = memtool_core::timings::span("output");
    let exporter = exporter(args.format.into());
    write_to(args.output.as_deref(), |out| exporter.export(report, out))
}

/// Whether output for `-o path` goes to standard output: no `-o`, or `-o -`.
pub fn is_stdout(path: Option<&Path>) -> bool {
    path.is_none_or(|p| p.as_os_str() == "-")
}

/// Writes what `fill` writes to `path` (see [`is_stdout`]), the one way every
/// command's output leaves memtool.
pub fn write_to(
    path: Option<&Path>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    match path {
        Some(path) if !is_stdout(Some(path)) => write_atomically(path, fill),
        _ => {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            fill(&mut out)?;
            out.flush()?;
            Ok(())
        }
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
