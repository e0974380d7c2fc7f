//! The PyTorch JSON readers (traces and memory timelines) and their detection.

use std::io;

use super::memory_timeline;
use super::trace::{self, window};
use crate::error::{Error, Result};
use crate::input::detect;
use crate::input::source::ByteSource;
use crate::model::{EventKind, Format, Phase, Profile};

/// Bytes served only through `read_exact_at`, as a file is: the reader
/// streams them instead of parsing them in place.
struct Streamed(Vec<u8>);

impl ByteSource for Streamed {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_exact_at(offset, buf)
    }
}

fn load_from(data: &dyn ByteSource) -> Result<Profile> {
    let mut profile = Profile::default();
    match detect::classify(data).unwrap() {
        Format::TorchMemoryTimeline => memory_timeline::read(&mut profile, "t.json", data)?,
        _ => trace::read(&mut profile, "t.json", data, false)?,
    }
    Ok(profile)
}

/// Reads `text` both streamed and in place; both must agree (on the
/// profile; serde_json's two readers may place a type error one column
/// apart).
fn load(text: &str) -> Result<Profile> {
    let streamed = load_from(&Streamed(text.as_bytes().to_vec()));
    let in_place = load_from(&text.as_bytes().to_vec());
    match (&streamed, &in_place) {
        (Ok(a), Ok(b)) => {
            // Interning tables print in hash order; what they hold shows
            // through the memories' ids.
            let shown = |p: &Profile| format!("{:?}", (&p.inputs, &p.memories, &p.warnings));
            assert_eq!(shown(a), shown(b));
        }
        (a, b) => assert_eq!(a.is_ok(), b.is_ok(), "{a:?} / {b:?}"),
    }
    streamed
}

fn classify(bytes: &[u8]) -> Format {
    let streamed = detect::classify(&Streamed(bytes.to_vec())).unwrap();
    assert_eq!(streamed, detect::classify(&bytes.to_vec()).unwrap());
    streamed
}

#[test]
fn classifies_timelines_and_traces() {
    assert_eq!(classify(b" [ [1], [[0]]]"), Format::TorchMemoryTimeline);
    assert_eq!(classify(b"[[-1, 1, 5, 0]]"), Format::TorchMemoryTimeline);
    assert_eq!(classify(b"{\"traceEvents\": []}"), Format::TorchTrace);
    assert_eq!(classify(b"[{\"name\": \"x\"}]"), Format::TorchTrace);
    // Only the first two characters that are not whitespace decide, however
    // far into the input they are.
    let mut padded = vec![b' '; 100_000];
    padded.extend_from_slice(b"[\n[1], [[0]]]");
    assert_eq!(classify(&padded), Format::TorchMemoryTimeline);
    assert_eq!(classify(b""), Format::TorchTrace);
    assert_eq!(classify(b"["), Format::TorchTrace);
}

#[test]
fn fields_of_unexpected_types_are_read_around() {
    // A numeric name, string ids and sizes, args that are not an object,
    // a bare array of events: none of it is fatal.
    let p = load(
        r#"[{"name": 5, "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 10, "tid": "main"},
            {"name": "[memory]", "ph": "i", "ts": "2", "tid": "main",
             "args": {"Bytes": "100", "Addr": 16, "Device Type": 1, "Device Id": 0}},
            {"name": "[memory]", "ph": "i", "ts": 3, "args": "oops"},
            {"name": "[memory]", "ph": "i", "ts": 4,
             "args": {"Bytes": -100, "Addr": 16, "Device Type": 1, "Device Id": 0, "Total Allocated": []}}]"#,
    )
    .unwrap();
    assert_eq!(p.memories.len(), 1);
    let m = &p.memories[0];
    assert_eq!(m.id, "cuda:0");
    assert_eq!(m.events.len(), 2);
    assert_eq!(m.allocations[0].bytes, 100);
}

