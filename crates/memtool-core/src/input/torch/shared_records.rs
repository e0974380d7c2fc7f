//! Tests: snapshot records the format gives one owner (segments, blocks,
//! trace entries) referenced many times through the pickle memo are
//! refused, and frames, which snapshots do share, are converted once: a
//! pickle of a million two-byte references costs what its bytes do, not a
//! million records (issue 27).

use super::pickle::Paths;
use super::snapshot::read;
use crate::model::Profile;

/// SHORT_BINUNICODE.
fn text(out: &mut Vec<u8>, s: &str) {
    out.push(0x8c);
    out.push(s.len() as u8);
    out.extend(s.as_bytes());
}

/// `n` BINGETs of memo entry `slot`.
fn references(out: &mut Vec<u8>, slot: u8, n: usize) {
    for _ in 0..n {
        out.extend([b'h', slot]);
    }
}

const MILLION: usize = 1_000_000;

/// Reads `pickle` on both paths and returns the error each gives.
fn refused(pickle: &[u8]) -> Vec<String> {
    let pickle = pickle.to_vec();
    [Paths::Fast, Paths::GeneralOnly]
        .into_iter()
        .map(|paths| {
            let mut profile = Profile::default();
            let started = std::time::Instant::now();
            let err = read(&mut profile, "shared.pickle", &pickle, paths)
                .expect_err("a record listed again is refused");
            // Refused at the second reference, not after a million records:
            // well within a second even in a debug build on a loaded machine.
            assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
            err.to_string()
        })
        .collect()
}

/// Old snapshots are a bare list of segments: `[S, S, S, …]`, S one empty
/// dict (memo entry 1) referenced a million times, is refused at the second.
#[test]
fn a_million_references_to_one_segment_are_refused() {
    let mut p = vec![0x80, 4, b']', 0x94, b'(', b'}', 0x94];
    references(&mut p, 1, MILLION);
    p.extend([b'e', b'.']);
    for err in refused(&p) {
        assert!(
            err.starts_with(
                "shared.pickle: invalid PyTorch snapshot pickle: memo entry 1, a segment \
                 already read, is listed again (shared records are not expected there)"
            ),
            "{err}"
        );
    }
}

/// `{'segments': [S, S, …]}` with S a segment of one block: the same.
#[test]
fn a_segment_listed_again_under_segments_is_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    text(&mut p, "segments");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // the list 1, S 2
    text(&mut p, "total_size");
    p.extend([b'K', 64, b'u']);
    references(&mut p, 2, MILLION);
    p.extend([b'e', b'u', b'.']);
    for err in refused(&p) {
        assert!(
            err.contains("memo entry 2, a segment already read"),
            "{err}"
        );
    }
}

/// A segment whose blocks list is one block dict a million times.
#[test]
fn a_million_references_to_one_block_are_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    text(&mut p, "segments");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // the list 1, the segment 2
    text(&mut p, "blocks");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // blocks 3, the block 4
    text(&mut p, "size");
    p.extend([b'K', 16, b'u']);
    references(&mut p, 4, MILLION);
    p.extend([b'e', b'u', b'e', b'u', b'.']);
    for err in refused(&p) {
        assert!(err.contains("memo entry 4, a block already read"), "{err}");
    }
}

/// A block of one segment listed again in another segment.
#[test]
fn a_block_shared_between_segments_is_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    text(&mut p, "segments");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // the list 1, the segment 2
    text(&mut p, "blocks");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // blocks 3, the block 4
    text(&mut p, "size");
    p.extend([b'K', 16, b'u', b'e', b'u']);
    p.extend([b'}', b'(']);
    text(&mut p, "blocks");
    p.extend([b']', b'(', b'h', 4, b'e', b'u', b'e', b'u', b'.']);
    for err in refused(&p) {
        assert!(err.contains("memo entry 4, a block already read"), "{err}");
    }
}

/// A trace entry listed a million times in its device's trace.
#[test]
fn a_million_references_to_one_trace_entry_are_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    text(&mut p, "device_traces");
    p.extend([b']', 0x94, b']', 0x94, b'(', b'}', 0x94, b'(']); // traces 1, trace 2, entry 3
    text(&mut p, "action");
    text(&mut p, "alloc");
    text(&mut p, "addr");
    p.extend([b'K', 1]);
    text(&mut p, "size");
    p.extend([b'K', 8, b'u']);
    references(&mut p, 3, MILLION);
    p.extend([b'e', b'a', b'u', b'.']);
    // The decoder refuses it as it is pushed, a second copy of a record
    // still on the stack.
    for err in refused(&p) {
        assert!(
            err.contains("memo entry 3, a record listed already")
                && err.contains("(shared records are not expected there)"),
            "{err}"
        );
    }
}

/// Frames are shared in real snapshots (one dict per distinct frame): a
/// frames list of one frame referenced again and again (deep recursion)
/// is one frame interned once and a stack as deep as the list, in memory
/// proportional to the pickle, as the trie stores one node per reference.
#[test]
fn a_frame_referenced_many_times_is_converted_once() {
    let depth = 100_000;
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    text(&mut p, "device_traces");
    p.extend([b']', 0x94, b']', 0x94, b'}', 0x94, b'(']); // traces 1, trace 2, entry 3
    text(&mut p, "action");
    text(&mut p, "alloc");
    text(&mut p, "addr");
    p.extend([b'K', 1]);
    text(&mut p, "size");
    p.extend([b'K', 8]);
    text(&mut p, "frames");
    p.extend([b']', 0x94, b'(', b'}', 0x94, b'(']); // frames 4, frame 5
    text(&mut p, "filename");
    text(&mut p, "a.py");
    text(&mut p, "line");
    p.extend([b'K', 1]);
    text(&mut p, "name");
    text(&mut p, "f");
    p.push(b'u');
    references(&mut p, 5, depth - 1);
    p.extend([b'e', b'u', b'a', b'a', b'u', b'.']);
    for paths in [Paths::Fast, Paths::GeneralOnly] {
        let mut profile = Profile::default();
        read(&mut profile, "deep.pickle", &p, paths).unwrap();
        let memory = &profile.memories[0];
        assert_eq!(memory.allocations.len(), 1);
        let names = &profile.names;
        let stack = names.site_of(memory.allocations[0].site).stack;
        let frames: Vec<_> = names.frames_of(stack).collect();
        assert_eq!(frames.len(), depth);
        assert!(
            frames.iter().all(|&f| f == frames[0]),
            "one frame, interned once"
        );
    }
}
