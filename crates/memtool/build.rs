//! Tells the integration tests whether the shared reference fixtures
//! (`../shared/fixtures` beside the repository) are present: tests that
//! compare memtool with XProf, `go tool pprof` and torch on those real
//! profiles are marked ignored, with the reason, where they are absent, so
//! `cargo test` says what it did not run instead of passing silently. In CI
//! (`MEMTOOL_REQUIRE_FIXTURES` set) their absence stops the build.
//! `MEMTOOL_SHARED_FIXTURES` names another folder that holds them.
//!
//! Likewise `go` (Debian's `golang-go`), whose `go tool pprof` reads the
//! profiles `--format pprof` writes: tests that run it are ignored, with the
//! reason, where it is not on `PATH`, and its absence stops the build where
//! `MEMTOOL_REQUIRE_GO` is set (CI, which installs it).

use std::path::{Path, PathBuf};

fn main() {
    go_pprof();
    println!("cargo::rustc-check-cfg=cfg(shared_fixtures)");
    println!("cargo::rerun-if-env-changed=MEMTOOL_REQUIRE_FIXTURES");
    println!("cargo::rerun-if-env-changed=MEMTOOL_SHARED_FIXTURES");
    let fixtures = std::env::var_os("MEMTOOL_SHARED_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures")
        });
    println!("cargo::rerun-if-changed={}", fixtures.display());
    println!(
        "cargo::rustc-env=MEMTOOL_SHARED_FIXTURES_DIR={}",
        fixtures.display()
    );
    if fixtures.is_dir() {
        println!("cargo::rustc-cfg=shared_fixtures");
        return;
    }
    // A folder that appears later is seen by the next build even when its
    // modification time is older than this run (a copy that keeps times, a
    // move): a path that never exists is always out of date, so this script
    // runs again on every build until the folder is there. (The tests also
    // check at run time that the folder is as this script saw it.)
    println!(
        "cargo::rerun-if-changed={}",
        fixtures.join(".memtool-never-exists").display()
    );
    if std::env::var_os("MEMTOOL_REQUIRE_FIXTURES").is_some() {
        panic!(
            "{} is missing, and MEMTOOL_REQUIRE_FIXTURES is set",
            fixtures.display()
        );
    } else {
        println!(
            "cargo::warning={} is missing: the tests against the reference tools on real \
             profiles are ignored (cargo test lists them)",
            fixtures.display()
        );
    }
}

/// Sets `go_pprof` when `go` is on `PATH`, and runs again when it appears
/// or goes (a directory of `PATH` changes).
fn go_pprof() {
    println!("cargo::rustc-check-cfg=cfg(go_pprof)");
    println!("cargo::rerun-if-env-changed=MEMTOOL_REQUIRE_GO");
    println!("cargo::rerun-if-env-changed=PATH");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for dir in &dirs {
        if dir.is_dir() {
            println!("cargo::rerun-if-changed={}", dir.display());
        }
    }
    let go = dirs.iter().map(|d| d.join("go")).find(|p| is_executable(p));
    if go.is_some() {
        println!("cargo::rustc-cfg=go_pprof");
    } else if std::env::var_os("MEMTOOL_REQUIRE_GO").is_some() {
        panic!("`go` is not on PATH (apt-get install golang-go), and MEMTOOL_REQUIRE_GO is set");
    } else {
        println!(
            "cargo::warning=`go` is not on PATH: the tests that read memtool's pprof output \
             with `go tool pprof` are ignored (apt-get install golang-go)"
        );
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
