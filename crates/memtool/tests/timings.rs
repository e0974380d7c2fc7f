//! `MEMTOOL_TIMINGS=1` prints phase timings to stderr and changes nothing else.

mod common;

use common::{memtool, shared_fixture};

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn timings_go_to_stderr_and_leave_stdout_alone() {
    let path = shared_fixture("pprof/memory.prof");
    let path = path.to_str().unwrap();
    let plain = memtool().args(["summary", path]).output().unwrap();
    let timed = memtool()
        .args(["summary", path])
        .env("MEMTOOL_TIMINGS", "1")
        .output()
        .unwrap();
    assert!(plain.status.success() && timed.status.success());
    assert_eq!(plain.stdout, timed.stdout);
    assert!(plain.stderr.is_empty());
    let stderr = String::from_utf8(timed.stderr).unwrap();
    let phases: Vec<&str> = stderr
        .lines()
        .skip(2)
        .filter_map(|l| l.split("  ").find(|s| !s.is_empty()))
        .map(str::trim)
        .collect();
    for phase in [
        "total",
        "read files",
        "parse",
        "gunzip",
        "pprof: decode (prost)",
        "analysis",
        "output",
    ] {
        assert!(phases.contains(&phase), "{phase} missing from {stderr}");
    }
    // Nested phases are indented under their parent.
    assert!(stderr.contains("\n      gunzip"), "{stderr}");
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn timings_off_when_zero() {
    let path = shared_fixture("pprof/memory.prof");
    let out = memtool()
        .args(["summary", path.to_str().unwrap()])
        .env("MEMTOOL_TIMINGS", "0")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty());
}

/// Every part of `summary`'s analysis has a phase of its own, the
/// categories among them, and the parts found on threads of their own
/// (`--jobs 2`: the landmarks, the per-step figures) are printed under
/// `analysis`, as with one thread.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn analysis_phases_nest_under_analysis_on_any_number_of_threads() {
    let path = shared_fixture("xspace/tf_cnn.xplane.pb");
    for jobs in ["1", "2"] {
        let out = memtool()
            .args(["summary", path.to_str().unwrap(), "--jobs", jobs])
            .env("MEMTOOL_TIMINGS", "1")
            .output()
            .unwrap();
        assert!(out.status.success());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("\n    categories "), "{stderr}");
        for phase in [
            "replay: peak and live set",
            "per-step figures",
            "landmarks",
            "stream peaks",
        ] {
            assert!(
                stderr.contains(&format!("\n      {phase} ")),
                "--jobs {jobs}: {phase} not under analysis in {stderr}"
            );
        }
    }
}
