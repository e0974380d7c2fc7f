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
            if case.message == "(no warning)" {
                assert!(warnings.is_empty(), "{path}: {warnings:?}");
            } else {
                assert!(
                    warnings.contains(&case.message.as_str()),
                    "{path}: {warnings:?}"
                );
            }
        }
    }
}

#[test]
fn the_decompression_cap_is_named_and_can_be_set() {
    // 8 MiB that start like a trace: within the default cap of 4 GiB, past
    // a cap of 4 MiB, which the message names.
    let out = memtool()
        .current_dir(repo())
        .args([
            "summary",
            "tests/broken/trace-bomb.json.gz",
            "--max-decompressed",
            "4MiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "memtool: tests/broken/trace-bomb.json.gz: decompressed size exceeds the limit of \
         4 MiB; raise it with --max-decompressed BYTES if the file is trusted\n"
    );
    // Zeros are no profile: refused from their first 64 KiB, not inflated.
    let start = std::time::Instant::now();
    let bomb = repo().join("tests/broken/bomb.gz").display().to_string();
    let stderr = common::fails(&["summary", &bomb], 2);
    assert!(stderr.contains("not a memory profile"), "{stderr}");
    assert!(start.elapsed().as_secs_f64() < 2.0);
}

#[test]
fn padding_and_a_byte_order_mark_read_as_the_profile_without_them() {
    let path = |p: &str| repo().join(p).display().to_string();
    let padded = common::json(&["summary", &path("tests/broken/nul-padded.prof.gz")]);
    let plain = common::json(&["summary", &path("tests/pprof/training.prof")]);
    for key in ["peak_bytes", "final_bytes", "allocations", "top_stacks"] {
        assert_eq!(
            padded["memories"][0][key], plain["memories"][0][key],
            "{key}"
        );
    }
    let v = common::json(&["summary", &path("tests/broken/bom.pt.trace.json")]);
    assert_eq!(v["memories"][0]["peak_bytes"], 512);
}

#[test]
fn a_file_without_read_permission_is_one_clear_error() {
    let dir = std::env::temp_dir().join(format!("memtool-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("locked.prof");
    std::fs::write(&path, b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let p = path.display().to_string();
    let out = if std::fs::read(&path).is_ok() {
        // Running as root, which permissions do not stop: memtool runs as
        // `nobody` (util-linux's setpriv), as a user would.
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(assert_cmd::cargo::cargo_bin("memtool"))
            .args(["summary", &p])
            .output()
            .expect("as root this test runs memtool through setpriv (util-linux)")
    } else {
        common::memtool().args(["summary", &p]).output().unwrap()
    };
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("memtool: {p}: permission denied (cannot read the file)\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An XSpace that defines one event metadata id as both MemoryDeallocation
/// and MemoryAllocation: its events are told apart by address, so the
/// replayed figures agree with the allocator's own. The events (see
/// `scripts/make_broken_corpus.py`): +1 KiB at 0x1000, +2 KiB at 0x2000,
/// the ambiguous one at 0x1000 (a free: 0x1000 is live), +0.5 KiB at 0x3000;
/// `bytes_allocated` after each: 1, 3, 2, 2.5 KiB.
#[test]
fn a_metadata_id_defined_twice_gives_figures_that_agree() {
    let path = repo()
        .join("tests/broken/duplicate-metadata-id.xplane.pb")
        .display()
        .to_string();
    let v = common::json(&["summary", &path]);
    let memory = &v["memories"][0];
    assert_eq!(memory["id"], "GPU_0_bfc");
    assert_eq!(memory["peak_bytes"], 3 * 1024);
    assert_eq!(memory["final_bytes"], 2560);
    assert_eq!(memory["live_bytes_at_end"], 2560);
    assert_eq!(memory["allocated_bytes"], 2560);
    assert_eq!(memory["allocations"], 3);
    assert_eq!(memory["deallocations"], 1);
    assert_eq!(
        v["warnings"].as_array().unwrap().len(),
        1,
        "{}",
        v["warnings"]
    );
}
