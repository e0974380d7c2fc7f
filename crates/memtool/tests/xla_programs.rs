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
