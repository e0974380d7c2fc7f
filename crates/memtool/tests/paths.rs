//! The fast and the general paths of every reader give one profile on every
//! real profile: the shared reference fixtures one by one, and the committed
//! series. (The mutation sweep in `memtool-core/tests/robustness.rs` checks
//! the same on damaged inputs.)

mod common;

#[path = "../../memtool-core/tests/common/paths.rs"]
mod paths;

use std::path::{Path, PathBuf};

use memtool_core::{LoadOptions, Source};
use paths::{assert_loads_agree, assert_paths_agree};

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn from_files(paths: &[PathBuf]) -> Vec<Source> {
    paths
        .iter()
        .map(|p| Source::from_bytes(p.display().to_string(), std::fs::read(p).unwrap()))
        .collect()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn paths_agree_on_every_shared_fixture() {
    let root = common::shared_fixture("");
    let profiles: Vec<PathBuf> = files_under(&root)
        .into_iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == "expected"))
        .filter(|p| {
            !matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("md" | "sha256")
            )
        })
        .collect();
    assert!(
        profiles.len() > 20,
        "only {} shared fixtures",
        profiles.len()
    );
    for path in profiles {
        let file = [path];
        assert_paths_agree(
            &file[0].display().to_string(),
            || from_files(&file),
            &LoadOptions::default(),
        );
    }
}

/// A snapshot's pickle read from its file ahead of the decoder (more than
/// one job; chunks of 200 bytes, so a chunk's edge falls in every kind of
/// opcode and record) gives the profile read in place on one thread, on
/// every shared snapshot.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn snapshots_read_ahead_agree_on_every_shared_fixture() {
    let pickles: Vec<PathBuf> = files_under(&common::shared_fixture(""))
        .into_iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("pickle"))
        .collect();
    assert!(
        pickles.len() >= 5,
        "only {} shared snapshots",
        pickles.len()
    );
    for path in pickles {
        let name = path.display().to_string();
        let file = std::fs::File::open(&path).unwrap();
        assert_loads_agree(
            &name,
            (
                "in place, one thread",
                from_files(std::slice::from_ref(&path)),
                &LoadOptions {
                    jobs: 1,
                    ..LoadOptions::default()
                },
            ),
            (
                "read ahead",
                vec![Source::new(name.clone(), file)],
                &LoadOptions {
                    jobs: 4,
                    run_bytes: 200,
                    ..LoadOptions::default()
                },
            ),
        );
    }
}

#[test]
fn paths_agree_on_series_and_hosts() {
    let repo = |names: &[&str]| -> Vec<PathBuf> {
        names.iter().map(|n| common::repo_fixture(n)).collect()
    };
    let series = [
        repo(&[
            "pprof/cache1.prof",
            "pprof/cache2.prof",
            "pprof/cache3.prof",
        ]),
        repo(&[
            "pprof/leak1.prof",
            "pprof/leak2.prof",
            "pprof/leak3.prof",
            "pprof/leak4.prof",
        ]),
        // A run's hosts, read on threads and appended.
        repo(&["xspace/jax_mlp.xplane.pb", "xspace/jax_mlp.xplane.pb"]),
    ];
    for files in series {
        assert_paths_agree(
            &format!("{files:?}"),
            || from_files(&files),
            &LoadOptions::default(),
        );
    }
}

/// The shared fixtures are as `build.rs` saw them: the tests that need them
/// are compiled as ignored without them, so a folder that appeared after the
/// last build (or went away) would otherwise change what runs silently.
#[test]
fn shared_fixtures_are_as_the_build_saw_them() {
    let dir = std::path::PathBuf::from(env!("MEMTOOL_SHARED_FIXTURES_DIR"));
    let built_with = cfg!(shared_fixtures);
    assert_eq!(
        dir.is_dir(),
        built_with,
        "{} is {} now but was {} when the tests were built, so the tests that \
         need it are {}; `touch crates/memtool/build.rs` and run the tests again",
        dir.display(),
        if dir.is_dir() { "there" } else { "missing" },
        if built_with { "there" } else { "missing" },
        if built_with { "failing" } else { "ignored" },
    );
}
