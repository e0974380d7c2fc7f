//! Words that say what the file shows: which of "the recording started
//! late" and "the blocks were live before it" a snapshot shows, tied peaks
//! and breakdowns that do not add up to the peak said in their own table,
//! every file of a series labelled, and hosts of one machine told apart.

mod common;

use common::{json, shared_fixture};
use serde_json::Value;

fn stderr_of(args: &[&str]) -> String {
    let out = common::memtool().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = common::memtool().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A snapshot whose every free has its allocation lost nothing: its blocks
/// from before were live when recording began, which is no ring buffer.
/// One with frees of unseen allocations says the trace starts late.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn live_before_recording_is_not_called_a_ring_buffer() {
    let forward = shared_fixture("torch/silmont2000_memory_forward_fp32_128.pickle");
    let stderr = stderr_of(&["summary", forward.to_str().unwrap()]);
    assert!(
        stderr.contains("cuda:0: 137 blocks live at the end were allocated before recording began"),
        "{stderr}"
    );
    assert!(!stderr.contains("ring buffer"), "{stderr}");
    let bcrafton = shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let stderr = stderr_of(&["summary", bcrafton.to_str().unwrap()]);
    assert!(
        stderr.contains("the trace starts after the program did"),
        "{stderr}"
    );
}

/// The peak of a training loop is often reached once per step: JSON says
/// how many moments reach it, the Peaks table (text and Markdown) says so
/// under it, and the page among the memory's facts.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_tied_peak_says_so_in_its_table() {
    let file = shared_fixture("torch/torch_cpu_transformer.snapshot.pickle");
    let file = file.to_str().unwrap();
    let doc = json(&["peak", file]);
    let m = &doc["memories"][0];
    // Three training iterations of the same work, each reaching the peak.
    assert_eq!(m["peak_moments"], 3, "{}", m["peak_label"]);
    let table = stdout_of(&["peak", file]);
    let peaks = &table[..table.find("\n\n").unwrap()];
    assert!(
        peaks.contains("device:0: the peak is tied — 3 separate moments reach 30.56 MiB"),
        "{peaks}"
    );
    // Markdown says it under the table, the page among the memory's facts;
    // CSV's rows are the live set's groups, with no place for it.
    let md = stdout_of(&["peak", file, "--format", "md"]);
    assert!(
        md.contains("- device:0: the peak is tied — 3 separate moments reach 30.56 MiB"),
        "{md}"
    );
    let page = stdout_of(&["render", file]);
    assert!(
        page.contains(
            "<dt>peak reached</dt><dd>3 separate times (the peak is tied); the chart marks \
             the first</dd>"
        ),
        "no tie on the page"
    );
    // A peak reached once has no such field.
    let once = shared_fixture("xspace/synth_bfc_3events.xplane.pb");
    assert!(json(&["peak", once.to_str().unwrap()])["memories"][0]
        .get("peak_moments")
        .is_none());
}

/// On synth_bfc_3events the allocator counts 1.91 KiB no recorded event
/// explains: each breakdown of the live set says what share of the peak
/// its rows cover, under its own table.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_breakdown_short_of_the_peak_says_so_in_its_table() {
    let file = shared_fixture("xspace/synth_bfc_3events.xplane.pb");
    let file = file.to_str().unwrap();
    let doc = json(&["peak", file, "--by", "op"]);
    let m = &doc["memories"][0];
    let peak = m["peak_bytes"].as_u64().unwrap();
    let unexplained: u64 = m["at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["op"] == "<in use by the allocator's count, not in any recorded event>")
        .map(|r| r["bytes"].as_u64().unwrap())
        .sum();
    assert!(unexplained > 0);
    let covered = (peak - unexplained) as f64 * 100.0 / peak as f64;
    let table = stdout_of(&["peak", file, "--by", "op", "--width", "200"]);
    let by_op = &table[table.find("Live at peak by op —").unwrap()..];
    let want = format!("these rows add up to {covered:.1}% of the");
    assert!(by_op.contains(&want), "{want}\n{by_op}");
}

/// Two snapshot files of one device: both labelled with their file, the
/// first too.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_file_of_a_snapshot_series_is_labelled() {
    let a = shared_fixture("torch/silmont2000_memory_forward_fp32_128.pickle");
    let b = shared_fixture("torch/silmont2000_memory_forward_bf16_128.pickle");
    let doc = json(&["summary", a.to_str().unwrap(), b.to_str().unwrap()]);
    let mut ids: Vec<&str> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "cuda:0 (silmont2000_memory_forward_bf16_128.pickle)",
            "cuda:0 (silmont2000_memory_forward_fp32_128.pickle)"
        ]
    );
}

/// A Keras logdir holds `train/` and `validation/` runs, each a file named
/// after the one machine (`vm.xplane.pb`, host `vm`): their allocators are
/// told apart, and each memory's `host` is the label its id carries.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn two_runs_of_one_machine_are_told_apart_by_id_and_host() {
    let dir = std::env::temp_dir().join(format!("memtool-keras-{}", std::process::id()));
    let mut files = Vec::new();
    for (tag, fixture) in [("train", "tf_keras"), ("validation", "tf_cnn")] {
        let run = dir.join(tag).join("plugins/profile/2024_01_01_00_00_00");
        std::fs::create_dir_all(&run).unwrap();
        let file = run.join("vm.xplane.pb");
        std::fs::copy(
            shared_fixture(&format!("xspace/{fixture}.xplane.pb")),
            &file,
        )
        .unwrap();
        files.push(file.display().to_string());
    }
    let doc = json(&["summary", &files[0], &files[1]]);
    let memories: Vec<(String, String)> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m: &Value| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["host"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        memories,
        [
            ("mklcpu (vm)".to_string(), "vm".to_string()),
            (
                "mklcpu (validation/vm)".to_string(),
                "validation/vm".to_string()
            )
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A row that folds several memories into one gives their totals and says
/// so: `+N small (totals)` as `+N more (totals)` does, in `summary` and
/// `peak` (the small row gave the largest of their peaks, unlabelled).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn folded_rows_give_totals_and_say_so() {
    let path = shared_fixture("xspace/jax_transformer_small.xplane.pb");
    let path = path.to_str().unwrap();
    let doc = json(&["summary", path]);
    let peaks: Vec<(u64, u64)> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["peak_bytes"].as_u64().unwrap(),
                m["buffers"].as_u64().unwrap(),
            )
        })
        .collect();
    let largest = peaks.iter().map(|p| p.0).max().unwrap();
    // Trivial: a peak under 1% of the largest and under 1 MiB.
    let small: Vec<&(u64, u64)> = peaks
        .iter()
        .filter(|p| p.0 * 100 < largest && p.0 < 1 << 20)
        .collect();
    let bytes: u64 = small.iter().map(|p| p.0).sum();
    let buffers: u64 = small.iter().map(|p| p.1).sum();
    assert_eq!((small.len(), bytes, buffers), (10, 824_076, 90));
    for command in ["summary", "peak"] {
        let table = stdout_of(&[command, path]);
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with("+10 small"))
            .unwrap_or_else(|| panic!("{table}"));
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells[0], "+10 small (totals)", "{row}");
        assert_eq!(cells[1], "804.76 KiB", "{row}");
        assert!(cells.contains(&"90"), "{row}");
    }
}
