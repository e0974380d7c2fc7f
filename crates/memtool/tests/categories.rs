//! Inferred categories (`analysis::category`) measured where the truth is
//! known: PyTorch's memory profiler names the category of every tensor of a
//! profiled run, in the snapshot `_profile_to_snapshot` makes of it and in
//! `export_memory_timeline`. memtool infers them while ignoring the file's
//! own and the two are compared byte for byte at the peak (and over the
//! recording, weighted by how long each byte was live). The plain CUDA
//! snapshots, which name no category, get categories that add up to their
//! peak with little left unknown. The figures are in docs/categories.md.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{json, shared_fixture};
use memtool_core::analysis::category::{assign, Inference};
use memtool_core::analysis::replay;
use memtool_core::model::{Memory, Profile};
use memtool_core::{load, LoadOptions, Source};

fn profile(path: &Path) -> Profile {
    load(
        vec![Source::from_bytes(
            path.display().to_string(),
            std::fs::read(path).unwrap(),
        )],
        &LoadOptions::default(),
    )
    .unwrap()
}

fn category(
    profile: &Profile,
    memory: &Memory,
    id: memtool_core::model::AllocId,
) -> Option<String> {
    let site = profile.names.site_of(memory.allocation(id).site);
    site.category.map(|c| profile.names.str(c).to_string())
}

/// Bytes whose inferred category is the file's, of the bytes the file names
/// a category for: at the peak, and over the recording weighted by the
/// events each allocation was live for.
struct Agreement {
    at_peak: (u64, u64),
    /// Bytes at the peak by (the file's category, the inferred one), where
    /// they differ.
    differ: BTreeMap<(String, String), u64>,
    over_time: (u128, u128),
}

fn agreement(path: &Path) -> Agreement {
    let truth = profile(path);
    let mut inferred = profile(path);
    assign(&mut inferred, &[], Inference::IgnoringFile);
    let (t, i) = (&truth.memories[0], &inferred.memories[0]);
    let peak = replay::peak(t).unwrap();
    let mut at_peak = (0, 0);
    let mut differ = BTreeMap::new();
    for id in replay::live_at(t, peak.index) {
        let Some(truth_category) = category(&truth, t, id) else {
            continue;
        };
        let bytes = t.allocation(id).bytes;
        at_peak.1 += bytes;
        let guess = category(&inferred, i, id).unwrap_or_default();
        if guess == truth_category {
            at_peak.0 += bytes;
        } else {
            *differ.entry((truth_category, guess)).or_default() += bytes;
        }
    }
    let mut over_time = (0u128, 0u128);
    let last = t.events.len();
    replay::for_each_lifespan(t, |span| {
        let Some(truth_category) = category(&truth, t, span.alloc) else {
            return;
        };
        let weight = u128::from(t.allocation(span.alloc).bytes)
            * (span.freed.unwrap_or(last) - span.made.unwrap_or(0)) as u128;
        over_time.1 += weight;
        let guess = category(&inferred, i, span.alloc).unwrap_or_default();
        if guess == truth_category {
            over_time.0 += weight;
        } else if std::env::var_os("MEMTOOL_CATEGORY_DIFFER").is_some() {
            eprintln!("over time: {truth_category} inferred {guess}: {weight}");
        }
    });
    Agreement {
        at_peak,
        differ,
        over_time,
    }
}

fn share(part: impl Into<f64>, whole: impl Into<f64>) -> f64 {
    part.into() / whole.into()
}

/// The profiler-made snapshot of a 2-layer transformer's three Adam steps:
/// at its peak (the first forward pass's end) the profiler names
/// 24,199,176 B (the rest was made before profiling and is named by
/// nobody), all but 4 B of which memtool names alike (24,199,172 B, 100.0%):
/// activations saved for the backward pass, and the first gradients of the
/// backward pass (`autograd_detail`).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn profiler_snapshot_agrees_at_the_peak() {
    let a = agreement(&shared_fixture(
        "torch/torch_cpu_transformer.snapshot.pickle",
    ));
    let peak = share(a.at_peak.0 as f64, a.at_peak.1 as f64);
    let time = share(a.over_time.0 as f64, a.over_time.1 as f64);
    eprintln!(
        "at the peak {} of {} B agree ({:.1}%); over time {:.1}%",
        a.at_peak.0,
        a.at_peak.1,
        peak * 100.0,
        time * 100.0
    );
    assert_eq!(a.at_peak, (24_199_172, 24_199_176), "{:?}", a.differ);
    assert!(peak >= 0.90, "{peak}");
}

