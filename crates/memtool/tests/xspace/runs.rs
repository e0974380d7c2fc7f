//! Run directories, log directories and hosts: which files are read, and
//! that reading them on several threads gives the profile read on one.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{fixture, memory, num, path, scratch, WITH_ALLOCATOR_EVENTS};
use crate::common::{fails, json, memtool, shared_fixture};

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn reads_run_directories_and_logdirs() {
    let (cnn, bfc) = (fixture("tf_cnn"), fixture("synth_bfc_3events"));
    let logdir = scratch("logdir");
    let old = logdir.join("plugins/profile/2026_01_01_00_00_00");
    let new = logdir.join("plugins/profile/2026_02_01_00_00_00");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(&new).unwrap();
    std::fs::copy(&bfc.profile, old.join("host.xplane.pb")).unwrap();
    std::fs::copy(&cnn.profile, new.join("worker0.xplane.pb")).unwrap();
    std::fs::copy(&bfc.profile, new.join("worker1.xplane.pb")).unwrap();

    // The newest run, both hosts.
    let doc = json(&["summary", path(&logdir)]);
    let ids: Vec<&str> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["mklcpu", "GPU_0_bfc"]);
    // One host of a run directory.
    let doc = json(&["summary", path(&new), "--host", "worker0"]);
    assert_eq!(doc["memories"].as_array().unwrap().len(), 1);
    assert_eq!(
        num(&memory(&doc, "mklcpu")["peak_bytes"]),
        num(&cnn.xprof["mklcpu"]["profileSummary"]["peakStats"]["peakBytesInUse"])
    );
    let err = fails(&["summary", path(&new), "--host", "worker9"], 2);
    assert!(
        err.contains("no host `worker9`") && err.contains("worker0, worker1"),
        "{err}"
    );
    let empty = scratch("empty");
    let err = fails(&["summary", path(&empty)], 2);
    assert!(err.contains("is a directory"), "{err}");
    let _ = std::fs::remove_dir_all(&logdir);
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn reads_keras_logdirs_chooses_runs_and_labels_hosts() {
    let (cnn, bfc, keras) = (
        fixture("tf_cnn"),
        fixture("synth_bfc_3events"),
        fixture("tf_keras"),
    );
    // The layout Keras's TensorBoard callback writes: runs under train/ and
    // validation/.
    let logdir = scratch("keras");
    let run = |tag: &str, name: &str| {
        let dir = logdir.join(tag).join("plugins/profile").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let older = run("train", "2026_03_01_10_00_00");
    let two_hosts = run("train", "2026_03_02_10_00_00");
    let newest = run("validation", "2026_03_03_10_00_00");
    std::fs::copy(&keras.profile, older.join("host.xplane.pb")).unwrap();
    std::fs::copy(&bfc.profile, two_hosts.join("worker0.xplane.pb")).unwrap();
    std::fs::copy(&bfc.profile, two_hosts.join("worker1.xplane.pb")).unwrap();
    std::fs::copy(&cnn.profile, newest.join("host.xplane.pb")).unwrap();
    let logdir_arg = path(&logdir);

    // The newest run by its timestamp name, said on stderr.
    let out = memtool()
        .args(["summary", logdir_arg, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("reading run validation/2026_03_03_10_00_00 (the newest of 3"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        num(&memory(&doc, "mklcpu")["peak_bytes"]),
        num(&cnn.xprof["mklcpu"]["profileSummary"]["peakStats"]["peakBytesInUse"])
    );
    assert_eq!(memory(&doc, "mklcpu")["host"], "vm");

    // --run picks another, by its folder's name or its full name; both
    // hosts of one allocator name are labelled, the first too. The two files
    // record one host name (`synth`), so the second's file name tells it
    // apart, in its id and its host alike.
    for name in ["2026_03_02_10_00_00", "train/2026_03_02_10_00_00"] {
        let doc = json(&["summary", logdir_arg, "--run", name]);
        let ids: Vec<(&str, &str)> = doc["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["id"].as_str().unwrap(), m["host"].as_str().unwrap()))
            .collect();
        assert_eq!(
            ids,
            [
                ("GPU_0_bfc (synth)", "synth"),
                ("GPU_0_bfc (worker1)", "worker1")
            ]
        );
    }
    let err = fails(&["summary", logdir_arg, "--run", "2027_01_01_00_00_00"], 2);
    assert!(
        err.contains("no run `2027_01_01_00_00_00`")
            && err.contains("train/2026_03_01_10_00_00, train/2026_03_02_10_00_00"),
        "{err}"
    );

    // --list-runs: every run, newest last, with its hosts.
    let out = memtool()
        .args(["peak", logdir_arg, "--list-runs"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = listed.lines().skip(1).map(str::trim).collect();
    assert_eq!(
        lines,
        [
            "train/2026_03_01_10_00_00  hosts: host",
            "train/2026_03_02_10_00_00  hosts: worker0, worker1",
            "validation/2026_03_03_10_00_00  hosts: host",
        ]
    );
    let _ = std::fs::remove_dir_all(&logdir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn hosts_read_in_parallel_give_the_profile_read_one_after_another() {
    let (cnn, leak) = (fixture("tf_cnn"), fixture("tf_cnn_leak"));
    let dir = scratch("parallel-hosts");
    let a = dir.join("worker0.xplane.pb");
    let b = dir.join("worker1.xplane.pb");
    let c = dir.join("worker2.xplane.pb");
    std::fs::copy(&cnn.profile, &a).unwrap();
    std::fs::copy(&leak.profile, &b).unwrap();
    // A gzipped host is read in memory, one host after another.
    let raw = std::fs::read(&cnn.profile).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    let c_gz = dir.join("worker2.xplane.pb.gz");
    std::fs::write(&c_gz, gz.finish().unwrap()).unwrap();
    std::fs::copy(&cnn.profile, &c).unwrap();
    for command in ["summary", "peak", "leaks", "frag"] {
        let parallel = json(&[command, path(&a), path(&b), path(&c)]);
        let one_by_one = json(&[command, path(&a), path(&b), path(&c_gz)]);
        let one_by_one = one_by_one
            .to_string()
            .replace("worker2.xplane.pb.gz", "worker2.xplane.pb");
        assert_eq!(parallel.to_string(), one_by_one, "{command}");
    }
    // Three allocators named mklcpu, all on host `vm`: the first is
    // labelled with its host, the later ones with their file names.
    let doc = json(&["summary", path(&a), path(&b), path(&c)]);
    let ids: Vec<&str> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mklcpu (vm)", "mklcpu (worker1)", "mklcpu (worker2)"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Everything a profile read from `path` holds, read on `jobs` threads with
/// each XSpace line's events cut into runs of `run_bytes` (0: the default).
/// Also returns how many allocator samples (one per allocator event) it has.
fn dump_read(path: &Path, jobs: usize, run_bytes: u64) -> (String, usize) {
    let options = memtool_core::LoadOptions {
        jobs,
        run_bytes,
        ..memtool_core::LoadOptions::default()
    };
    let source =
        memtool_core::Source::from_bytes(path.display().to_string(), std::fs::read(path).unwrap());
    match memtool_core::load(vec![source], &options) {
        Ok(p) => (
            format!(
                "inputs {:?}\nwarnings {:?}\nnames {:?}\nmemories {:#?}",
                p.inputs, p.warnings, p.names, p.memories
            ),
            p.memories.iter().map(|m| m.allocator_samples.len()).sum(),
        ),
        Err(e) => (format!("error: {e}"), 0),
    }
}

/// Decoding a profile's lines in runs on several threads gives the profile
/// decoding it on one thread gives, on every XSpace of the shared fixtures
/// and of the repository: runs of a few events (every line cut, several runs
/// in flight at once) and of a few KiB, and runs shorter than an event
/// (every run but a line's first starts at a guessed offset, nearly always
/// inside an event, and finds the next one).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn decoding_in_runs_on_many_threads_gives_the_one_thread_profile() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        shared_fixture("xspace"),
        crate::common::repo_fixture("xspace"),
    ] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_str().is_some_and(|p| p.ends_with(".xplane.pb")) {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let (mut with_events, mut events) = (0, 0);
    for file in &files {
        let (one_thread, samples) = dump_read(file, 1, 0);
        with_events += usize::from(samples > 0);
        events += samples;
        for (jobs, run_bytes) in [(2, 33), (3, 50), (4, 97), (4, 200), (3, 4096), (2, 0)] {
            let (in_runs, _) = dump_read(file, jobs, run_bytes);
            assert!(
                in_runs == one_thread,
                "{}: {jobs} jobs, runs of {run_bytes} bytes: not the one-thread profile",
                file.display()
            );
        }
    }
    // The shared fixtures with allocator events, and the repository's.
    assert!(
        with_events >= WITH_ALLOCATOR_EVENTS.len() && events > 2_000,
        "{with_events} files, {events} events"
    );
}
