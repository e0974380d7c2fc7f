//! Annotation stages (`analysis::stages`) and moments other than the peak
//! (`peak --at`) on real files: live bytes at each annotation's START and
//! END against an independent replay of the file
//! (`scripts/torch_annotation_replay.py`), which counts blocks allocated
//! before the recording as MemoryViz does.

mod common;

use common::{json, shared_fixture};

const BCRAFTON: &str = "torch/bcrafton_memory_snapshot.pickle";

fn stages(path: &str) -> Vec<serde_json::Value> {
    let file = shared_fixture(path);
    let doc = json(&["summary", file.to_str().unwrap()]);
    doc["memories"][0]["annotation_stages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn adamw_step_starts_and_ends_at_the_replayed_live_bytes() {
    let stages = stages(BCRAFTON);
    assert_eq!(stages.len(), 1, "{stages:?}");
    let step = &stages[0];
    assert_eq!(step["name"], "Optimizer.step#AdamW.step");
    // scripts/torch_annotation_replay.py prints 3077285120 for START and END.
    assert_eq!(step["start_bytes"], 3_077_285_120u64);
    assert_eq!(step["end_bytes"], 3_077_285_120u64);
    assert_eq!(step["growth_bytes"], 0);
    assert_eq!(step["start_label"], "t+24.82 ms");
    assert_eq!(step["end_label"], "t+37.74 ms");
    // The step's two new Adam buffers per parameter replace the ones made
    // before the recording: +761,840,640 B at each of optimizer.py:74 and
    // :75, the same released by blocks allocated before the recording.
    let by_frame = step["growth_by_user_frame"].as_array().unwrap();
    let total: i64 = by_frame.iter().map(|g| g["bytes"].as_i64().unwrap()).sum();
    assert_eq!(total, 0);
    let of = |suffix: &str| {
        by_frame
            .iter()
            .find(|g| g["key"].as_str().unwrap().ends_with(suffix))
            .map(|g| g["bytes"].as_i64().unwrap())
    };
    assert_eq!(of("optimizer.py:74"), Some(761_840_640));
    assert_eq!(of("optimizer.py:75"), Some(761_840_640));
    // More than the START is live inside: the step's temporaries.
    assert!(step["peak_bytes"].as_u64().unwrap() > 3_077_285_120);
    assert_eq!(step["allocated_bytes"], step["freed_bytes"]);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn zero_grad_stages_match_the_replay() {
    // scripts/torch_annotation_replay.py: 523811840 at START and END of
    // `Optimizer.zero_grad#AdamW.zero_grad` in both silmont2000 forward files.
    for path in [
        "torch/silmont2000_memory_forward_bf16_128.pickle",
        "torch/silmont2000_memory_forward_fp32_128.pickle",
    ] {
        let stages = stages(path);
        assert_eq!(stages.len(), 1, "{path}: {stages:?}");
        assert_eq!(stages[0]["name"], "Optimizer.zero_grad#AdamW.zero_grad");
        assert_eq!(stages[0]["start_bytes"], 523_811_840u64, "{path}");
        assert_eq!(stages[0]["end_bytes"], 523_811_840u64, "{path}");
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn files_without_annotations_have_no_stages() {
    assert!(stages("torch/magma27_memory_snapshot.pickle").is_empty());
}

fn peak_at(args: &[&str]) -> serde_json::Value {
    let file = shared_fixture(BCRAFTON);
    let mut all = vec!["peak", file.to_str().unwrap()];
    all.extend_from_slice(args);
    json(&all)
}

/// Each breakdown of a memory adds up to its figure at the moment.
fn assert_breakdowns_add_up(memory: &serde_json::Value) {
    let total = memory["peak_bytes"].as_u64().unwrap();
    for b in memory["breakdowns"].as_array().unwrap() {
        let sum: u64 = b["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, total, "{}", b["by"]);
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn peak_at_an_annotation_is_the_stage_figure() {
    for (moment, label) in [
        ("annotation:AdamW.step", "t+24.82 ms"),
        ("annotation:Optimizer.step#AdamW.step:start", "t+24.82 ms"),
        ("annotation:AdamW.step:end", "t+37.74 ms"),
    ] {
        let doc = peak_at(&["--at", moment]);
        assert_eq!(doc["moment"], moment);
        let m = &doc["memories"][0];
        assert_eq!(m["peak_bytes"], 3_077_285_120u64, "{moment}");
        assert_eq!(m["peak_label"], label, "{moment}");
        assert_breakdowns_add_up(m);
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn peak_at_a_time_and_an_entry_match_the_replay() {
    // scripts/torch_annotation_replay.py FILE --at-us 25000 --at-entry 1200:
    // 3386064128 at t+25000us, 3080234504 after entry 1200.
    let doc = peak_at(&["--at", "t+25ms"]);
    let m = &doc["memories"][0];
    assert_eq!(m["peak_bytes"], 3_386_064_128u64);
    assert_eq!(m["peak_label"], "t+25.00 ms (optimizer)");
    assert_breakdowns_add_up(m);
    let doc = peak_at(&["--at-entry", "1200"]);
    assert_eq!(doc["moment"], "entry 1200");
    let m = &doc["memories"][0];
    assert_eq!(m["peak_bytes"], 3_080_234_504u64);
    assert_breakdowns_add_up(m);
    // Without --at the same file reports its peak, and no moment.
    let doc = peak_at(&[]);
    assert!(doc.get("moment").is_none());
    assert!(doc["memories"][0]["peak_bytes"].as_u64().unwrap() > 3_386_064_128);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_moment_no_memory_has_is_an_error() {
    let file = shared_fixture(BCRAFTON);
    let file = file.to_str().unwrap();
    for args in [
        vec!["peak", file, "--at", "annotation:no_such_range"],
        vec!["peak", file, "--at", "t+999s"],
        vec!["peak", file, "--at-entry", "100000"],
    ] {
        let err = common::fails(&args, 2);
        assert!(err.contains("no memory has the moment"), "{err}");
    }
    let err = common::fails(&["peak", file, "--at", "t+25"], 2);
    assert!(err.contains("is no moment"), "{err}");
    let err = common::fails(
        &[
            "peak", file, "--at", "t+1ms", "--format", "pprof", "-o", "x.pb.gz",
        ],
        2,
    );
    assert!(
        err.contains("--format pprof writes the live set at the peak"),
        "{err}"
    );
    let err = common::fails(&["peak", file, "--at", "t+1ms", "--budget", "1GiB"], 2);
    assert!(err.contains("cannot be used with"), "{err}");
}

/// The tables and CSV a person reads, from the repository root (the paths
/// relative, as given).
fn shown(args: &[&str]) -> String {
    common::stdout_in_repo(args, &[0])
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn moment_and_stage_tables() {
    let file = "../shared/fixtures/torch/bcrafton_memory_snapshot.pickle";
    assert!(shared_fixture(BCRAFTON).exists());
    insta::assert_snapshot!(
        "peak_at_annotation_end_table",
        shown(&[
            "peak",
            file,
            "--at",
            "annotation:AdamW.step:end",
            "--by",
            "category"
        ])
    );
    insta::assert_snapshot!(
        "peak_at_time_csv",
        shown(&[
            "peak",
            file,
            "--at",
            "t+25ms",
            "--by",
            "user-frame",
            "--format",
            "csv"
        ])
    );
    insta::assert_snapshot!(
        "peak_at_entry_markdown",
        shown(&[
            "peak",
            file,
            "--at-entry",
            "1200",
            "--by",
            "phase",
            "--format",
            "md"
        ])
    );
    insta::assert_snapshot!(
        "summary_stages_csv",
        shown(&["summary", file, "--stages", "--format", "csv"])
    );
    let trace = "../shared/fixtures/torch/torch_cpu_transformer.pt.trace.json.gz";
    insta::assert_snapshot!(
        "summary_stages_of_a_trace",
        shown(&["summary", trace, "--top", "20"])
    );
    insta::assert_snapshot!(
        "summary_stages_only_markdown",
        shown(&["summary", trace, "--stages", "--format", "md"])
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_page_shows_the_stages() {
    let page = |path: &str| {
        let out = common::memtool()
            .args(["render", shared_fixture(path).to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let with = page(BCRAFTON);
    let section = &with[with
        .find("<h3>Annotation stages</h3>")
        .expect("a stages section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("Optimizer.step#AdamW.step"), "{section}");
    // Live at START and END, as the replay says.
    assert_eq!(
        section.matches(r#"data-v="3077285120""#).count(),
        2,
        "{section}"
    );
    assert!(section.contains("optimizer.py:74"), "{section}");
    let without = page("torch/magma27_memory_snapshot.pickle");
    assert!(!without.contains("<h3>Annotation stages</h3>"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn what_each_stage_added_adds_up_to_its_growth() {
    let mut checked = 0;
    for path in [
        BCRAFTON,
        "torch/torch_cpu_transformer.pt.trace.json.gz",
        "torch/silmont2000_memory_forward_fp32_128.pickle",
    ] {
        let file = shared_fixture(path);
        let doc = json(&["summary", file.to_str().unwrap()]);
        for m in doc["memories"].as_array().unwrap() {
            for s in m["annotation_stages"].as_array().into_iter().flatten() {
                let growth = s["growth_bytes"].as_i64().unwrap();
                let start = s["start_bytes"].as_i64().unwrap();
                assert_eq!(s["end_bytes"].as_i64().unwrap() - start, growth, "{path}");
                assert!(s["peak_bytes"].as_i64().unwrap() >= start.max(start + growth));
                for by in ["growth_by_user_frame", "growth_by_category"] {
                    let sum: i64 = s[by]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|g| g["bytes"].as_i64().unwrap())
                        .sum();
                    assert_eq!(sum, growth, "{path}: {} {by}", s["name"]);
                }
                checked += 1;
            }
        }
    }
    // 1 + 6 + 1 stages.
    assert_eq!(checked, 8);
}

/// `--by annotation`: the live set at bcrafton's peak by the innermost
/// annotated range each block was made in, as an independent replay says
/// (`scripts/torch_annotation_replay.py FILE --by-annotation`: 3077285120 B
/// outside every range — the blocks made before the recording among them —
/// and 771947520 B made inside `Optimizer.step#AdamW.step`), in every
/// format.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn peak_by_annotation_matches_the_replay() {
    let doc = peak_at(&["--by", "annotation"]);
    let m = &doc["memories"][0];
    assert_eq!(m["peak_bytes"], 3_849_232_640u64);
    let b = &m["breakdowns"][0];
    assert_eq!(b["by"], "annotation");
    let by_key = common::bytes_by_key(&b["groups"]);
    assert_eq!(
        by_key.into_iter().collect::<Vec<_>>(),
        [
            ("<outside any annotation>".to_string(), 3_077_285_120u64),
            ("Optimizer.step#AdamW.step".to_string(), 771_947_520),
        ]
    );
    let file = "../shared/fixtures/torch/bcrafton_memory_snapshot.pickle";
    let table = shown(&["peak", file, "--by", "annotation"]);
    let row = table
        .lines()
        .find(|l| l.contains("Optimizer.step#AdamW.step"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("736.19 MiB") && row.contains("20.1%"), "{row}");
    assert!(
        table.contains("Live at peak by annotation — cuda:0"),
        "{table}"
    );
    let csv = shown(&["peak", file, "--by", "annotation", "--format", "csv"]);
    assert!(
        csv.lines().any(|l| l.starts_with("cuda:0,")
            && l.contains(",annotation,Optimizer.step#AdamW.step,771947520,771947520,5,")),
        "{csv}"
    );
    assert!(
        csv.contains(",annotation,<outside any annotation>,3077285120,"),
        "{csv}"
    );
    let md = shown(&["peak", file, "--by", "annotation", "--format", "md"]);
    assert!(
        md.contains("| Optimizer.step#AdamW.step | 736.19 MiB | 20.1% | 5 |"),
        "{md}"
    );
    assert!(
        md.contains("| &lt;outside any annotation&gt; | 2.87 GiB | 79.9% | 450 |"),
        "{md}"
    );
}

/// A trace's annotations are its CPU `user_annotation` spans: 41 ms into
/// the shared transformer's trace, inside its first Adam step, one block
/// the step made is live (`scripts/torch_annotation_replay.py TRACE
/// --trace-at 4463188336907`: 512000 B in `Optimizer.step#Adam.step`,
/// 4662180 B outside).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_trace_groups_by_its_user_annotations() {
    let trace = shared_fixture("torch/torch_cpu_transformer.pt.trace.json.gz");
    let doc = json(&[
        "peak",
        trace.to_str().unwrap(),
        "--by",
        "annotation",
        "--at",
        "t+41ms",
    ]);
    let m = &doc["memories"][0];
    assert_eq!(m["peak_at"], 4_463_188_336_907i64);
    let by_key = common::bytes_by_key(&m["breakdowns"][0]["groups"]);
    assert_eq!(by_key["Optimizer.step#Adam.step"], 512_000);
    assert_eq!(by_key["<outside any annotation>"], 4_662_180);
    assert_breakdowns_add_up(m);
}

/// `diff --by annotation` and `render --group-by annotation`: a file with
/// no annotations is all outside (and a note says why), the rows are those
/// of `peak`, and the page stacks its timeline by them.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn diff_and_page_by_annotation() {
    let base = shared_fixture("torch/magma27_memory_snapshot.pickle");
    let new = shared_fixture(BCRAFTON);
    let (base, new) = (base.to_str().unwrap(), new.to_str().unwrap());
    let doc = json(&["diff", base, new, "--by", "annotation"]);
    let rows = doc["rows"].as_array().unwrap();
    let step = rows
        .iter()
        .find(|r| r["key"] == "Optimizer.step#AdamW.step")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(step["base_bytes"], 0);
    assert_eq!(step["new_bytes"], 771_947_520u64);
    let out = common::memtool()
        .args(["diff", base, new, "--by", "annotation"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(
            "magma27_memory_snapshot.pickle: no annotated ranges (record_function, user \
             annotations) are recorded, so every allocation is <outside any annotation>"
        ),
        "{stderr}"
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("Change per annotation"), "{table}");
    let page = common::memtool()
        .args(["render", new, "--group-by", "annotation"])
        .output()
        .unwrap();
    assert!(page.status.success());
    let html = String::from_utf8(page.stdout).unwrap();
    assert!(html.contains("Stacked by annotation"), "no such legend");
    // The bands' keys, as the page's data writes them.
    for key in [
        r#""key":"Optimizer.step#AdamW.step""#,
        r#""key":"\u003coutside any annotation\u003e""#,
    ] {
        assert!(html.contains(key), "{key}");
    }
}
