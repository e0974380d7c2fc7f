//! `leaks`, `frag`, `peak --budget`, `diff` and the text formats on XSpaces.

use serde_json::Value;

use super::{fixture, memory, num, path, Fixture};
use crate::common::{json, memtool};

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
    let out = crate::common::memtool()
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
