//! PyTorch inputs against the references: snapshot pickles against torch's own
//! `_memory_viz.segsum` numbers, the peak of its MemoryViz "Active Memory
//! Timeline" and a plain `pickle.load` replay
//! (`../shared/fixtures/torch/expected/reference.json`, and
//! `tests/torch/expected.json` for the fixtures `scripts/make_torch_fixtures.py`
//! writes), profiler traces against the totals the trace itself records.

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use memtool_core::model::{BlockState, Memory};
use memtool_core::{load, LoadOptions, Source};
use serde_json::Value;

const SNAPSHOTS: [&str; 7] = [
    "bcrafton_memory_snapshot.pickle",
    "magma27_memory_snapshot.pickle",
    "silmont2000_mem_snapshot.pickle",
    "silmont2000_memory_forward_bf16_128.pickle",
    "silmont2000_memory_forward_fp32_128.pickle",
    "torch_cpu_transformer.snapshot.pickle",
    "transformer_nuggets_mini_snapshot.pickle",
];

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn profile(path: &Path) -> memtool_core::model::Profile {
    load(
        vec![Source::from_bytes(
            path.display().to_string(),
            std::fs::read(path).unwrap(),
        )],
        &LoadOptions::default(),
    )
    .unwrap()
}

/// torch's `segsum` split of a memory's end state: (reserved, allocated,
/// free external, free internal).
fn segsum(memory: &Memory) -> (u64, u64, u64, u64) {
    let (mut reserved, mut allocated, mut external, mut internal) = (0, 0, 0, 0);
    for s in &memory.segments {
        reserved += s.bytes;
        for b in &s.blocks {
            if b.state == BlockState::Allocated {
                allocated += b.requested;
                internal += b.bytes - b.requested;
            } else {
                external += b.bytes;
            }
        }
    }
    (reserved, allocated, external, internal)
}

