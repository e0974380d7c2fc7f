//! Smoke tests: each generator's small output is read back by memtool where
//! it has a reader and walked for structure otherwise. The patterns are the
//! reference fixtures beside the repository; without them the tests skip,
//! unless `MEMTOOL_REQUIRE_FIXTURES` is set (CI).

use std::rc::Rc;

use memtool_proto::wire::reader::{Fields, Value};

use super::*;
use crate::pickle::Val;

fn pattern(rel: &str) -> Option<Vec<u8>> {
    let path = fixture(rel);
    if !path.exists() {
        assert!(
            std::env::var_os("MEMTOOL_REQUIRE_FIXTURES").is_none(),
            "{} is missing and MEMTOOL_REQUIRE_FIXTURES is set",
            path.display()
        );
        eprintln!("skipping: {} is not present", path.display());
        return None;
    }
    Some(read_pattern(&Some(path), rel).unwrap())
}

fn messages(buf: &[u8], field: u32) -> Vec<&[u8]> {
    Fields::new(buf)
        .map(|f| f.expect("the output walks cleanly"))
        .filter_map(|(n, v, _)| match (n, v) {
            (n, Value::Bytes(b)) if n == field => Some(b),
            _ => None,
        })
        .collect()
}

fn varint(buf: &[u8], field: u32) -> Option<u64> {
    Fields::new(buf)
        .map(|f| f.unwrap())
        .find_map(|(n, v, _)| (n == field).then(|| v.as_u64()).flatten())
}

/// (metadata id → name) of a plane's event or stat metadata map.
fn names(plane: &[u8], field: u32) -> std::collections::HashMap<u64, String> {
    messages(plane, field)
        .into_iter()
        .map(|entry| {
            let id = varint(entry, 1).unwrap_or(0);
            let md = messages(entry, 2).first().copied().unwrap_or(&[]);
            let name = messages(md, 2).first().copied().unwrap_or(&[]);
            (id, String::from_utf8_lossy(name).into_owned())
        })
        .collect()
}

