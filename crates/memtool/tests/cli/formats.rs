//! Tables fit 100 columns, Markdown is tables, one vocabulary of group keys.

use super::fixture;
use crate::common::{fails, json, memtool};

#[test]
fn tables_fit_100_columns() {
    for args in [
        vec!["summary", "--all-frames"],
        vec!["peak", "--all-frames"],
    ] {
        let out = memtool()
            .args(&args)
            .arg(fixture("training.prof"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        for line in text.lines().filter(|l| !l.contains(": ")) {
            assert!(
                line.chars().count() <= 100,
                "{} chars: {line}",
                line.chars().count()
            );
        }
    }
}

#[test]
fn markdown_output_is_tables() {
    let out = memtool()
        .args(["summary", &fixture("training.prof"), "--format", "md"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("### Memories\n\n| memory | kind | peak_bytes |"),
        "{text}"
    );
    assert!(text.contains("| cpu:0 | device |"));
}

#[test]
fn group_keys_are_one_vocabulary_for_diff_and_render() {
    let one = fixture("leak1.prof");
    let two = fixture("leak2.prof");
    for key in [
        "stack",
        "user-frame",
        "shape",
        "op",
        "dtype",
        "category",
        "phase",
        "annotation",
        "stream",
        "compiled-graph",
    ] {
        let v = json(&["diff", &one, &two, "--by", key]);
        assert_eq!(v["schema"], "memtool/diff/v1", "{key}");
        let v = json(&["peak", &two, "--by", key]);
        assert_eq!(v["schema"], "memtool/peak/v1", "{key}");
        memtool()
            .args(["render", &one, "--format", "svg", "--group-by", key])
            .assert()
            .success();
    }
    for cmd in [
        vec!["diff", &one, &two, "--by"],
        vec!["peak", &one, "--by"],
        vec!["render", &one, "--group-by"],
    ] {
        let mut args = cmd.clone();
        args.push("frame");
        let e = fails(&args, 2);
        assert!(
            e.contains(
                "[possible values: stack, user-frame, shape, op, dtype, category, phase, \
                 annotation, stream, compiled-graph]"
            ),
            "{e}"
        );
    }
}
