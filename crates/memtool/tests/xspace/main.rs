//! XSpace (`*.xplane.pb`) allocator events against XProf 2.24.2's own Memory
//! Profile output (`../shared/fixtures/xspace/expected/*.memory_profile.json`).
//! Where memtool deliberately differs from XProf the test says so and
//! docs/xprof-differences.md explains why.

mod allocators;
mod commands;
#[path = "../common/mod.rs"]
mod common;
mod errors;
mod planes;
mod runs;
mod xprof;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::shared_fixture;

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

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-xspace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// --- Synthetic XSpaces, written here field by field (proto/xplane.proto). ---