/// `export_memory_timeline`'s bytes per category at a time (µs since the
/// epoch): its last row at or before it, as `[(category, bytes)]` in the
/// profiler's column order.
fn timeline_at(path: &Path, at_us: i64) -> BTreeMap<&'static str, u64> {
    const COLUMNS: [&str; 8] = [
        "parameter",
        "optimizer_state",
        "input",
        "temporary",
        "activation",
        "gradient",
        "autograd_detail",
        "unknown",
    ];
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let times = doc[0].as_array().unwrap();
    let rows = doc[1].as_array().unwrap();
    let row = times
        .iter()
        .zip(rows)
        .take_while(|(t, _)| t.as_i64().unwrap() <= at_us)
        .last()
        .map(|(_, row)| row)
        .unwrap();
    COLUMNS
        .iter()
        .enumerate()
        .map(|(c, &name)| (name, row[c + 1].as_u64().unwrap()))
        .filter(|&(_, bytes)| bytes > 0)
        .collect()
}

/// The profiler trace of the same run has no categories, and no identities
/// the timeline shares; the timeline (same clock) gives the profiler's
/// bytes per category at the trace's peak. Of the bytes the trace has live
/// there (what the profiler saw made: the timeline adds the memory made
/// before profiling), those whose inferred category the timeline holds at
/// least as many bytes of agree.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn profiler_trace_agrees_with_the_memory_timeline_at_the_peak() {
    let trace = shared_fixture("torch/torch_cpu_transformer.pt.trace.json.gz");
    let mut p = profile(&trace);
    assign(&mut p, &[], Inference::WhereMissing);
    let m = p.memories.iter().find(|m| m.id == "cpu").unwrap();
    let peak = replay::peak(m).unwrap();
    let mut inferred: BTreeMap<String, u64> = BTreeMap::new();
    for id in replay::live_at(m, peak.index) {
        *inferred.entry(category(&p, m, id).unwrap()).or_default() += m.allocation(id).bytes;
    }
    // The trace's clock: `ts` in µs after `baseTimeNanoseconds`.
    let base_us = 1_790_857_026_000_000;
    let truth = timeline_at(
        &shared_fixture("torch/torch_cpu_transformer.memory_timeline.json"),
        base_us + peak.at,
    );
    let agreeing: u64 = inferred
        .iter()
        .map(|(c, &bytes)| bytes.min(truth.get(c.as_str()).copied().unwrap_or(0)))
        .sum();
    let share = share(agreeing as f64, peak.bytes as f64);
    eprintln!(
        "at {}: inferred {inferred:?}, timeline {truth:?}: {:.1}%",
        peak.at,
        share * 100.0
    );
    assert_eq!(inferred.values().sum::<u64>(), peak.bytes);
    // All but 4 B of the trace's peak: 20,103,172 B of activations and
    // 4,096,000 B of autograd detail of the timeline's at that moment.
    assert_eq!((agreeing, peak.bytes), (24_199_172, 24_199_176));
    assert!(share >= 0.90, "{share}");
}

