//! Golden terminal tables for the committed fixtures (insta snapshots under
//! `snapshots/`). Review a changed snapshot as you would a changed UI.

mod common;

use common::{memtool, repo_fixture};

fn run(args: &[&str]) -> String {
    let out = memtool()
        .current_dir(common::repo())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn summary_table() {
    assert!(repo_fixture("pprof/training.prof").exists());
    insta::assert_snapshot!(run(&["summary", "tests/pprof/training.prof"]));
}

#[test]
fn peak_table_of_a_sharded_profile() {
    insta::assert_snapshot!(run(&[
        "peak",
        "tests/pprof/sharded.prof",
        "--memory",
        "cpu:0"
    ]));
}

#[test]
fn leaks_table() {
    insta::assert_snapshot!(run(&[
        "leaks",
        "tests/pprof/cache1.prof",
        "tests/pprof/cache2.prof",
        "tests/pprof/cache3.prof",
        "tests/pprof/cache4.prof",
        "tests/pprof/cache5.prof",
        "tests/pprof/cache6.prof",
    ]));
}

#[test]
fn diff_table() {
    insta::assert_snapshot!(run(&[
        "diff",
        "tests/pprof/leak1.prof",
        "tests/pprof/leak4.prof",
        "--fail-on-growth",
        "1MiB"
    ]));
}

#[test]
fn diff_markdown() {
    insta::assert_snapshot!(run(&[
        "diff",
        "tests/pprof/leak1.prof",
        "tests/pprof/leak4.prof",
        "--format",
        "md"
    ]));
}
