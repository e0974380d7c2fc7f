//! The out-of-memory post-mortem (`memtool oom`, and `summary` opening with
//! it) on the snapshots `scripts/make_torch_oom_fixtures.py` derives,
//! against the figures that script computed from the pickled dicts alone
//! (`crates/memtool/tests/data/oom/expected.json`); and on compiled programs over a
//! capacity, given or recorded in the XSpace.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

/// The derived snapshots live beside the tests, not under `tests/`: see
/// their README.
fn data(file: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/oom")
        .join(file)
}

fn expected(name: &str) -> Value {
    let path = data("expected.json");
    let all: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    all[name].clone()
}

fn fixture(name: &str) -> String {
    data(&format!("{name}.pickle")).display().to_string()
}

/// The one post-mortem of `oom FILE [extra]`, after checking that the figures
/// it shares with the expected ones are equal.
fn post_mortem(name: &str, extra: &[&str]) -> Value {
    let file = fixture(name);
    let mut args = vec!["oom", file.as_str()];
    args.extend_from_slice(extra);
    let doc = common::json(&args);
    assert_eq!(doc["schema"], "memtool/oom/v1");
    let ooms = doc["oom"].as_array().unwrap();
    assert_eq!(ooms.len(), 1, "{ooms:?}");
    let pm = ooms[0].clone();
    let want = expected(name);
    for (field, key) in [
        ("request_bytes", "request_bytes"),
        ("device_free_bytes", "device_free_bytes"),
        ("reserved_bytes", "reserved_bytes"),
        ("allocated_bytes", "allocated_bytes"),
        ("free_in_reserved_bytes", "free_in_reserved_bytes"),
        ("capacity_bytes", "capacity_bytes"),
    ] {
        assert_eq!(pm[field], want[key], "{name}: {field}");
    }
    // Free and the largest free block per pool and stream.
    let pools: BTreeMap<String, (u64, u64)> = pm["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                format!("{}/{}", p["pool"].as_str().unwrap(), p["stream"]),
                (
                    p["free_bytes"].as_u64().unwrap(),
                    p["largest_free_block_bytes"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    let want_pools: BTreeMap<String, (u64, u64)> = want["free_by_pool"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (
                    v.as_u64().unwrap(),
                    want["largest_free_block_by_pool"][k].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(pools, want_pools, "{name}: pools");
    // Live at the failure by user frame.
    let live = common::bytes_by_key(&pm["live_by_user_frame"]);
    let want_live: BTreeMap<String, u64> = want["live_by_user_frame"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(live, want_live, "{name}: live by user frame");
    pm
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
fn live_tensors_beyond_the_device_are_a_capacity_failure() {
    let pm = post_mortem("capacity", &["--capacity", "64MiB"]);
    let want = expected("capacity");
    assert_eq!(pm["verdict"], "capacity");
    assert_eq!(pm["capacity_source"], "given");
    let needed = u(&want["allocated_bytes"]) + u(&want["request_bytes"]);
    let shortfall = needed - u(&want["capacity_bytes"]);
    assert_eq!(u(&pm["shortfall_bytes"]), shortfall);
    // The groups to remove are the largest first and cover the shortfall,
    // and no fewer of them would.
    let remove = pm["remove_to_fit"].as_array().unwrap();
    let last = remove.last().unwrap();
    assert!(u(&last["cumulative_bytes"]) >= shortfall);
    assert!(remove.len() == 1 || u(&remove[remove.len() - 2]["cumulative_bytes"]) < shortfall);
    let largest = want["live_by_user_frame"]
        .as_object()
        .unwrap()
        .iter()
        .max_by_key(|(_, v)| v.as_u64())
        .unwrap();
    assert_eq!(remove[0]["key"], largest.0.as_str());
    // No capacity given: the device is taken as reserved + free, which here is
    // the same 64 MiB, and the verdict says how to tell outside memory apart.
    let pm = post_mortem("capacity", &[]);
    assert_eq!(pm["capacity_source"], "reserved_plus_free");
    assert_eq!(pm["verdict"], "capacity");
    assert!(pm["explanation"].as_str().unwrap().contains("--capacity"));
    // The failed allocation: its stack, user frame first, and what came just before.
    assert_eq!(pm["user_frame"], "step torch_train.py:10");
    assert_eq!(pm["stack"][0], "step torch_train.py:10");
    let recent = pm["recent_allocations"].as_array().unwrap();
    assert_eq!(recent.len(), 10);
    assert!(recent.windows(2).all(|w| u(&w[0]["at"]) >= u(&w[1]["at"])));
    assert!(u(&recent[0]["at"]) < u(&pm["at"]));
}

#[test]
fn free_memory_in_pieces_is_a_fragmentation_failure_with_the_settings_that_help() {
    let pm = post_mortem("fragmentation", &[]);
    let want = expected("fragmentation");
    assert_eq!(pm["verdict"], "fragmentation");
    let request = u(&want["request_bytes"]);
    let free = u(&want["free_in_reserved_bytes"]) + u(&want["device_free_bytes"]);
    assert!(request <= free);
    assert_eq!(pm["pool"], "large");
    let largest = u(&want["largest_free_block_by_pool"]["large/0"]);
    assert!(largest < request);
    assert_eq!(u(&pm["shortfall_bytes"]), request - largest);
    let settings: Vec<&str> = pm["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["setting"].as_str().unwrap())
        .collect();
    assert_eq!(settings[0], "expandable_segments:True");
    // expandable segments: the large pool's free bytes and the device's.
    assert_eq!(
        u(&pm["settings"][0]["bytes"]),
        u(&want["free_by_pool"]["large/0"]) + u(&want["device_free_bytes"])
    );
    // The allocator released every wholly free segment before it gave up,
    // so a garbage collection threshold would recover nothing: not listed,
    // nor is any other setting that would recover 0 B.
    assert!(
        !settings
            .iter()
            .any(|s| s.starts_with("garbage_collection_threshold:")),
        "{settings:?}"
    );
    for s in pm["settings"].as_array().unwrap() {
        assert!(u(&s["bytes"]) > 0, "{s}");
    }
    assert!(pm["remove_to_fit"].is_null());
    assert_eq!(pm["state_at_failure"], "segments");
    assert_eq!(pm["events_after_failure"], 0);

    // The same failure with expandable segments already on: the verdict and
    // figures are the same, and the advice does not recommend them again.
    let on = post_mortem("fragmentation_expandable", &[]);
    assert_eq!(on["verdict"], "fragmentation");
    assert_eq!(on["shortfall_bytes"], pm["shortfall_bytes"]);
    let advised: Vec<&str> = on["settings"]
        .as_array()
        .map(|a| a.iter().map(|s| s["setting"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(
        !advised.iter().any(|s| s.starts_with("expandable_segments")),
        "{advised:?}"
    );
    assert_eq!(advised, settings[1..].to_vec());
}

#[test]
fn a_failure_followed_by_more_events_is_judged_at_the_failure() {
    // The program caught the error and freed its largest tensors before the
    // snapshot was dumped: at the end the segments are mostly free, and a
    // verdict from them would be fragmentation.
    let want = expected("after_failure");
    let request = u(&want["request_bytes"]);
    assert!(u(&want["end_free_in_reserved_bytes"]) + u(&want["device_free_bytes"]) >= request);
    assert!(u(&want["free_in_reserved_bytes"]) + u(&want["device_free_bytes"]) < request);

    let file = fixture("after_failure");
    let doc = common::json(&["oom", &file]);
    let pm = &doc["oom"][0];
    assert_eq!(pm["verdict"], "capacity", "{pm}");
    assert_eq!(pm["state_at_failure"], "replayed");
    assert_eq!(pm["segments_at_failure"], false);
    assert!(u(&pm["events_after_failure"]) > 0);
    for field in [
        "request_bytes",
        "device_free_bytes",
        "reserved_bytes",
        "live_bytes",
    ] {
        assert_eq!(pm[field], want[field], "{field}");
    }
    // Replayed blocks take their request rounded to 512 B; the allocator's
    // blocks can be larger (a remainder it did not split), so the replayed
    // allocated bytes are at most the allocator's, and its free bytes at least.
    assert!(u(&pm["allocated_bytes"]) <= u(&want["allocated_bytes"]));
    assert!(u(&pm["allocated_bytes"]) >= u(&want["live_bytes"]));
    assert!(u(&pm["free_in_reserved_bytes"]) >= u(&want["free_in_reserved_bytes"]));
    assert_eq!(
        u(&pm["allocated_bytes"]) + u(&pm["free_in_reserved_bytes"]),
        u(&pm["reserved_bytes"])
    );
    // Every figure is the failure's: the live table adds up to live_bytes.
    let live: u64 = common::bytes_by_key(&pm["live_by_user_frame"])
        .values()
        .sum();
    assert_eq!(live, u(&want["live_bytes"]));
    let text = pm["explanation"].as_str().unwrap();
    assert!(text.contains("replayed from the trace"), "{text}");
    assert!(pm["settings"].is_null(), "no setting advice for capacity");
}

#[test]
fn reserved_and_free_far_below_the_device_is_memory_outside_pytorch() {
    let pm = post_mortem("outside_pytorch", &["--capacity", "80GiB"]);
    let want = expected("outside_pytorch");
    assert_eq!(pm["verdict"], "outside_pytorch");
    let outside =
        u(&want["capacity_bytes"]) - u(&want["reserved_bytes"]) - u(&want["device_free_bytes"]);
    assert_eq!(u(&pm["outside_bytes"]), outside);
    let text = pm["explanation"].as_str().unwrap();
    assert!(text.contains("79.68 GiB is held outside PyTorch"), "{text}");
}

#[test]
fn summary_opens_with_the_post_mortem_and_exits_0() {
    let file = fixture("fragmentation");
    let doc = common::json(&["summary", &file]);
    assert_eq!(doc["oom"][0]["verdict"], "fragmentation");
    assert_eq!(
        doc["oom"][0]["request_bytes"],
        expected("fragmentation")["request_bytes"]
    );
    let out = common::memtool().args(["summary", &file]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("Out of memory — cuda:0: fragmentation"),
        "{text}"
    );
    // A profile without a failure has no `oom` in its summary.
    let plain = common::repo_fixture("xspace/jax_mlp.xplane.pb")
        .display()
        .to_string();
    assert!(common::json(&["summary", &plain]).get("oom").is_none());
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(number: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(number << 3 | 2, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn varint_field(number: u64, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(number << 3, &mut out);
    varint(value, &mut out);
    out
}

/// `xspace` with a GPU device plane that records `memory_size` as the
/// profiler does (a plane stat; XProf's `kDevCapMemorySize`).
fn with_device_memory(xspace: &[u8], memory_size: u64) -> Vec<u8> {
    let stat_metadata = [varint_field(1, 7), field(2, b"memory_size")].concat();
    let entry = [varint_field(1, 7), field(2, &stat_metadata)].concat();
    let stat = [varint_field(1, 7), varint_field(3, memory_size)].concat();
    let plane = [
        varint_field(1, 9),
        field(2, b"/device:GPU:0"),
        field(5, &entry),
        field(6, &stat),
    ]
    .concat();
    [xspace, &field(1, &plane)].concat()
}

#[test]
fn programs_over_the_capacity_the_xspace_records_get_a_post_mortem() {
    let original = std::fs::read(common::repo_fixture("xspace/jax_mlp.xplane.pb")).unwrap();
    let dir = std::env::temp_dir().join(format!("memtool-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gpu.xplane.pb");
    std::fs::write(&path, with_device_memory(&original, 4 << 20)).unwrap();
    let file = path.display().to_string();

    // The peaks of every program, to know which exceed 4 MiB.
    let peaks = common::json(&["peak", &file]);
    let over: Vec<(String, u64)> = peaks["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["memory_space"] == 0 && u(&m["peak_bytes"]) > 4 << 20)
        .map(|m| (m["id"].as_str().unwrap().to_string(), u(&m["peak_bytes"])))
        .collect();
    assert!(over.len() >= 2, "{over:?}");
    for m in peaks["memories"].as_array().unwrap() {
        if m["memory_space"] == 0 {
            assert_eq!(u(&m["capacity_bytes"]), 4 << 20, "{}", m["id"]);
        }
    }

    let doc = common::json(&["oom", &file]);
    let found: Vec<(String, u64)> = doc["oom"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pm| {
            assert_eq!(pm["verdict"], "capacity");
            assert_eq!(pm["capacity_source"], "profile");
            assert_eq!(u(&pm["over_bytes"]), u(&pm["peak_bytes"]) - (4 << 20));
            // CPU programs are not padded; the figure is there, and exact.
            let buffers = pm["buffers"].as_array().unwrap();
            assert!(!buffers.is_empty());
            assert_eq!(pm["padding_waste_bytes"], 0);
            assert!(!pm["by_op"].as_array().unwrap().is_empty());
            (pm["id"].as_str().unwrap().to_string(), u(&pm["peak_bytes"]))
        })
        .collect();
    assert_eq!(found, over);
    // summary opens with them too, without being asked.
    assert_eq!(
        common::json(&["summary", &file])["oom"]
            .as_array()
            .unwrap()
            .len(),
        over.len()
    );
    // A capacity given wins over the file's.
    assert!(common::json(&["oom", &file, "--capacity", "1GiB"])["oom"]
        .as_array()
        .unwrap()
        .is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn peak_over_budget_carries_the_program_post_mortem() {
    let file = common::repo_fixture("xspace/jax_mlp.xplane.pb")
        .display()
        .to_string();
    let out = common::memtool()
        .args([
            "peak", &file, "--module", "jit_step", "--budget", "4MiB", "--format", "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "over budget is the gate");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &doc["memories"][0];
    let pm = &m["budget"]["post_mortem"];
    assert_eq!(pm["verdict"], "capacity");
    assert_eq!(pm["capacity_source"], "given");
    assert_eq!(u(&pm["over_bytes"]), u(&m["peak_bytes"]) - (4 << 20));
    // Padding at the peak is what the buffers at the peak hold beyond their unpadded sizes.
    let waste: u64 = m["buffers_at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| u(&b["bytes"]) - u(&b["unpadded_bytes"]))
        .sum();
    assert_eq!(u(&pm["padding_waste_bytes"]), waste);
}

#[test]
fn the_page_opens_on_the_post_mortem() {
    let file = fixture("capacity");
    let out = common::memtool().args(["render", &file]).output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    let body = &page[page.find("</header>").unwrap()..];
    let oom = body.find("<section class=\"oom\"").expect("an oom section");
    let first_memory = body.find("<section class=\"memory\"").unwrap();
    // The first thing after the page's header, before any memory.
    assert!(body[..oom]
        .trim_start_matches("</header>")
        .trim()
        .is_empty());
    assert!(oom < first_memory);
    assert!(body[oom..first_memory].contains("out of memory on cuda:0: capacity"));
    // A page without a failure has no such section.
    let plain = common::repo_fixture("xspace/jax_mlp.xplane.pb")
        .display()
        .to_string();
    let out = common::memtool().args(["render", &plain]).output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(!page.contains("<section class=\"oom\""));
}
