//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use assert_cmd::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file under `../shared/fixtures` (the reference profiles beside the
/// repository). `None` when they are absent, except in CI
/// (`MEMTOOL_REQUIRE_FIXTURES=1`), where their absence fails the test.
pub fn shared_fixture(rel: &str) -> Option<PathBuf> {
    let root = repo().join("../shared/fixtures");
    if !root.is_dir() {
        assert!(
            std::env::var_os("MEMTOOL_REQUIRE_FIXTURES").is_none(),
            "../shared/fixtures is missing, and MEMTOOL_REQUIRE_FIXTURES is set"
        );
        eprintln!("skipping: ../shared/fixtures is not present");
        return None;
    }
    let path = root.join(rel);
    assert!(path.exists(), "{} is missing from ../shared/fixtures", rel);
    Some(path)
}

/// A fixture committed in this repository under `tests/`.
pub fn repo_fixture(rel: &str) -> PathBuf {
    repo().join("tests").join(rel)
}

pub fn memtool() -> Command {
    Command::cargo_bin("memtool").expect("memtool binary")
}

/// Runs memtool and parses its stdout as JSON, asserting exit code 0.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = memtool()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "memtool {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// Runs memtool expecting failure with `code`; returns stderr.
pub fn fails(args: &[&str], code: i32) -> String {
    let out = memtool().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "memtool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}
