//! The corpus of broken inputs in `tests/broken` (made by
//! `scripts/make_broken_corpus.py`): each gives exactly its expected line from
//! `tests/broken/expected.tsv`, for every subcommand, with no panic.

mod common;

use common::{memtool, repo};

struct Case {
    file: String,
    code: i32,
    message: String,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(repo().join("tests/broken/expected.tsv")).unwrap();
    let cases: Vec<Case> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            Case {
                file: parts.next().unwrap().to_string(),
                code: parts.next().unwrap().parse().unwrap(),
                message: parts.next().unwrap().to_string(),
            }
        })
        .collect();
    // Every file in the corpus has an expectation.
    let mut files: Vec<String> = std::fs::read_dir(repo().join("tests/broken"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "expected.tsv")
        .collect();
    files.sort();
    let mut listed: Vec<String> = cases.iter().map(|c| c.file.clone()).collect();
    listed.sort();
    assert_eq!(files, listed, "tests/broken and expected.tsv disagree");
    cases
}

#[test]
fn each_broken_input_gives_its_expected_line() {
    for case in cases() {
        let path = format!("tests/broken/{}", case.file);
        for cmd in ["summary", "peak", "leaks"] {
            let out = memtool()
                .current_dir(repo())
                .args([cmd, &path])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(case.code), "{cmd} {path}: {stderr}");
            if case.code == 2 {
                assert_eq!(
                    stderr,
                    format!("memtool: {path}: {}\n", case.message),
                    "{cmd} {path}"
                );
            }
        }
        if case.code == 0 {
            let v = common::json(&["summary", &repo().join(&path).display().to_string()]);
            let warnings: Vec<&str> = v["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["message"].as_str().unwrap())
                .collect();
            assert!(
                warnings.contains(&case.message.as_str()),
                "{path}: {warnings:?}"
            );
        }
    }
}

#[test]
fn a_raised_limit_lets_a_trusted_large_file_through() {
    // The bomb is 300 MiB of zeros: past the default cap, and not a profile.
    let out = memtool()
        .current_dir(repo())
        .args([
            "summary",
            "tests/broken/bomb.gz",
            "--max-decompressed",
            "400MiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a memory profile"), "{stderr}");
}

#[test]
fn a_file_without_read_permission_is_one_clear_error() {
    let dir = std::env::temp_dir().join(format!("memtool-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("locked.prof");
    std::fs::write(&path, b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&path).is_ok() {
        // Running as root: permissions do not apply, nothing to check.
        eprintln!("skipping: this user can read a mode-000 file (root)");
        return;
    }
    let p = path.display().to_string();
    let stderr = common::fails(&["summary", &p], 2);
    assert_eq!(
        stderr,
        format!("memtool: {p}: permission denied (cannot read the file)\n")
    );
}