/// Allocator events of the host plane as (absolute ps, addr).
fn allocator_events(space: &[u8]) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    for plane in messages(space, 1) {
        let (events, stats) = (names(plane, 4), names(plane, 5));
        for line in messages(plane, 3) {
            let ts = varint(line, 3).unwrap_or(0) as i64;
            for event in messages(line, 4) {
                let md = varint(event, 1).unwrap_or(0);
                if !events[&md].starts_with("Memory") {
                    continue;
                }
                let at = ts * 1000 + varint(event, 2).unwrap_or(0) as i64;
                let addr = messages(event, 4)
                    .into_iter()
                    .find(|s| stats[&varint(s, 1).unwrap()] == "addr")
                    .and_then(|s| varint(s, 4).or_else(|| varint(s, 3)))
                    .unwrap();
                out.push((at, addr));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn xspace_with_exactly_the_pattern_is_the_pattern() {
    let Some(p) = pattern("xspace/tf_cnn.xplane.pb") else {
        return;
    };
    // tf_cnn has 66 + 66 allocator events: one repetition re-encodes it as is.
    let mut out = Vec::new();
    xspace::generate(&p, 132, &mut out).unwrap();
    let first_difference = out.iter().zip(&p).position(|(a, b)| a != b);
    assert_eq!(first_difference, None);
    assert_eq!(out.len(), p.len());
}

#[test]
fn xspace_scales_to_n_allocator_events_shifted_in_time_and_address() {
    let Some(p) = pattern("xspace/tf_cnn.xplane.pb") else {
        return;
    };
    let mut out = Vec::new();
    let written = xspace::generate(&p, 1000, &mut out).unwrap();
    assert_eq!(written, out.len() as u64);
    let events = allocator_events(&out);
    assert_eq!(events.len(), 1000);
    let original = allocator_events(&p);
    // Repetitions come after the pattern, in address ranges of their own.
    let (t_end, a_max) = (
        original.last().unwrap().0,
        original.iter().map(|e| e.1).max().unwrap(),
    );
    let later: Vec<_> = events[132..].to_vec();
    assert!(later.iter().all(|&(t, a)| t > t_end && a > a_max));
    // The profile's stop time moved with the events.
    let stop = |space: &[u8]| -> i64 {
        let env = messages(space, 1)
            .into_iter()
            .find(|p| messages(p, 2).first() == Some(&&b"Task Environment"[..]))
            .unwrap();
        let id = names(env, 5)
            .into_iter()
            .find(|(_, n)| n == "profile_stop_time")
            .unwrap()
            .0;
        messages(env, 6)
            .into_iter()
            .find(|s| varint(s, 1) == Some(id))
            .and_then(|s| varint(s, 3).or_else(|| varint(s, 4)))
            .unwrap() as i64
    };
    let moved_ns = (events.last().unwrap().0 - original.last().unwrap().0) / 1000;
    assert!(moved_ns > 0 && stop(&out) - stop(&p) >= moved_ns);
}

fn list(v: &Val) -> Vec<Val> {
    match v {
        Val::List(l) => l.borrow().clone(),
        _ => panic!("not a list"),
    }
}

#[test]
fn torch_snapshot_entries_repeat_with_frames_shared_as_pytorch_shares_them() {
    let Some(p) = pattern("torch/transformer_nuggets_mini_snapshot.pickle") else {
        return;
    };
    let mut out = Vec::new();
    torch_snapshot::generate(&p, 1000, &mut out).unwrap();
    let original = pickle::load(&p).unwrap();
    let generated = pickle::load(&out).unwrap();
    let traces = list(&generated.get("device_traces").unwrap());
    let pattern_traces = list(&original.get("device_traces").unwrap());
    let device = pattern_traces
        .iter()
        .position(|t| !list(t).is_empty())
        .unwrap();
    let (entries, pattern_entries) = (list(&traces[device]), list(&pattern_traces[device]));
    let per = pattern_entries.len();
    assert_eq!(entries.len(), 1000);
    let int = |e: &Val, k: &str| e.get(k).and_then(|v| v.as_int()).unwrap();
    let span = int(&entries[per], "addr") - int(&entries[0], "addr");
    assert!(span > 0 && span % (2 << 20) == 0);
    for (i, e) in entries.iter().enumerate() {
        let base = &pattern_entries[i % per];
        assert_eq!(
            e.get("action").unwrap().as_str(),
            base.get("action").unwrap().as_str()
        );
        assert_eq!(int(e, "size"), int(base, "size"));
        assert_eq!(int(e, "addr"), int(base, "addr") + span * (i / per) as i64);
    }
    let frames = |i: usize| list(&entries[i].get("frames").unwrap());
    let first_with_frames = (0..per).find(|&i| !frames(i).is_empty()).unwrap();
    let (a, b) = (
        &frames(first_with_frames)[0],
        &frames(first_with_frames + per)[0],
    );
    let (Val::Dict(a), Val::Dict(b)) = (a, b) else {
        panic!("frames are dicts")
    };
    assert!(Rc::ptr_eq(a, b), "one frame dict across repetitions");
    let (Some(Val::List(la)), Some(Val::List(lb))) = (
        entries[first_with_frames].get("frames"),
        entries[first_with_frames + per].get("frames"),
    ) else {
        panic!()
    };
    assert!(
        !Rc::ptr_eq(&la, &lb),
        "each repetition has its own frames lists"
    );
    // Everything but the trace is the pattern's.
    assert_eq!(
        list(&generated.get("segments").unwrap()).len(),
        list(&original.get("segments").unwrap()).len()
    );
}

#[test]
fn torch_trace_has_n_memory_events_in_time_order() {
    let Some(p) = pattern("torch/torch_cpu_transformer.pt.trace.json.gz") else {
        return;
    };
    let mut out = Vec::new();
    torch_trace::generate(&p, 6000, 0, &mut out).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let memory: Vec<&serde_json::Value> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .collect();
    assert_eq!(memory.len(), 6000);
    let ts: Vec<f64> = memory.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    for e in &memory {
        for key in [
            "Addr",
            "Bytes",
            "Total Allocated",
            "Total Reserved",
            "Device Id",
            "Device Type",
        ] {
            assert!(e["args"][key].is_i64(), "{key} in {e}");
        }
    }
}

#[test]
fn pprof_series_is_read_back_by_memtool() {
    let Some(p) = pattern("pprof/sharded.prof") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("memtool-gen-pprof-{}", std::process::id()));
    let paths = pprof::generate_series(&p, 1000, 3, 0, &dir).unwrap();
    let sources = paths
        .iter()
        .map(|path| {
            memtool_core::Source::from_bytes(
                path.display().to_string(),
                std::fs::read(path).unwrap(),
            )
        })
        .collect();
    let profile = memtool_core::load(sources, &Default::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    let pattern = pprof::read_pattern(&p).unwrap();
    let (per, first) = (pattern.buffer_bytes(), pattern.buffer_bytes()[0]);
    let expected: u64 = (0..1000).map(|i| per[i % per.len()]).sum();
    let at = |snapshot: usize| -> (u64, u64) {
        let mut bytes = 0;
        let mut samples = 0;
        for m in &profile.memories {
            for &a in &m.instants[snapshot].live {
                bytes += m.allocations[a.index()].bytes;
                samples += 1;
            }
        }
        (bytes, samples)
    };
    assert_eq!(at(0), (expected + first, 1001));
    // The growing stack holds one more copy per snapshot.
    assert_eq!(at(2), (expected + 3 * first, 1001));
}

#[test]
fn hlo_module_repeats_its_heap_trace_with_the_same_peak() {
    let Some(p) = pattern("xspace/jax_transformer_small.xplane.pb") else {
        return;
    };
    let load = |bytes: Vec<u8>| {
        memtool_core::load(
            vec![memtool_core::Source::from_bytes("gen.xplane.pb", bytes)],
            &Default::default(),
        )
        .unwrap()
    };
    let per_rep = hlo::buffers_per_repetition(&p).unwrap();
    assert!(per_rep > 10, "{per_rep}");
    let mut out = Vec::new();
    hlo::generate(&p, 3 * per_rep, &mut out).unwrap();
    let scaled = load(out);
    let original = load(p);
    // One module, the pattern's biggest (its training step), with three
    // times the events of each memory space and the same peaks.
    assert!(!scaled.memories.is_empty());
    for m in &scaled.memories {
        assert_eq!(m.kind, memtool_core::model::MemoryKind::ProgramSpace);
        assert!(m.id.starts_with("jit_train_step("), "{}", m.id);
        let o = original.memories.iter().find(|o| o.id == m.id).unwrap();
        assert_eq!(m.events.len(), 3 * o.events.len());
        assert!(m.allocations.len() > 2 * o.allocations.len());
        let peak = |m| memtool_core::analysis::replay::peak(m).map(|p| p.bytes);
        assert_eq!(peak(m), peak(o));
    }
    assert!(scaled
        .warnings
        .iter()
        .all(|w| !w.message.contains("left out")));
}

#[test]
fn pprof_samples_dealt_to_many_devices_are_that_many_memories() {
    let Some(p) = pattern("pprof/sharded.prof") else {
        return;
    };
    let mut out = Vec::new();
    let pattern = pprof::read_pattern(&p).unwrap();
    pprof::write_snapshot(&pattern, 700, 0, 7, &mut out).unwrap();
    let source = memtool_core::Source::from_bytes("many.prof", out);
    let profile = memtool_core::load(vec![source], &Default::default()).unwrap();
    let mut ids: Vec<&str> = profile.memories.iter().map(|m| m.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["dev:0", "dev:1", "dev:2", "dev:3", "dev:4", "dev:5", "dev:6"]
    );
    let per = pattern.buffer_bytes();
    let expected: u64 = (0..700).map(|i| per[i % per.len()]).sum();
    let total: u64 = profile
        .memories
        .iter()
        .flat_map(|m| &m.allocations)
        .map(|a| a.bytes * u64::from(a.count.max(1)))
        .sum();
    assert_eq!(total, expected);
    assert!(profile.memories.iter().all(|m| m.allocations.len() == 100));
}

#[test]
fn torch_trace_dealt_to_many_devices_is_that_many_memories() {
    let Some(p) = pattern("torch/torch_cpu_transformer.pt.trace.json.gz") else {
        return;
    };
    let json: serde_json::Value = serde_json::from_slice(&p).unwrap();
    let per = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .count() as u64;
    // Every [memory] event dealt to 7 CUDA devices: each has some, and the
    // pattern's other events (its ops) stay.
    let mut out = Vec::new();
    torch_trace::generate(&p, per * 8, 7, &mut out).unwrap();
    let source = memtool_core::Source::from_bytes("many.pt.trace.json", out);
    let profile = memtool_core::load(vec![source], &Default::default()).unwrap();
    let mut ids: Vec<&str> = profile.memories.iter().map(|m| m.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6"]
    );
    let events: usize = profile.memories.iter().map(|m| m.events.len()).sum();
    assert_eq!(events as u64, per * 8);
    assert!(profile.memories.iter().all(|m| m.events.len() as u64 > per));
}
