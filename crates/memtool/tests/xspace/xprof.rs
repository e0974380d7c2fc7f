//! memtool's figures against XProf's own Memory Profile of the same files:
//! peaks, capacity, fragmentation, the allocations active at the peak.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    fixture, memory, num, path, BEFORE_START_OP, FREED_BEFORE_START_OP, UNEXPLAINED_OP,
    WITH_ALLOCATOR_EVENTS,
};
use crate::common::json;

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
