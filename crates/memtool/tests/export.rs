//! `memtool export`: the Parquet it writes, read back with the parquet
//! crate's reader, holds the allocations `summary` reports — the same number
//! and the same bytes at the peak and at the end — for every kind of input.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{memtool, repo_fixture};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-export-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One row as column name → value (`Field::Null` for nulls).
type Row = BTreeMap<String, Field>;

/// Every row of a Parquet file, and its row group count.
fn read_rows(path: &Path) -> (Vec<Row>, usize) {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = reader.metadata().num_row_groups();
    let rows = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect()
        })
        .collect();
    (rows, groups)
}

fn int(row: &Row, name: &str) -> Option<i64> {
    match &row[name] {
        Field::Long(v) => Some(*v),
        Field::Null => None,
        other => panic!("{name}: {other:?} is not an integer"),
    }
}

fn text<'r>(row: &'r Row, name: &str) -> Option<&'r str> {
    match &row[name] {
        Field::Str(v) => Some(v),
        Field::Null => None,
        other => panic!("{name}: {other:?} is not text"),
    }
}

fn flag(row: &Row, name: &str) -> bool {
    match &row[name] {
        Field::Bool(v) => *v,
        other => panic!("{name}: {other:?} is not a boolean"),
    }
}

/// Exports `input` and checks each memory's rows against `summary --format
/// json`: rows made during the recording are its allocation events (its
/// allocations, for snapshots), the rows live at the peak are its live set
/// there (the top stacks' bytes and buffers), the rows never freed its final
/// bytes and buffers; and the memories table repeats its figures.
fn check_against_summary(input: &Path) -> usize {
    let dir = scratch(&input.file_name().unwrap().to_string_lossy());
    let (allocations, memories) = (dir.join("a.parquet"), dir.join("m.parquet"));
    let out = memtool()
        .arg("export")
        .arg(input)
        .arg("-o")
        .arg(&allocations)
        .arg("--memories")
        .arg(&memories)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = common::json(&["summary", input.to_str().unwrap()]);
    let (rows, _) = read_rows(&allocations);
    let (memory_rows, _) = read_rows(&memories);
    let name = input.to_str().unwrap();
    assert!(rows.iter().all(|r| text(r, "input") == Some(name)));
    let summarized = summary["memories"].as_array().unwrap();
    assert!(!summarized.is_empty(), "{name}: no memories");
    for m in summarized {
        let id = m["id"].as_str().unwrap();
        let what = format!("{name} {id}");
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| text(r, "memory") == Some(id))
            .collect();
        let sum = |rows: &[&Row], column: &str| -> u64 {
            rows.iter().map(|r| int(r, column).unwrap() as u64).sum()
        };
        let at_peak: Vec<&Row> = mine
            .iter()
            .copied()
            .filter(|r| flag(r, "live_at_peak"))
            .collect();
        let stacks = m["top_stacks"].as_array().unwrap();
        let stack_total =
            |field: &str| -> u64 { stacks.iter().map(|g| g[field].as_u64().unwrap()).sum() };
        assert_eq!(sum(&at_peak, "bytes"), stack_total("bytes"), "{what}");
        assert_eq!(sum(&at_peak, "buffers"), stack_total("count"), "{what}");
        assert_eq!(
            sum(&at_peak, "requested"),
            m["peak_requested_bytes"].as_u64().unwrap(),
            "{what}"
        );
        assert!(
            sum(&at_peak, "bytes") <= m["peak_bytes"].as_u64().unwrap(),
            "{what}"
        );
        let allocations = m["allocations"].as_u64().unwrap() as usize;
        if m["snapshots"].as_array().is_some_and(|s| !s.is_empty()) {
            assert_eq!(mine.len(), allocations, "{what}: one row per allocation");
            assert!(mine.iter().all(|r| text(r, "snapshot").is_some()));
        } else {
            // An event stream's allocations are its allocation events; a
            // memory with no events (a compiled program with no heap) has
            // its allocations live throughout.
            let made = if m["events"] == 0 {
                mine.len()
            } else {
                let made = mine.iter().filter(|r| int(r, "alloc_event").is_some());
                made.count()
            };
            assert_eq!(made, allocations, "{what}: one row per allocation");
            let live: Vec<&Row> = mine
                .iter()
                .copied()
                .filter(|r| int(r, "free_event").is_none())
                .collect();
            assert_eq!(
                sum(&live, "bytes"),
                m["final_bytes"].as_u64().unwrap(),
                "{what}"
            );
            assert_eq!(
                sum(&live, "buffers"),
                m["final_buffers"].as_u64().unwrap(),
                "{what}"
            );
            for r in &mine {
                let (made, freed) = (int(r, "alloc_event"), int(r, "free_event"));
                assert!(made.is_none_or(|m| freed.is_none_or(|f| m < f)), "{what}");
                assert_eq!(made.is_some(), int(r, "alloc_at").is_some(), "{what}");
                assert_eq!(freed.is_some(), int(r, "free_at").is_some(), "{what}");
            }
        }
        let facts: Vec<&Row> = memory_rows
            .iter()
            .filter(|r| text(r, "memory") == Some(id))
            .collect();
        let [facts] = facts[..] else {
            panic!("{what}: one row in the memories table");
        };
        assert_eq!(text(facts, "input"), Some(name));
        assert_eq!(text(facts, "kind"), m["kind"].as_str(), "{what}");
        assert_eq!(text(facts, "host"), m["host"].as_str(), "{what}");
        for (column, field) in [
            ("peak_bytes", "peak_bytes"),
            ("peak_buffers", "buffers"),
            ("peak_at", "peak_at"),
            ("final_bytes", "final_bytes"),
            ("final_buffers", "final_buffers"),
        ] {
            assert_eq!(
                int(facts, column),
                m[field].as_i64(),
                "{what}: {column} is summary's {field}"
            );
        }
        assert_eq!(
            int(facts, "peak_live_bytes"),
            Some(stack_total("bytes") as i64)
        );
        assert_eq!(text(facts, "peak_label"), m["peak_label"].as_str());
        assert_eq!(int(facts, "capacity_bytes"), m["capacity_bytes"].as_i64());
        assert_eq!(int(facts, "rows"), Some(mine.len() as i64), "{what}");
    }
    assert_eq!(memory_rows.len(), summarized.len(), "{name}");
    std::fs::remove_dir_all(&dir).unwrap();
    rows.len()
}

