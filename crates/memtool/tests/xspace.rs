//! XSpace (`*.xplane.pb`) allocator events against XProf 2.24.2's own Memory
//! Profile output (`../shared/fixtures/xspace/expected/*.memory_profile.json`).
//! Where memtool deliberately differs from XProf the test says so and
//! docs/xprof-differences.md explains why.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{fails, json, memtool, shared_fixture};
use serde_json::Value;

/// The fixtures with allocator events.
const WITH_ALLOCATOR_EVENTS: [&str; 6] = [
    "synth_bfc_3events",
    "synth_two_lines_offsets",
    "tf_keras",
    "tf_cnn",
    "tf_cnn_leak",
    "xprof_gpu_multi_worker",
];

const BEFORE_START_OP: &str = "<allocated before recording, still live>";
const FREED_BEFORE_START_OP: &str = "<allocated before recording, freed later>";
const UNEXPLAINED_OP: &str = "<in use by the allocator's count, not in any recorded event>";

struct Fixture {
    profile: PathBuf,
    /// XProf's `memoryProfilePerAllocator`.
    xprof: serde_json::Map<String, Value>,
}

fn fixture(name: &str) -> Fixture {
    let profile = shared_fixture(&format!("xspace/{name}.xplane.pb"));
    let expected = shared_fixture(&format!("xspace/expected/{name}.memory_profile.json"));
    let doc: Value = serde_json::from_slice(&std::fs::read(expected).unwrap()).unwrap();
    let xprof = doc["memoryProfilePerAllocator"]
        .as_object()
        .unwrap()
        .clone();
    Fixture { profile, xprof }
}

fn num(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        Value::Number(n) => n.as_i64().unwrap(),
        Value::Null => 0,
        other => panic!("not a number: {other}"),
    }
}

