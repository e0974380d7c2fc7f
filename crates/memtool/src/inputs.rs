//! Reading the files named on the command line. This is the only place that
//! touches input files; the core gets bytes.

use std::io::Read;
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
    let sources = paths
        .iter()
        .map(|p| read_source(p))
        .collect::<Result<Vec<_>>>()?;
    let options = LoadOptions {
        max_decompressed: args.max_decompressed,
    };
    Ok(memtool_core::load(sources, &options)?)
}