/// Every kind of input the repository holds: pprof, an XSpace's compiled
/// programs, a PyTorch snapshot, trace and memory timeline.
#[test]
fn every_repository_fixture_reads_back_as_summary_reports_it() {
    for rel in [
        "pprof/training.prof",
        "pprof/sharded.prof",
        "xspace/jax_mlp.xplane.pb",
        "torch/snapshot.p4.pickle",
        "torch/snapshot.p2.pickle",
        "torch/synthetic.pt.trace.json.gz",
        "torch/synthetic_v19.pt.trace.json",
        "torch/synthetic.memory_timeline.json",
        "torch/synthetic.memory_timeline.raw.json.gz",
    ] {
        let rows = check_against_summary(&repo_fixture(rel));
        assert!(rows > 0, "{rel}: no rows");
    }
}

/// The reference profiles: XSpace allocator events (TensorFlow, a real
/// multi-GPU BERT run), compiled programs, JAX pprof, real PyTorch snapshots,
/// traces and timelines.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_reference_fixture_reads_back_as_summary_reports_it() {
    for rel in [
        "xspace/tf_keras.xplane.pb",
        "xspace/tf_cnn.xplane.pb",
        "xspace/tf_cnn_leak.xplane.pb",
        "xspace/synth_bfc_3events.xplane.pb",
        "xspace/synth_two_lines_offsets.xplane.pb",
        "xspace/xprof_gpu_multi_worker.xplane.pb",
        "xspace/jax_transformer_small.xplane.pb",
        "pprof/memory.prof",
        "pprof/sharded.prof",
        "pprof/notraceback.prof",
        "torch/transformer_nuggets_mini_snapshot.pickle",
        "torch/silmont2000_memory_forward_bf16_128.pickle",
        "torch/bcrafton_memory_snapshot.pickle",
        "torch/magma27_memory_snapshot.pickle",
        "torch/torch_cpu_transformer.snapshot.pickle",
        "torch/torch_cpu_transformer.pt.trace.json.gz",
        "torch/torch_cpu_transformer.memory_timeline.json",
        "torch/hta_memory_timeline.raw.json.gz",
        "torch/kineto_tb_plugin_resnet50_worker0.pt.trace.json.gz",
    ] {
        let rows = check_against_summary(&common::shared_fixture(rel));
        assert!(rows > 0, "{rel}: no rows");
    }
}

