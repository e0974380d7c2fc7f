//! Compiled-program memory (XLA buffer assignment in an XSpace) against XProf
//! 2.24.2's Memory Viewer output in `../shared/fixtures/xspace/expected/`.
//! Every expected value is computed from XProf's JSON at test time.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

const MIB: f64 = 1048576.0;
/// XProf lumps buffers under this size into one "small" row.
const SMALL: u64 = 16384;
const FIXTURES: [&str; 2] = ["jax_mlp", "jax_transformer_small"];

/// XProf's MiB back to bytes. Every size is a whole number of bytes, but
/// XProf's JSON prints some doubles with only 15 significant digits.
fn bytes(mib: &Value) -> u64 {
    let b = mib.as_f64().expect("a number") * MIB;
    let whole = b.round();
    assert!(
        (b - whole).abs() < 1e-3,
        "{mib} MiB is not a whole number of bytes"
    );
    whole as u64
}

/// How `run_xprof.py` turns a module name into a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// XProf's Memory Viewer output per module, keyed by the file-safe module name.
fn expected(fixture: &str) -> BTreeMap<String, Value> {
    let dir = common::shared_fixture("xspace/expected");
    let prefix = format!("{fixture}.memory_viewer.");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name
            .strip_prefix(&prefix)
            .and_then(|n| n.strip_suffix(".json"))
        {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            out.insert(module.to_string(), serde_json::from_str(&text).unwrap());
        }
    }
    assert!(!out.is_empty(), "no memory_viewer files for {fixture}");
    out
}

fn path(fixture: &str) -> String {
    let p = common::shared_fixture(&format!("xspace/{fixture}.xplane.pb"));
    p.to_str().unwrap().to_string()
}

