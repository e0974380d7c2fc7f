//! The output contracts, pinned: the JSON and CSV of every command on every
//! format of the committed fixtures, and the frag table (insta snapshots under
//! `snapshots/`). JSON is the versioned schema CI users script against
//! (docs/json/); a change here is a change of contract — review it as one.

mod common;

/// memtool's stdout; exit code 1 (a gate that failed) is an answer too.
fn run(args: &[&str]) -> String {
    common::stdout_in_repo(args, &[0, 1])
}

/// Pins `command` on `inputs` in JSON and in CSV, as `<name>_json` and
/// `<name>_csv`.
fn pin(name: &str, command: &[&str]) {
    for format in ["json", "csv"] {
        let mut args = command.to_vec();
        args.extend(["--format", format]);
        let out = run(&args);
        assert!(!out.is_empty(), "memtool {args:?} printed nothing");
        insta::assert_snapshot!(format!("{name}_{format}"), out);
    }
}

const PPROF: &str = "tests/pprof/training.prof";
const SHARDED: &str = "tests/pprof/sharded.prof";
const SNAPSHOT: &str = "tests/torch/snapshot.p4.pickle";
const TRACE: &str = "tests/torch/synthetic_v19.pt.trace.json";
const TRACE_GZ: &str = "tests/torch/synthetic.pt.trace.json.gz";
const TIMELINE: &str = "tests/torch/synthetic.memory_timeline.json";
const XSPACE: &str = "tests/xspace/jax_mlp.xplane.pb";

const CACHE_SERIES: [&str; 6] = [
    "tests/pprof/cache1.prof",
    "tests/pprof/cache2.prof",
    "tests/pprof/cache3.prof",
    "tests/pprof/cache4.prof",
    "tests/pprof/cache5.prof",
    "tests/pprof/cache6.prof",
];

#[test]
fn summary() {
    pin("summary_pprof", &["summary", PPROF]);
    pin("summary_pprof_sharded", &["summary", SHARDED]);
    pin("summary_snapshot", &["summary", SNAPSHOT]);
    pin("summary_trace", &["summary", TRACE]);
    pin("summary_timeline", &["summary", TIMELINE]);
    pin("summary_xspace_programs", &["summary", XSPACE]);
}

#[test]
fn peak() {
    pin("peak_pprof", &["peak", PPROF]);
    pin("peak_pprof_budget", &["peak", PPROF, "--budget", "1KiB"]);
    pin("peak_snapshot", &["peak", SNAPSHOT]);
    pin("peak_trace", &["peak", TRACE]);
    pin("peak_timeline", &["peak", TIMELINE]);
    pin("peak_xspace_programs", &["peak", XSPACE]);
}

#[test]
fn leaks() {
    let mut series = vec!["leaks"];
    series.extend(CACHE_SERIES);
    pin("leaks_pprof_series", &series);
    pin(
        "leaks_pprof_gate",
        &[
            "leaks",
            "tests/pprof/leak1.prof",
            "tests/pprof/leak2.prof",
            "tests/pprof/leak3.prof",
            "tests/pprof/leak4.prof",
            "--fail-on-leak",
        ],
    );
    pin("leaks_snapshot", &["leaks", SNAPSHOT]);
    pin("leaks_trace", &["leaks", TRACE]);
    pin("leaks_timeline", &["leaks", TIMELINE]);
}

#[test]
fn frag() {
    pin("frag_pprof", &["frag", PPROF]);
    pin("frag_snapshot", &["frag", SNAPSHOT]);
    pin("frag_trace", &["frag", TRACE]);
    pin("frag_xspace_programs", &["frag", XSPACE]);
}

#[test]
fn frag_table() {
    insta::assert_snapshot!("frag_snapshot_table", run(&["frag", SNAPSHOT]));
    insta::assert_snapshot!("frag_xspace_programs_table", run(&["frag", XSPACE]));
}

#[test]
fn diff() {
    pin(
        "diff_pprof_gate",
        &[
            "diff",
            "tests/pprof/leak1.prof",
            "tests/pprof/leak4.prof",
            "--fail-on-growth",
            "5%",
        ],
    );
    pin(
        "diff_pprof_by_op",
        &[
            "diff",
            "tests/pprof/cache1.prof",
            "tests/pprof/cache6.prof",
            "--by",
            "op",
        ],
    );
    pin("diff_trace", &["diff", TRACE_GZ, TRACE]);
    pin(
        "diff_snapshot",
        &["diff", "tests/torch/snapshot.p2.pickle", SNAPSHOT],
    );
}

#[test]
fn ranks() {
    // Three derived OOM snapshots as three ranks (each failed), by pattern.
    pin(
        "ranks_oom",
        &[
            "ranks",
            "crates/memtool/tests/data/oom/*.pickle",
            "--capacity",
            "64MiB",
        ],
    );
    // Processes of one pprof each, one of them of four devices.
    pin(
        "ranks_pprof",
        &[
            "ranks",
            "tests/pprof/cache1.prof",
            "tests/pprof/cache2.prof",
            "tests/pprof/cache3.prof",
            "tests/pprof/sharded.prof",
        ],
    );
}

/// `oom` on a log holding XLA out-of-memory reports: the entries with
/// `source: "xla_report"` (docs/json/oom.md).
#[test]
fn oom_xla_report() {
    pin(
        "oom_xla_report_tpu",
        &["oom", "tests/xla/tpu_compile_oom.log"],
    );
    pin("oom_xla_report_gpu", &["oom", "tests/xla/gpu_bfc_oom.log"]);
}