/// Several files go into one table, each row naming its input; row groups
/// are written as they fill, so `--row-group-rows` bounds the rows in memory.
#[test]
fn a_fleet_of_files_concatenates_in_row_groups() {
    let dir = scratch("fleet");
    let out = dir.join("fleet.parquet");
    let inputs = ["tests/pprof/leak1.prof", "tests/torch/snapshot.p4.pickle"];
    let status = memtool()
        .current_dir(common::repo())
        .arg("export")
        .args(inputs)
        .arg("-o")
        .arg(&out)
        .args(["--row-group-rows", "3"])
        .output()
        .unwrap();
    assert!(status.status.success());
    let (rows, groups) = read_rows(&out);
    let per_input = |name: &str| {
        rows.iter()
            .filter(|r| text(r, "input") == Some(name))
            .count()
    };
    let leak = common::json(&[
        "summary",
        &repo_fixture("pprof/leak1.prof").to_string_lossy(),
    ]);
    let snapshot = common::json(&[
        "summary",
        &repo_fixture("torch/snapshot.p4.pickle").to_string_lossy(),
    ]);
    assert_eq!(
        per_input(inputs[0]),
        leak["memories"][0]["allocations"].as_u64().unwrap() as usize
    );
    assert!(
        per_input(inputs[1]) >= snapshot["memories"][0]["allocations"].as_u64().unwrap() as usize
    );
    assert_eq!(per_input(inputs[0]) + per_input(inputs[1]), rows.len());
    assert_eq!(groups, rows.len().div_ceil(3));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Parquet never goes to a terminal; piped, it does.
#[test]
fn export_never_writes_parquet_into_a_terminal() {
    let bin = assert_cmd::cargo::cargo_bin("memtool");
    let training = repo_fixture("pprof/training.prof");
    let out = std::process::Command::new("script")
        .args(["-qec"])
        .arg(format!("{} export {}", bin.display(), training.display()))
        .arg("/dev/null")
        .output()
        .expect("script (util-linux) runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "memtool: export writes Parquet, not text for a terminal; give -o allocations.parquet \
         (or redirect stdout)"
    );
    let piped = memtool().arg("export").arg(&training).output().unwrap();
    assert!(piped.status.success());
    assert!(piped.stdout.starts_with(b"PAR1") && piped.stdout.ends_with(b"PAR1"));
}

/// A `--memory` that names nothing in any input fails and leaves no file.
#[test]
fn an_unknown_memory_fails_without_writing() {
    let dir = scratch("unknown");
    let out = dir.join("a.parquet");
    let training = repo_fixture("pprof/training.prof");
    let stderr = common::fails(
        &[
            "export",
            training.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--memory",
            "nope",
        ],
        2,
    );
    assert!(
        stderr.contains("no memory or module named `nope`"),
        "{stderr}"
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The memories table may go to stdout while the allocations go to a file;
/// both cannot.
#[test]
fn only_one_table_goes_to_stdout() {
    let dir = scratch("stdout");
    let out = dir.join("a.parquet");
    let training = repo_fixture("pprof/training.prof");
    let piped = memtool()
        .arg("export")
        .arg(&training)
        .arg("-o")
        .arg(&out)
        .args(["--memories", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(piped.stdout.starts_with(b"PAR1") && piped.stdout.ends_with(b"PAR1"));
    let memories = dir.join("m.parquet");
    std::fs::write(&memories, &piped.stdout).unwrap();
    let (rows, _) = read_rows(&memories);
    assert_eq!(rows.len(), 1);
    assert_eq!(text(&rows[0], "memory"), Some("cpu:0"));
    assert!(read_rows(&out).0.len() > 1);
    let stderr = common::fails(
        &["export", training.to_str().unwrap(), "--memories", "-"],
        2,
    );
    assert!(stderr.contains("cannot both go to stdout"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