/// Checks one snapshot's memtool output against a reference entry of the
/// shape `torch_reference.py` writes (per device: reserved, allocated;
/// per trace: actions, net change, maximum rise).
fn check_snapshot(path: &Path, reference: &Value) {
    let name = path.display().to_string();
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    let frag = common::json(&["frag", path.to_str().unwrap()]);
    let memories = summary["memories"].as_array().unwrap();
    let devices = reference["devices"].as_object().unwrap();
    assert_eq!(
        memories.len(),
        devices.len(),
        "{name}: one memory per device"
    );
    let loaded = profile(path);
    for (device, expected) in devices {
        let m = memories
            .iter()
            .find(|m| m["id"].as_str().unwrap().ends_with(&format!(":{device}")))
            .unwrap_or_else(|| panic!("{name}: no memory for device {device}"));
        assert_eq!(m["reserved_bytes"], expected["reserved"], "{name} reserved");
        assert_eq!(
            m["allocated_bytes"], expected["allocated"],
            "{name} allocated"
        );
        let memory = loaded
            .memories
            .iter()
            .find(|x| x.id == m["id"].as_str().unwrap())
            .unwrap();
        let (reserved, allocated, external, internal) = segsum(memory);
        assert_eq!(Some(reserved), expected["reserved"].as_u64(), "{name}");
        assert_eq!(Some(allocated), expected["allocated"].as_u64(), "{name}");
        let f = frag["memories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == m["id"])
            .unwrap();
        assert_eq!(
            f["reserved_bytes"], expected["reserved"],
            "{name} frag reserved"
        );
        assert_eq!(
            f["allocated_bytes"], expected["allocated"],
            "{name} frag allocated"
        );
        if let Some(ext) = expected.get("free_external") {
            assert_eq!(Some(external), ext.as_u64(), "{name} free external");
            assert_eq!(Some(internal), expected["free_internal"].as_u64(), "{name}");
            assert_eq!(&f["free_external_bytes"], ext, "{name} frag free external");
            assert_eq!(
                f["free_internal_bytes"], expected["free_internal"],
                "{name}"
            );
        }
        assert_eq!(
            memory.segments.len() as u64,
            expected["segments"].as_u64().unwrap(),
            "{name} segments"
        );
        assert_eq!(
            f["segments"].as_array().unwrap().len(),
            memory.segments.len()
        );

        let actions = &reference["trace_actions"][device.as_str()];
        let replay = &reference["trace_replay"][device.as_str()];
        if actions.is_null() {
            assert!(m.get("events_by_action").is_none(), "{name}: no trace");
            continue;
        }
        assert_eq!(&m["events_by_action"], actions, "{name} events per action");
        // The replay starts from what was live before the window, so its
        // peak is the reference's maximum rise above the start, and its end
        // the net change: peak - final = max_rise - net_change.
        let peak = m["peak_bytes"].as_i64().unwrap();
        let last = m["final_bytes"].as_i64().unwrap();
        let max_rise = replay["max_rise"].as_i64().unwrap();
        let net = replay["net_change"].as_i64().unwrap();
        assert_eq!(peak - last, max_rise - net, "{name} peak above the end");
        // Every live figure counts requested bytes.
        let requested = m["peak_requested_bytes"].as_i64().unwrap();
        assert_eq!(requested, peak, "{name}");
        // The peak and the end MemoryViz's "Active Memory Timeline" draws.
        if let Some(viz) = reference.get("memory_viz_active") {
            let viz = &viz[device.as_str()];
            assert_eq!(m["peak_bytes"], viz["max_size"], "{name}: MemoryViz's peak");
            assert_eq!(m["final_bytes"], viz["end"], "{name}: MemoryViz's end");
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn real_snapshots_match_torch_segsum_and_the_pickle_replay() {
    let expected = common::shared_fixture("torch/expected/reference.json");
    let reference = read_json(&expected);
    // MemoryViz's figures for the shared snapshots, kept in the repository
    // (numbers only) by scripts/memory_viz_reference.py.
    let memory_viz = read_json(&common::repo_fixture("torch/memory_viz_shared.json"));
    for name in SNAPSHOTS {
        let path = common::shared_fixture(&format!("torch/{name}"));
        let r = &reference[name];
        // Reshape the oracle's entry: totals per device, and the file-wide
        // free split (every fixture has one device).
        let mut devices = r["devices"].clone();
        for d in devices.as_object_mut().unwrap().values_mut() {
            d["free_external"] = r["free_external_bytes"].clone();
            d["free_internal"] = r["free_internal_bytes"].clone();
        }
        let viz = &memory_viz[name];
        assert!(
            viz.is_object(),
            "{name}: tests/torch/memory_viz_shared.json lacks MemoryViz's peak \
             (scripts/memory_viz_reference.py ../shared/fixtures/torch/*.pickle)"
        );
        let entry = serde_json::json!({
            "devices": devices,
            "trace_actions": r["trace_actions"],
            "trace_replay": r["trace_replay"],
            "memory_viz_active": viz,
        });
        check_snapshot(&path, &entry);
    }
}

#[test]
fn generated_snapshots_match_their_expected_numbers() {
    let expected = read_json(&common::repo_fixture("torch/expected.json"));
    for file in [
        "snapshot.p2.pickle",
        "snapshot.p4.pickle",
        "snapshot.p5.pickle",
        "snapshot.p4.pickle.gz",
    ] {
        check_snapshot(
            &common::repo_fixture(&format!("torch/{file}")),
            &expected["snapshot"],
        );
    }
    check_snapshot(
        &common::repo_fixture("torch/legacy.p2.pickle"),
        &expected["legacy"],
    );
}

/// Everything but the input's own path and format.
fn without_inputs(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("inputs");
    for w in v["warnings"].as_array_mut().unwrap() {
        w.as_object_mut().unwrap().remove("path");
    }
    v
}

#[test]
fn pickle_protocols_and_gzip_give_identical_output() {
    for command in ["summary", "peak", "leaks"] {
        let outputs: Vec<Value> = ["p2.pickle", "p4.pickle", "p5.pickle", "p4.pickle.gz"]
            .iter()
            .map(|v| {
                let path = common::repo_fixture(&format!("torch/snapshot.{v}"));
                without_inputs(common::json(&[command, path.to_str().unwrap()]))
            })
            .collect();
        for o in &outputs[1..] {
            assert_eq!(o, &outputs[0], "{command}");
        }
    }
}

#[test]
fn the_ring_buffer_and_its_end_state_are_explained() {
    let path = common::repo_fixture("torch/snapshot.p4.pickle");
    let p = profile(&path);
    let m = &p.memories[0];
    assert_eq!(m.id, "cuda:0");
    // One allocation freed in the window but made before it, one live block
    // never allocated in it: both are live at the start.
    assert_eq!(m.live_at_start.len(), 2);
    // Both count what was requested (the block of 1 MiB was asked 1,000,000).
    let starts: u64 = m.live_at_start.iter().map(|&a| m.allocation(a).bytes).sum();
    assert_eq!(starts, 100_000 + 1_000_000);
    // Each is named for what the recording saw of it, under the stack the
    // file gives: the block's own, the free's.
    let names = &p.names;
    let mut named: Vec<(u64, String, String)> = m
        .live_at_start
        .iter()
        .map(|&a| {
            let site = names.site_of(m.allocation(a).site);
            (
                m.allocation(a).bytes,
                names.str(site.op.unwrap()).to_string(),
                names.stack_label(site.stack),
            )
        })
        .collect();
    named.sort();
    assert_eq!(
        named,
        [
            (
                100_000,
                "<allocated before recording, freed later>".to_string(),
                "backward /venv/lib/python3.12/site-packages/torch/_tensor.py:581 \
                 <- train_step train.py:22 <- <module> train.py:40 <- <allocated before recording, freed later>"
                    .to_string()
            ),
            (
                1_000_000,
                "<allocated before recording, still live>".to_string(),
                "__init__ model.py:10 <- <module> train.py:40 <- <allocated before recording, still live>"
                    .to_string()
            ),
        ]
    );
    // The pending-free block (300 bytes requested) is still held at the end.
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    let cuda0 = &summary["memories"][0];
    assert_eq!(cuda0["final_bytes"], 1_000_000 + 500_000 + 300);
    assert_eq!(cuda0["final_buffers"], 3);
    // Reserved over time: the small segment was allocated in the window.
    let reserved: Vec<u64> = m
        .allocator_samples
        .iter()
        .filter_map(|s| s.reserved_bytes())
        .collect();
    assert_eq!(reserved, vec![2 << 20, 3 << 20, 3 << 20]);
    let warnings = summary["warnings"].to_string();
    assert!(
        warnings.contains("1 free and 1 live block belong to allocations made before"),
        "{warnings}"
    );
    assert!(
        warnings
            .contains("1 out-of-memory event in the trace: 8.00 MiB requested with 3.00 MiB free"),
        "{warnings}"
    );
    // ProfilerStep annotations are the steps; other annotations are not.
    let steps: Vec<(i64, i64, i64)> = m.steps.iter().map(|s| (s.id, s.start, s.end)).collect();
    let t0 = 1_700_000_000_000_000;
    assert_eq!(steps, [(7, t0 + 2, t0 + 8)]);
    // Frames keep Python's names as written, leaf first.
    let peak = common::json(&["peak", path.to_str().unwrap(), "--all-frames"]);
    let stacks = peak["memories"][0]["breakdowns"][0]["groups"].to_string();
    assert!(stacks.contains("<module> train.py:40"), "{stacks}");
}

#[test]
fn pickles_that_would_run_code_are_refused() {
    for file in ["hostile_reduce.p2.pickle", "hostile_stack_global.p4.pickle"] {
        let path = common::repo_fixture(&format!("torch/{file}"));
        let err = common::fails(&["summary", path.to_str().unwrap()], 2);
        assert!(err.contains(file), "{err}");
        assert!(err.contains("GLOBAL"), "{err}");
        assert!(err.contains("refuses"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// The largest `Total Allocated` per device in a Chrome trace, read with a
/// plain JSON parse (the reference the trace itself gives).
fn max_total_allocated(path: &Path) -> std::collections::BTreeMap<String, u64> {
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let trace: Value = serde_json::from_slice(&text).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["name"] != "[memory]" {
            continue;
        }
        let Some(total) = e["args"]["Total Allocated"].as_u64() else {
            continue;
        };
        let id = match e["args"]["Device Type"].as_i64().unwrap() {
            0 => "cpu".to_string(),
            _ => format!("cuda:{}", e["args"]["Device Id"]),
        };
        let slot = out.entry(id).or_insert(0);
        *slot = total.max(*slot);
    }
    out
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn profiler_traces_peak_at_the_largest_total_allocated() {
    for name in [
        "torch_cpu_transformer.pt.trace.json.gz",
        "hta_df_index_resolver.pt.trace.json.gz",
    ] {
        let path = common::shared_fixture(&format!("torch/{name}"));
        let expected = max_total_allocated(&path);
        let summary = common::json(&["summary", path.to_str().unwrap()]);
        for m in summary["memories"].as_array().unwrap() {
            let id = m["id"].as_str().unwrap();
            assert_eq!(
                m["peak_bytes"].as_u64(),
                expected.get(id).copied(),
                "{name} {id}"
            );
        }
        // Allocations are attributed to the operators that made them.
        let peak = common::json(&["peak", path.to_str().unwrap()]);
        let ops = peak["memories"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["breakdowns"].as_array().unwrap())
            .filter(|b| b["by"] == "op")
            .flat_map(|b| b["groups"].as_array().unwrap())
            .filter(|g| g["key"].as_str().unwrap().starts_with("aten::"))
            .count();
        assert!(ops > 0, "{name}: no allocation attributed to an aten:: op");
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn old_traces_without_addresses_pair_frees_by_size() {
    let path = common::shared_fixture("torch/kineto_tb_plugin_resnet50_worker0.pt.trace.json.gz");
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    let memories = summary["memories"].as_array().unwrap();
    let ids: Vec<&str> = memories.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["cpu", "cuda:0"]);
    // 12,838 [memory] events: 4,618 on the CPU, 8,220 on cuda:0.
    let events: Vec<u64> = memories
        .iter()
        .map(|m| m["events"].as_u64().unwrap())
        .collect();
    assert_eq!(events, [4618, 8220]);
    assert!(summary["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains("no Addr"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn memory_timelines_peak_at_the_largest_category_sum() {
    let path = common::shared_fixture("torch/torch_cpu_transformer.memory_timeline.json");
    let [times, sizes]: [Value; 2] =
        serde_json::from_value(read_json(&path)).expect("[times, sizes]");
    assert_eq!(
        times.as_array().unwrap().len(),
        sizes.as_array().unwrap().len()
    );
    let largest = sizes
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>()
        })
        .max()
        .unwrap();
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    assert_eq!(summary["memories"][0]["peak_bytes"].as_u64(), Some(largest));
    // The snapshot of the same run peaks at the same bytes.
    let snapshot = common::shared_fixture("torch/torch_cpu_transformer.snapshot.pickle");
    let s = common::json(&["summary", snapshot.to_str().unwrap()]);
    assert_eq!(s["memories"][0]["peak_bytes"].as_u64(), Some(largest));
    // Categories are torch's names, spelt as its snapshots write them, in
    // the timeline and the snapshot alike.
    let categories = |path: &Path| -> Vec<String> {
        let peak = common::json(&["peak", path.to_str().unwrap()]);
        let by_category = peak["memories"][0]["breakdowns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["by"] == "category")
            .unwrap()
            .clone();
        let mut keys: Vec<String> = by_category["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["key"].as_str().unwrap().to_string())
            .collect();
        keys.sort();
        keys
    };
    let torch_names = [
        "activation",
        "autograd_detail",
        "gradient",
        "input",
        "optimizer_state",
        "parameter",
        "temporary",
        "unknown",
    ];
    let from_timeline = categories(&path);
    let from_snapshot = categories(&snapshot);
    assert!(
        from_timeline
            .iter()
            .all(|k| torch_names.contains(&k.as_str())),
        "{from_timeline:?}"
    );
    assert!(from_timeline.contains(&"parameter".to_string()));
    assert!(from_timeline.contains(&"optimizer_state".to_string()));
    // The snapshot's allocations carry torch's names too (its other rows
    // are memory without a category: `<none>`).
    let named: Vec<&String> = from_snapshot
        .iter()
        .filter(|k| k.as_str() != "<none>")
        .collect();
    assert!(!named.is_empty(), "{from_snapshot:?}");
    assert!(
        named.iter().all(|k| torch_names.contains(&k.as_str())),
        "{from_snapshot:?}"
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_torch_fixture_works_with_every_command_and_format() {
    let dir = common::shared_fixture("torch");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 12);
    for f in &files {
        // The 53 MB trace once per command is enough; the rest in every format.
        let big = f.metadata().unwrap().len() > 1 << 20;
        let formats: &[&str] = if big {
            &["csv"]
        } else {
            &["table", "json", "csv"]
        };
        let f = f.to_str().unwrap();
        for command in ["summary", "peak", "leaks", "frag"] {
            for &format in formats {
                let out = common::memtool()
                    .args([command, f, "--format", format])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{command} {f} {format}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(!out.stdout.is_empty());
            }
        }
        let out = common::memtool()
            .args(["diff", f, f, "--format", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "diff {f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn generated_traces_attribute_allocations_to_the_innermost_op() {
    let expected = read_json(&common::repo_fixture("torch/expected.json"));
    let path = common::repo_fixture("torch/synthetic.pt.trace.json.gz");
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    for m in summary["memories"].as_array().unwrap() {
        let id = m["id"].as_str().unwrap();
        assert_eq!(
            m["peak_bytes"], expected["trace_peak_total_allocated"][id],
            "{id}: the peak is the largest Total Allocated"
        );
    }
    assert_eq!(summary["memories"][1]["capacity_bytes"], 16u64 << 30);
    let p = profile(&path);
    let mut checked = 0;
    for m in &p.memories {
        for a in &m.allocations {
            let Some(addr) = a.address() else { continue };
            let Some(op) = expected["alloc_ops"].get(addr.to_string()) else {
                continue;
            };
            let site = p.names.site_of(a.site);
            let got = site.op.map(|s| p.names.str(s).to_string());
            assert_eq!(got.as_deref(), op.as_str(), "allocation at {addr:#x}");
            checked += 1;
        }
    }
    assert_eq!(checked, expected["alloc_ops"].as_object().unwrap().len());
    // ProfilerStep#N spans are the steps of every memory of the trace.
    for m in &p.memories {
        let steps: Vec<(i64, i64, i64)> = m.steps.iter().map(|s| (s.id, s.start, s.end)).collect();
        assert_eq!(steps, [(0, 1000, 1500), (1, 2000, 2500)], "{}", m.id);
    }
    // The same events without Addr or totals pair by size; the live bytes
    // differ from the full trace only by what only the totals revealed.
    let old = common::repo_fixture("torch/synthetic_v19.pt.trace.json");
    let old_summary = common::json(&["summary", old.to_str().unwrap()]);
    let cuda = |s: &Value| s["memories"][1]["peak_bytes"].as_u64().unwrap();
    assert_eq!(cuda(&summary) - cuda(&old_summary), 1 << 20);
    assert_eq!(old_summary["memories"][1]["events"], 7);
}

#[test]
fn generated_memory_timelines_replay_their_categories() {
    let expected = read_json(&common::repo_fixture("torch/expected.json"));
    for (file, prefix) in [
        ("synthetic.memory_timeline.json", "timeline"),
        ("synthetic.memory_timeline.raw.json.gz", "raw_timeline"),
    ] {
        let path = common::repo_fixture(&format!("torch/{file}"));
        let summary = common::json(&["summary", path.to_str().unwrap()]);
        let m = &summary["memories"][0];
        assert_eq!(
            m["peak_bytes"],
            expected[format!("{prefix}_peak")],
            "{file}"
        );
        assert_eq!(
            m["final_bytes"],
            expected[format!("{prefix}_final")],
            "{file}"
        );
    }
}

/// A memory timeline records no device: it is named for the one its file
/// name says, else `cuda:0` (`export_memory_timeline`'s default where CUDA
/// was used), and a note says so, that its rows are categories, and how
/// much it holds from before profiling.
#[test]
fn memory_timelines_are_named_for_their_device_and_say_what_they_hold() {
    let path = common::repo_fixture("torch/synthetic.memory_timeline.json");
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    assert_eq!(summary["memories"][0]["id"], "cuda:0");
    let notes: Vec<&str> = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["note"] == true)
        .filter_map(|w| w["message"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with(
            "a PyTorch memory timeline, named cuda:0: the file records no device and cuda:0 is export_memory_timeline's default"
        ) && n.contains("its rows are categories (parameter, activation, ...), counted where other files count buffers")
            && !n.contains("before profiling")),
        "{notes:?}"
    );
}

/// The CPU transformer's timeline is `cpu` by its name, and holds 7,846,732 B
/// from before profiling (its first row, which `export_memory_timeline`
/// writes at the first time of the rest: the weights and Adam state of the
/// iterations before), which its trace cannot see.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_timeline_says_what_it_holds_from_before_profiling() {
    let path = common::shared_fixture("torch/torch_cpu_transformer.memory_timeline.json");
    let summary = common::json(&["summary", path.to_str().unwrap()]);
    assert_eq!(summary["memories"][0]["id"], "cpu");
    let note = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["note"] == true)
        .and_then(|w| w["message"].as_str())
        .unwrap()
        .to_string();
    assert!(
        note.starts_with("a PyTorch memory timeline of cpu, as its file name says; ")
            && note.ends_with(
                "it includes 7.48 MiB (7846732 B) made before profiling, which the trace of the same run cannot see"
            ),
        "{note}"
    );
    // Its rows are categories' totals: JSON marks the memory, and the
    // tables and the page count categories where they count buffers (5 at
    // the peak: activation, optimizer state, autograd detail, parameter,
    // input); CSV keeps its columns' names.
    assert_eq!(summary["memories"][0]["category_totals"], true);
    let file = path.to_str().unwrap();
    let table = common::stdout_in_repo(&["summary", file], &[0]);
    assert!(
        table.contains("peak bytes   categories      peak at   final bytes   final categories"),
        "{table}"
    );
    let peak = common::stdout_in_repo(&["peak", file, "--format", "md"], &[0]);
    assert!(
        peak.contains("| memory | peak_bytes | requested_bytes | categories | peak_at |")
            && peak.contains("| cpu | 30.56 MiB | 30.56 MiB | 5 | t+22.73 ms |"),
        "{peak}"
    );
    let csv = common::stdout_in_repo(&["summary", file, "--format", "csv"], &[0]);
    assert!(
        csv.starts_with("memory,kind,peak_bytes,buffers,peak_at,final_bytes,final_buffers\n"),
        "{csv}"
    );
    let page = common::stdout_in_repo(&["render", file], &[0]);
    assert!(
        page.contains("30.56 MiB (32045908 bytes, 5 categories)"),
        "page"
    );
    // The page says among the memory's facts what the note says.
    assert!(
        page.contains(
            "<dt>holds</dt><dd>each category&#39;s total (parameter, activation, ...), not \
             buffers; 7.48 MiB (7846732 B) of it made before profiling, which the trace of the \
             same run cannot see</dd>"
        ),
        "page"
    );
    assert!(
        page.contains("<dt>content</dt><dd>4438 events, 2221 category totals"),
        "page"
    );
    // A trace counts buffers.
    let trace = common::shared_fixture("torch/torch_cpu_transformer.pt.trace.json.gz");
    let doc = common::json(&["summary", trace.to_str().unwrap()]);
    assert!(doc["memories"][0].get("category_totals").is_none());
}

#[test]
fn hostile_json_is_an_error_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("memtool-torch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let deep = format!("{{\"traceEvents\": {}", "[".repeat(100_000));
    for (name, text) in [
        ("deep.json", deep.as_str()),
        (
            "truncated.json",
            "{\"traceEvents\": [{\"name\": \"[memory]\", \"ts\": 1",
        ),
        (
            "no_memory.json",
            "{\"traceEvents\": [{\"name\": \"aten::mm\", \"ph\": \"X\"}]}",
        ),
        ("bad_timeline.json", "[[1, 2], [[0, 1e400]]]"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let err = common::fails(&["summary", path.to_str().unwrap()], 2);
        assert!(err.contains(name), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What was live at the peak by training phase, on every shared snapshot and
/// the trace of the CPU transformer run, against an independent reading in
/// Python (`scripts/torch_phases_reference.py`, its output in
/// `tests/torch/phases_shared.json`): the rows are those bytes and add up to
/// the peak; each memory's phases come in the order the reference finds its
/// allocations' phases; and the trace's stacks are its `python_function`
/// spans, leaf for leaf.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn phases_and_python_stacks_match_an_independent_reading() {
    let reference = read_json(&common::repo_fixture("torch/phases_shared.json"));
    let reference = reference.as_object().unwrap();
    assert_eq!(reference.len(), SNAPSHOTS.len() + 1);
    for (name, memories) in reference {
        let path = common::shared_fixture(&format!("torch/{name}"));
        let path = path.to_str().unwrap();
        let peak = common::json(&["peak", path, "--by", "phase"]);
        let summary = common::json(&["summary", path]);
        for (id, want) in memories.as_object().unwrap() {
            let memory = |doc: &Value| {
                doc["memories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    // Snapshot devices by number (`cuda:0`, `device:0`).
                    .find(|m| {
                        let m = m["id"].as_str().unwrap();
                        m == id
                            || m.strip_suffix(id.as_str())
                                .is_some_and(|d| d.ends_with(':'))
                    })
                    .cloned()
                    .unwrap_or_else(|| panic!("{name}: no memory {id}"))
            };
            let m = memory(&peak);
            assert_eq!(m["peak_bytes"], want["peak_bytes"], "{name} {id}");
            let breakdowns = m["breakdowns"].as_array().unwrap();
            assert_eq!(
                breakdowns.len(),
                1,
                "{name}: --by phase is the one breakdown"
            );
            assert_eq!(breakdowns[0]["by"], "phase");
            let (rows, empty): (Vec<&Value>, Vec<&Value>) = breakdowns[0]["groups"]
                .as_array()
                .unwrap()
                .iter()
                .partition(|g| g["bytes"] != 0);
            let rows: serde_json::Map<String, Value> = rows
                .iter()
                .map(|g| (g["key"].as_str().unwrap().to_string(), g["bytes"].clone()))
                .collect();
            // Phases the recording has that hold nothing at the peak are
            // rows of 0 B (the optimizer of a peak in the first backward).
            let empty: BTreeSet<&str> = empty.iter().map(|g| g["key"].as_str().unwrap()).collect();
            let want_empty: BTreeSet<&str> = want["phase_runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .filter(|p| !rows.contains_key(*p))
                .collect();
            assert_eq!(empty, want_empty, "{name} {id}: phases without bytes");
            assert_eq!(
                &Value::Object(rows.clone()),
                &want["by_phase"],
                "{name} {id}"
            );
            let sum: u64 = rows.values().map(|v| v.as_u64().unwrap()).sum();
            assert_eq!(
                Some(sum),
                m["peak_bytes"].as_u64(),
                "{name} {id}: rows add up"
            );
            let summary = memory(&summary);
            let runs: Vec<&Value> = summary["phases"]
                .as_array()
                .map(|spans| spans.iter().map(|s| &s["phase"]).collect())
                .unwrap_or_default();
            let want_runs: Vec<&Value> = want["phase_runs"].as_array().unwrap().iter().collect();
            assert_eq!(runs, want_runs, "{name} {id}: phases in order");
            if let Some(leaves) = want.get("by_leaf_frame") {
                let stacks = common::json(&["peak", path, "--by", "stack", "--all-frames"]);
                let mut by_leaf = serde_json::Map::new();
                for g in memory(&stacks)["breakdowns"][0]["groups"]
                    .as_array()
                    .unwrap()
                {
                    let leaf = g["key"].as_str().unwrap().split(" <- ").next().unwrap();
                    let bytes = by_leaf.entry(leaf).or_insert(Value::from(0u64));
                    *bytes = Value::from(bytes.as_u64().unwrap() + g["bytes"].as_u64().unwrap());
                }
                assert!(!by_leaf.contains_key("<no stack>"), "{name}: {by_leaf:?}");
                assert_eq!(&Value::Object(by_leaf), leaves, "{name} {id}: leaf frames");
            }
        }
    }
    // The run the fixtures were made from: the peak is in the first step's
    // backward pass, with the forward pass's activations and the loss live;
    // every step has its optimizer phase.
    let reference = &reference["torch_cpu_transformer.pt.trace.json.gz"]["cpu"];
    for phase in ["forward", "loss", "backward"] {
        assert!(reference["by_phase"].get(phase).is_some(), "{phase}");
    }
    let optimizer_phases = reference["phase_runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| *p == "optimizer")
        .count();
    assert_eq!(optimizer_phases, 3);
}

/// Blocks allocated before the recording and freed during it carry the
/// free's stack (the file recorded nothing else): no table lists that stack
/// as where they were allocated. `peak --by stack` and `--by user-frame`
/// give them one name and the same bytes, and the page marks their sites so
/// its drill-down heads the stack as the free's.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_stack_of_a_free_is_never_shown_as_an_allocation_s() {
    const FREED: &str = "<allocated before recording, freed later>";
    let path = common::shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let file = path.to_str().unwrap();
    let groups = |by: &str| {
        let doc = common::json(&["peak", file, "--by", by]);
        common::bytes_by_key(&doc["memories"][0]["breakdowns"][0]["groups"])
    };
    let by_stack = groups("stack");
    let by_user_frame = groups("user-frame");
    // Independently: MemoryViz's rule, frees without a recorded allocation
    // live from the start, at the free's size. 222 such blocks are live at
    // the peak, 1,523,681,280 B (optimizer.py:71 and :72's frees, and
    // benchmarking_script.py:54's).
    assert_eq!(by_stack[FREED], 1_523_681_280);
    assert_eq!(by_user_frame[FREED], by_stack[FREED]);
    for key in by_stack.keys() {
        assert!(
            key == FREED || !key.contains(FREED),
            "a free's stack listed as an allocation's: {key}"
        );
    }
    assert!(
        !by_stack.keys().any(|k| k.contains("optimizer.py:71")),
        "{by_stack:?}"
    );
    // The page's drill-down knows which sites these are.
    let out = common::memtool().args(["render", file]).output().unwrap();
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains("\"before\":\"freed\""));
    assert!(page.contains("allocation not recorded; stack of the free"));
}

/// The traces `scripts/make_torch_trace_fixtures.py` writes, and the figures
/// it computed from their events alone.
fn trace_data(file: &str) -> String {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch_trace")
        .join(file)
        .display()
        .to_string()
}

fn trace_expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(trace_data("expected.json")).unwrap()).unwrap()
}

/// Recent PyTorch annotates each step twice, on the CPU and as a GPU copy
/// that ends before the step's last CPU-side events: steps are the CPU's
/// spans, so those events (the activations' frees) fall in their step.
#[test]
fn trace_steps_are_the_cpu_annotation_not_its_gpu_copy() {
    let want = trace_expected();
    let doc = common::json(&["summary", &trace_data("steps_cpu_gpu.pt.trace.json")]);
    let steps = doc["memories"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for (got, want) in steps.iter().zip(want["steps"].as_array().unwrap()) {
        for field in [
            "step",
            "start",
            "end",
            "allocations",
            "deallocations",
            "end_bytes",
        ] {
            assert_eq!(got[field], want[field], "{field}: {got}");
        }
    }
    // The GPU copy ends before the frees: had it been the step, step 0
    // would have ended with its activations live and no free.
    let gpu_end = want["gpu_steps"][0]["end"].as_f64().unwrap();
    assert!(gpu_end < want["steps"][0]["end"].as_f64().unwrap());
    assert_eq!(want["steps"][0]["deallocations"], 4);
}

/// PyTorch on ROCm records `Device Type: 6` (HIP): the GPU is `cuda:N`, as
/// PyTorch names it there, with its reserved bytes and capacity; every
/// memory of a trace, the CPU's included, is of kind `device`.
#[test]
fn rocm_traces_are_gpus_with_reserved_and_capacity() {
    let want = trace_expected();
    let file = trace_data("rocm.pt.trace.json");
    let doc = common::json(&["summary", &file]);
    let memories = doc["memories"].as_array().unwrap();
    let gpu = memories
        .iter()
        .find(|m| m["id"] == "cuda:0")
        .expect("cuda:0");
    assert_eq!(gpu["kind"], "device");
    assert_eq!(gpu["capacity_bytes"], want["capacity_bytes"]);
    assert_eq!(gpu["reserved_bytes"], want["reserved_bytes"]);
    assert_eq!(gpu["peak_bytes"], want["peak_bytes"]);
    let cpu = memories.iter().find(|m| m["id"] == "cpu").expect("cpu");
    assert_eq!(cpu["kind"], "device");
    // frag has its figure, as for a CUDA trace.
    let frag = common::json(&["frag", &file]);
    let row = frag["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "cuda:0")
        .unwrap()
        .clone();
    assert_eq!(row["at_peak"]["reserved_bytes"], want["reserved_bytes"]);
    assert_eq!(
        row["at_peak"]["unused_reserved_bytes"].as_u64().unwrap(),
        want["reserved_bytes"].as_u64().unwrap() - want["peak_bytes"].as_u64().unwrap()
    );
}
