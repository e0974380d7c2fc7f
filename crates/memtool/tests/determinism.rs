//! Same input, same bytes: every command's JSON and CSV (and pprof, and
//! `render`'s HTML and Perfetto trace) is byte-identical across runs, for every input format; and every
//! subcommand keeps the documented exit codes.

mod common;

use common::{memtool, repo, shared_fixture};

/// One small input per format and kind of memory.
fn inputs() -> Vec<String> {
    let mut out: Vec<String> = ["tests/pprof/sharded.prof", "tests/xspace/jax_mlp.xplane.pb"]
        .iter()
        .map(|p| repo().join(p).display().to_string())
        .collect();
    let torch = repo().join("tests/torch");
    let mut pickles: Vec<String> = std::fs::read_dir(&torch)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("snapshot"))
                })
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    pickles.sort();
    out.extend(pickles.into_iter().take(1));
    // With the shared fixtures, real files of the formats the repository has
    // only small ones of.
    let shared = [
        "xspace/tf_cnn_leak.xplane.pb",
        "torch/transformer_nuggets_mini_snapshot.pickle",
        "torch/torch_cpu_transformer.memory_timeline.json",
    ];
    if cfg!(shared_fixtures) {
        for rel in shared {
            out.push(shared_fixture(rel).display().to_string());
        }
    }
    out
}

fn run(args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let out = memtool().args(args).output().unwrap();
    (out.status.code(), out.stdout)
}

#[test]
fn json_and_csv_are_byte_identical_across_runs() {
    for input in inputs() {
        for cmd in ["summary", "peak", "leaks", "frag"] {
            for format in ["json", "csv"] {
                let args = [cmd, input.as_str(), "--format", format];
                let first = run(&args);
                assert_eq!(first.0, Some(0), "{args:?}");
                assert!(!first.1.is_empty(), "{args:?}");
                assert_eq!(first, run(&args), "{args:?} differs between runs");
            }
        }
        let args = ["diff", input.as_str(), input.as_str(), "--format", "json"];
        assert_eq!(run(&args), run(&args), "{args:?}");
        let args = ["export", input.as_str()];
        let first = run(&args);
        assert_eq!(first.0, Some(0), "{args:?}");
        assert!(first.1.starts_with(b"PAR1"), "{args:?}");
        assert_eq!(first, run(&args), "{args:?} differs between runs");
    }
}

#[test]
fn pprof_and_perfetto_are_byte_identical_across_runs() {
    for input in inputs() {
        for args in [
            ["peak", input.as_str(), "--format", "pprof"],
            ["summary", input.as_str(), "--format", "pprof"],
            ["render", input.as_str(), "--format", "perfetto"],
        ] {
            let first = run(&args);
            assert_eq!(first.0, Some(0), "{args:?}");
            assert!(!first.1.is_empty(), "{args:?}");
            assert_eq!(first, run(&args), "{args:?} differs between runs");
        }
    }
}

#[test]
fn html_reports_are_byte_identical_across_runs() {
    let dir = std::env::temp_dir().join(format!("memtool-det-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, input) in inputs().iter().enumerate() {
        let mut pages = Vec::new();
        for round in 0..2 {
            let out = dir.join(format!("{i}-{round}.html"));
            memtool()
                .args(["render", input, "-o"])
                .arg(&out)
                .assert()
                .success();
            pages.push(std::fs::read(&out).unwrap());
        }
        assert!(pages[0] == pages[1], "{input}: render differs between runs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_exits_2_on_bad_input_and_usage() {
    let missing = repo()
        .join("tests/broken/does-not-exist.prof")
        .display()
        .to_string();
    let broken = repo().join("tests/broken/random.bin").display().to_string();
    for cmd in ["summary", "peak", "leaks", "frag", "render", "export"] {
        for bad in [&missing, &broken] {
            let out = memtool()
                .args([cmd, bad.as_str(), "-o", "/tmp/memtool-never-written"])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd} {bad}");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr).lines().count(),
                1,
                "{cmd} {bad}"
            );
        }
        assert_eq!(run(&[cmd]).0, Some(2), "{cmd} without input is bad usage");
        assert_eq!(run(&[cmd, "--no-such-flag"]).0, Some(2), "{cmd}");
        let help = memtool().args([cmd, "--help"]).output().unwrap();
        assert_eq!(help.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&help.stdout).contains(&format!("memtool {cmd} ")),
            "{cmd} --help has an example"
        );
    }
    assert!(!std::path::Path::new("/tmp/memtool-never-written").exists());
    let out = memtool()
        .args(["diff", &missing, &broken])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `summary` of a profile of several memories summarises them on `--jobs`
/// threads, a run of neighbouring memories each: the same JSON and table as
/// one thread, memories in profile order.
#[test]
fn summary_of_many_memories_is_the_same_on_any_number_of_threads() {
    let mut files = vec![
        repo().join("tests/pprof/sharded.prof"),
        repo().join("tests/xspace/jax_mlp.xplane.pb"),
    ];
    if cfg!(shared_fixtures) {
        files.push(shared_fixture("xspace/xprof_gpu_multi_worker.xplane.pb"));
        files.push(shared_fixture("xspace/jax_transformer_small.xplane.pb"));
    }
    for file in &files {
        let file = file.display().to_string();
        for format in ["json", "table"] {
            let one = run(&["summary", &file, "--format", format, "--jobs", "1"]);
            assert_eq!(one.0, Some(0), "{file} {format}");
            for jobs in ["2", "3", "7"] {
                let many = run(&["summary", &file, "--format", format, "--jobs", jobs]);
                assert!(
                    many == one,
                    "{file}: summary --format {format} --jobs {jobs} is not the one-thread output"
                );
            }
        }
    }
}

/// `summary` of one memory finds its landmarks and its per-step figures on
/// threads of their own beside the rest of its analysis (`--jobs` 2 and
/// more): the same JSON and table as one thread, for a memory of each
/// kind of input with events and steps.
#[test]
fn summary_of_one_memory_is_the_same_on_any_number_of_threads() {
    let mut files = vec![repo().join("tests/xspace/jax_mlp.xplane.pb")];
    let torch = repo().join("tests/torch");
    let mut pickles: Vec<_> = std::fs::read_dir(&torch)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
                .collect()
        })
        .unwrap_or_default();
    pickles.sort();
    files.extend(pickles);
    if cfg!(shared_fixtures) {
        for rel in [
            "xspace/tf_cnn.xplane.pb",
            "xspace/tf_cnn_leak.xplane.pb",
            "torch/bcrafton_memory_snapshot.pickle",
            "torch/transformer_nuggets_mini_snapshot.pickle",
            "torch/torch_cpu_transformer.memory_timeline.json",
        ] {
            files.push(shared_fixture(rel));
        }
    }
    let mut with_landmarks = 0;
    for file in &files {
        let file = file.display().to_string();
        for format in ["json", "table"] {
            let one = run(&["summary", &file, "--format", format, "--jobs", "1"]);
            if format == "json" && one.1.windows(12).any(|w| w == b"\"landmarks\":") {
                with_landmarks += 1;
            }
            for jobs in ["2", "3"] {
                let many = run(&["summary", &file, "--format", format, "--jobs", jobs]);
                assert!(
                    many == one,
                    "{file}: summary --format {format} --jobs {jobs} is not the one-thread output"
                );
            }
        }
    }
    assert!(
        with_landmarks >= 2,
        "{with_landmarks} inputs with landmarks"
    );
}
