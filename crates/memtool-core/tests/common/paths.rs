//! Both paths of every reader give one profile: the fast paths (pprof's one
//! walk, XSpace's merged walk and fast event decoding, the pickle records
//! fast path, the Chrome trace window) and the general paths they fall back
//! to. Shared by the robustness sweep and the `load` fuzz target.

use memtool_core::model::Profile;
use memtool_core::{load, LoadOptions, Result, Source};

/// Everything a profile holds, in a form where equal profiles print alike.
fn dump(profile: &Result<Profile>) -> String {
    match profile {
        Ok(p) => format!(
            "inputs {:?}\nwarnings {:?}\nnames {:?}\nmemories {:#?}",
            p.inputs, p.warnings, p.names, p.memories
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// Loads the inputs `sources` makes through the fast paths (on one thread,
/// and on four with an XSpace's lines cut into runs of a few events and a
/// pprof profile's samples walked ahead a few at a time) and
/// through the general paths only; panics, naming `what`, where they
/// disagree.
pub fn assert_paths_agree(what: &str, sources: impl Fn() -> Vec<Source>, options: &LoadOptions) {
    let one_thread = load(
        sources(),
        &LoadOptions {
            jobs: 1,
            ..*options
        },
    );
    let in_runs = load(
        sources(),
        &LoadOptions {
            jobs: 4,
            run_bytes: 200,
            ..*options
        },
    );
    let general = load(
        sources(),
        &LoadOptions {
            force_general_path: true,
            ..*options
        },
    );
    let (one_thread, in_runs) = (dump(&one_thread), dump(&in_runs));
    assert_agree(
        what,
        "fast, one thread",
        &one_thread,
        "fast, in runs",
        &in_runs,
    );
    assert_agree(what, "fast", &one_thread, "general", &dump(&general));
}

/// Loads `one` and `other` (each a name, its sources and its options) and
/// panics, naming `what`, where their profiles differ.
#[allow(dead_code)] // Not every test binary that shares this file uses it.
pub fn assert_loads_agree(
    what: &str,
    one: (&str, Vec<Source>, &LoadOptions),
    other: (&str, Vec<Source>, &LoadOptions),
) {
    let first = dump(&load(one.1, one.2));
    let second = dump(&load(other.1, other.2));
    assert_agree(what, one.0, &first, other.0, &second);
}

fn assert_agree(what: &str, one: &str, fast: &str, other: &str, general: &str) {
    if fast != general {
        let line = fast
            .lines()
            .zip(general.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let at = |s: &str| s.lines().nth(line).unwrap_or("<end>").to_string();
        panic!(
            "{what}: {one} and {other} disagree at line {line}:\n  {one}: {}\n  {other}: {}",
            at(fast),
            at(general)
        );
    }
}
