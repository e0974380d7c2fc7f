//! Reading the files named on the command line. This is the only place that
//! touches input files; the core gets bytes.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use memtool_core::model::Profile;
use memtool_core::{LoadOptions, Source};

use crate::cli::ReadArgs;

/// Reads one input: a file path, or `-` for standard input.
pub fn read_source(path: &str) -> Result<Source> {
    let bytes = if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("<stdin>: cannot read standard input")?;
        bytes
    } else {
        let p = Path::new(path);
        if p.is_dir() {
            bail!("{path}: is a directory, not a profile file");
        }
        std::fs::read(p).map_err(|e| anyhow::anyhow!("{path}: {}", describe_io(&e)))?
    };
    let shown = if path == "-" { "<stdin>" } else { path };
    Ok(Source {
        path: shown.to_string(),
        bytes,
    })
}

fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (cannot read the file)".to_string()
        }
        _ => format!("cannot read: {e}"),
    }
}

/// Reads the inputs of one command into one profile (a series when several).
pub fn load(paths: &[String], args: &ReadArgs) -> Result<Profile> {
    if paths.iter().filter(|p| *p == "-").count() > 1 {
        bail!("standard input (-) can be given only once");
    }
    let read = memtool_core::timings::span("read files");
    let sources = paths
        .iter()
        .map(|p| read_source(p))
        .collect::<Result<Vec<_>>>()?;
    drop(read);
    let options = LoadOptions {
        max_decompressed: args.max_decompressed,
    };
    let total: usize = sources.iter().map(|s| s.bytes.len()).sum();
    let progress = Progress::start(total, sources.len());
    let profile = memtool_core::timings::time("parse", || memtool_core::load(sources, &options));
    progress.finish();
    Ok(profile?)
}

/// A one-line status on stderr while large inputs are parsed, only when
/// stderr is a terminal (never in CI logs or pipes).
struct Progress {
    shown: bool,
}

impl Progress {
    const THRESHOLD: usize = 32 << 20;

    fn start(bytes: usize, files: usize) -> Progress {
        let shown = bytes >= Self::THRESHOLD && std::io::stderr().is_terminal();
        if shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "memtool: parsing {} in {files} file(s)…",
                memtool_core::report::units::bytes(bytes as u64)
            );
            let _ = err.flush();
        }
        Progress { shown }
    }

    fn finish(self) {
        if self.shown {
            // Erase the status line.
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}
