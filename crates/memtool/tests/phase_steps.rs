//! Steps without markers: a snapshot or trace that marks no
//! `ProfilerStep#N` gets its forward → backward cycles (the training phases
//! the loader sees) as steps, and says so — `summary` has a Steps table and
//! `leaks` compares step ends instead of evenly spaced events.

mod common;

use common::{json, memtool, shared_fixture};

const CNN_SGD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/categories/cnn_sgd_momentum.snapshot.pickle.gz"
);

/// The SGD-with-momentum CNN capture: three training steps, no markers.
/// Each step runs from its forward pass to just before the next one (events
/// 0–171, 172–453, 454–735), and each ends with the same 142,880 B in use;
/// the first makes 64 allocations, the others 94 (momentum buffers are
/// made by the first step's optimizer as clones, later ones update them in
/// place and record new versions).
#[test]
fn summary_has_the_phase_cycles_as_steps_and_says_so() {
    let doc = json(&["summary", CNN_SGD]);
    let m = &doc["memories"][0];
    assert_eq!(m["steps_from_phases"], true);
    let steps = m["steps"].as_array().unwrap();
    let figures: Vec<(i64, i64, i64, u64, u64)> = steps
        .iter()
        .map(|s| {
            (
                s["step"].as_i64().unwrap(),
                s["start"].as_i64().unwrap(),
                s["end"].as_i64().unwrap(),
                s["allocations"].as_u64().unwrap(),
                s["end_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        figures,
        [
            (0, 0, 171, 64, 142_880),
            (1, 172, 453, 94, 142_880),
            (2, 454, 735, 94, 142_880),
        ]
    );
    let out = memtool().args(["summary", CNN_SGD]).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains(
            "Steps — device:0 (the file marks none: each is a forward → backward cycle of the phases)"
        ),
        "{table}"
    );
}

#[test]
fn leaks_compares_the_ends_of_the_phase_cycles() {
    let doc = json(&["leaks", CNN_SGD]);
    let m = &doc["memories"][0];
    assert_eq!(m["point_kind"], "step");
    assert_eq!(m["steps_from_phases"], true);
    assert_eq!(
        m["points"],
        serde_json::json!(["step 0", "step 1", "step 2"])
    );
    let verdict = m["verdict"].as_str().unwrap();
    assert!(
        verdict
            .starts_with("no growth: no group holds more at step 2 than at step 0 (3 step ends;")
            && verdict.contains("the file marks no steps, so a step is a forward → backward cycle"),
        "{verdict}"
    );
}

/// A file that marks its steps keeps them (no `steps_from_phases`); one
/// training step alone is no repetition and gets none.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn marked_steps_are_kept_and_one_cycle_is_not_a_step() {
    let trace = shared_fixture("torch/torch_cpu_transformer.pt.trace.json.gz");
    let doc = json(&["summary", trace.to_str().unwrap()]);
    let m = &doc["memories"][0];
    assert_eq!(m["steps"].as_array().unwrap().len(), 3);
    assert!(m.get("steps_from_phases").is_none(), "{m}");
    // The same run's profiler-made snapshot marks none: its three cycles.
    let snapshot = shared_fixture("torch/torch_cpu_transformer.snapshot.pickle");
    let doc = json(&["summary", snapshot.to_str().unwrap()]);
    let m = &doc["memories"][0];
    assert_eq!(m["steps_from_phases"], true);
    assert_eq!(m["steps"].as_array().unwrap().len(), 3);
    // bcrafton's snapshot records forward, loss, backward, optimizer once.
    let one = shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let doc = json(&["summary", one.to_str().unwrap()]);
    let m = &doc["memories"][0];
    assert!(m.get("steps").is_none() && m.get("steps_from_phases").is_none());
}
