//! Allocator events of synthetic XSpaces: memory allocated before the
//! profile, epoch timestamps, a TPU's stack reservation.

use super::planes::{allocator_space, allocator_space_with_stack, epoch_timestamps};
use super::{memory, num, path, scratch, BEFORE_START_OP, UNEXPLAINED_OP};
use crate::common::json;

#[test]
fn frees_of_allocations_older_than_the_profile_are_live_at_its_start() {
    // Before the profile: 150 bytes in use, of which address 9 (50 bytes) is
    // freed first; then 100 bytes are allocated at address 1.
    let dir = scratch("older");
    let file = dir.join("older.xplane.pb");
    std::fs::write(
        &file,
        allocator_space(0, &[(5, true, 100, 50, 9), (7, false, 200, 100, 1)]),
    )
    .unwrap();
    let doc = json(&["summary", path(&file)]);
    let m = memory(&doc, "GPU_0_bfc");
    assert_eq!((num(&m["allocations"]), num(&m["deallocations"])), (1, 1));
    // The allocator's figure before the first event: 100 + 50.
    assert_eq!(num(&m["peak_bytes"]), 200);
    assert_eq!(num(&m["peak_time_ps"]), 7);
    let peak = json(&["peak", path(&file)]);
    let rows = memory(&peak, "GPU_0_bfc")["at_peak"]
        .as_array()
        .unwrap()
        .clone();
    let before: i64 = rows
        .iter()
        .filter(|r| r["op"] == BEFORE_START_OP)
        .map(|r| num(&r["bytes"]))
        .sum();
    // 150 before the start, less the 50 freed at address 9.
    assert_eq!(before, 100);
    assert_eq!(rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(), 200);
    assert!(rows.iter().all(|r| r["op"] != UNEXPLAINED_OP));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn epoch_timestamps_count_from_the_earliest_line() {
    let dir = scratch("epoch");
    let file = dir.join("epoch.xplane.pb");
    std::fs::write(&file, epoch_timestamps()).unwrap();
    let doc = json(&["summary", path(&file)]);
    let m = memory(&doc, "GPU_0_bfc");
    assert_eq!(num(&m["peak_bytes"]), 300);
    assert_eq!(num(&m["peak_time_ps"]), 10);
    assert_eq!(num(&m["allocations"]), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tpu_stack_reservation_is_live_while_reserved() {
    // TPU-shaped: the stack reservation changes during the profile (50, 100,
    // none, then 1 MB) and is most of the peak; in use = stack + heap.
    let dir = scratch("tpu-stack");
    let file = dir.join("tpu.xplane.pb");
    let events = [
        ((10, false, 1000, 1000, 1), Some(50)),
        ((20, false, 1500, 500, 2), Some(100)),
        ((30, true, 1000, 500, 2), Some(100)),
        ((40, true, 0, 1000, 1), Some(0)),
        ((50, false, 128, 128, 3), Some(1_000_000)),
        ((60, true, 0, 128, 3), Some(1_000_000)),
    ];
    let in_use = |i: usize| events[i].0 .2 + events[i].1.unwrap();
    std::fs::write(&file, allocator_space_with_stack(0, &events)).unwrap();
    let peak = json(&["peak", path(&file)]);
    assert!(peak["warnings"].as_array().unwrap().is_empty(), "{peak}");
    let m = memory(&peak, "GPU_0_bfc");
    assert_eq!(num(&m["peak_bytes"]), in_use(4) as i64);
    assert_eq!(num(&m["peak_time_ps"]), 50);
    let rows = m["at_peak"].as_array().expect("at_peak rows");
    assert_eq!(
        rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(),
        num(&m["peak_bytes"])
    );
    // XProf lists the stack at the peak as one "stack" allocation.
    let stack: Vec<i64> = rows
        .iter()
        .filter(|r| r["op"] == "stack" && r["region"] == "stack")
        .map(|r| num(&r["bytes"]))
        .collect();
    assert_eq!(stack, [1_000_000]);
    // So does `--xprof-compat`: the stack is a `stack` row there too (as
    // docs/json/peak.md promises for both modes), never counted in the
    // allocator's in-use figure left unexplained.
    let compat = json(&["peak", path(&file), "--xprof-compat"]);
    let c = memory(&compat, "GPU_0_bfc");
    assert_eq!(num(&c["peak_bytes"]), in_use(4) as i64);
    let compat_rows = c["at_peak"].as_array().expect("at_peak rows");
    let stack: Vec<i64> = compat_rows
        .iter()
        .filter(|r| r["op"] == "stack" && r["region"] == "stack")
        .map(|r| num(&r["bytes"]))
        .collect();
    assert_eq!(stack, [1_000_000], "{c}");
    assert!(
        compat_rows.iter().all(|r| r["op"] != UNEXPLAINED_OP),
        "{compat_rows:?}"
    );
    assert_eq!(
        compat_rows.iter().map(|r| num(&r["bytes"])).sum::<i64>(),
        num(&c["peak_bytes"])
    );
    for b in m["breakdowns"].as_array().unwrap() {
        let total: i64 = b["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| num(&g["bytes"]))
            .sum();
        assert_eq!(total, num(&m["peak_bytes"]), "{}", b["by"]);
    }
    // The stack in force at each point is live there: the replayed timeline
    // is the allocator's own figure, up to the end.
    let summary = json(&["summary", path(&file)]);
    let s = memory(&summary, "GPU_0_bfc");
    assert_eq!(num(&s["final_bytes"]), in_use(5) as i64);
    assert_eq!(num(&s["live_bytes_at_end"]), num(&s["final_bytes"]));
    let frag = json(&["frag", path(&file)]);
    assert_eq!(
        num(&memory(&frag, "GPU_0_bfc")["at_end"]["in_use_bytes"]),
        in_use(5) as i64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