/// Every plain `_dump_snapshot` of the shared fixtures (no category in the
/// file; every one's stacks have Python frames): `peak --by category` names
/// every byte of the peak, each row marked inferred, and less than a fifth
/// of them unknown.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn plain_snapshots_get_categories_that_add_up_to_the_peak() {
    // Each file's unknown bytes at its peak: 4 B of magma27's 13.0 GiB,
    // none elsewhere.
    for (name, unknown_bytes) in [
        ("bcrafton_memory_snapshot.pickle", 0),
        ("magma27_memory_snapshot.pickle", 4),
        ("silmont2000_mem_snapshot.pickle", 0),
        ("silmont2000_memory_forward_bf16_128.pickle", 0),
        ("silmont2000_memory_forward_fp32_128.pickle", 0),
        ("transformer_nuggets_mini_snapshot.pickle", 0),
    ] {
        let path = shared_fixture(&format!("torch/{name}"));
        let report = json(&["peak", "--by", "category", path.to_str().unwrap()]);
        let memory = &report["memories"][0];
        let groups = memory["breakdowns"][0]["groups"].as_array().unwrap();
        let total: u64 = groups.iter().map(|g| g["bytes"].as_u64().unwrap()).sum();
        assert_eq!(total, memory["peak_bytes"].as_u64().unwrap(), "{name}");
        for g in groups {
            assert_eq!(g["category_source"], "inferred", "{name}: {g}");
        }
        let unknown: u64 = groups
            .iter()
            .filter(|g| g["key"] == "unknown")
            .map(|g| g["bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(unknown, unknown_bytes, "{name}");
        assert!(
            unknown * 5 < total,
            "{name}: {unknown} of {total} B unknown"
        );
    }
}

/// A profiler-made snapshot keeps the profiler's categories, said to be
/// its; what was made before profiling has none (`<none>`, no source).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn profiler_categories_are_kept_and_said_to_be_the_profilers() {
    let path = shared_fixture("torch/torch_cpu_transformer.snapshot.pickle");
    let report = json(&["peak", "--by", "category", path.to_str().unwrap()]);
    for g in report["memories"][0]["breakdowns"][0]["groups"]
        .as_array()
        .unwrap()
    {
        if g["key"] == "<none>" {
            assert!(g.get("category_source").is_none(), "{g}");
        } else {
            assert_eq!(g["category_source"], "profiler", "{g}");
        }
    }
}

