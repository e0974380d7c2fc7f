//! `frag`'s figures against what the allocator holds: on every profile of
//! `tests/`, `examples/` and `../shared/fixtures`, no figure exceeds what the
//! allocator reserved or its capacity; PyTorch snapshots' figures over time
//! against an independent replay (`scripts/torch_segment_replay.py`) and
//! their end state against torch's `segsum`
//! (`../shared/fixtures/torch/expected/reference.json`); the warnings a
//! profile's contradicting figures give.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Every file under `dir`, in name order.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `memtool frag --format json` of `path`, or `None` for a file memtool
/// refuses (exit 2: the broken corpus, expected outputs).
fn frag_of(path: &Path) -> Option<Value> {
    let out = common::memtool()
        .args(["frag", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    match out.status.code() {
        Some(0) => Some(serde_json::from_slice(&out.stdout).expect("valid JSON")),
        Some(2) => None,
        other => panic!(
            "{}: exit {other:?}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn bytes(v: &Value) -> Option<u64> {
    v.as_u64()
}

/// Asserts the bound on one point of a memory: every byte figure within
/// what the allocator reserved there and its capacity.
fn check_point(what: &str, point: &Value, capacity: Option<u64>) {
    if point.is_null() {
        return;
    }
    let reserved = bytes(&point["reserved_bytes"]);
    let mut figures: Vec<(&str, u64)> = Vec::new();
    for key in [
        "in_use_bytes",
        "free_bytes",
        "reserved_bytes",
        "unused_reserved_bytes",
    ] {
        if let Some(b) = bytes(&point[key]) {
            figures.push((key, b));
        }
    }
    if let (Some(r), Some(u)) = (reserved, bytes(&point["unused_reserved_bytes"])) {
        assert!(u <= r, "{what}: unused {u} > reserved {r}");
    }
    let address = &point["address"];
    if !address.is_null() {
        let held = bytes(&address["held_bytes"]).unwrap();
        let gap = bytes(&address["gap_bytes"]).unwrap();
        let largest = bytes(&address["largest_gap_bytes"]).unwrap();
        assert!(largest <= gap && gap <= held, "{what}: {address}");
        assert!(address.get("span_bytes").is_none(), "{what}: no span");
        if let Some(r) = reserved {
            assert_eq!(held, r, "{what}: the held ranges are what is reserved");
        }
        figures.extend([
            ("held_bytes", held),
            ("gap_bytes", gap),
            ("largest_gap_bytes", largest),
        ]);
    }
    if let Some(c) = capacity {
        for (key, b) in figures {
            assert!(b <= c, "{what}: {key} {b} > capacity {c}");
        }
    }
}

/// Checks every memory of `frag`'s document for `path`; returns how many
/// memories have an address-gap figure.
fn check_bound(path: &Path, doc: &Value) -> usize {
    let mut with_gaps = 0;
    for m in doc["memories"].as_array().unwrap() {
        let what = format!("{} {}", path.display(), m["id"]);
        let capacity = bytes(&m["capacity_bytes"]);
        let reserved_at_end = bytes(&m["reserved_bytes"]);
        if let Some(r) = reserved_at_end {
            let largest = bytes(&m["largest_free_block_bytes"]).unwrap();
            let external = bytes(&m["free_external_bytes"]).unwrap();
            assert!(largest <= external && external <= r, "{what}");
        }
        if let Some(u) = m["unused_reserved"].as_object() {
            let (max, reserved) = (
                u["max_bytes"].as_u64().unwrap(),
                u["max_reserved_bytes"].as_u64().unwrap(),
            );
            assert!(max <= reserved, "{what}: {u:?}");
            assert!(u["mean_bytes"].as_u64().unwrap() <= max, "{what}");
            if let Some(c) = capacity {
                assert!(reserved <= c, "{what}: reserved {reserved} > capacity {c}");
            }
        }
        check_point(&format!("{what} at peak"), &m["at_peak"], capacity);
        check_point(&format!("{what} at end"), &m["at_end"], capacity);
        if let Some(r) = reserved_at_end {
            // The last point is the end state: the segments.
            let end = &m["at_end"]["address"];
            if !end.is_null() {
                assert_eq!(bytes(&end["held_bytes"]), Some(r), "{what}");
            }
        }
        for (i, w) in m["worst"].as_array().unwrap().iter().enumerate() {
            check_point(&format!("{what} worst {i}"), w, capacity);
        }
        with_gaps += usize::from(!m["at_peak"]["address"].is_null());
    }
    with_gaps
}

/// Checks every profile under `dirs`; returns (profiles, memories with gaps).
fn check_all(dirs: &[PathBuf]) -> (usize, usize) {
    let (mut profiles, mut with_gaps) = (0, 0);
    for dir in dirs {
        for path in files_under(dir) {
            if let Some(doc) = frag_of(&path) {
                profiles += 1;
                with_gaps += check_bound(&path, &doc);
            }
        }
    }
    (profiles, with_gaps)
}

#[test]
fn no_frag_figure_exceeds_what_the_allocator_holds_in_the_repository() {
    let root = common::repo();
    let (profiles, with_gaps) = check_all(&[root.join("tests"), root.join("examples")]);
    // The pprof series, the snapshots (three protocols, gzip, legacy), the
    // traces, the timelines, the XSpace programs.
    assert!(profiles >= 20, "{profiles} profiles checked");
    assert!(with_gaps >= 10, "{with_gaps} memories with gaps");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn no_frag_figure_exceeds_what_the_allocator_holds_in_the_shared_fixtures() {
    let dir = common::shared_fixture("");
    let (profiles, with_gaps) = check_all(&[dir]);
    assert!(profiles >= 30, "{profiles} profiles checked");
    assert!(with_gaps >= 20, "{with_gaps} memories with gaps");
}

/// The figures the issue reported: a gap larger than what was reserved, or
/// than the capacity, is gone; allocators whose address ranges are unknown
/// give no gap figure at all.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn gaps_between_segments_and_outside_the_allocator_are_not_counted() {
    let bcrafton = common::shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let doc = frag_of(&bcrafton).unwrap();
    let m = &doc["memories"][0];
    let peak = &m["at_peak"]["address"];
    // 3.95 GiB reserved in 96 segments; the largest gap is inside one of
    // them: at most the largest segment, 148 MiB.
    assert_eq!(m["reserved_bytes"], 4238344192u64);
    let largest_segment = m["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reserved_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(largest_segment, 155189248);
    assert!(peak["largest_gap_bytes"].as_u64().unwrap() <= largest_segment);
    for tf in ["xspace/tf_cnn.xplane.pb", "xspace/tf_keras.xplane.pb"] {
        let doc = frag_of(&common::shared_fixture(tf)).unwrap();
        let m = &doc["memories"][0];
        assert!(
            m["at_peak"]["address"].is_null(),
            "{tf}: malloc's heap and mmap regions are not the allocator's"
        );
        // Its own figure stays.
        assert!(m["allocator"]["max"].as_f64().unwrap() > 0.0);
    }
    let out = common::stdout_in_repo(
        &[
            "frag",
            common::shared_fixture("xspace/tf_cnn.xplane.pb")
                .to_str()
                .unwrap(),
        ],
        &[0],
    );
    assert!(out.contains("mklcpu: address gaps n/a: the profile does not say which address ranges the allocator holds"), "{out}");
}

/// Reference figures of `scripts/torch_segment_replay.py`, a plain
/// `pickle.load` replay: reserved = the end-state segments with the trace's
/// segment events undone and replayed, live = requested sizes of `alloc` /
/// `free_completed`. (points, most unused, mean unused, unused at the
/// peak, unused at the end.) Only snapshots whose live set the trace
/// alone gives: no block of the end state predates the window.
const REPLAYED: [(&str, u64, u64, u64, u64, u64); 2] = [
    (
        "silmont2000_mem_snapshot.pickle",
        63,
        3749445628,
        1380419078,
        532021240,
        3749445628,
    ),
    (
        "transformer_nuggets_mini_snapshot.pickle",
        33,
        25165824,
        15673754,
        18775040,
        18807808,
    ),
];

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn snapshots_have_unused_reserved_memory_over_time_from_their_segment_events() {
    for (file, points, max, mean, at_peak, at_end) in REPLAYED {
        let doc = frag_of(&common::shared_fixture(&format!("torch/{file}"))).unwrap();
        let m = &doc["memories"][0];
        let u = &m["unused_reserved"];
        assert_eq!(
            (
                u["points"].as_u64(),
                u["max_bytes"].as_u64(),
                u["mean_bytes"].as_u64(),
                m["at_peak"]["unused_reserved_bytes"].as_u64(),
                u["last_bytes"].as_u64(),
            ),
            (
                Some(points),
                Some(max),
                Some(mean),
                Some(at_peak),
                Some(at_end)
            ),
            "{file}"
        );
        // At the peak the two independent figures agree: reserved − in use
        // (sums) and the free runs inside the segments held then (addresses).
        assert_eq!(
            m["at_peak"]["address"]["gap_bytes"].as_u64(),
            Some(at_peak),
            "{file}"
        );
    }
    // silmont2000's trace reserves all nine segments as it goes: at the
    // start nothing is held.
    let doc = frag_of(&common::shared_fixture(
        "torch/silmont2000_mem_snapshot.pickle",
    ))
    .unwrap();
    assert!(doc["memories"][0]["unused_reserved"]["max_bytes"].as_u64() < Some(3781165056));
}

/// The end state against torch's `segsum`: the free memory inside the
/// segments is torch's free external bytes plus at most its internal ones
/// (live blocks count their requested size or their block size).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_end_state_gaps_are_segsums_free_memory() {
    let reference: Value = serde_json::from_slice(
        &std::fs::read(common::shared_fixture("torch/expected/reference.json")).unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for (file, r) in reference.as_object().unwrap() {
        // A trimmed snapshot whose trace leaves allocations live that its
        // segments call free (memtool warns): the two cannot agree.
        if file == "transformer_nuggets_mini_snapshot.pickle" {
            continue;
        }
        let doc = frag_of(&common::shared_fixture(&format!("torch/{file}"))).unwrap();
        let m = &doc["memories"][0];
        let end = &m["at_end"]["address"];
        let (external, internal) = (
            r["free_external_bytes"].as_u64().unwrap(),
            r["free_internal_bytes"].as_u64().unwrap(),
        );
        assert_eq!(end["held_bytes"], r["reserved_bytes"], "{file}");
        let gap = end["gap_bytes"].as_u64().unwrap();
        assert!(
            (external..=external + internal).contains(&gap),
            "{file}: {gap} outside {external}..={}",
            external + internal
        );
        assert_eq!(
            m["at_end"]["unused_reserved_bytes"].as_u64(),
            Some(gap),
            "{file}"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// A trace whose own totals contradict each other (more allocated than
/// reserved, a peak above the device) says so on stderr and in the JSON.
#[test]
fn contradicting_figures_are_warned_of() {
    let memory = |ts: f64, bytes: i64, addr: u64, allocated: u64, reserved: u64| {
        serde_json::json!({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
            "pid": 1, "tid": 1, "ts": ts,
            "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": bytes,
                     "Addr": addr, "Device Id": 0, "Device Type": 1}})
    };
    let trace = serde_json::json!({
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Small GPU", "totalGlobalMem": 4096}],
        "traceEvents": [
            memory(1.0, 2048, 4096, 2048, 4096),
            memory(2.0, 4096, 8192, 6144, 4096),
            memory(3.0, -4096, 8192, 2048, 4096),
        ]
    });
    let dir = std::env::temp_dir().join(format!("memtool-frag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("contradicting.pt.trace.json");
    std::fs::write(&path, trace.to_string()).unwrap();
    let out = common::memtool()
        .args(["summary", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    let over_reserved = "cuda:0: more in use than the allocator reserved at 1 points (first at t+1.000 us: 6.00 KiB in use, 4.00 KiB reserved)";
    let over_capacity =
        "cuda:0: the peak, 6.00 KiB at t+1.000 us, is above the device's capacity of 4.00 KiB";
    for expected in [over_reserved, over_capacity] {
        assert!(
            warnings.iter().any(|w| w.starts_with(expected)),
            "{warnings:?}"
        );
        assert!(stderr.contains(expected), "{stderr}");
    }
}
