//! XSpaces that hold no allocator events, truncated or damaged ones: one
//! clear message, never a panic.

use serde_json::Value;

use super::planes::host_plane_without_allocator_events;
use super::{fixture, path, scratch};
use crate::common::{fails, memtool, shared_fixture};

#[test]
fn a_profile_without_allocator_events_says_how_to_capture_them() {
    let dir = scratch("noevents");
    let file = dir.join("cpu.xplane.pb");
    std::fs::write(&file, host_plane_without_allocator_events()).unwrap();
    let err = fails(&["summary", path(&file)], 2);
    assert!(err.contains(path(&file)), "{err}");
    assert!(err.contains("no allocator events"), "{err}");
    assert!(err.contains("host_tracer_level"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn jax_on_cpu_has_no_allocator_events() {
    let jax = shared_fixture("xspace/jax_mlp.xplane.pb");
    // Its compiled programs may give memories of their own (HLO buffer
    // assignment); either way the missing allocator events are named.
    let out = memtool()
        .args(["summary", path(&jax), "--format", "json"])
        .output()
        .unwrap();
    match out.status.code() {
        Some(2) => assert!(String::from_utf8_lossy(&out.stderr).contains("no allocator events")),
        Some(0) => {
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(doc["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["message"]
                    .as_str()
                    .unwrap()
                    .contains("no allocator events")));
        }
        other => panic!("exit {other:?}: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_truncated_profile_is_one_clear_error() {
    let f = fixture("tf_cnn");
    let bytes = std::fs::read(&f.profile).unwrap();
    let dir = scratch("truncated");
    let file = dir.join("cut.xplane.pb");
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = fails(&["summary", path(&file)], 2);
    assert!(
        err.contains("invalid XSpace") && err.contains("at byte"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn damaged_profiles_never_panic() {
    let f = fixture("synth_bfc_3events");
    let original = std::fs::read(&f.profile).unwrap();
    let dir = scratch("damaged");
    let file = dir.join("damaged.xplane.pb");
    // A fixed pseudo-random sequence of single-byte changes.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..200 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut bytes = original.clone();
        let at = (state >> 33) as usize % bytes.len();
        bytes[at] = (state >> 8) as u8;
        std::fs::write(&file, &bytes).unwrap();
        for command in ["summary", "peak", "leaks", "frag"] {
            let out = memtool().args([command, path(&file)]).output().unwrap();
            let code = out.status.code();
            assert!(
                matches!(code, Some(0) | Some(2)),
                "round {round}, byte {at}: {command} exited {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