/// memtool's program memories of memory space 0, keyed like [`expected`].
fn memories(report: &Value) -> BTreeMap<String, &Value> {
    report["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "program_space" && m["memory_space"] == 0)
        .map(|m| (file_safe(m["module"].as_str().unwrap()), m))
        .collect()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_module_has_xprofs_peak_timeline_and_buffers() {
    for fixture in FIXTURES {
        let file = path(fixture);
        let expected = expected(fixture);
        let report = common::json(&["peak", &file]);
        let ours = memories(&report);
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{fixture}: the modules"
        );
        for (module, xprof) in &expected {
            let m = ours[module];
            let what = format!("{fixture} {module}");
            assert_eq!(
                m["peak_bytes"],
                bytes(&xprof["peakHeapMib"]),
                "{what}: peak"
            );
            assert_eq!(
                m["peak_requested_bytes"],
                bytes(&xprof["peakUnpaddedHeapMib"]),
                "{what}: unpadded peak"
            );
            let position = xprof["peakHeapSizePosition"].as_i64().unwrap_or(0);
            assert_eq!(m["peak_position"], position, "{what}: peak position");

            let timeline: Vec<u64> = xprof["heapSizes"]
                .as_array()
                .map_or(Vec::new(), |a| a.iter().map(bytes).collect());
            let unpadded: Vec<u64> = xprof["unpaddedHeapSizes"]
                .as_array()
                .map_or(Vec::new(), |a| a.iter().map(bytes).collect());
            let ours_timeline: Vec<u64> =
                serde_json::from_value(m["heap_timeline_bytes"].clone()).unwrap();
            let ours_unpadded: Vec<u64> =
                serde_json::from_value(m["heap_timeline_requested_bytes"].clone()).unwrap();
            if timeline.is_empty() {
                // No heap simulator trace: XProf draws nothing, memtool one
                // point holding what lives through the whole program.
                assert_eq!(ours_timeline, vec![bytes(&xprof["peakHeapMib"])], "{what}");
            } else {
                assert_eq!(ours_timeline, timeline, "{what}: heap timeline");
                assert_eq!(ours_unpadded, unpadded, "{what}: unpadded heap timeline");
                let names = xprof["hloInstructionNames"].as_array().unwrap();
                let at_peak = names[position as usize].as_str().unwrap();
                assert_eq!(
                    m["peak_instruction"], at_peak,
                    "{what}: instruction at peak"
                );
            }

            // XProf's maxHeap: one row per buffer of 16 KiB or more, the rest
            // summed into one "small" row.
            let mut xprof_large = Vec::new();
            let mut xprof_small = 0;
            for object in xprof["maxHeap"].as_array().unwrap() {
                if object["logicalBufferId"] == -1 {
                    xprof_small += bytes(&object["logicalBufferSizeMib"]);
                } else {
                    xprof_large.push((
                        object["instructionName"].as_str().unwrap().to_string(),
                        object["shapeString"].as_str().unwrap().to_string(),
                        bytes(&object["logicalBufferSizeMib"]),
                        bytes(&object["unpaddedShapeMib"]),
                        object["groupName"].as_str().unwrap().to_string(),
                        object["tfOpName"].as_str().unwrap_or("").to_string(),
                    ));
                }
            }
            let mut ours_large = Vec::new();
            let mut ours_small = 0;
            for b in m["buffers_at_peak"].as_array().unwrap() {
                let size = b["bytes"].as_u64().unwrap();
                if size < SMALL {
                    ours_small += size;
                    continue;
                }
                ours_large.push((
                    b["instruction"].as_str().unwrap().to_string(),
                    b["shape"].as_str().unwrap().to_string(),
                    size,
                    b["unpadded_bytes"].as_u64().unwrap(),
                    b["category"].as_str().unwrap().to_string(),
                    b["op_name"].as_str().unwrap_or("").to_string(),
                ));
            }
            // Ours are sorted by size; XProf's maxHeapBySize is too, but ties
            // keep program order there. Compare as sets.
            xprof_large.sort();
            ours_large.sort();
            assert_eq!(ours_large, xprof_large, "{what}: buffers at peak");
            assert_eq!(ours_small, xprof_small, "{what}: small buffers at peak");
            let sizes: Vec<u64> = m["buffers_at_peak"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["bytes"].as_u64().unwrap())
                .collect();
            assert!(
                sizes.windows(2).all(|w| w[0] >= w[1]),
                "{what}: largest first"
            );
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn summary_has_xprofs_allocation_totals_and_ranks_modules_by_peak() {
    for fixture in FIXTURES {
        let file = path(fixture);
        let expected = expected(fixture);
        let report = common::json(&["summary", &file]);
        let ours = memories(&report);
        assert_eq!(ours.len(), expected.len(), "{fixture}: one row per module");
        for (module, xprof) in &expected {
            let m = ours[module];
            let what = format!("{fixture} {module}");
            assert_eq!(m["peak_bytes"], bytes(&xprof["peakHeapMib"]), "{what}");
            assert_eq!(
                m["total_allocation_bytes"],
                bytes(&xprof["totalBufferAllocationMib"]),
                "{what}: total allocation"
            );
            assert_eq!(
                m["parameter_bytes"],
                bytes(&xprof["entryComputationParametersMib"]),
                "{what}: parameters"
            );
            assert_eq!(
                m["output_bytes"],
                bytes(&xprof["maybeLiveOutMib"]),
                "{what}: outputs"
            );
            assert_eq!(
                m["temporary_bytes"].as_u64().unwrap(),
                bytes(&xprof["totalBufferAllocationMib"])
                    - bytes(&xprof["indefiniteBufferAllocationMib"]),
                "{what}: temporaries"
            );
        }
    }
    // The transformer: all 18 modules, biggest peak first in the table.
    let file = path("jax_transformer_small");
    let expected = expected("jax_transformer_small");
    assert_eq!(expected.len(), 18);
    let out = common::memtool().args(["summary", &file]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let table = text
        .split("Compiled programs (biggest peak first)")
        .nth(1)
        .expect("a compiled programs table");
    // The row under the rule (a heading may take two lines).
    let first_row = table
        .lines()
        .skip_while(|l| !l.starts_with('─'))
        .nth(1)
        .unwrap();
    let biggest = expected
        .iter()
        .max_by(|a, b| {
            a.1["peakHeapMib"]
                .as_f64()
                .partial_cmp(&b.1["peakHeapMib"].as_f64())
                .unwrap()
        })
        .unwrap()
        .1["moduleName"]
        .as_str()
        .unwrap();
    assert!(first_row.trim_start().starts_with(biggest), "{first_row}");
    // A module's heap simulator events are not an allocator's allocations
    // and frees: no "Allocators" table (the file has no allocator events).
    assert!(!text.contains("Allocators"), "{text}");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn module_selects_by_name_with_or_without_program_id() {
    let file = path("jax_mlp");
    let expected = expected("jax_mlp");
    let xprof = &expected["jit_step_10_"];
    for name in ["jit_step", "jit_step(10)"] {
        let report = common::json(&["peak", &file, "--module", name]);
        let memories = report["memories"].as_array().unwrap();
        assert_eq!(memories.len(), 1, "--module {name}");
        assert_eq!(memories[0]["module"], "jit_step(10)");
        assert_eq!(memories[0]["peak_bytes"], bytes(&xprof["peakHeapMib"]));
    }
    // jit__normal(4), (6) and (8) share a name.
    let report = common::json(&["peak", &file, "--module", "jit__normal"]);
    assert_eq!(report["memories"].as_array().unwrap().len(), 3);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn budget_lists_what_must_shrink_and_fails_when_exceeded() {
    let file = path("jax_transformer_small");
    let expected = expected("jax_transformer_small");
    let xprof = &expected["jit_train_step_34_"];
    let peak = bytes(&xprof["peakHeapMib"]);
    let budget = peak - 4 * 1048576;
    let args = ["peak", &file, "--module", "jit_train_step", "--budget"];
    let out = common::memtool()
        .args(args)
        .arg(budget.to_string())
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a peak over budget fails the gate"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = &report["memories"][0]["budget"];
    assert_eq!(check["fits"], false);
    assert_eq!(check["excess_bytes"], peak - budget);
    // The largest buffers at XProf's peak, largest first, until they cover 4 MiB.
    let mut sizes: Vec<u64> = xprof["maxHeap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| bytes(&o["logicalBufferSizeMib"]))
        .collect();
    sizes.sort_by(|a, b| b.cmp(a));
    let mut needed = Vec::new();
    let mut total = 0;
    for s in sizes {
        if total >= peak - budget {
            break;
        }
        total += s;
        needed.push(s);
    }
    let shrink: Vec<u64> = check["shrink"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(shrink, needed);

    let report = common::json(&[
        "peak",
        &file,
        "--module",
        "jit_train_step",
        "--budget",
        &peak.to_string(),
    ]);
    assert_eq!(report["memories"][0]["budget"]["fits"], true);
    assert_eq!(
        report["memories"][0]["budget"]["shrink"],
        Value::Array(vec![])
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn buffers_carry_source_lines_and_phases() {
    let file = path("jax_mlp");
    let expected = expected("jax_mlp");
    let xprof = &expected["jit_step_10_"];
    let report = common::json(&["peak", &file, "--module", "jit_step"]);
    let buffers = report["memories"][0]["buffers_at_peak"].as_array().unwrap();
    for object in xprof["maxHeap"].as_array().unwrap() {
        let Some(source) = object.get("sourceInfo") else {
            continue;
        };
        let name = object["instructionName"].as_str().unwrap();
        let ours = buffers.iter().find(|b| b["instruction"] == name).unwrap();
        let want = format!(
            "{}:{}",
            source["fileName"].as_str().unwrap(),
            source["lineNumber"]
        );
        assert_eq!(ours["source"], want.as_str(), "{name}");
        // JAX names gradient ops transpose(jvp(...)).
        let op = object["tfOpName"].as_str().unwrap();
        if op.contains("transpose(") {
            assert_eq!(ours["phase"], "backward", "{name}");
        }
    }
}

/// A length-delimited protobuf field.
fn field(number: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 128 && number < 16);
    [&[number << 3 | 2, payload.len() as u8][..], payload].concat()
}

/// An XSpace whose metadata plane names an `Hlo Proto` stat and holds one
/// event metadata entry.
fn metadata_xspace(event_metadata_entry: &[u8]) -> Vec<u8> {
    let stat = field(2, &[&[0x08, 7][..], &field(2, b"Hlo Proto")].concat());
    let plane = [
        field(2, b"/host:metadata"),
        field(5, &[&[0x08, 7][..], &stat].concat()),
        field(4, event_metadata_entry),
    ]
    .concat();
    field(1, &plane)
}

fn write_temp(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("memtool-hlo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_corrupt_metadata_plane_is_an_error_naming_the_file() {
    // The entry's value claims 5 bytes; 1 follows.
    let file = write_temp("corrupt.xplane.pb", &metadata_xspace(&[0x12, 0x05, 0x08]));
    let stderr = common::fails(&["summary", &file], 2);
    assert!(
        stderr.contains(&file) && stderr.contains("invalid XSpace") && stderr.contains("at byte"),
        "{stderr}"
    );
}

#[test]
fn a_module_that_is_not_an_hlo_proto_is_skipped_with_a_warning() {
    // Event metadata 3 whose `Hlo Proto` stat holds bytes that are not a message.
    let stat = field(5, &[&[0x08, 7][..], &field(6, &[0xff, 0xff])].concat());
    let metadata = [&[0x08, 3][..], &stat].concat();
    let entry = [&[0x08, 3][..], &field(2, &metadata)].concat();
    let file = write_temp("bad_module.xplane.pb", &metadata_xspace(&entry));
    // With nothing else in the file there is no memory to report: exit 2,
    // saying why, including the skipped module.
    let stderr = common::fails(&["summary", &file], 2);
    assert!(
        stderr.contains("program id 3") && stderr.contains("skipped"),
        "{stderr}"
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn diff_by_op_compares_compiles_op_by_op() {
    let file = path("jax_mlp");
    let expected = expected("jax_mlp");
    let xprof = &expected["jit_step_10_"];
    let report = common::json(&["diff", &file, &file, "--module", "jit_step", "--by", "op"]);
    assert_eq!(report["by"], "op");
    assert_eq!(report["total"]["delta_bytes"], 0);
    let rows = report["rows"].as_array().unwrap();
    let total: u64 = rows.iter().map(|r| r["base_bytes"].as_u64().unwrap()).sum();
    assert_eq!(total, bytes(&xprof["peakHeapMib"]));
    let mut by_op: BTreeMap<String, u64> = BTreeMap::new();
    for object in xprof["maxHeap"].as_array().unwrap() {
        if let Some(op) = object["tfOpName"].as_str() {
            *by_op.entry(op.to_string()).or_default() += bytes(&object["logicalBufferSizeMib"]);
        }
    }
    for (op, xprof_bytes) in by_op {
        let row = rows.iter().find(|r| r["key"] == op.as_str()).unwrap();
        // XProf leaves buffers under 16 KiB out of its per-buffer rows.
        let ours = row["base_bytes"].as_u64().unwrap();
        assert!(ours >= xprof_bytes && ours - xprof_bytes < SMALL, "{op}");
        assert_eq!(row["delta_bytes"], 0);
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn xprof_compat_lists_buffers_at_peak_as_xprofs_max_heap() {
    for fixture in FIXTURES {
        let file = path(fixture);
        let expected = expected(fixture);
        let report = common::json(&["peak", &file, "--xprof-compat"]);
        let ours = memories(&report);
        for (module, xprof) in &expected {
            let want: Vec<(String, Option<String>, u64)> = xprof["maxHeap"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    let name = o.get("instructionName").unwrap_or(&o["label"]);
                    (
                        name.as_str().unwrap().to_string(),
                        o["shapeString"].as_str().map(str::to_string),
                        bytes(&o["logicalBufferSizeMib"]),
                    )
                })
                .collect();
            let got: Vec<(String, Option<String>, u64)> = ours[module]["buffers_at_peak"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| {
                    (
                        b["instruction"].as_str().unwrap().to_string(),
                        b["shape"].as_str().map(str::to_string),
                        b["bytes"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{fixture} {module}: maxHeap, row by row");
        }
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn phases_split_a_training_step_peak() {
    let file = path("jax_transformer_small");
    let expected = expected("jax_transformer_small");
    let xprof = &expected["jit_train_step_34_"];
    let report = common::json(&["peak", &file, "--module", "jit_train_step"]);
    let m = &report["memories"][0];
    let phases = common::bytes_by_key(&m["phases"]);
    assert_eq!(phases.values().sum::<u64>(), bytes(&xprof["peakHeapMib"]));
    // XProf's rows whose JAX op name is inside transpose(...) / only jvp(...).
    let (mut backward, mut forward) = (0, 0);
    for o in xprof["maxHeap"].as_array().unwrap() {
        let op = o["tfOpName"].as_str().unwrap_or("");
        if o["groupName"] == "Parameter" {
            continue;
        }
        if op.contains("transpose(") {
            backward += bytes(&o["logicalBufferSizeMib"]);
        } else if op.contains("jvp(") {
            forward += bytes(&o["logicalBufferSizeMib"]);
        }
    }
    assert!(backward > 0 && forward > 0);
    // Ours also count the buffers under 16 KiB XProf sums apart.
    assert!(phases["backward"] >= backward && phases["backward"] - backward < SMALL);
    assert!(phases["forward"] >= forward && phases["forward"] - forward < SMALL);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_file_is_listed_once_per_load() {
    let file = path("jax_mlp");
    let report = common::json(&["summary", &file]);
    assert_eq!(report["inputs"].as_array().unwrap().len(), 1);
    assert_eq!(report["inputs"][0]["format"], "xspace");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_module_that_is_not_there_is_a_usage_error_listing_the_modules() {
    let file = path("jax_mlp");
    let stderr = common::fails(&["peak", &file, "--module", "jit_nope"], 2);
    assert!(
        stderr.contains("`jit_nope`") && stderr.contains("jit_step(10)"),
        "{stderr}"
    );
}

/// The page draws each program's buffers as XProf's Memory Viewer does: the
/// blocks it marks live at the peak are XProf's `maxHeap` (buffers under
/// 16 KiB summed, as XProf lumps them), at XProf's peak position, and each
/// is drawn across that position while no other block is.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_pages_program_blocks_at_the_peak_are_xprofs_max_heap() {
    for fixture in FIXTURES {
        let expected = expected(fixture);
        let out = common::memtool()
            .args(["render", &path(fixture), "-o", "-"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{fixture}: render failed");
        let page = String::from_utf8(out.stdout).unwrap();
        let tag = "<script type=\"application/json\" id=\"memtool-data\">";
        let start = page.find(tag).expect("data element") + tag.len();
        let end = start + page[start..].find("</script>").unwrap();
        let data: Value = serde_json::from_str(&page[start..end]).unwrap();
        let mut checked = Vec::new();
        for chart in data["memories"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m.get("program"))
            .filter(|p| p["memory_space"] == 0)
        {
            let module = file_safe(chart["module"].as_str().unwrap());
            let xprof = &expected[&module];
            let what = format!("{fixture} {module}");
            let peak_at = chart["peak_at"].as_i64().unwrap();
            assert_eq!(
                peak_at,
                xprof["peakHeapSizePosition"].as_i64().unwrap_or(0),
                "{what}: peak position"
            );
            assert_eq!(chart["omitted"], 0, "{what}: every buffer drawn");
            let mut ours_large = Vec::new();
            let mut ours_small = 0;
            for b in chart["blocks"].as_array().unwrap() {
                let (s, e) = (b["s"].as_i64().unwrap(), b["e"].as_i64().unwrap());
                let at_peak = b["peak"] == true;
                assert_eq!(
                    s <= peak_at && peak_at < e,
                    at_peak,
                    "{what}: {} drawn across the peak iff live there",
                    b["name"]
                );
                if !at_peak {
                    continue;
                }
                let size = b["b"].as_u64().unwrap();
                if size < SMALL {
                    ours_small += size;
                } else {
                    ours_large.push((b["name"].as_str().unwrap().to_string(), size));
                }
            }
            let mut xprof_large = Vec::new();
            let mut xprof_small = 0;
            for object in xprof["maxHeap"].as_array().unwrap() {
                let size = bytes(&object["logicalBufferSizeMib"]);
                if object["logicalBufferId"] == -1 {
                    xprof_small += size;
                } else {
                    xprof_large.push((
                        object["instructionName"].as_str().unwrap().to_string(),
                        size,
                    ));
                }
            }
            ours_large.sort();
            xprof_large.sort();
            assert!(!xprof_large.is_empty(), "{what}: XProf lists buffers");
            assert_eq!(ours_large, xprof_large, "{what}: blocks at the peak");
            assert_eq!(ours_small, xprof_small, "{what}: small blocks at the peak");
            checked.push(module);
        }
        // The page draws every program worth a section; the training step
        // is the one that motivated the chart.
        assert!(
            fixture != "jax_transformer_small"
                || checked.iter().any(|m| m.starts_with("jit_train_step")),
            "{fixture}: jit_train_step drawn ({checked:?})"
        );
        assert!(!checked.is_empty(), "{fixture}: no program charts");
    }
}
