//! What is read: uncompressed files, stdin, committed series, both sides
//! of a diff; committed fixtures name no path of the machine that made them.

use std::io::Write;

use flate2::read::GzDecoder;

use super::{fixture, one_line_error, raw_profile, temp_dir, write};
use crate::common::{json, memtool};

#[test]
fn uncompressed_profiles_and_stdin_are_read() {
    let dir = temp_dir("stdin");
    let p = write(&dir, "raw.pb", &raw_profile());
    let from_file = json(&["summary", &p]);
    let out = memtool()
        .args(["summary", "-", "--format", "json"])
        .write_stdin(std::fs::read(fixture("training.prof")).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let from_stdin: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_stdin["inputs"][0]["path"], "<stdin>");
    assert_eq!(
        from_file["memories"][0]["top_stacks"],
        from_stdin["memories"][0]["top_stacks"]
    );
    assert_eq!(
        from_file["memories"][0]["peak_bytes"],
        from_stdin["memories"][0]["peak_bytes"]
    );
    assert!(from_file["memories"][0]["peak_bytes"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn series_from_committed_fixtures_tell_leaks_from_caches() {
    let leak: Vec<String> = (1..=4).map(|i| fixture(&format!("leak{i}.prof"))).collect();
    let mut args = vec!["leaks"];
    args.extend(leak.iter().map(String::as_str));
    let v = json(&args);
    let top = &v["memories"][0]["findings"][0];
    assert_eq!(top["growth"], "steady");
    assert!(top["key"].as_str().unwrap().starts_with("keep_history "));
    // step k appends k*1000 float32 values: 4000 bytes per step, summed.
    let bytes: Vec<u64> = top["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    assert_eq!(bytes, vec![4000, 12000, 24000, 40000]);

    let cache: Vec<String> = (1..=6)
        .map(|i| fixture(&format!("cache{i}.prof")))
        .collect();
    let mut args = vec!["leaks"];
    args.extend(cache.iter().map(String::as_str));
    let v = json(&args);
    let top = &v["memories"][0]["findings"][0];
    assert_eq!(top["growth"], "bounded");
    assert_eq!(top["stopped_at"], "cache3.prof");
    assert!(top["key"].as_str().unwrap().starts_with("cached_table "));
    let _ = std::io::stdout().flush();
}

#[test]
fn diff_reads_both_sides_in_parallel_but_reports_the_base_first() {
    let dir = temp_dir("diff-both-broken");
    let raw = raw_profile();
    // The base fails late (cut in the middle, inside a field: the middle
    // itself falls between two), the new side at once (empty): the base's
    // error is still the one reported.
    let base = write(&dir, "base.prof", &raw[..raw.len() / 2 + 1]);
    let new = write(&dir, "new.prof", b"");
    let err = one_line_error(&["diff", &base, &new], &base);
    assert!(err.contains("invalid pprof"), "{err}");
    // Both sides good: the same result as reading them one after the other.
    let good = fixture("training.prof");
    let both = json(&["diff", &good, &good]);
    assert_eq!(both["total"]["base_bytes"], 3735552, "{both}");
    assert_eq!(both["total"]["delta_bytes"], 0, "{both}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Committed fixtures name their frames relative to the checkout and the
/// virtualenv (`scripts/…`, `venv/lib/pythonX.Y/site-packages/…`), never by a
/// path of the machine that made them: the capture scripts pass what they
/// write through `scripts/relativize_fixture_paths.py`.
#[test]
fn committed_fixtures_carry_no_absolute_path_of_the_machine_that_made_them() {
    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&crate::common::repo().join("tests"), &mut files);
    walk(&crate::common::repo().join("examples"), &mut files);
    assert!(files.len() > 40, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let mut text = bytes.clone();
        if bytes.starts_with(&[0x1f, 0x8b]) {
            // Broken ones too (as far as they decompress), but not past 1 MiB
            // of the decompression bomb (zeros).
            let mut raw = Vec::new();
            let mut gz = std::io::Read::take(GzDecoder::new(&bytes[..]), 1 << 20);
            let _ = std::io::Read::read_to_end(&mut gz, &mut raw);
            text.extend_from_slice(&raw);
        }
        for prefix in ["/work/", "/tmp/", "/home/", "/root/"] {
            assert!(
                !text.windows(prefix.len()).any(|w| w == prefix.as_bytes()),
                "{} holds a path under {prefix}: rewrite it with scripts/relativize_fixture_paths.py",
                path.display()
            );
        }
    }
}