fn memory<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no memory {id} in {doc}"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn summary_matches_xprof_peak_capacity_and_counts() {
    for name in WITH_ALLOCATOR_EVENTS {
        let f = fixture(name);
        let doc = json(&["summary", path(&f.profile)]);
        assert_eq!(
            doc["memories"].as_array().unwrap().len(),
            f.xprof.len(),
            "{name}"
        );
        for (id, x) in &f.xprof {
            let m = memory(&doc, id);
            let summary = &x["profileSummary"];
            assert_eq!(m["kind"], "allocator");
            assert_eq!(
                num(&m["peak_bytes"]),
                num(&summary["peakStats"]["peakBytesInUse"]),
                "{name} {id} peak"
            );
            assert_eq!(
                num(&m["capacity_bytes"]),
                num(&summary["memoryCapacity"]),
                "{name} {id} capacity"
            );
            // Under 1000 events XProf's sampled timeline holds every event,
            // so its counts are the true ones.
            let snapshots = x["sampledTimelineSnapshots"].as_array().unwrap();
            assert!(snapshots.len() < 1000);
            let count = |what: &str| {
                snapshots
                    .iter()
                    .filter(|s| s["activityMetadata"]["memoryActivity"] == what)
                    .count() as i64
            };
            assert_eq!(
                num(&m["allocations"]),
                count("ALLOCATION"),
                "{name} allocations"
            );
            assert_eq!(
                num(&m["deallocations"]),
                count("DEALLOCATION"),
                "{name} frees"
            );
            // Lifetime peak: the largest peak_bytes_in_use any event reported
            // (XProf keeps the last event's), and never below the peak seen.
            let reported = snapshots
                .iter()
                .map(|s| num(&s["aggregationStats"]["peakBytesInUse"]))
                .max()
                .unwrap();
            assert_eq!(
                num(&m["lifetime_peak_bytes"]),
                reported.max(num(&m["peak_bytes"])),
                "{name} lifetime peak"
            );
            assert!(num(&m["lifetime_peak_bytes"]) >= num(&summary["peakBytesUsageLifetime"]));
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn fragmentation_at_peak_matches_xprof() {
    for name in WITH_ALLOCATOR_EVENTS {
        let f = fixture(name);
        // Ties for the peak: XProf keeps the last one, as --xprof-compat does.
        let doc = json(&["summary", path(&f.profile), "--xprof-compat"]);
        for (id, x) in &f.xprof {
            let m = memory(&doc, id);
            let expected = x["profileSummary"]["peakStats"]["fragmentation"]
                .as_f64()
                .unwrap_or(0.0);
            match m["fragmentation_at_peak"].as_f64() {
                Some(ours) => assert!(
                    (ours - expected).abs() < 1e-9,
                    "{name}: {ours} vs {expected}"
                ),
                // The peak event carries no fragmentation stat: XProf shows
                // its proto default, 0; memtool says it is unknown.
                None => assert_eq!(expected, 0.0, "{name}"),
            }
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn peak_time_counts_from_the_profile_start_not_the_line() {
    let f = fixture("tf_cnn");
    let doc = json(&["summary", path(&f.profile)]);
    let m = memory(&doc, "mklcpu");
    // tf_cnn's host lines start 10827 ns after the profile start; XProf
    // reports the offset within the line.
    let xprof = num(&f.xprof["mklcpu"]["profileSummary"]["peakStatsTimePs"]);
    assert_eq!(num(&m["peak_time_ps"]), xprof + 10_827_000);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn two_lines_are_ordered_by_absolute_time() {
    let f = fixture("synth_two_lines_offsets");
    let x = &f.xprof["GPU_0_bfc"];
    // XProf orders by line-relative offset: line B's events (offsets 0, 10)
    // before line A's (100000), although line B starts 1000 ns later.
    let xprof_order: Vec<i64> = x["sampledTimelineSnapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| num(&s["activityMetadata"]["address"]))
        .collect();
    assert_eq!(xprof_order, vec![2, 3, 1]);
    let doc = json(&["frag", path(&f.profile)]);
    let m = memory(&doc, "GPU_0_bfc");
    // memtool: A at 100000 ps, then B at 1000 ns × 1000 + 0 and + 10.
    assert_eq!(num(&m["at_end"]["at"]), 1_000_010);
    assert_eq!(m["at_end"]["allocator_fragmentation"].as_f64(), Some(0.3));
    let summary = json(&["summary", path(&f.profile)]);
    let s = memory(&summary, "GPU_0_bfc");
    // The first time the allocator reached 512 bytes is B's first event.
    assert_eq!(num(&s["peak_time_ps"]), 1_000_000);
    assert_eq!(s["fragmentation_at_peak"].as_f64(), Some(0.2));
    assert_eq!(
        num(&s["peak_bytes"]),
        num(&x["profileSummary"]["peakStats"]["peakBytesInUse"])
    );
    let compat = json(&["summary", path(&f.profile), "--xprof-compat"]);
    assert_eq!(
        num(&memory(&compat, "GPU_0_bfc")["peak_time_ps"]),
        1_000_010
    );
    // At that last tie the allocator counts 512 bytes while the three
    // recorded 256-byte allocations are live (in time order). By default
    // the peak is what is live (the first tie, 512 bytes, agrees); with
    // --xprof-compat it is XProf's figure, the allocator's 512 bytes, and
    // the rows still list the live allocations.
    let m = memory(&summary, "GPU_0_bfc");
    assert_eq!(num(&m["peak_bytes"]), 512);
    let compat = json(&["peak", path(&f.profile), "--xprof-compat"]);
    let m = memory(&compat, "GPU_0_bfc");
    assert_eq!(
        num(&m["peak_bytes"]),
        num(&x["profileSummary"]["peakStats"]["heapAllocatedBytes"])
    );
    assert_eq!(num(&m["peak_bytes"]), 512);
    let rows = m["at_peak"].as_array().expect("at_peak rows");
    assert_eq!(rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(), 3 * 256);
    for b in m["breakdowns"].as_array().unwrap() {
        let groups = b["groups"].as_array().unwrap();
        assert_eq!(
            groups.iter().map(|g| num(&g["bytes"])).sum::<i64>(),
            3 * 256
        );
    }
}

type GroupKey = (String, String, String, String);

/// XProf's active allocations at the peak, by (op, shape, dtype, region):
/// total bytes of the ordinary rows, and the special rows apart.
fn xprof_active(x: &Value) -> (BTreeMap<GroupKey, i64>, BTreeMap<String, i64>) {
    let snapshots = x["memoryProfileSnapshots"].as_array().unwrap();
    let special = x["specialAllocations"].as_array().unwrap();
    let mut rows = BTreeMap::new();
    let mut specials = BTreeMap::new();
    for a in x["activeAllocations"].as_array().unwrap() {
        let index = num(&a["snapshotIndex"]);
        let occurrences = num(&a["numOccurrences"]);
        if index < 0 {
            let m = &special[num(&a["specialIndex"]) as usize];
            specials.insert(
                m["tfOpName"].as_str().unwrap().to_string(),
                num(&m["allocationBytes"]) * occurrences,
            );
            continue;
        }
        let m = &snapshots[index as usize]["activityMetadata"];
        let key = (
            m["tfOpName"].as_str().unwrap().to_string(),
            m["tensorShape"].as_str().unwrap().to_string(),
            m["dataType"].as_str().unwrap().to_string(),
            m["regionType"].as_str().unwrap().to_string(),
        );
        *rows.entry(key).or_insert(0) += num(&m["allocationBytes"]) * occurrences;
    }
    (rows, specials)
}

/// memtool's at_peak rows made in the peak step (or, without steps, made
/// during the profile), by (op, shape, dtype, region).
fn peak_step_rows(m: &Value) -> BTreeMap<GroupKey, i64> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut rows = BTreeMap::new();
    for r in m["at_peak"].as_array().unwrap() {
        let pseudo = r["op"] == BEFORE_START_OP
            || r["op"] == FREED_BEFORE_START_OP
            || r["op"] == UNEXPLAINED_OP
            || r["region"] == "stack";
        if r["step"] != m["peak_step"] || pseudo {
            continue;
        }
        let key = (
            text(&r["op"]),
            text(&r["shape"]),
            text(&r["dtype"]),
            text(&r["region"]),
        );
        *rows.entry(key).or_insert(0) += num(&r["bytes"]);
    }
    rows
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn live_at_peak_lists_xprofs_active_allocations() {
    for name in ["tf_cnn", "synth_bfc_3events"] {
        let f = fixture(name);
        let doc = json(&["peak", path(&f.profile)]);
        for (id, x) in &f.xprof {
            let m = memory(&doc, id);
            let (xprof_rows, specials) = xprof_active(x);
            assert!(!xprof_rows.is_empty(), "{name}");
            assert_eq!(peak_step_rows(m), xprof_rows, "{name} {id}");
            // Beyond XProf: every live byte is in a row, so the rows add up
            // to the peak.
            let total: i64 = m["at_peak"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| num(&r["bytes"]))
                .sum();
            assert_eq!(total, num(&m["peak_bytes"]), "{name}");
            if let Some(&stack) = specials.get("stack") {
                let ours = m["at_peak"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["region"] == "stack")
                    .map(|r| num(&r["bytes"]));
                assert_eq!(ours, Some(stack), "{name} stack");
            }
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn live_at_peak_is_attributed_where_xprof_attributes_nothing() {
    // tf_keras reaches the same peak in every step. XProf takes the peak's
    // time from the last tie in file order (step 2) and its step from the
    // last tie in time order (step 3), so no event of "its" step precedes
    // "its" peak and the whole heap is "unused preallocated device memory".
    let f = fixture("tf_keras");
    let x = &f.xprof["mklcpu"];
    let (rows, specials) = xprof_active(x);
    let peak = num(&x["profileSummary"]["peakStats"]["peakBytesInUse"]);
    assert!(rows.is_empty());
    assert_eq!(
        specials.get("unused preallocated device memory"),
        Some(&peak)
    );
    let doc = json(&["peak", path(&f.profile)]);
    let m = memory(&doc, "mklcpu");
    assert_eq!(num(&m["peak_bytes"]), peak);
    let in_step = peak_step_rows(m);
    assert!(!in_step.is_empty());
    // Every allocation of the peak step that is live at the peak is also an
    // allocation XProf recorded in that step (op, shape, dtype, region).
    let recorded: std::collections::BTreeSet<GroupKey> = x["sampledTimelineSnapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| num(&s["activityMetadata"]["stepId"]) == num(&m["peak_step"]))
        .map(|s| {
            let a = &s["activityMetadata"];
            let t = |k: &str| a[k].as_str().unwrap().to_string();
            (
                t("tfOpName"),
                t("tensorShape"),
                t("dataType"),
                t("regionType"),
            )
        })
        .collect();
    assert!(in_step.keys().all(|k| recorded.contains(k)), "{in_step:?}");
    let total: i64 = m["at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| num(&r["bytes"]))
        .sum();
    assert_eq!(total, peak);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn live_at_peak_shows_the_leaked_tensors_xprof_misses() {
    let f = fixture("tf_cnn_leak");
    let x = &f.xprof["mklcpu"];
    let (rows, specials) = xprof_active(x);
    // XProf takes the peak's time from one tie and its step from another, so
    // no event of its "peak step" precedes its peak: the whole heap becomes
    // "unused preallocated device memory".
    let peak = num(&x["profileSummary"]["peakStats"]["peakBytesInUse"]);
    assert!(rows.is_empty());
    assert_eq!(
        specials.get("unused preallocated device memory"),
        Some(&peak)
    );
    // memtool lists what was live: among it, every AddV2 [256,1024] made
    // before the peak and never freed.
    let peak_time = num(&x["profileSummary"]["peakStatsTimePs"]);
    let leaked_before_peak = x["sampledTimelineSnapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["activityMetadata"]["tfOpName"] == "AddV2"
                && s["activityMetadata"]["memoryActivity"] == "ALLOCATION"
                && num(&s["timeOffsetPs"]) <= peak_time
        })
        .count() as i64;
    let doc = json(&["peak", path(&f.profile)]);
    let m = memory(&doc, "mklcpu");
    assert_eq!(num(&m["peak_bytes"]), peak);
    let add: Vec<&Value> = m["at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["op"] == "AddV2")
        .collect();
    assert!(add
        .iter()
        .all(|r| r["shape"] == "[256,1024]" && r["dtype"] == "float"));
    assert_eq!(
        add.iter().map(|r| num(&r["count"])).sum::<i64>(),
        leaked_before_peak
    );
    // One per step, each older than the last.
    let steps: Vec<i64> = add.iter().map(|r| num(&r["step"])).collect();
    let mut sorted = steps.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), steps.len());
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn leaks_names_the_leaking_op_and_shape_per_step() {
    let f = fixture("tf_cnn_leak");
    let doc = json(&["leaks", path(&f.profile)]);
    let m = memory(&doc, "mklcpu");
    assert_eq!(m["point_kind"], "step");
    // six steps (the README: train step ×6)
    assert_eq!(m["points"].as_array().unwrap().len(), 6);
    let finding = &m["findings"][0];
    assert_eq!(finding["key"], "AddV2 [256,1024]");
    assert_eq!(finding["growth"], "steady");
    // Each step leaves one more float [256,1024] tensor: 256×1024×4 bytes.
    let bytes: Vec<i64> = finding["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(num)
        .collect();
    for w in bytes.windows(2) {
        assert!(w[1] - w[0] >= 256 * 1024 * 4, "{bytes:?}");
    }
    assert_eq!(m["findings"].as_array().unwrap().len(), 1);
    let verdict = m["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("steady growth") && verdict.contains("AddV2 [256,1024]"),
        "{verdict}"
    );
    // 84 allocations, 78 frees: the six never freed, one per step.
    let never: Vec<&Value> = m["never_freed"].as_array().unwrap().iter().collect();
    assert_eq!(never.len(), 6);
    assert!(never
        .iter()
        .all(|r| r["key"] == "AddV2 [256,1024]" && num(&r["count"]) == 1));
    let steps = m["steps"].as_array().unwrap();
    let (allocs, frees): (i64, i64) = steps.iter().fold((0, 0), |(a, f), s| {
        (a + num(&s["allocations"]), f + num(&s["deallocations"]))
    });
    assert_eq!((allocs, frees), (84, 78));
    assert!(steps
        .iter()
        .all(|s| num(&s["allocations"]) - num(&s["deallocations"]) == 1));

    let out = memtool()
        .args(["leaks", path(&f.profile), "--fail-on-leak"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn leaks_finds_no_steady_growth_in_a_steady_training_loop() {
    let f = fixture("tf_cnn");
    let doc = json(&["leaks", path(&f.profile)]);
    let m = memory(&doc, "mklcpu");
    assert_eq!(m["point_kind"], "step");
    assert!(m["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["growth"] != "steady"));
    assert!(m["verdict"].as_str().unwrap().starts_with("no growth"));
    assert!(m["never_freed"].as_array().is_none_or(|v| v.is_empty()));
    let out = memtool()
        .args(["leaks", path(&f.profile), "--fail-on-leak"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn frag_reports_the_allocators_own_series() {
    for name in ["tf_cnn", "tf_keras", "tf_cnn_leak"] {
        let f = fixture(name);
        let doc = json(&["frag", path(&f.profile)]);
        let x = &f.xprof["mklcpu"];
        let m = memory(&doc, "mklcpu");
        let series: Vec<f64> = x["sampledTimelineSnapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s["aggregationStats"]["fragmentation"]
                    .as_f64()
                    .unwrap_or(0.0)
            })
            .collect();
        let max = series.iter().cloned().fold(f64::MIN, f64::max);
        assert!(
            (m["allocator"]["max"].as_f64().unwrap() - max).abs() < 1e-9,
            "{name}"
        );
        assert_eq!(num(&m["samples_with_fragmentation"]), series.len() as i64);
        let worst = &m["worst"][0];
        assert!((worst["allocator_fragmentation"].as_f64().unwrap() - max).abs() < 1e-9);
        assert!(
            (m["at_peak"]["allocator_fragmentation"].as_f64().unwrap()
                - x["profileSummary"]["peakStats"]["fragmentation"]
                    .as_f64()
                    .unwrap())
            .abs()
                < 1e-9
        );
        // The events give addresses but not the ranges the allocator holds
        // (a CPU allocator's are malloc's heap and mmap regions): no gap
        // figure, rather than one counting address space it never held.
        assert!(m["at_peak"]["address"].is_null(), "{name}");
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn text_formats_render_every_command() {
    let f = fixture("tf_cnn_leak");
    for command in ["summary", "peak", "leaks", "frag"] {
        for format in ["table", "csv", "md"] {
            let out = memtool()
                .args([command, path(&f.profile), "--format", format])
                .output()
                .unwrap();
            assert!(out.status.success(), "{command} {format}");
            assert!(!out.stdout.is_empty());
        }
    }
    let table = memtool().args(["peak", path(&f.profile)]).output().unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("[256,1024]"));
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-xspace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

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

// --- Synthetic XSpaces, written here field by field (proto/xplane.proto). ---

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A metadata map entry (`event_metadata` = 4, `stat_metadata` = 5).
fn metadata_entry(out: &mut Vec<u8>, map: u32, id: u64, name: &str) {
    let mut meta = Vec::new();
    field_varint(&mut meta, 1, id);
    field_bytes(&mut meta, 2, name.as_bytes());
    let mut entry = Vec::new();
    field_varint(&mut entry, 1, id);
    field_bytes(&mut entry, 2, &meta);
    field_bytes(out, map, &entry);
}

/// An XSpace with one `/host:CPU` plane holding one `train` step event.
fn host_plane_without_allocator_events() -> Vec<u8> {
    let mut stat = Vec::new();
    field_varint(&mut stat, 1, 1);
    field_varint(&mut stat, 4, 0); // int64_value: step_num = 0
    let mut event = Vec::new();
    field_varint(&mut event, 1, 1);
    field_varint(&mut event, 2, 1000);
    field_varint(&mut event, 3, 5000);
    field_bytes(&mut event, 4, &stat);
    let mut line = Vec::new();
    field_varint(&mut line, 1, 1);
    field_bytes(&mut line, 2, b"python");
    field_bytes(&mut line, 4, &event);
    let mut plane = Vec::new();
    field_varint(&mut plane, 1, 1);
    field_bytes(&mut plane, 2, b"/host:CPU");
    field_bytes(&mut plane, 3, &line);
    metadata_entry(&mut plane, 4, 1, "train");
    metadata_entry(&mut plane, 5, 1, "step_num");
    let mut space = Vec::new();
    field_bytes(&mut space, 1, &plane);
    space
}

#[test]
fn a_profile_without_allocator_events_says_how_to_capture_them() {
    let dir = scratch("noevents");
    let file = dir.join("cpu.xplane.pb");
    std::fs::write(&file, host_plane_without_allocator_events()).unwrap();
    let err = fails(&["summary", path(&file)], 2);
    assert!(err.contains(path(&file)), "{err}");
    assert!(err.contains("no allocator events"), "{err}");
    assert!(err.contains("host_tracer_level"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn jax_on_cpu_has_no_allocator_events() {
    let jax = shared_fixture("xspace/jax_mlp.xplane.pb");
    // Its compiled programs may give memories of their own (HLO buffer
    // assignment); either way the missing allocator events are named.
    let out = memtool()
        .args(["summary", path(&jax), "--format", "json"])
        .output()
        .unwrap();
    match out.status.code() {
        Some(2) => assert!(String::from_utf8_lossy(&out.stderr).contains("no allocator events")),
        Some(0) => {
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(doc["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["message"]
                    .as_str()
                    .unwrap()
                    .contains("no allocator events")));
        }
        other => panic!("exit {other:?}: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_truncated_profile_is_one_clear_error() {
    let f = fixture("tf_cnn");
    let bytes = std::fs::read(&f.profile).unwrap();
    let dir = scratch("truncated");
    let file = dir.join("cut.xplane.pb");
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = fails(&["summary", path(&file)], 2);
    assert!(
        err.contains("invalid XSpace") && err.contains("at byte"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn damaged_profiles_never_panic() {
    let f = fixture("synth_bfc_3events");
    let original = std::fs::read(&f.profile).unwrap();
    let dir = scratch("damaged");
    let file = dir.join("damaged.xplane.pb");
    // A fixed pseudo-random sequence of single-byte changes.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..200 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut bytes = original.clone();
        let at = (state >> 33) as usize % bytes.len();
        bytes[at] = (state >> 8) as u8;
        std::fs::write(&file, &bytes).unwrap();
        for command in ["summary", "peak", "leaks", "frag"] {
            let out = memtool().args([command, path(&file)]).output().unwrap();
            let code = out.status.code();
            assert!(
                matches!(code, Some(0) | Some(2)),
                "round {round}, byte {at}: {command} exited {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn budget_lists_the_fewest_largest_allocations_to_remove() {
    let f = fixture("tf_cnn");
    let peak = num(&f.xprof["mklcpu"]["profileSummary"]["peakStats"]["peakBytesInUse"]);
    let fits = json(&["peak", path(&f.profile), "--budget", &peak.to_string()]);
    let check = &memory(&fits, "mklcpu")["budget"];
    assert_eq!(
        (num(&check["excess_bytes"]), check["fits"].as_bool()),
        (0, Some(true))
    );
    assert!(check["shrink"].as_array().unwrap().is_empty());

    let budget = peak - 20 * 1024 * 1024;
    // Over budget: exit code 1, the report still written.
    let out = common::memtool()
        .args([
            "peak",
            path(&f.profile),
            "--budget",
            &budget.to_string(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = &memory(&doc, "mklcpu")["budget"];
    assert_eq!(num(&check["excess_bytes"]), 20 * 1024 * 1024);
    assert_eq!(check["fits"], false);
    let removed: Vec<i64> = check["shrink"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| num(&g["bytes"]))
        .collect();
    let total: i64 = removed.iter().sum();
    assert!(total >= num(&check["excess_bytes"]));
    assert!(
        total - removed.last().unwrap() < num(&check["excess_bytes"]),
        "{removed:?}"
    );
    // Largest first, named by op and shape (TensorFlow records no stacks).
    assert!(removed.windows(2).all(|w| w[0] >= w[1]), "{removed:?}");
    let key = check["shrink"][0]["key"].as_str().unwrap();
    assert!(!key.is_empty() && key != "<no stack>", "{key}");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn diff_compares_op_and_shape_groups_at_the_peaks() {
    let (base, new) = (fixture("tf_cnn"), fixture("tf_cnn_leak"));
    let peak =
        |f: &Fixture| num(&f.xprof["mklcpu"]["profileSummary"]["peakStats"]["peakBytesInUse"]);
    let doc = json(&["diff", path(&base.profile), path(&new.profile)]);
    assert_eq!(num(&doc["total"]["base_bytes"]), peak(&base));
    assert_eq!(num(&doc["total"]["new_bytes"]), peak(&new));
    let x = &new.xprof["mklcpu"];
    let peak_time = num(&x["profileSummary"]["peakStatsTimePs"]);
    let leaked_before_peak = x["sampledTimelineSnapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["activityMetadata"]["tfOpName"] == "AddV2"
                && s["activityMetadata"]["memoryActivity"] == "ALLOCATION"
                && num(&s["timeOffsetPs"]) <= peak_time
        })
        .count() as i64;
    let row = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "AddV2 [256,1024]")
        .expect("AddV2 row");
    assert_eq!(
        (num(&row["base_count"]), num(&row["new_count"])),
        (0, leaked_before_peak)
    );
    assert!(num(&row["delta_bytes"]) >= leaked_before_peak * 256 * 1024 * 4);
}

/// One allocator event: (offset ps, is a free, heap after it, bytes, address).
type Ev = (u64, bool, u64, u64, u64);

/// A `/host:CPU` plane with one line starting at `line_ns` holding events of
/// allocator `GPU_0_bfc`; no `Task Environment` plane.
fn allocator_space(line_ns: u64, events: &[Ev]) -> Vec<u8> {
    let events: Vec<(Ev, Option<u64>)> = events.iter().map(|&e| (e, None)).collect();
    allocator_space_with_stack(line_ns, &events)
}

/// [`allocator_space`] with the stack each event reports reserved
/// (`bytes_reserved`), as TPU allocators do.
fn allocator_space_with_stack(line_ns: u64, events: &[(Ev, Option<u64>)]) -> Vec<u8> {
    // stat ids: 1 allocator_name, 2 bytes_allocated, 3 allocation_bytes,
    // 4 addr, 5 bytes_reserved
    let int_stat = |id: u64, v: u64| {
        let mut s = Vec::new();
        field_varint(&mut s, 1, id);
        field_varint(&mut s, 3, v);
        s
    };
    let mut name = Vec::new();
    field_varint(&mut name, 1, 1);
    field_bytes(&mut name, 5, b"GPU_0_bfc");
    let mut line = Vec::new();
    field_varint(&mut line, 1, 1);
    field_varint(&mut line, 3, line_ns);
    for &((offset, free, heap, bytes, address), stack) in events {
        let mut event = Vec::new();
        field_varint(&mut event, 1, if free { 2 } else { 1 });
        field_varint(&mut event, 2, offset);
        field_bytes(&mut event, 4, &name);
        field_bytes(&mut event, 4, &int_stat(2, heap));
        field_bytes(&mut event, 4, &int_stat(3, bytes));
        field_bytes(&mut event, 4, &int_stat(4, address));
        if let Some(stack) = stack {
            field_bytes(&mut event, 4, &int_stat(5, stack));
        }
        field_bytes(&mut line, 4, &event);
    }
    let mut plane = Vec::new();
    field_bytes(&mut plane, 2, b"/host:CPU");
    field_bytes(&mut plane, 3, &line);
    metadata_entry(&mut plane, 4, 1, "MemoryAllocation");
    metadata_entry(&mut plane, 4, 2, "MemoryDeallocation");
    for (id, name) in [
        (1, "allocator_name"),
        (2, "bytes_allocated"),
        (3, "allocation_bytes"),
        (4, "addr"),
        (5, "bytes_reserved"),
    ] {
        metadata_entry(&mut plane, 5, id, name);
    }
    let mut space = Vec::new();
    field_bytes(&mut space, 1, &plane);
    space
}

fn epoch_timestamps() -> Vec<u8> {
    allocator_space(
        1_795_320_112_346_504_805,
        &[(0, false, 100, 100, 1), (10, false, 300, 200, 2)],
    )
}

#[test]
fn frees_of_allocations_older_than_the_profile_are_live_at_its_start() {
    // Before the profile: 150 bytes in use, of which address 9 (50 bytes) is
    // freed first; then 100 bytes are allocated at address 1.
    let dir = scratch("older");
    let file = dir.join("older.xplane.pb");
    std::fs::write(
        &file,
        allocator_space(0, &[(5, true, 100, 50, 9), (7, false, 200, 100, 1)]),
    )
    .unwrap();
    let doc = json(&["summary", path(&file)]);
    let m = memory(&doc, "GPU_0_bfc");
    assert_eq!((num(&m["allocations"]), num(&m["deallocations"])), (1, 1));
    // The allocator's figure before the first event: 100 + 50.
    assert_eq!(num(&m["peak_bytes"]), 200);
    assert_eq!(num(&m["peak_time_ps"]), 7);
    let peak = json(&["peak", path(&file)]);
    let rows = memory(&peak, "GPU_0_bfc")["at_peak"]
        .as_array()
        .unwrap()
        .clone();
    let before: i64 = rows
        .iter()
        .filter(|r| r["op"] == BEFORE_START_OP)
        .map(|r| num(&r["bytes"]))
        .sum();
    // 150 before the start, less the 50 freed at address 9.
    assert_eq!(before, 100);
    assert_eq!(rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(), 200);
    assert!(rows.iter().all(|r| r["op"] != UNEXPLAINED_OP));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn epoch_timestamps_count_from_the_earliest_line() {
    let dir = scratch("epoch");
    let file = dir.join("epoch.xplane.pb");
    std::fs::write(&file, epoch_timestamps()).unwrap();
    let doc = json(&["summary", path(&file)]);
    let m = memory(&doc, "GPU_0_bfc");
    assert_eq!(num(&m["peak_bytes"]), 300);
    assert_eq!(num(&m["peak_time_ps"]), 10);
    assert_eq!(num(&m["allocations"]), 2);
    let _ = std::fs::remove_dir_all(&dir);
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

#[test]
fn a_tpu_stack_reservation_is_live_while_reserved() {
    // TPU-shaped: the stack reservation changes during the profile (50, 100,
    // none, then 1 MB) and is most of the peak; in use = stack + heap.
    let dir = scratch("tpu-stack");
    let file = dir.join("tpu.xplane.pb");
    let events = [
        ((10, false, 1000, 1000, 1), Some(50)),
        ((20, false, 1500, 500, 2), Some(100)),
        ((30, true, 1000, 500, 2), Some(100)),
        ((40, true, 0, 1000, 1), Some(0)),
        ((50, false, 128, 128, 3), Some(1_000_000)),
        ((60, true, 0, 128, 3), Some(1_000_000)),
    ];
    let in_use = |i: usize| events[i].0 .2 + events[i].1.unwrap();
    std::fs::write(&file, allocator_space_with_stack(0, &events)).unwrap();
    let peak = json(&["peak", path(&file)]);
    assert!(peak["warnings"].as_array().unwrap().is_empty(), "{peak}");
    let m = memory(&peak, "GPU_0_bfc");
    assert_eq!(num(&m["peak_bytes"]), in_use(4) as i64);
    assert_eq!(num(&m["peak_time_ps"]), 50);
    let rows = m["at_peak"].as_array().expect("at_peak rows");
    assert_eq!(
        rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(),
        num(&m["peak_bytes"])
    );
    // XProf lists the stack at the peak as one "stack" allocation.
    let stack: Vec<i64> = rows
        .iter()
        .filter(|r| r["op"] == "stack" && r["region"] == "stack")
        .map(|r| num(&r["bytes"]))
        .collect();
    assert_eq!(stack, [1_000_000]);
    // So does `--xprof-compat`: the stack is a `stack` row there too (as
    // docs/json/peak.md promises for both modes), never counted in the
    // allocator's in-use figure left unexplained.
    let compat = json(&["peak", path(&file), "--xprof-compat"]);
    let c = memory(&compat, "GPU_0_bfc");
    assert_eq!(num(&c["peak_bytes"]), in_use(4) as i64);
    let compat_rows = c["at_peak"].as_array().expect("at_peak rows");
    let stack: Vec<i64> = compat_rows
        .iter()
        .filter(|r| r["op"] == "stack" && r["region"] == "stack")
        .map(|r| num(&r["bytes"]))
        .collect();
    assert_eq!(stack, [1_000_000], "{c}");
    assert!(
        compat_rows.iter().all(|r| r["op"] != UNEXPLAINED_OP),
        "{compat_rows:?}"
    );
    assert_eq!(
        compat_rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(),
        num(&c["peak_bytes"])
    );
    for b in m["breakdowns"].as_array().unwrap() {
        let total: i64 = b["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| num(&g["bytes"]))
            .sum();
        assert_eq!(total, num(&m["peak_bytes"]), "{}", b["by"]);
    }
    // The stack in force at each point is live there: the replayed timeline
    // is the allocator's own figure, up to the end.
    let summary = json(&["summary", path(&file)]);
    let s = memory(&summary, "GPU_0_bfc");
    assert_eq!(num(&s["final_bytes"]), in_use(5) as i64);
    assert_eq!(num(&s["live_bytes_at_end"]), num(&s["final_bytes"]));
    let frag = json(&["frag", path(&file)]);
    assert_eq!(
        num(&memory(&frag, "GPU_0_bfc")["at_end"]["in_use_bytes"]),
        in_use(5) as i64
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// XProf's "active allocations" at the peak with its data type `INVALID`
/// (code 0) read as no data type, as memtool reads it.
fn xprof_active_rows(x: &Value) -> BTreeMap<GroupKey, i64> {
    xprof_active(x)
        .0
        .into_iter()
        .map(|((op, shape, dtype, region), bytes)| {
            let dtype = if dtype == "INVALID" {
                String::new()
            } else {
                dtype
            };
            ((op, shape, dtype, region), bytes)
        })
        .fold(BTreeMap::new(), |mut rows, (k, v)| {
            *rows.entry(k).or_insert(0) += v;
            rows
        })
}

/// Rows equal, or the rows that differ (not the thousands that agree).
fn assert_same_rows(ours: &BTreeMap<GroupKey, i64>, xprof: &BTreeMap<GroupKey, i64>, id: &str) {
    let differ: Vec<_> = ours
        .keys()
        .chain(xprof.keys())
        .filter(|k| ours.get(*k) != xprof.get(*k))
        .map(|k| (k, ours.get(k), xprof.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "{id}: {} rows differ (memtool, XProf): {differ:?}",
        differ.len()
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_multi_gpu_tensorflow_run_breaks_its_peaks_down_as_xprof() {
    let f = fixture("xprof_gpu_multi_worker");
    assert_eq!(f.xprof.len(), 4);
    let doc = json(&["peak", path(&f.profile), "--xprof-compat"]);
    let own_doc = json(&["peak", path(&f.profile)]);
    for (id, x) in &f.xprof {
        let m = memory(&doc, id);
        let summary = &x["profileSummary"];
        // Every line starts 237916 ns after the profile start; XProf counts
        // from the line.
        assert_eq!(
            num(&m["peak_time_ps"]),
            num(&summary["peakStatsTimePs"]) + 237_916_000,
            "{id}"
        );
        let rows = m["at_peak"].as_array().unwrap();
        let total: i64 = rows.iter().map(|r| num(&r["bytes"])).sum();
        assert_eq!(total, num(&summary["peakStats"]["peakBytesInUse"]), "{id}");
        let xprof_rows = xprof_active_rows(x);
        assert!(!xprof_rows.is_empty(), "{id}");
        let mut all = BTreeMap::new();
        for r in rows.iter().filter(|r| r["op"] != BEFORE_START_OP) {
            let text = |v: &Value| v.as_str().unwrap_or("").to_string();
            let key = (
                text(&r["op"]),
                text(&r["shape"]),
                text(&r["dtype"]),
                text(&r["region"]),
            );
            *all.entry(key).or_insert(0) += num(&r["bytes"]);
        }
        // Steps as XProf gives them (`UpdateStepId`): an event's group_id,
        // else the last group_id before it + 1 (0 before any). The peak is
        // in step 0 on the GPUs (GPU_1's events have no group_id at all)
        // and in step 1 on the host, whose peak comes after its last group;
        // the allocations of that step live at the peak are XProf's rows.
        let peak_step = if id.starts_with("gpu_host") { 1 } else { 0 };
        assert_eq!(num(&m["peak_step"]), peak_step, "{id}");
        assert_same_rows(&peak_step_rows(m), &xprof_rows, id);
        // Without --xprof-compat, memtool's own steps (documented in
        // docs/xprof-differences.md): spans of group_id, none on GPU_1; the
        // host's peak, after its last group, is in none.
        let own = memory(&own_doc, id);
        if id.starts_with("GPU_1") || id.starts_with("gpu_host") {
            assert!(own["peak_step"].is_null(), "{id}");
        } else {
            assert_eq!(num(&own["peak_step"]), 0, "{id}");
        }
        // What XProf calls "unused preallocated device memory" is the rest.
        let (_, specials) = xprof_active(x);
        let unused = specials["unused preallocated device memory"];
        assert_eq!(
            unused + xprof_rows.values().sum::<i64>(),
            num(&summary["peakStats"]["peakBytesInUse"]),
            "{id}"
        );
    }
    // Steps: one per group_id the allocator's events carry (group 0 on the
    // GPUs that train and on the host), none on GPU_1.
    let summary = json(&["summary", path(&f.profile)]);
    for (id, steps) in [
        ("GPU_1_bfc", vec![]),
        ("GPU_4_bfc", vec![0]),
        ("GPU_6_bfc", vec![0]),
        ("gpu_host_bfc", vec![0]),
    ] {
        let listed: Vec<i64> = memory(&summary, id)["steps"]
            .as_array()
            .map(|s| s.iter().map(|s| num(&s["step"])).collect())
            .unwrap_or_default();
        assert_eq!(listed, steps, "{id}");
    }
}

/// Everything a profile read from `path` holds, read on `jobs` threads with
/// each XSpace line's events cut into runs of `run_bytes` (0: the default).
/// Also returns how many allocator samples (one per allocator event) it has.
fn dump_read(path: &Path, jobs: usize, run_bytes: u64) -> (String, usize) {
    let options = memtool_core::LoadOptions {
        jobs,
        xspace_run_bytes: run_bytes,
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
/// in flight at once) and of a few KiB.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn decoding_in_runs_on_many_threads_gives_the_one_thread_profile() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [shared_fixture("xspace"), common::repo_fixture("xspace")] {
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
        for (jobs, run_bytes) in [(4, 200), (3, 4096), (2, 0)] {
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
