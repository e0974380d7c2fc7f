//! The CLI contract shared by every subcommand: exit codes, one-line errors,
//! stdin, atomic `-o`, help with examples. Uses fixtures made by
//! `scripts/capture_jax_pprof.py` and committed under `tests/pprof`.

#[path = "../common/mod.rs"]
mod common;
mod errors;
mod formats;
mod help;
mod inputs;
mod out_of_memory;
mod output;

use flate2::read::GzDecoder;

use crate::common::{fails, repo_fixture};

fn fixture(name: &str) -> String {
    repo_fixture(&format!("pprof/{name}")).display().to_string()
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

fn raw_profile() -> Vec<u8> {
    let gz = std::fs::read(fixture("training.prof")).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut GzDecoder::new(&gz[..]), &mut raw).unwrap();
    raw
}

/// Asserts exit code 2 and a single line starting with `memtool: <path>: `.
fn one_line_error(args: &[&str], path: &str) -> String {
    let stderr = fails(args, 2);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!("memtool: {path}: ")),
        "names the file: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}