/// `--category` and `--categories FILE`: the first matching rule names an
/// allocation, over the inferred category, in every format, said to be the
/// user's. On the bcrafton snapshot its optimizer (`optimizer.py`, the
/// script's own) frees what the state of the step before it held.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn user_categories_win_in_every_format() {
    let path = shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let path = path.to_str().unwrap();
    let rule = r"my_optimizer=optimizer\.py";
    let inferred = json(&["peak", "--by", "category", path]);
    let mine = json(&["peak", "--by", "category", "--category", rule, path]);
    let groups =
        |report: &serde_json::Value| report["memories"][0]["breakdowns"][0]["groups"].clone();
    let by_key = common::bytes_by_key(&groups(&mine));
    // Every byte whose stack names optimizer.py: the inferred optimizer
    // state of the same file (freed by its step) and more.
    let state = common::bytes_by_key(&groups(&inferred))["optimizer_state"];
    assert!(by_key["my_optimizer"] >= state, "{by_key:?}");
    assert_eq!(
        by_key.values().sum::<u64>(),
        mine["memories"][0]["peak_bytes"].as_u64().unwrap()
    );
    for g in groups(&mine).as_array().unwrap() {
        let source = if g["key"] == "my_optimizer" {
            "user"
        } else {
            "inferred"
        };
        assert_eq!(g["category_source"], source, "{g}");
    }
    for format in ["table", "md", "csv"] {
        let out = common::memtool()
            .args([
                "peak",
                "--by",
                "category",
                "--category",
                rule,
                "--format",
                format,
                path,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let row = text
            .lines()
            .find(|l| l.contains("my_optimizer"))
            .unwrap_or_else(|| panic!("{format}: {text}"));
        assert!(row.contains("user"), "{format}: {row}");
        // The categories no rule named are said to be inferred.
        let row = text
            .lines()
            .find(|l| l.contains("parameter"))
            .unwrap_or_else(|| panic!("{format}: {text}"));
        assert!(row.contains("inferred"), "{format}: {row}");
    }
    // The same rule from a file, after a rule that matches nothing.
    let dir = std::env::temp_dir().join(format!("memtool-categories-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("team.toml");
    std::fs::write(
        &file,
        "# a team's rules\n[categories]\nnccl = 'nccl|ProcessGroup'\nmy_optimizer = \"optimizer\\\\.py\" # the script's\n",
    )
    .unwrap();
    let from_file = json(&[
        "peak",
        "--by",
        "category",
        "--categories",
        file.to_str().unwrap(),
        path,
    ]);
    assert_eq!(groups(&from_file), groups(&mine));
    std::fs::write(&file, "nccl = nccl\n").unwrap();
    let err = common::fails(&["peak", "--categories", file.to_str().unwrap(), path], 2);
    assert!(
        err.contains("team.toml:1:") && err.lines().count() == 1,
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let err = common::fails(&["peak", "--category", "bad=(", path], 2);
    assert!(
        err.contains("`(` is not a regular expression (unclosed group)"),
        "{err}"
    );
}

/// The captures of `scripts/capture_torch_categories.py`: a CNN and a
/// transformer, AdamW and SGD with momentum, with and without activation
/// checkpointing. Each states its agreement at the peak, over the bytes the
/// profiler names there (the rest was made before profiling): all but 4 to
/// 20 B of each agree. The checkpointed CNN's peak falls in the
/// recomputation of a checkpointed block inside the backward pass: the
/// recomputed ReLU output (524,288 B), which the node that asked for it
/// frees right after making its gradient, is a temporary of that node, as
/// the profiler files it; the recomputed convolution's output, kept for a
/// later node, is `autograd_detail` in both.
#[test]
fn new_captures_agree_at_the_peak() {
    // (file, bytes agreeing at the peak of those named, per mille agreeing
    // over the recording).
    let expected: [(&str, (u64, u64), u128); 6] = [
        ("cnn_adamw", (2_427_532, 2_427_552), 972),
        ("cnn_sgd_momentum", (2_405_436, 2_405_456), 999),
        ("cnn_sgd_momentum_checkpoint", (2_161_868, 2_161_872), 999),
        ("transformer_adamw", (4_211_168, 4_211_172), 937),
        ("transformer_sgd_momentum", (3_685_284, 3_685_288), 995),
        ("transformer_adamw_checkpoint", (3_016_368, 3_016_372), 937),
    ];
    for (name, figure, over_time) in expected {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/categories/{name}.snapshot.pickle.gz"));
        let a = agreement(&path);
        eprintln!(
            "{name}: at the peak {} of {} B agree ({:.1}%); over time {:.1}%; differ {:?}",
            a.at_peak.0,
            a.at_peak.1,
            share(a.at_peak.0 as f64, a.at_peak.1 as f64) * 100.0,
            share(a.over_time.0 as f64, a.over_time.1 as f64) * 100.0,
            a.differ
        );
        assert_eq!(a.at_peak, figure, "{name}: {:?}", a.differ);
        let per_mille = (a.over_time.0 * 1000 + a.over_time.1 / 2) / a.over_time.1;
        assert_eq!(per_mille, over_time, "{name}");
        assert!(
            share(a.at_peak.0 as f64, a.at_peak.1 as f64) >= 0.90,
            "{name}"
        );
    }
}

/// The page stacks a plain snapshot by its categories, says they are
/// inferred and which are the user's, and names the user's in its legend
/// (the bands' keys).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_page_shows_inferred_and_user_categories() {
    let path = shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let dir = std::env::temp_dir().join(format!("memtool-categories-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.html");
    let out = common::memtool()
        .args([
            "render",
            path.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ])
        .args(["--category", r"my_optimizer=optimizer\.py"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Stacked by category (inferred; yours: my_optimizer)"));
    for key in ["\"my_optimizer\"", "\"parameter\"", "\"activation\""] {
        assert!(html.contains(key), "{key}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `diff --by category` of two plain snapshots: each row says its category
/// was inferred, in JSON and in the table.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn diff_by_category_says_the_categories_are_inferred() {
    let base = shared_fixture("torch/silmont2000_memory_forward_fp32_128.pickle");
    let new = shared_fixture("torch/silmont2000_memory_forward_bf16_128.pickle");
    let (base, new) = (base.to_str().unwrap(), new.to_str().unwrap());
    let report = json(&["diff", "--by", "category", base, new]);
    let rows = report["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["key"] == "activation"), "{rows:?}");
    for r in rows {
        assert_eq!(r["category_source"], "inferred", "{r}");
    }
    let out = common::memtool()
        .args(["diff", "--by", "category", base, new])
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    // A column with one value in every row is left out of the terminal
    // table and named under it.
    let row = table.lines().find(|l| l.contains("activation")).unwrap();
    assert!(
        row.ends_with("inferred")
            || table
                .lines()
                .any(|l| l.contains("the same in every row") && l.contains("source inferred")),
        "{table}"
    );
}
