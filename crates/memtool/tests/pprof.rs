//! JAX device-memory profiles (pprof) against the reference numbers in
//! `../shared/fixtures/pprof/expected`: an independent protobuf decoder
//! (`reference.json`) and `go tool pprof -top` output.

mod common;

use common::{json, shared_fixture};
use serde_json::Value;

const FILES: [&str; 13] = [
    "empty.prof",
    "memory.prof",
    "memory1.prof",
    "memory2.prof",
    "memory3.prof",
    "memory4.prof",
    "memory5.prof",
    "memory6.prof",
    "memory7.prof",
    "memory8.prof",
    "memory9.prof",
    "notraceback.prof",
    "sharded.prof",
];

fn reference() -> Value {
    let path = shared_fixture("pprof/expected/reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn path(name: &str) -> String {
    shared_fixture(&format!("pprof/{name}"))
        .display()
        .to_string()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn summary_matches_the_reference_per_device() {
    let reference = reference();
    for name in FILES {
        let expected = &reference[name];
        let out = json(&["summary", &path(name)]);
        assert_eq!(out["schema"], "memtool/summary/v1");
        assert_eq!(out["inputs"][0]["format"], "pprof");
        let devices = expected["devices"].as_object().unwrap();
        let memories = out["memories"].as_array().unwrap();
        assert_eq!(memories.len(), devices.len(), "{name}: device count");
        for (device, want) in devices {
            let m = memories
                .iter()
                .find(|m| m["id"] == device.as_str())
                .unwrap_or_else(|| panic!("{name}: no memory {device}"));
            assert_eq!(m["kind"], "device");
            assert_eq!(m["peak_bytes"], want["bytes"], "{name} {device} bytes");
            assert_eq!(m["buffers"], want["buffers"], "{name} {device} buffers");
        }
        let exe = &out["inputs"][0]["executables"];
        assert_eq!(
            exe["count"], expected["executables"]["count"],
            "{name} executables"
        );
        assert_eq!(
            exe["bytes"], expected["executables"]["bytes"],
            "{name} executable bytes"
        );
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn full_stacks_match_the_reference_top_stacks() {
    let reference = reference();
    for name in FILES {
        let want = reference[name]["top_stacks"].as_array().unwrap();
        let out = json(&["summary", "--all-frames", &path(name)]);
        // Stacks summed over all devices, as the reference does.
        let mut got: std::collections::BTreeMap<String, u64> = Default::default();
        for m in out["memories"].as_array().unwrap() {
            for s in m["top_stacks"].as_array().unwrap() {
                let key = s["key"].as_str().unwrap();
                let key = if key == "<no stack>" { "" } else { key };
                *got.entry(key.to_string()).or_default() += s["bytes"].as_u64().unwrap();
            }
        }
        for w in want {
            assert_eq!(
                got.get(w["stack"].as_str().unwrap()).copied(),
                w["bytes"].as_u64(),
                "{name}: stack {}",
                w["stack"]
            );
        }
    }
}

/// `Showing nodes accounting for 1.68MB, 3.66% of 45.81MB total` → (1.68, 45.81).
fn pprof_top_totals(file: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(shared_fixture(&format!("pprof/expected/{file}"))).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap();
    let mb = |s: &str| -> f64 {
        s.trim()
            .trim_end_matches(',')
            .trim_end_matches("MB")
            .parse()
            .unwrap()
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    (mb(words[4]), mb(words[7]))
}

fn mib(bytes: &Value) -> f64 {
    (bytes.as_i64().unwrap() as f64 / (1u64 << 20) as f64 * 100.0).round() / 100.0
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn totals_agree_with_go_tool_pprof_top() {
    for (file, prof) in [
        ("memory.pprof_top.txt", "memory.prof"),
        ("memory9.pprof_top.txt", "memory9.prof"),
        ("sharded.pprof_top.txt", "sharded.prof"),
    ] {
        let (shown, total) = pprof_top_totals(file);
        let out = json(&["summary", &path(prof)]);
        let bytes: i64 = out["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["peak_bytes"].as_i64().unwrap())
            .sum();
        assert_eq!(mib(&Value::from(bytes)), total, "{prof}");
        assert_eq!(shown, total, "{prof}: pprof shows every node");
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn diff_totals_agree_with_go_tool_pprof_diff_base() {
    let (delta, base) = pprof_top_totals("diff_memory1_memory9.pprof_top.txt");
    let out = json(&["diff", &path("memory1.prof"), &path("memory9.prof")]);
    assert_eq!(out["schema"], "memtool/diff/v1");
    assert_eq!(mib(&out["total"]["delta_bytes"]), delta);
    assert_eq!(mib(&out["total"]["base_bytes"]), base);
    let reference = reference();
    assert_eq!(
        out["total"]["base_bytes"],
        reference["memory1.prof"]["buffer_bytes"]
    );
    assert_eq!(
        out["total"]["new_bytes"],
        reference["memory9.prof"]["buffer_bytes"]
    );
    // The only stack that changed is the leaking list in anotherfunc.
    let changed: Vec<&Value> = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["delta_bytes"] != 0)
        .collect();
    assert_eq!(changed.len(), 1);
    assert!(changed[0]["key"]
        .as_str()
        .unwrap()
        .starts_with("anotherfunc "));
    assert_eq!(changed[0]["delta_bytes"], out["total"]["delta_bytes"]);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_ci_gate_fails_with_exit_code_1_only_past_the_bound() {
    let (a, b) = (path("memory1.prof"), path("memory9.prof"));
    // Growth is 1,760,000 bytes = 3.66% of the base.
    let out = common::memtool()
        .args(["diff", &a, &b, "--fail-on-growth", "3%"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "growth gate FAILED: total growth +1.68 MiB (+1760000 B), +3.66% of the base 45.81 MiB \
         (48040000 B), exceeds the limit 3%"
    ));
    common::memtool()
        .args(["diff", &a, &b, "--fail-on-growth", "4%"])
        .assert()
        .code(0);
    common::memtool()
        .args(["diff", &a, &b, "--fail-on-growth", "1760000"])
        .assert()
        .code(0);
    let out = common::memtool()
        .args([
            "diff",
            &a,
            &b,
            "--fail-on-growth",
            "1759999",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gate"]["passed"], false);
    assert!(String::from_utf8_lossy(&out.stderr).contains("gate FAILED"));
    // Shrinking never fails the gate.
    common::memtool()
        .args(["diff", &b, &a, "--fail-on-growth", "0"])
        .assert()
        .code(0);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn leaks_name_anotherfunc_and_the_random_normal_line() {
    let files: Vec<String> = (1..=9).map(|i| path(&format!("memory{i}.prof"))).collect();
    let mut args = vec!["leaks"];
    args.extend(files.iter().map(String::as_str));
    let out = json(&args);
    let m = &out["memories"][0];
    assert_eq!(m["points"].as_array().unwrap().len(), 9);
    assert_eq!(m["points"][0], "memory1.prof");
    let top = &m["findings"][0];
    assert_eq!(top["growth"], "steady");
    // The user's frame: `anotherfunc`, at the line that calls jax.random.normal.
    assert!(
        top["key"]
            .as_str()
            .unwrap()
            .starts_with("anotherfunc /tmp/gen/seed002.py:23"),
        "{}",
        top["key"]
    );
    let reference = reference();
    let grown = reference["memory9.prof"]["buffer_bytes"].as_u64().unwrap()
        - reference["memory1.prof"]["buffer_bytes"].as_u64().unwrap();
    assert_eq!(top["growth_bytes"], grown);
    assert_eq!(
        m["findings"].as_array().unwrap().len(),
        1,
        "nothing else grows"
    );
    // Per-snapshot values: the list holds arrays of 10k, 20k, ... floats.
    let bytes: Vec<u64> = top["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(
        bytes,
        (1..=9u64)
            .map(|k| 40_000 * k * (k + 1) / 2)
            .collect::<Vec<_>>()
    );
    assert!(m["verdict"]
        .as_str()
        .unwrap()
        .starts_with("steady growth: +1.68 MiB over 9 snapshots"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn peak_of_a_series_is_the_largest_snapshot() {
    let files: Vec<String> = ["memory1.prof", "memory9.prof", "memory5.prof"]
        .iter()
        .map(|f| path(f))
        .collect();
    let out = json(&["peak", &files[0], &files[1], &files[2]]);
    assert_eq!(out["schema"], "memtool/peak/v1");
    let m = &out["memories"][0];
    assert_eq!(m["peak_label"], "memory9.prof");
    assert_eq!(
        m["peak_at"], 2,
        "snapshots are numbered in command-line order"
    );
    assert_eq!(m["peak_bytes"], 49_800_000);
    assert_eq!(out["overall"]["bytes"], 49_800_000);
    let by: Vec<&str> = m["breakdowns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["by"].as_str().unwrap())
        .collect();
    assert_eq!(
        by,
        ["stack", "user_frame"],
        "pprof has no shapes, ops or dtypes"
    );
    // User frames put the bytes on the user's code, not on JAX internals.
    let user = &m["breakdowns"][1]["groups"];
    assert_eq!(user[0]["key"], "func1 /tmp/gen/seed002.py:6");
    assert_eq!(user[0]["bytes"], 40_000_000);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn sharded_profiles_have_one_memory_per_device_and_an_overall_peak() {
    let out = json(&["peak", &path("sharded.prof")]);
    let ids: Vec<&str> = out["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]);
    assert_eq!(out["overall"]["bytes"], 11_534_336);
    let only = json(&["peak", &path("sharded.prof"), "--memory", "cpu:2"]);
    assert_eq!(only["memories"].as_array().unwrap().len(), 1);
    assert_eq!(only["memories"][0]["id"], "cpu:2");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn profiles_without_stacks_or_samples_are_valid_with_warnings() {
    let out = json(&["summary", &path("notraceback.prof")]);
    assert_eq!(out["memories"][0]["top_stacks"][0]["key"], "<no stack>");
    assert!(out["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["message"].as_str().unwrap().contains("no call stack")));
    let out = json(&["summary", &path("empty.prof")]);
    assert_eq!(out["memories"].as_array().unwrap().len(), 0);
    assert!(out["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("no samples"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn csv_has_a_header_and_exact_bytes() {
    let out = common::memtool()
        .args(["peak", &path("memory.prof"), "--format", "csv"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("memory,peak_at,group_by,key,bytes,requested_bytes,count,oldest_age")
    );
    let rows: Vec<&str> = lines.collect();
    assert!(
        rows.iter().any(|r| r.starts_with(
            // `peak_at` is the snapshot's number, as in JSON; a snapshot
            // records no ages.
            "cpu:0,1,user_frame,<module> /tmp/gen/seed002.py:12,4000000,4000000,1,"
        )),
        "{text}"
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn json_output_is_byte_identical_across_runs() {
    for cmd in ["summary", "peak", "leaks"] {
        let run = || {
            common::memtool()
                .args([
                    cmd,
                    &path("sharded.prof"),
                    &path("memory.prof"),
                    "--format",
                    "json",
                ])
                .output()
                .unwrap()
                .stdout
        };
        assert_eq!(run(), run(), "{cmd}");
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_profile_works_with_every_command_and_format() {
    for name in FILES {
        let p = path(name);
        for format in ["table", "json", "csv", "md"] {
            for args in [
                vec!["summary", p.as_str()],
                vec!["peak", p.as_str()],
                vec!["leaks", p.as_str()],
                vec!["diff", p.as_str(), p.as_str(), "--fail-on-growth", "0"],
            ] {
                let out = common::memtool()
                    .args(&args)
                    .args(["--format", format])
                    .output()
                    .unwrap();
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{args:?} {format}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(!out.stdout.is_empty(), "{args:?} {format}");
            }
        }
    }
}

/// `memtool leaks ARGS` in `dir`: its stderr and the series' point labels.
fn leaks_in(dir: &std::path::Path, args: &[&str]) -> (String, Vec<String>) {
    let out = common::memtool()
        .current_dir(dir)
        .arg("leaks")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let labels = doc["memories"][0]["points"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|p| p.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    (String::from_utf8(out.stderr).unwrap(), labels)
}

/// The JAX documentation's folder as `memory*.prof` expands it: `memory.prof`
/// (the first example's snapshot) before the leak series. memtool warns
/// that it is outside the series' numbering; the series alone gets no such
/// warning.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_file_outside_the_series_numbering_is_warned_of() {
    let dir = shared_fixture("pprof");
    let mut glob: Vec<String> = (1..=9).map(|i| format!("memory{i}.prof")).collect();
    glob.insert(0, "memory.prof".to_string());
    let args: Vec<&str> = glob.iter().map(String::as_str).collect();
    let (stderr, _) = leaks_in(&dir, &args);
    assert!(
        stderr.contains(
            "memory.prof is not numbered like the other files of the series \
                         (memory1.prof … memory9.prof)"
        ),
        "{stderr}"
    );
    let (stderr, _) = leaks_in(&dir, &args[1..]);
    assert!(!stderr.contains("warning"), "{stderr}");
    // A file of another program (sharded.prof: four devices, no stack in
    // common) is named as such too.
    let (stderr, _) = leaks_in(
        &dir,
        &[
            "memory1.prof",
            "memory2.prof",
            "memory3.prof",
            "sharded.prof",
        ],
    );
    assert!(
        stderr.contains("sharded.prof holds 0.0% of its bytes at call stacks the other files"),
        "{stderr}"
    );
}

/// Ten or more numbered files in a shell glob's order (`m10` before `m2`)
/// are warned of, and `--sort natural` reads them in the numbers' order.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn numbered_files_out_of_order_are_warned_of_and_sorted_naturally() {
    let dir = std::env::temp_dir().join(format!("memtool-natural-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 1..=10 {
        let source = path(&format!("memory{}.prof", i.min(9)));
        std::fs::copy(source, dir.join(format!("m{i}.prof"))).unwrap();
    }
    // The shell's order: names sorted as text.
    let mut glob: Vec<String> = (1..=10).map(|i| format!("m{i}.prof")).collect();
    glob.sort();
    assert_eq!(glob[1], "m10.prof");
    let args: Vec<&str> = glob.iter().map(String::as_str).collect();
    let (stderr, labels) = leaks_in(&dir, &args);
    assert!(
        stderr.contains(
            "the files are not in the order of the numbers in their names \
                         (m10.prof is given before m2.prof)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("--sort natural"), "{stderr}");
    assert_eq!(labels[1], "m10.prof");
    let mut sorted = args.clone();
    sorted.push("--sort");
    sorted.push("natural");
    let (stderr, labels) = leaks_in(&dir, &sorted);
    assert!(!stderr.contains("warning"), "{stderr}");
    let want: Vec<String> = (1..=10).map(|i| format!("m{i}.prof")).collect();
    assert_eq!(labels, want);
    std::fs::remove_dir_all(&dir).unwrap();
}