#[test]
fn a_trace_larger_than_the_read_buffer_streams_to_the_same_model() {
    // Two threads, two devices, times running backwards on one thread, and
    // an operator span on each thread: the regrouping by thread and by
    // device after the parse must keep each memory in time order.
    let mut text = String::from(
        r#"{"traceEvents": [
        {"name": "aten::add", "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 1000000, "pid": 1, "tid": 1},
        {"name": "aten::mul", "ph": "X", "cat": "cpu_op", "ts": 0, "dur": 1000000, "pid": 1, "tid": 2}"#,
    );
    let events = 12_000;
    for i in 0..events {
        let (tid, device, ts) = if i % 2 == 0 {
            (1, 0, 10 * i)
        } else {
            (2, 1, 10 * (events - i))
        };
        let bytes = if i % 4 < 2 { 512 } else { -512 };
        let addr = 4096 * (i / 4) + 64 * (i % 2);
        text.push_str(&format!(
            r#", {{"name": "[memory]", "ph": "i", "ts": {ts}, "pid": 1, "tid": {tid},
                 "args": {{"Bytes": {bytes}, "Addr": {addr}, "Device Type": {device},
                           "Device Id": 0, "Ev Idx": {i}, "note": "{}"}}}}"#,
            // Brackets and escaped quotes inside strings, across blocks.
            r#"a\"{[}]\\"#.repeat(i % 7)
        ));
    }
    text.push_str("]}");
    assert!(text.len() > 2 * window::BLOCK);
    let p = load(&text).unwrap();
    let ids: Vec<&str> = p.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["cpu", "cuda:0"]);
    // Backwards in time, each free on the second thread comes before its
    // allocation: all of them are of allocations made before the trace.
    for ((m, op), before) in p
        .memories
        .iter()
        .zip(["aten::add", "aten::mul"])
        .zip([0, events / 4])
    {
        assert_eq!(m.events.len(), events / 2);
        assert!(m.events.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(m.live_at_start.len(), before);
        let made = m
            .events
            .iter()
            .find(|e| e.kind() == EventKind::Alloc)
            .unwrap();
        let site = p.names.site_of(m.allocations[made.alloc().0 as usize].site);
        assert_eq!(site.op.map(|s| p.names.str(s)), Some(op));
    }
}

#[test]
fn malformed_documents_are_errors() {
    assert!(load("{\"traceEvents\": [1, 2]}").is_err());
    assert!(load("{\"traceEvents\": [").is_err());
    assert!(matches!(load("{}"), Err(Error::NoData { .. })));
    assert!(load("[[1, 2, 3]]").is_ok());
}

/// XProf's own JSON pages are named for what they are, with what to give
/// memtool instead.
#[test]
fn xprofs_json_pages_are_named() {
    for (text, page) in [
        (
            r#"{"memoryProfilePerAllocator": {}, "numHosts": 1}"#,
            "Memory Profile",
        ),
        (
            r#"{"heapSizes": [1.5], "unpaddedHeapSizes": [1.0]}"#,
            "Memory Viewer",
        ),
        (r#" {"maxHeap": []}"#, "Memory Viewer"),
    ] {
        let err = load(text).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "t.json: this is XProf's {page} JSON, made from an XSpace; give memtool the \
                 .xplane.pb it was made from (or its run directory or logdir)"
            )
        );
    }
    let err = load(r#"{"traceEvents": []}"#).unwrap_err().to_string();
    assert!(err.contains("the trace has no [memory] events"), "{err}");
}

