//! Results that leave memtool for other tools: `peak`/`summary --format
//! pprof` read back by memtool and by `go tool pprof`, and `render --format
//! perfetto` parsed back as the trace importers read it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Each memory's peak bytes and buffers, as `peak --format json` gives them.
fn peaks(file: &Path) -> BTreeMap<String, (u64, u64)> {
    let report = json(&["peak", file.to_str().unwrap()]);
    report["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                (
                    m["peak_bytes"].as_u64().unwrap(),
                    m["buffers"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// A scratch folder of this test's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-exports-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `COMMAND file --format pprof -o out`, checked to succeed; the bytes written.
fn pprof_of(command: &str, file: &Path, out: &Path) -> Vec<u8> {
    let run = memtool()
        .args([command, file.to_str().unwrap(), "--format", "pprof", "-o"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{command} {}: {}",
        file.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.stdout.is_empty());
    std::fs::read(out).unwrap()
}

/// Writes each file's peak as pprof and reads it back: the same memories
/// with the same peak bytes and buffers; `summary` writes the same bytes.
fn pprof_reads_back(files: &[PathBuf], dir: &Path) {
    for (i, file) in files.iter().enumerate() {
        let out = dir.join(format!("{i}.pb.gz"));
        let bytes = pprof_of("peak", file, &out);
        assert_eq!(&bytes[..2], b"\x1f\x8b", "{}: gzipped", file.display());
        let expected = peaks(file);
        assert_eq!(
            peaks(&out),
            expected,
            "{}: the pprof profile read back",
            file.display()
        );
        let summary = pprof_of("summary", file, &dir.join(format!("{i}.summary.pb.gz")));
        assert_eq!(
            summary,
            bytes,
            "{}: summary and peak differ",
            file.display()
        );
    }
}

fn repo_profiles() -> Vec<PathBuf> {
    vec![
        repo().join("examples/jax_training.prof"),
        repo_fixture("pprof/training.prof"),
        repo_fixture("pprof/sharded.prof"),
        repo_fixture("torch/snapshot.p4.pickle"),
    ]
}

fn shared_profiles() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (dir, suffix) in [("pprof", ".prof"), ("xspace", ".xplane.pb")] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(shared_fixture(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        found.sort();
        assert!(!found.is_empty(), "no {suffix} under {dir}");
        files.extend(found);
    }
    files.push(shared_fixture(
        "torch/torch_cpu_transformer.snapshot.pickle",
    ));
    files.push(shared_fixture(
        "torch/torch_cpu_transformer.pt.trace.json.gz",
    ));
    files
}

#[test]
fn pprof_of_the_repositorys_profiles_reads_back_with_the_same_peaks() {
    let dir = scratch("repo");
    pprof_reads_back(&repo_profiles(), &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn pprof_of_every_shared_profile_reads_back_with_the_same_peaks() {
    let dir = scratch("shared");
    pprof_reads_back(&shared_profiles(), &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The bytes `go tool pprof -top` counts in `profile`, of the samples whose
/// `device` label matches `device` (every sample for `None`): its "Showing
/// nodes accounting for N" with no node dropped, in bytes.
fn go_pprof_bytes(profile: &Path, device: Option<&str>) -> u64 {
    let mut command = std::process::Command::new("go");
    command.args(["tool", "pprof", "-top", "-unit=byte", "-nodefraction=0"]);
    if let Some(device) = device {
        command.arg(format!("-tagfocus=device=^{}$", regex_escape(device)));
    }
    let out = command.arg(profile).output().expect("go runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof {}: {}",
        profile.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let showing = text
        .lines()
        .find_map(|l| l.strip_prefix("Showing nodes accounting for "))
        .unwrap_or_else(|| panic!("go tool pprof -top printed no total:\n{text}"));
    let figure = showing.split(',').next().unwrap();
    figure
        .trim_end_matches('B')
        .parse()
        .unwrap_or_else(|_| panic!("not bytes: {figure}"))
}

fn regex_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `go tool pprof -top` counts each memory's peak in the samples labelled
/// with it, and every memory's together in the whole profile.
fn go_pprof_agrees(files: &[PathBuf], dir: &Path) {
    for (i, file) in files.iter().enumerate() {
        let out = dir.join(format!("{i}.pb.gz"));
        pprof_of("peak", file, &out);
        let expected = peaks(file);
        for (memory, &(bytes, _)) in &expected {
            assert_eq!(
                go_pprof_bytes(&out, Some(memory)),
                bytes,
                "{}: {memory}",
                file.display()
            );
        }
        let total: u64 = expected.values().map(|&(bytes, _)| bytes).sum();
        assert_eq!(go_pprof_bytes(&out, None), total, "{}", file.display());
    }
}

#[test]
#[cfg_attr(
    not(go_pprof),
    ignore = "needs `go` on PATH (apt-get install golang-go; .ci/run installs it)"
)]
fn go_tool_pprof_reads_the_repositorys_profiles_peaks() {
    let dir = scratch("go-repo");
    go_pprof_agrees(&repo_profiles(), &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(
    not(all(go_pprof, shared_fixtures)),
    ignore = "needs `go` on PATH (apt-get install golang-go) and ../shared/fixtures"
)]
fn go_tool_pprof_reads_every_shared_profiles_peaks() {
    let dir = scratch("go-shared");
    // Empty profiles have no memory and no total to compare.
    let files: Vec<PathBuf> = shared_profiles()
        .into_iter()
        .filter(|f| !f.ends_with("empty.prof"))
        .collect();
    go_pprof_agrees(&files, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Frames keep their function, file and line: `go tool pprof` shows the
/// profile's own stacks, as it does reading the JAX profile itself (with
/// `<module>` kept, not demangled into `<unknown>`).
#[test]
#[cfg_attr(
    not(go_pprof),
    ignore = "needs `go` on PATH (apt-get install golang-go; .ci/run installs it)"
)]
fn go_tool_pprof_shows_the_profiles_frames() {
    let dir = scratch("go-frames");
    let file = repo().join("examples/jax_training.prof");
    let out = dir.join("peak.pb.gz");
    pprof_of("peak", &file, &out);
    let ours = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-nodefraction=0"])
        .arg(&out)
        .output()
        .unwrap();
    let theirs = std::process::Command::new("go")
        .args([
            "tool",
            "pprof",
            "-top",
            "-nodefraction=0",
            "-sample_index=space",
            // JAX gives each function a system name, which pprof would
            // demangle (`<module>` into `<unknown>`); memtool gives none.
            "-symbolize=none",
        ])
        .arg(&file)
        .output()
        .unwrap();
    // The function rows (flat, cum, name), without the header lines that
    // name the file.
    let rows = |out: &std::process::Output| -> Vec<String> {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut rows: Vec<String> = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .skip(1)
            .map(str::to_string)
            .collect();
        rows.sort();
        rows
    };
    assert!(!rows(&theirs).is_empty());
    assert_eq!(rows(&ours), rows(&theirs));
    assert!(!rows(&ours).iter().any(|r| r.contains("<unknown>")));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `render --format perfetto` of `file`, parsed.
fn perfetto(file: &Path) -> Value {
    let out = memtool()
        .args(["render", file.to_str().unwrap(), "--format", "perfetto"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON document")
}

/// A trace holds, per memory, a named process with a total counter and a
/// group counter at the same timestamps, the groups adding up to the total
/// at each, in time order and at most 1000 of each (the page's columns); the
/// peak instant sits where the total counter reaches the peak `peak` reports;
/// steps are instants. Returns how many step instants there were.
fn check_trace(file: &Path) -> usize {
    let trace = perfetto(file);
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let expected = peaks(file);
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    for event in events {
        assert_eq!(event["tid"], 1, "{event}");
        if event["ph"] == "M" && event["name"] == "process_name" {
            let pid = event["pid"].as_u64().unwrap();
            names.insert(pid, event["args"]["name"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(
        names.len(),
        expected.len(),
        "{}: one process per memory",
        file.display()
    );
    let mut steps = 0;
    for (&pid, name) in &names {
        let memory = expected
            .keys()
            .find(|id| name == *id || name.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{name} names no memory of {expected:?}"));
        let (peak_bytes, _) = expected[memory];
        let mine: Vec<&Value> = events.iter().filter(|e| e["pid"] == pid).collect();
        let counter = |total: bool| -> Vec<(f64, Vec<u64>)> {
            mine.iter()
                .filter(|e| {
                    let name = e["name"].as_str().unwrap();
                    e["ph"] == "C"
                        && if total {
                            name == "live bytes"
                        } else {
                            name.starts_with("live bytes by ")
                        }
                })
                .map(|e| {
                    let values = e["args"]
                        .as_object()
                        .unwrap()
                        .values()
                        .map(|v| v.as_u64().unwrap())
                        .collect();
                    (e["ts"].as_f64().unwrap(), values)
                })
                .collect()
        };
        let totals: Vec<(f64, u64)> = counter(true)
            .into_iter()
            .map(|(ts, v)| {
                assert_eq!(v.len(), 1, "{name}: one total");
                (ts, v[0])
            })
            .collect();
        let groups = counter(false);
        assert!(
            !totals.is_empty() && totals.len() <= 1000,
            "{name}: {} columns",
            totals.len()
        );
        assert!(
            totals.windows(2).all(|w| w[0].0 <= w[1].0),
            "{name}: out of order"
        );
        assert!(
            totals.iter().all(|&(ts, _)| ts >= 0.0),
            "{name}: before the start"
        );
        // Every group counter event goes with the total at its timestamp.
        assert_eq!(groups.len(), totals.len(), "{name}");
        for ((ts, total), (group_ts, values)) in totals.iter().zip(&groups) {
            assert_eq!(ts, group_ts);
            assert_eq!(values.iter().sum::<u64>(), *total, "{name} at {ts}");
        }
        let peaks: Vec<&&Value> = mine
            .iter()
            .filter(|e| e["ph"] == "i" && e["name"].as_str().unwrap().starts_with("peak "))
            .collect();
        assert_eq!(peaks.len(), 1, "{name}: one peak instant");
        let peak = peaks[0];
        assert_eq!(peak["s"], "p");
        assert_eq!(peak["args"]["bytes"].as_u64(), Some(peak_bytes), "{name}");
        let peak_ts = peak["ts"].as_f64().unwrap();
        let at_peak: Vec<u64> = totals
            .iter()
            .filter(|&&(ts, _)| ts == peak_ts)
            .map(|&(_, v)| v)
            .collect();
        assert_eq!(
            at_peak,
            [peak_bytes],
            "{name}: the total counter at the peak"
        );
        assert_eq!(
            totals.iter().map(|&(_, v)| v).max(),
            Some(peak_bytes),
            "{name}"
        );
        steps += mine
            .iter()
            .filter(|e| e["ph"] == "i" && e["name"].as_str().unwrap().starts_with("step "))
            .count();
    }
    steps
}

#[test]
fn perfetto_trace_of_a_snapshot_adds_up() {
    check_trace(&repo_fixture("torch/snapshot.p4.pickle"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn perfetto_traces_of_snapshots_traces_and_xspaces_add_up() {
    check_trace(&shared_fixture(
        "torch/torch_cpu_transformer.snapshot.pickle",
    ));
    check_trace(&shared_fixture(
        "torch/transformer_nuggets_mini_snapshot.pickle",
    ));
    check_trace(&shared_fixture("xspace/jax_transformer_small.xplane.pb"));
    check_trace(&shared_fixture("xspace/xprof_gpu_multi_worker.xplane.pb"));
    // Six `train` steps: each begins, and the last ends.
    assert_eq!(check_trace(&shared_fixture("xspace/tf_cnn.xplane.pb")), 7);
    assert!(
        check_trace(&shared_fixture(
            "torch/torch_cpu_transformer.pt.trace.json.gz"
        )) > 0
    );
}

/// Binary and trace output never scrolls through a terminal; commands with
/// no live set at a peak refuse pprof before reading anything.
#[test]
fn pprof_and_perfetto_refuse_a_terminal_and_pprof_other_commands() {
    let bin = assert_cmd::cargo::cargo_bin("memtool");
    let training = repo_fixture("pprof/training.prof");
    for (args, message) in [
        (
            "peak --format pprof",
            "peak writes a gzipped pprof profile, not text for a terminal; give -o peak.pb.gz",
        ),
        (
            "summary --format pprof",
            "summary writes a gzipped pprof profile, not text for a terminal; give -o summary.pb.gz",
        ),
        (
            "render --format perfetto",
            "render writes a Perfetto trace, not text for a terminal; give -o trace.json",
        ),
    ] {
        let out = std::process::Command::new("script")
            .args(["-qec"])
            .arg(format!("{} {args} {}", bin.display(), training.display()))
            .arg("/dev/null")
            .output()
            .expect("script (util-linux) runs");
        assert_eq!(out.status.code(), Some(2), "{args}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("memtool: {message} (or redirect stdout)")
        );
    }
    for command in ["leaks", "frag", "oom"] {
        let stderr = fails(&[command, "no-such-file.prof", "--format", "pprof"], 2);
        assert_eq!(
            stderr.trim(),
            "memtool: --format pprof is for peak and summary (what was live at each peak); \
             use table, json, csv or md here"
        );
    }
    let piped = memtool()
        .args(["peak", training.to_str().unwrap(), "--format", "pprof"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert_eq!(&piped.stdout[..2], b"\x1f\x8b");
}
