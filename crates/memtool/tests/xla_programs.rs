//! Compiled programs across runs and from XLA's dumps, on the captures of
//! `scripts/capture_xla_dumps.py` (JAX on CPU): two XSpace traces of one
//! script, the second compiling one more program first (so every compile
//! counter differs), and the `--xla_dump_to` dumps of the same programs.

mod common;

use serde_json::Value;

fn fixture(rel: &str) -> String {
    common::repo_fixture(rel).display().to_string()
}

const RUN1: &str = "xspace/counters_run1.xplane.pb";
const RUN2: &str = "xspace/counters_run2.xplane.pb";

/// `diff` pairs every program with itself whatever its counter: no change
/// anywhere but the two programs only the second run compiles.
#[test]
fn diff_pairs_each_program_with_itself_across_compile_counters() {
    let doc = common::json(&["diff", &fixture(RUN1), &fixture(RUN2)]);
    let memories = doc["memories"].as_array().unwrap();
    let mut new_only = Vec::new();
    for m in memories {
        let id = m["id"].as_str().unwrap();
        assert!(!id.ends_with(')'), "{id}: a key keeps no counter");
        if m["base_bytes"] == 0 {
            new_only.push(id.to_string());
            continue;
        }
        assert_eq!(m["delta_bytes"], 0, "{m}");
        assert_ne!(m["base_id"], m["new_id"], "{m}: the counters differ");
    }
    new_only.sort();
    assert_eq!(new_only, ["jit__lambda", "jit_iota"]);
    let step = memories
        .iter()
        .find(|m| m["id"] == "jit_train_step")
        .unwrap();
    assert_eq!(step["base_id"], "jit_train_step(26)");
    assert_eq!(step["new_id"], "jit_train_step(30)");
    assert_eq!(step["base_bytes"], step["new_bytes"]);
    // Three `_normal` programs of different shapes pair by shape, not order.
    let normals: Vec<&Value> = memories
        .iter()
        .filter(|m| m["id"].as_str().unwrap().starts_with("jit__normal"))
        .collect();
    assert_eq!(normals.len(), 3);
    // One program op by op: nothing changes.
    let doc = common::json(&[
        "diff",
        &fixture(RUN1),
        &fixture(RUN2),
        "--module",
        "jit_train_step",
        "--by",
        "op",
    ]);
    assert_eq!(doc["memories"].as_array().unwrap().len(), 1);
    for row in doc["rows"].as_array().unwrap() {
        assert_eq!(row["delta_bytes"], 0, "{row}");
    }
    assert_eq!(doc["total"]["delta_bytes"], 0);
}

/// The peak memory of each program, by module name, as `peak` reports it.
fn peaks(path: &str) -> std::collections::BTreeMap<String, Value> {
    let doc = common::json(&["peak", path, "--top", "1000"]);
    doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap().to_string(), m.clone()))
        .collect()
}

/// A dump's `*.hlo.pb` is the program an XSpace of the same script holds:
/// the same peak, where, and the same buffers at it.
#[test]
fn a_dumped_module_reads_as_the_same_program_in_an_xspace() {
    let traced = peaks(&fixture(RUN1));
    for module in ["jit_train_step(26)", "jit_oom(28)"] {
        let name = module.split('(').next().unwrap();
        let file = fixture(&format!(
            "xla/dump_proto/module_00{}.{name}.cpu_after_optimizations.hlo.pb",
            &module[module.len() - 3..module.len() - 1]
        ));
        let dumped = peaks(&file);
        assert_eq!(dumped.len(), 1, "{file}");
        let (d, t) = (&dumped[module], &traced[module]);
        for field in [
            "peak_bytes",
            "peak_position",
            "peak_instruction",
            "buffers_at_peak",
        ] {
            assert_eq!(d[field], t[field], "{module}: {field}");
        }
        assert!(!d["buffers_at_peak"].as_array().unwrap().is_empty());
    }
}

/// A `--xla_dump_to` folder is its optimized modules; their allocations add
/// up to the `Total bytes` of XLA's own memory usage report.
#[test]
fn a_dump_folder_is_its_modules_and_agrees_with_xlas_usage_report() {
    let doc = common::json(&["summary", &fixture("xla/dump_proto")]);
    let formats: Vec<&str> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["format"].as_str().unwrap())
        .collect();
    assert_eq!(formats, ["hlo_proto", "hlo_proto"]);
    let programs = doc["memories"].as_array().unwrap();
    assert_eq!(programs.len(), 2);
    for p in programs {
        let module = p["module"].as_str().unwrap();
        let name = module.split('(').next().unwrap();
        let id: u32 = module[name.len() + 1..module.len() - 1].parse().unwrap();
        let report = std::fs::read_to_string(common::repo_fixture(&format!(
            "xla/dump_text/module_{id:04}.{name}.cpu_after_optimizations-memory-usage-report.txt"
        )))
        .unwrap();
        let total: u64 = report
            .lines()
            .find_map(|l| l.strip_prefix("Total bytes: "))
            .and_then(|t| t.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(p["total_allocation_bytes"], total, "{module}");
    }
}

/// The training step's three parameters come back as outputs of their
/// shapes, both live at its peak: donating them saves their bytes there.
/// The other programs compute no gradients and get no advice.
#[test]
fn a_training_step_is_told_what_donating_its_parameters_saves() {
    let doc = common::json(&["peak", &fixture(RUN1)]);
    for m in doc["memories"].as_array().unwrap() {
        let id = m["id"].as_str().unwrap();
        if id == "jit_train_step(26)" {
            // f32[128,256], f32[256,256], f32[256,10].
            let bytes = (128 * 256 + 256 * 256 + 256 * 10) * 4;
            assert_eq!(
                m["donation"],
                serde_json::json!({"parameters": 3, "bytes": bytes})
            );
        } else {
            assert!(m.get("donation").is_none(), "{id}");
        }
    }
}