/// A trace naming 10^5 devices is read in time linear in them: each
/// device's memory is built once and never searched for again (a search
/// per device took minutes). Timed against the same reader on 10^4 devices,
/// so the bound holds however fast the machine is.
#[test]
fn a_trace_of_many_devices_reads_in_linear_time() {
    let trace = |devices: usize| {
        let events: Vec<String> = (0..devices)
            .map(|i| {
                format!(
                    r#"{{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {}, "args": {{"Addr": {}, "Bytes": 512, "Device Id": {i}, "Device Type": 1}}}}"#,
                    i + 1,
                    4096 * (i + 1)
                )
            })
            .collect();
        format!(r#"{{"traceEvents": [{}]}}"#, events.join(", ")).into_bytes()
    };
    let timed = |devices: usize| {
        let bytes = trace(devices);
        let start = std::time::Instant::now();
        let profile = load_from(&bytes).unwrap();
        assert_eq!(profile.memories.len(), devices);
        assert_eq!(
            profile.memories[devices - 1].id,
            format!("cuda:{}", devices - 1)
        );
        start.elapsed()
    };
    let small = timed(10_000);
    let large = timed(100_000);
    // Linear: about 10×; quadratic: about 100×.
    assert!(
        large < small * 40,
        "10^4 devices: {small:?}, 10^5 devices: {large:?}"
    );
}

/// The `[memory]` events of a trace get the `python_function` spans around
/// them on their thread as their stack, and the phase those spans and the
/// named ranges tell; in a step without stacks, what comes before the loss
/// or backward pass (and after data loading) is the forward pass.
#[test]
fn trace_events_get_python_stacks_and_phases() {
    let mem = |ts: u32, tid: u32, addr: u32, bytes: i64| {
        format!(
            r#"{{"name": "[memory]", "ph": "i", "ts": {ts}, "pid": 1, "tid": {tid},
                "args": {{"Bytes": {bytes}, "Addr": {addr}, "Device Type": 0}}}}"#
        )
    };
    let span = |name: &str, cat: &str, ts: u32, dur: u32, tid: u32| {
        format!(
            r#"{{"name": "{name}", "ph": "X", "cat": "{cat}", "ts": {ts}, "dur": {dur}, "pid": 1, "tid": {tid}}}"#
        )
    };
    let events = [
        // Thread 1, with Python stacks: a module's forward, then the engine.
        span("train.py(9): step", "python_function", 0, 100, 1),
        span("nn.Module: Linear_0", "python_function", 10, 20, 1),
        span(
            "torch/nn/functional.py(12): linear",
            "python_function",
            12,
            10,
            1,
        ),
        mem(15, 1, 1, 64),
        span(
            "torch/_tensor.py(566): backward",
            "python_function",
            40,
            20,
            1,
        ),
        mem(45, 1, 2, 32),
        // A stack that names no phase.
        mem(70, 1, 3, 16),
        // Thread 2, no stacks: step 4 loads data, runs forward and backward.
        span("ProfilerStep#4", "user_annotation", 200, 100, 2),
        span(
            "enumerate(DataLoader)#_Iter.__next__",
            "user_annotation",
            201,
            9,
            2,
        ),
        mem(205, 2, 10, 8),
        mem(215, 2, 11, 128),
        span(
            "autograd::engine::evaluate_function: MmBackward0",
            "cpu_op",
            250,
            10,
            2,
        ),
        mem(255, 2, 12, 256),
        mem(270, 2, 13, 4),
    ];
    let p = load(&format!("{{\"traceEvents\": [{}]}}", events.join(",\n"))).unwrap();
    let m = &p.memories[0];
    let of = |addr: u64| {
        let a = m
            .allocations
            .iter()
            .find(|a| a.address() == Some(addr))
            .unwrap();
        let site = p.names.site_of(a.site);
        (p.names.stack_label(site.stack), site.phase)
    };
    assert_eq!(
        of(1),
        (
            "linear torch/nn/functional.py:12 <- nn.Module: Linear_0 <- step train.py:9".into(),
            Some(Phase::Forward)
        )
    );
    assert_eq!(
        of(2),
        (
            "backward torch/_tensor.py:566 <- step train.py:9".into(),
            Some(Phase::Backward)
        )
    );
    assert_eq!(of(3), ("step train.py:9".into(), None));
    assert_eq!(of(10), (String::new(), None), "data loading");
    assert_eq!(of(11), (String::new(), Some(Phase::Forward)));
    assert_eq!(of(12), (String::new(), Some(Phase::Backward)));
    assert_eq!(of(13), (String::new(), None), "after the backward pass");
}
