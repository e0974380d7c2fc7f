//! CUDA streams and torch.compile graphs as groupings (`--by stream`,
//! `--by compiled-graph`, the "Peak per CUDA stream" table) on the two
//! snapshots `scripts/make_torch_stream_fixtures.py` DERIVES from the
//! made-here torch_cpu_transformer snapshot (no shared snapshot has a second
//! stream or compile contexts), against the figures that script replays
//! from the trace alone (`tests/data/streams/expected.json`); and on the
//! shared snapshots, which have one stream and no compiled code.

mod common;

use common::{bytes_by_key, json, shared_fixture};
use serde_json::Value;

fn data(file: &str) -> String {
    common::repo()
        .join("crates/memtool/tests/data/streams")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(data("expected.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()[name].clone()
}

fn figures(v: &Value) -> std::collections::BTreeMap<String, u64> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

fn breakdown<'a>(memory: &'a Value, by: &str) -> Option<&'a Value> {
    memory["breakdowns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["by"] == by)
        .map(|b| &b["groups"])
}

#[test]
fn each_stream_holds_what_the_replay_gives_at_the_peak() {
    let want = expected("side_stream");
    let file = data("side_stream.pickle");
    let doc = json(&["peak", &file, "--by", "stream"]);
    let m = &doc["memories"][0];
    assert_eq!(m["id"], "cuda:0");
    assert_eq!(m["peak_bytes"], want["peak_bytes"]);
    // 24,754,504 B: 19,617,192 on the default stream, 5,137,312 on stream 7.
    let groups = breakdown(m, "stream").unwrap();
    assert_eq!(bytes_by_key(groups), figures(&want["at_peak_by_stream"]));
    // Without --by, the stream breakdown is among the others (two streams).
    let doc = json(&["peak", &file]);
    let groups = breakdown(&doc["memories"][0], "stream").unwrap();
    assert_eq!(bytes_by_key(groups), figures(&want["at_peak_by_stream"]));
}

#[test]
fn each_stream_peaks_at_its_own_moment() {
    let want = expected("side_stream");
    let file = data("side_stream.pickle");
    for command in ["summary", "peak"] {
        let doc = json(&[command, &file]);
        let streams = doc["memories"][0]["streams"].as_array().unwrap();
        let own: std::collections::BTreeMap<String, u64> = streams
            .iter()
            .map(|s| {
                (
                    s["stream"].as_str().unwrap().to_string(),
                    s["peak_bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        // Stream 0 peaks at 24,199,176 B, stream 7 at 8,312,320 B: together
        // more than the memory's 24,754,504 B, reached at other moments.
        assert_eq!(own, figures(&want["stream_peak_bytes"]), "{command}");
        let at_peak: std::collections::BTreeMap<String, u64> = streams
            .iter()
            .map(|s| {
                (
                    s["stream"].as_str().unwrap().to_string(),
                    s["bytes_at_memory_peak"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(at_peak, figures(&want["at_peak_by_stream"]), "{command}");
        // Largest own peak first; each reached where its label says.
        assert_eq!(streams[0]["stream"], "0");
        assert!(streams[1]["peak_label"].as_str().unwrap().starts_with("t+"));
        assert_ne!(streams[0]["peak_at"], streams[1]["peak_at"]);
    }
}

#[test]
fn compiled_graphs_hold_what_the_replay_gives_at_the_peak() {
    let want = expected("compiled");
    let file = data("compiled.pickle");
    for by in ["compiled-graph", "compile"] {
        let doc = json(&["peak", &file, "--by", by]);
        let m = &doc["memories"][0];
        assert_eq!(m["peak_bytes"], want["peak_bytes"]);
        // 0/0: 7,872,512 B, 0/1: 8,134,656 B, outside compiled code
        // 8,192,008 B.
        let groups = breakdown(m, "compiled_graph").unwrap();
        assert_eq!(
            bytes_by_key(groups),
            figures(&want["at_peak_by_compiled_graph"])
        );
    }
    // One stream: no stream table, no stream breakdown by default.
    let doc = json(&["peak", &file]);
    let m = &doc["memories"][0];
    assert!(m.get("streams").is_none());
    assert!(breakdown(m, "stream").is_none());
    assert!(breakdown(m, "compiled_graph").is_some());
    // Diff by graph: the side-stream file compiled nothing.
    let doc = json(&[
        "diff",
        &data("compiled.pickle"),
        &data("side_stream.pickle"),
        "--by",
        "compiled-graph",
    ]);
    let rows = doc["rows"].as_array().unwrap();
    let delta = |key: &str| {
        rows.iter()
            .find(|r| r["key"] == key)
            .map(|r| r["delta_bytes"].as_i64().unwrap())
    };
    assert_eq!(delta("0/0"), Some(-7_872_512));
    assert_eq!(delta("0/1"), Some(-8_134_656));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn single_stream_snapshots_have_one_stream_and_no_graph() {
    // Every shared CUDA snapshot records stream 0 only; magma27 and
    // bcrafton record compile_context `N/A` on every entry.
    for path in [
        "torch/bcrafton_memory_snapshot.pickle",
        "torch/magma27_memory_snapshot.pickle",
        "torch/silmont2000_mem_snapshot.pickle",
        "torch/transformer_nuggets_mini_snapshot.pickle",
    ] {
        let file = shared_fixture(path);
        let file = file.to_str().unwrap();
        let doc = json(&["peak", file]);
        let m = &doc["memories"][0];
        assert!(m.get("streams").is_none(), "{path}");
        assert!(breakdown(m, "stream").is_none(), "{path}");
        assert!(breakdown(m, "compiled_graph").is_none(), "{path}");
        let peak = m["peak_bytes"].as_u64().unwrap();
        let doc = json(&["peak", file, "--by", "stream"]);
        let groups = bytes_by_key(breakdown(&doc["memories"][0], "stream").unwrap());
        assert_eq!(groups.into_iter().collect::<Vec<_>>(), [("0".into(), peak)]);
        let doc = json(&["peak", file, "--by", "compiled-graph"]);
        let groups = bytes_by_key(breakdown(&doc["memories"][0], "compiled_graph").unwrap());
        assert_eq!(
            groups.into_iter().collect::<Vec<_>>(),
            [("<none>".into(), peak)]
        );
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn traces_record_no_stream() {
    let file = shared_fixture("torch/torch_cpu_transformer.pt.trace.json.gz");
    let doc = json(&["peak", file.to_str().unwrap(), "--by", "stream"]);
    for m in doc["memories"].as_array().unwrap() {
        let groups = bytes_by_key(breakdown(m, "stream").unwrap());
        assert!(groups.keys().all(|k| k == "<none>"), "{groups:?}");
    }
}

/// The tables, CSV and Markdown a person reads, from the repository root.
fn shown(args: &[&str]) -> String {
    common::stdout_in_repo(args, &[0])
}

#[test]
fn stream_and_graph_tables() {
    let side = "crates/memtool/tests/data/streams/side_stream.pickle";
    let compiled = "crates/memtool/tests/data/streams/compiled.pickle";
    insta::assert_snapshot!(
        "peak_by_stream_table",
        shown(&["peak", side, "--by", "stream", "--width", "100"])
    );
    insta::assert_snapshot!(
        "peak_by_stream_csv",
        shown(&["peak", side, "--by", "stream", "--format", "csv"])
    );
    insta::assert_snapshot!(
        "summary_stream_peaks_table",
        shown(&["summary", side, "--width", "100"])
    );
    insta::assert_snapshot!(
        "peak_by_stream_markdown",
        shown(&["peak", side, "--by", "stream", "--format", "md"])
    );
    insta::assert_snapshot!(
        "peak_by_compiled_graph_table",
        shown(&["peak", compiled, "--by", "compiled-graph", "--width", "100"])
    );
    insta::assert_snapshot!(
        "peak_by_compiled_graph_csv",
        shown(&[
            "peak",
            compiled,
            "--by",
            "compiled-graph",
            "--format",
            "csv"
        ])
    );
    insta::assert_snapshot!(
        "peak_by_compiled_graph_markdown",
        shown(&["peak", compiled, "--by", "compiled-graph", "--format", "md"])
    );
}

/// The page: `render --group-by stream` draws the timeline by stream (its
/// legend one band per stream), and the allocation view offers the stream
/// and the compiled graph in its colour picker where the memory records
/// them.
#[test]
fn the_page_groups_by_stream_and_offers_both_in_its_picker() {
    let dir = std::env::temp_dir().join(format!("memtool-streams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (file, by, picker) in [
        (
            "side_stream.pickle",
            "stream",
            r#""groupings":["user frame","category","phase","op","stream"]"#,
        ),
        (
            "compiled.pickle",
            "compiled-graph",
            r#""groupings":["user frame","category","phase","op","compiled graph"]"#,
        ),
    ] {
        let page = dir.join(format!("{by}.html"));
        common::memtool()
            .args([
                "render",
                &data(file),
                "--group-by",
                by,
                "-o",
                page.to_str().unwrap(),
            ])
            .assert()
            .success();
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.contains(picker), "{file}: no {picker}");
        assert!(
            html.contains(&format!("by {}", by.replace('-', " "))),
            "{file}"
        );
    }
    let bands = |html: &str| html.matches(r#"{"key":"#).count();
    let html = std::fs::read_to_string(dir.join("stream.html")).unwrap();
    assert!(html.contains(r#""bands":[{"key":"0","#), "stream 0 first");
    assert!(html.contains(r#"{"key":"7","#), "stream 7 in the legend");
    assert!(bands(&html) >= 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The gates on one group take a stream or a graph with that `--by`.
#[test]
fn gates_on_one_stream_or_graph() {
    let side = data("side_stream.pickle");
    let compiled = data("compiled.pickle");
    // Stream 7 holds 5,137,312 B at the peak.
    let err = common::fails(&["peak", &side, "--by", "stream", "--budget", "7:4MiB"], 1);
    assert!(
        err.contains("holds 4.90 MiB (5137312 B) of stream 7 at its peak"),
        "{err}"
    );
    common::memtool()
        .args(["peak", &side, "--by", "stream", "--budget", "7:5MiB"])
        .assert()
        .success();
    let err = common::fails(
        &[
            "diff",
            &compiled,
            &side,
            "--by",
            "stream",
            "--fail-on-growth",
            "7:1MiB",
        ],
        1,
    );
    assert!(
        err.contains("stream 7 growth +4.90 MiB (+5137312 B)"),
        "{err}"
    );
    // Graph 0/1 holds 8,134,656 B at the peak.
    let err = common::fails(
        &[
            "peak",
            &compiled,
            "--by",
            "compiled-graph",
            "--budget",
            "0/1:7MiB",
        ],
        1,
    );
    assert!(err.contains("(8134656 B)"), "{err}");
}
