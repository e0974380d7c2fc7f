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

/// XLA's `Total bytes` in a module's `*-memory-usage-report.txt`.
fn usage_report_total(module: &str) -> u64 {
    let name = module.split('(').next().unwrap();
    let id: u32 = module[name.len() + 1..module.len() - 1].parse().unwrap();
    let report = std::fs::read_to_string(common::repo_fixture(&format!(
        "xla/dump_text/module_{id:04}.{name}.cpu_after_optimizations-memory-usage-report.txt"
    )))
    .unwrap();
    report
        .lines()
        .find_map(|l| l.strip_prefix("Total bytes: "))
        .and_then(|t| t.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

/// The buffers at a program's peak that live through the whole program
/// (parameters, outputs, constants): instruction → bytes.
fn whole_program_buffers(m: &Value) -> std::collections::BTreeMap<String, u64> {
    m["buffers_at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["category"] != "Temporary")
        .map(|b| {
            (
                b["instruction"].as_str().unwrap().to_string(),
                b["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A dump without protos is read from its text buffer assignments as the
/// same programs as the `*.hlo.pb` of the dump with them: the same
/// parameters, outputs and constants, by name and size. The text has no
/// heap simulator trace, so the temporary allocation counts whole and the
/// peak is XLA's own `Total bytes`: the proto's peak where the heap fills
/// that allocation at its peak (the training step), above it otherwise
/// (`jit_oom`'s heap leaves a few bytes of it unused).
#[test]
fn a_text_buffer_assignment_reads_as_the_same_program_as_its_proto() {
    let doc = common::json(&["summary", &fixture("xla/dump_text")]);
    let formats: Vec<&str> = doc["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["format"].as_str().unwrap())
        .collect();
    assert_eq!(
        formats,
        ["buffer_assignment_text", "buffer_assignment_text"]
    );
    let text = peaks(&fixture("xla/dump_text"));
    let proto = peaks(&fixture("xla/dump_proto"));
    assert_eq!(
        text.keys().collect::<Vec<_>>(),
        ["jit_oom(28)", "jit_train_step(26)"]
    );
    for (module, t) in &text {
        let p = &proto[module];
        let total = usage_report_total(module);
        assert_eq!(t["peak_bytes"], total, "{module}");
        let whole = whole_program_buffers(t);
        assert!(!whole.is_empty(), "{module}");
        assert_eq!(whole, whole_program_buffers(p), "{module}");
        let temporary: Vec<&Value> = t["buffers_at_peak"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["category"] == "Temporary")
            .collect();
        assert_eq!(temporary.len(), 1, "{module}: {temporary:?}");
        let whole_bytes: u64 = whole.values().sum();
        assert_eq!(
            temporary[0]["bytes"].as_u64().unwrap(),
            total - whole_bytes,
            "{module}"
        );
        assert!(
            temporary[0]["instruction"]
                .as_str()
                .unwrap()
                .starts_with("allocation 9 (temporary, "),
            "{module}"
        );
    }
    let step = "jit_train_step(26)";
    assert_eq!(text[step]["peak_bytes"], proto[step]["peak_bytes"]);
    let oom = "jit_oom(28)";
    let (t, p) = (
        text[oom]["peak_bytes"].as_u64().unwrap(),
        proto[oom]["peak_bytes"].as_u64().unwrap(),
    );
    assert!(t > p && t - p < 4096, "{t} vs {p}");
    // Said once, in one note, with what is missing.
    let notes: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .filter(|m| m.contains("no heap simulator trace"))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
}

/// `oom LOG --dump DIR`: the `#allocationN` of a one-line out-of-memory
/// error is found in the dump of the same compile, read from its protos or
/// its text: the program's allocation of that index and size, with its
/// buffer as `peak` shows it there. An error of another compile matches
/// nothing and says so; without `--dump` nothing is searched.
#[test]
fn an_errors_allocation_is_found_in_the_dump_of_its_compile() {
    let log = fixture("xla/dump_allocation_oom.log");
    let proto_peak = peaks(&fixture("xla/dump_proto"));
    let output = proto_peak["jit_oom(28)"]["buffers_at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["category"] == "Output")
        .unwrap()
        .clone();
    for dump in ["xla/dump_proto", "xla/dump_text"] {
        let doc = common::json(&["oom", &log, "--dump", &fixture(dump)]);
        // The dump's files are inputs too, after the log.
        let formats: Vec<&str> = doc["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["format"].as_str().unwrap())
            .collect();
        let dumped = if dump.ends_with("proto") {
            "hlo_proto"
        } else {
            "buffer_assignment_text"
        };
        assert_eq!(formats, ["xla_report", dumped, dumped], "{dump}");
        let a = &doc["oom"][0]["allocations"][0];
        assert_eq!(a["allocation"], "#allocation0", "{dump}");
        let m = &a["in_dump"];
        assert_eq!(m["module"], "jit_oom(28)", "{dump}");
        assert_eq!(m["allocation_index"], 0, "{dump}");
        assert_eq!(m["bytes"], 512 * 512 * 2, "{dump}");
        assert_eq!(m["other_programs"], 0, "{dump}");
        let b = &m["buffer"];
        assert_eq!(b["instruction"], "wrapped_convert", "{dump}");
        assert_eq!(b["instruction"], output["instruction"], "{dump}");
        assert_eq!(b["shape"], "bf16[512,512]{1,0}", "{dump}");
        assert_eq!(b["shape"], output["shape"], "{dump}");
        assert_eq!(b["category"], "Output", "{dump}");
    }
    let text = common::stdout_in_repo(
        &[
            "oom",
            "tests/xla/dump_allocation_oom.log",
            "--dump",
            "tests/xla/dump_proto",
        ],
        &[0],
    );
    assert!(
        text.contains("Listed allocations in the XLA dump"),
        "{text}"
    );
    assert!(text.contains("jit_oom(28)") && text.contains("wrapped_convert"));
    let other = common::stdout_in_repo(
        &[
            "oom",
            "tests/xla/tpu_allocation_oom.log",
            "--dump",
            "tests/xla/dump_proto",
        ],
        &[0],
    );
    assert!(
        other.contains("#allocation7: no program of the dump has an allocation of that index"),
        "{other}"
    );
    let plain = common::json(&["oom", &log]);
    let a = &plain["oom"][0]["allocations"][0];
    assert!(a.get("in_dump").is_none(), "{a}");
}

/// A program whose heap reaches its peak twice (`tests/xspace/tied_peak.xplane.pb`,
/// written by `scripts/make_tied_peak_xspace.py`): the peak is the first,
/// XProf's `peakHeapSizePosition`, in both modes — position 1 with
/// `fusion.1` live, not position 3 with `fusion.2`.
#[test]
fn a_tied_program_peak_is_the_first_in_both_modes() {
    let file = fixture("xspace/tied_peak.xplane.pb");
    let (small, big) = (4096 * 4, 65536 * 4);
    for mode in [&[][..], &["--xprof-compat"][..]] {
        let mut args = vec!["peak", file.as_str()];
        args.extend_from_slice(mode);
        let doc = common::json(&args);
        let m = &doc["memories"][0];
        assert_eq!(m["id"], "jit_tied(7)", "{mode:?}");
        let timeline: Vec<u64> = m["heap_timeline_bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .collect();
        let peak = 3 * small + big;
        // Reached after trace events 1 and 3.
        let at: Vec<usize> = (0..timeline.len())
            .filter(|&i| timeline[i] == peak)
            .collect();
        assert_eq!(at, [2, 4], "{mode:?}: {timeline:?}");
        assert_eq!(m["peak_bytes"], peak, "{mode:?}");
        assert_eq!(m["peak_position"], 1, "{mode:?}");
        assert_eq!(m["peak_instruction"], "fusion.1", "{mode:?}");
        let mut buffers: Vec<(&str, u64)> = m["buffers_at_peak"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["instruction"].as_str().unwrap(),
                    b["bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        buffers.sort_unstable();
        assert_eq!(
            buffers,
            [
                ("a", small),
                ("fusion.1", big),
                ("out", small),
                ("p", small)
            ],
            "{mode:?}"
        );
    }
}

/// `ranks` over the two captures (a rank each, every compile counter
/// differing, `jit__normal(12)` a different program in each) labels each
/// program by what it is, as `diff` pairs them: every program of the first
/// run has the same label in the second, with the same peak, and no label
/// carries a counter.
#[test]
fn ranks_label_programs_by_what_they_are_not_by_counter() {
    let doc = common::json(&["ranks", &fixture(RUN1), &fixture(RUN2)]);
    let mut runs: [std::collections::BTreeMap<String, (u64, String)>; 2] = Default::default();
    for r in doc["ranks"].as_array().unwrap() {
        let rank = r["rank"].as_str().unwrap();
        let (file, program) = rank.split_once('/').unwrap();
        assert!(!program.ends_with(')'), "{rank}: a label keeps no counter");
        let run = usize::from(file == "counters_run2");
        runs[run].insert(
            program.to_string(),
            (
                r["peak_bytes"].as_u64().unwrap(),
                r["memory"].as_str().unwrap().to_string(),
            ),
        );
    }
    assert_eq!(runs[0].len(), 6, "{:?}", runs[0]);
    for (program, (peak, memory)) in &runs[0] {
        let (other_peak, other_memory) = &runs[1][program];
        assert_eq!(peak, other_peak, "{program}: {memory} vs {other_memory}");
        assert_ne!(memory, other_memory, "{program}: the counters differ");
    }
    // The id alone would pair `jit__normal(12)` of both runs: different
    // programs, of different peaks.
    let by_id = |run: usize| {
        runs[run]
            .values()
            .find(|(_, m)| m == "jit__normal(12)")
            .unwrap()
            .0
    };
    assert_ne!(by_id(0), by_id(1));
}

/// `leaks` over the two runs: each program of the first run is one series
/// with its counterpart in the second (paired as `diff` pairs them, shown by
/// its key), one point per run, the same bytes at both; the two programs
/// only the second run compiles are series of themselves.
#[test]
fn leaks_follow_each_program_across_runs_whatever_its_counter() {
    let doc = common::json(&["leaks", &fixture(RUN1), &fixture(RUN2)]);
    let memories = doc["memories"].as_array().unwrap();
    let mut joined = 0;
    let mut alone = Vec::new();
    for m in memories {
        let id = m["id"].as_str().unwrap();
        let points = m["points"].as_array().unwrap();
        if points.len() == 1 {
            alone.push(id.to_string());
            continue;
        }
        joined += 1;
        assert!(!id.ends_with(')'), "{id}: a key keeps no counter");
        assert_eq!(
            points,
            &["counters_run1.xplane.pb", "counters_run2.xplane.pb"],
            "{id}"
        );
        let totals = m["total_bytes"].as_array().unwrap();
        assert_eq!(totals[0], totals[1], "{id}");
        assert_eq!(m["leaking"], false, "{id}");
    }
    // Every program of the first run, each once.
    let first_run = peaks(&fixture(RUN1)).len();
    assert_eq!(joined, first_run);
    alone.sort();
    assert_eq!(alone, ["jit__lambda(2)", "jit_iota(0)"]);
    let step = memories
        .iter()
        .find(|m| m["id"] == "jit_train_step")
        .unwrap();
    assert_eq!(step["total_bytes"][0], 842264);
}
