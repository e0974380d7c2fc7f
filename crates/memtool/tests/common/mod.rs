//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use assert_cmd::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file under `../shared/fixtures` (the reference profiles beside the
/// repository). Tests that call this are marked
/// `#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]`:
/// `build.rs` sets `shared_fixtures` when the folder is there (or the one
/// `MEMTOOL_SHARED_FIXTURES` names), so without it
/// `cargo test` lists them as ignored, and in CI (`MEMTOOL_REQUIRE_FIXTURES`)
/// its absence fails the build.
pub fn shared_fixture(rel: &str) -> PathBuf {
    let path = PathBuf::from(env!("MEMTOOL_SHARED_FIXTURES_DIR")).join(rel);
    assert!(
        path.exists(),
        "{} is missing from ../shared/fixtures (a test that needs it is not marked to be ignored without it)",
        rel
    );
    path
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

/// Runs memtool from the repository root (so paths in the output are the
/// relative ones given) and returns its stdout, asserting it exited with one
/// of `codes`.
pub fn stdout_in_repo(args: &[&str], codes: &[i32]) -> String {
    let out = memtool().current_dir(repo()).args(args).output().unwrap();
    assert!(
        out.status.code().is_some_and(|c| codes.contains(&c)),
        "memtool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A JSON group list (`[{"key": …, "bytes": …}, …]`) as bytes by key.
pub fn bytes_by_key(groups: &serde_json::Value) -> std::collections::BTreeMap<String, u64> {
    groups
        .as_array()
        .expect("a list of groups")
        .iter()
        .map(|g| {
            (
                g["key"].as_str().expect("a key").to_string(),
                g["bytes"].as_u64().expect("bytes"),
            )
        })
        .collect()
}
