//! Tells the integration tests whether the shared reference fixtures
//! (`../shared/fixtures` beside the repository) are present: tests that
//! compare memtool with XProf, `go tool pprof` and torch on those real
//! profiles are marked ignored, with the reason, where they are absent, so
//! `cargo test` says what it did not run instead of passing silently. In CI
//! (`MEMTOOL_REQUIRE_FIXTURES` set) their absence stops the build.
//! `MEMTOOL_SHARED_FIXTURES` names another folder that holds them.

use std::path::PathBuf;

fn main() {
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
    } else if std::env::var_os("MEMTOOL_REQUIRE_FIXTURES").is_some() {
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
