//! Errors are one line naming the file, with exit code 2; warnings go to
//! stderr in every format.

use super::{fixture, one_line_error, raw_profile, temp_dir, write};
use crate::common::{fails, json, memtool};

#[test]
fn malformed_inputs_exit_2_with_one_line_naming_the_file() {
    let dir = temp_dir("malformed");
    let gz = std::fs::read(fixture("training.prof")).unwrap();
    let raw = raw_profile();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.prof", vec![], "file is empty"),
        (
            "truncated-gzip.prof",
            gz[..gz.len() / 2].to_vec(),
            "invalid gzip: gzip stream is truncated",
        ),
        (
            "random.bin",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
            "not a memory profile",
        ),
        (
            "text.txt",
            b"hello, I am not a profile\n".to_vec(),
            "not a memory profile",
        ),
    ];
    for (name, bytes, expected) in cases {
        let p = write(&dir, name, &bytes);
        for cmd in ["summary", "peak", "leaks"] {
            let e = one_line_error(&[cmd, &p], &p);
            assert!(e.contains(expected), "{name}: {e}");
        }
    }
    // Truncated protobuf, at many points: always exit 2 with an offset, never a panic.
    // (Inside a field: training.prof's middle itself falls between two
    // top-level fields, where a cut leaves a shorter but well-formed message.)
    for cut in [7, raw.len() / 3, raw.len() / 2 + 1, raw.len() - 3] {
        let p = write(&dir, &format!("cut{cut}.prof"), &raw[..cut]);
        let e = one_line_error(&["summary", &p], &p);
        assert!(e.contains("invalid pprof profile: "), "{e}");
        assert!(
            e.contains(" (at byte "),
            "corrupt files give the offset: {e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn directories_and_missing_files_exit_2() {
    let dir = temp_dir("paths");
    let d = dir.display().to_string();
    let e = one_line_error(&["summary", &d], &d);
    assert!(e.contains(": is a directory, not a profile file"), "{e}");
    let missing = dir.join("nope.prof").display().to_string();
    let e = one_line_error(&["peak", &missing], &missing);
    assert!(e.ends_with("no such file\n"), "{e}");
    let e = one_line_error(&["diff", &fixture("leak1.prof"), &missing], &missing);
    assert!(e.contains("no such file"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_usage_exits_2() {
    fails(&["summary"], 2);
    fails(&["frobnicate"], 2);
    fails(&["summary", &fixture("leak1.prof"), "--format", "xml"], 2);
    let e = fails(
        &[
            "diff",
            &fixture("leak1.prof"),
            &fixture("leak2.prof"),
            "--fail-on-growth",
            "lots",
        ],
        2,
    );
    assert!(e.contains("neither a size"), "{e}");
}

#[test]
fn every_command_refuses_a_memory_it_does_not_have() {
    let one = fixture("leak1.prof");
    let two = fixture("leak2.prof");
    let cases: Vec<Vec<&str>> = vec![
        vec!["summary", &one],
        vec!["peak", &one],
        vec!["leaks", &one, &two],
        vec!["frag", &one],
        vec!["diff", &one, &two],
        vec!["render", &one],
        vec!["render", &one, &two],
        vec!["render", &one, &two, "--series"],
    ];
    for args in cases {
        let mut args = args.clone();
        args.extend(["--memory", "cpu:9"]);
        let out = memtool().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(out.stdout, b"", "{args:?} prints nothing");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            stderr, "memtool: no memory or module named `cpu:9` (there are: cpu:0)\n",
            "{args:?}"
        );
    }
    // The memory that is there still selects it, in every command.
    for args in [
        vec!["leaks", &one, &two, "--memory", "cpu:0"],
        vec!["frag", &one, "--memory", "cpu:0"],
        vec!["diff", &one, &two, "--memory", "cpu:0"],
    ] {
        let v = json(&args);
        assert_eq!(
            v["schema"].as_str().unwrap().split('/').nth(1),
            Some(args[0])
        );
    }
    memtool()
        .args(["render", &one, "--memory", "cpu:0", "--format", "folded"])
        .assert()
        .success();
}

#[test]
fn diff_takes_exactly_two_profiles() {
    let one = fixture("leak1.prof");
    let e = fails(&["diff", &one], 2);
    assert!(e.contains("2 values required for '<BASE> <NEW>'"), "{e}");
    let e = fails(&["diff", &one, &one, &one], 2);
    assert!(e.contains("2 values required"), "{e}");
}

/// Warnings are written to stderr in every format, never among the tables
/// or CSV records, and JSON keeps them in the document too.
#[test]
fn warnings_go_to_stderr_in_every_format() {
    let snapshot = "tests/torch/snapshot.p4.pickle";
    let warning =
        "warning: tests/torch/snapshot.p4.pickle: cuda:0: the trace starts after the program did";
    let commands: [&[&str]; 5] = [
        &["summary", snapshot],
        &["peak", snapshot],
        &["leaks", snapshot],
        &["frag", snapshot],
        &["diff", snapshot, snapshot],
    ];
    for command in commands {
        for format in ["table", "md", "csv", "json"] {
            let out = memtool()
                .current_dir(crate::common::repo())
                .args(command)
                .args(["--format", format])
                .output()
                .unwrap();
            assert!(out.status.success(), "{command:?} {format}");
            let (stdout, stderr) = (
                String::from_utf8(out.stdout).unwrap(),
                String::from_utf8(out.stderr).unwrap(),
            );
            assert!(
                stderr.lines().any(|l| l.starts_with(warning)),
                "{command:?} {format}: {stderr}"
            );
            assert!(
                !stdout.contains("warning:"),
                "{command:?} {format}: {stdout}"
            );
            if format == "json" {
                let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
                assert!(
                    doc["warnings"]
                        .to_string()
                        .contains("the trace starts after the program did"),
                    "{command:?}: {doc}"
                );
            }
        }
    }
    let page = memtool()
        .current_dir(crate::common::repo())
        .args(["render", snapshot, "--format", "folded"])
        .output()
        .unwrap();
    assert!(String::from_utf8(page.stderr)
        .unwrap()
        .lines()
        .any(|l| l.starts_with(warning)));
}
