use super::*;

/// A protocol-4 pickle written as CPython does, memo ids counted.
struct Pickle {
    bytes: Vec<u8>,
    next: u8,
}

impl Pickle {
    fn memoize(&mut self) -> u8 {
        self.bytes.push(0x94);
        self.next += 1;
        self.next - 1
    }

    fn str(&mut self, s: &str) -> u8 {
        self.bytes.extend([0x8c, s.len() as u8]);
        self.bytes.extend(s.as_bytes());
        self.memoize()
    }

    fn get(&mut self, id: u8) {
        self.bytes.extend([b'h', id]);
    }

    /// `{'name': .., 'filename': .., 'line': ..}`
    fn frame(&mut self, name: &str, file: &str, line: u8) -> u8 {
        self.bytes.push(b'}');
        let id = self.memoize();
        self.bytes.push(b'(');
        for (key, value) in [("name", name), ("filename", file)] {
            self.str(key);
            self.str(value);
        }
        self.str("line");
        self.bytes.extend([b'K', line, b'u']);
        id
    }

    /// A trace entry; `frames` writes the value of its `frames` key.
    fn entry(&mut self, action: &str, addr: u8, frames: impl FnOnce(&mut Pickle)) {
        self.bytes.push(b'}');
        self.memoize();
        self.bytes.push(b'(');
        self.str("action");
        self.str(action);
        for (key, value) in [("addr", addr), ("size", 8)] {
            self.str(key);
            self.bytes.extend([b'K', value]);
        }
        self.str("frames");
        frames(self);
        self.bytes.push(b'u');
    }
}

/// Trace entries' `frames` lists: of frame dicts (read the ordinary
/// way), of frames met before (taken as a stack straight from the
/// bytes), a reference to such a list, and a list holding a stack where
/// a frame should be (built, then read the ordinary way; the stack is
/// left out): every way gives the stack the frames make.
#[test]
fn frames_lists_read_straight_or_the_ordinary_way_give_one_stack() {
    let mut p = Pickle {
        bytes: vec![0x80, 4, b'}'],
        next: 0,
    };
    p.memoize();
    p.bytes.push(b'(');
    p.str("device_traces");
    p.bytes.push(b']');
    p.memoize();
    p.bytes.extend([b'(', b']']);
    p.memoize();
    p.bytes.push(b'(');
    let (mut f, mut g, mut first, mut second) = (0, 0, 0, 0);
    p.entry("alloc", 16, |p| {
        p.bytes.push(b']');
        first = p.memoize();
        p.bytes.push(b'(');
        f = p.frame("f", "a.py", 1);
        g = p.frame("g", "b.py", 2);
        p.bytes.push(b'e');
    });
    // An entry read the ordinary way holds the rest of its batch back
    // until the batch's APPENDS: the next entries in a batch of their own.
    p.bytes.extend([b'e', b'(']);
    p.entry("alloc", 32, |p| {
        p.bytes.push(b']');
        second = p.memoize();
        p.bytes.push(b'(');
        p.get(f);
        p.get(g);
        p.bytes.push(b'e');
    });
    p.entry("free_completed", 16, |p| p.get(second));
    p.entry("alloc", 48, |p| {
        p.bytes.push(b']');
        p.memoize();
        p.bytes.push(b'(');
        p.get(f);
        p.get(first);
        p.bytes.push(b'e');
    });
    p.bytes.extend([b'e', b'e', b'u', b'.']);
    let mut profile = Profile::default();
    read(&mut profile, "frames.pickle", &p.bytes, pickle::Paths::Fast).unwrap();
    let m = &profile.memories[0];
    let names = &profile.names;
    let stacks: Vec<(Option<u64>, String)> = m
        .allocations
        .iter()
        .map(|a| (a.address(), names.stack_label(names.site_of(a.site).stack)))
        .collect();
    assert_eq!(
        stacks,
        [
            (Some(16), "f a.py:1 <- g b.py:2".to_string()),
            (Some(32), "f a.py:1 <- g b.py:2".to_string()),
            (Some(48), "f a.py:1".to_string()),
        ]
    );
    assert_eq!(m.events.len(), 4);
    assert!(profile.warnings.is_empty(), "{:?}", profile.warnings);
}

/// `{'segments': [{'blocks': L}, {'blocks': L}]}` with L one shared list
/// of one block: the second reference is read as empty, with a warning.
#[test]
fn a_blocks_list_shared_between_segments_is_read_once() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 8];
    p.extend(b"segments");
    p.extend([0x94, b']', 0x94, b'(', b'}', 0x94, b'(', 0x8c, 6]);
    p.extend(b"blocks");
    p.extend([0x94, b']', 0x94, b'}', 0x94, b'(', 0x8c, 4]);
    p.extend(b"size");
    p.extend([0x94, b'K', 200, 0x8c, 5]);
    p.extend(b"state");
    p.extend([0x94, 0x8c, 8]);
    p.extend(b"inactive");
    p.extend([0x94, b'u', b'a', b'u']);
    p.extend([b'}', 0x94, b'(', b'h', 4, b'h', 5, b'u', b'e', b'u', b'.']);
    let mut profile = Profile::default();
    read(&mut profile, "s.pickle", &p, pickle::Paths::Fast).unwrap();
    let m = &profile.memories[0];
    let blocks: Vec<usize> = m.segments.iter().map(|s| s.blocks.len()).collect();
    assert_eq!(blocks, [1, 0]);
    assert_eq!(m.segments[0].blocks[0].bytes, 200);
    assert!(profile.warnings[0].message.contains("shared"));
}
/// `{'action': 'alloc', 'addr': addr, 'size': 8}`, not memoized.
fn plain_entry(bytes: &mut Vec<u8>, addr: u32) {
    bytes.extend([b'}', b'(', 0x8c, 6]);
    bytes.extend(b"action");
    bytes.extend([0x8c, 5]);
    bytes.extend(b"alloc");
    bytes.extend([0x8c, 4]);
    bytes.extend(b"addr");
    bytes.push(b'J');
    bytes.extend(addr.to_le_bytes());
    bytes.extend([0x8c, 4]);
    bytes.extend(b"size");
    bytes.extend([b'K', 8, b'u']);
}

/// A list of trace entries stored once and listed as every device's
/// trace is read once: 2000 references to 2000 entries are 2000
/// allocations and a warning, not 4 million.
#[test]
fn a_trace_list_referenced_many_times_is_read_once() {
    let (entries, references) = (2000, 2000);
    let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 6];
    p.extend(b"shared");
    p.extend([b']', 0x94, b'(']); // memo 1
    for i in 0..entries {
        plain_entry(&mut p, 4096 * (i + 1));
    }
    p.extend([b'e', 0x8c, 13]);
    p.extend(b"device_traces");
    p.extend([b']', b'(']);
    for _ in 0..references {
        p.extend([b'h', 1]);
    }
    p.extend([b'e', b'u', b'.']);
    for paths in [pickle::Paths::Fast, pickle::Paths::GeneralOnly] {
        let mut profile = Profile::default();
        read(&mut profile, "shared.pickle", &p, paths).unwrap();
        let ids: Vec<&str> = profile.memories.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["cuda:0"]);
        assert_eq!(profile.memories[0].allocations.len(), entries as usize);
        assert!(
            profile.warnings.iter().any(|w| w
                .message
                .starts_with("1999 values have an unexpected type, are negative, or are shared")),
            "{:?}",
            profile.warnings
        );
    }
}

/// One entry listed many times in one batch (`MARK BINGET BINGET ...
/// APPENDS`, all of them on the stack before the first is read), or
/// copied with DUP, is refused at the second copy, before the stack
/// holds the rest: a million references (2 MB) cost nothing.
#[test]
fn an_entry_listed_again_in_its_batch_is_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 13];
    p.extend(b"device_traces");
    p.extend([b']', 0x94, b'(', b']', 0x94, b'(']); // memo 1, 2
    p.push(b'}');
    p.push(0x94); // memo 3
    p.extend([b'(', 0x8c, 6]);
    p.extend(b"action");
    p.extend([0x8c, 5]);
    p.extend(b"alloc");
    p.extend([0x8c, 4]);
    p.extend(b"addr");
    p.extend([b'K', 16, 0x8c, 4]);
    p.extend(b"size");
    p.extend([b'K', 8, b'u']);
    let second = p.len();
    let mut by_memo = p.clone();
    for _ in 0..1_000_000 {
        by_memo.extend([b'h', 3]);
    }
    by_memo.extend([b'e', b'e', b'u', b'.']);
    let mut by_dup = p.clone();
    by_dup.extend(std::iter::repeat_n(b'2', 1_000_000));
    by_dup.extend([b'e', b'e', b'u', b'.']);
    for paths in [pickle::Paths::Fast, pickle::Paths::GeneralOnly] {
        for (bytes, what) in [(&by_memo, "memo entry 3"), (&by_dup, "DUP")] {
            let mut profile = Profile::default();
            let err = read(&mut profile, "again.pickle", bytes, paths)
                .unwrap_err()
                .to_string();
            // Both paths read the record as soon as it is complete, so
            // a copy finds it read: a memo reference is refused in the
            // same words, a DUP finds the list's MARK on top.
            let expected = match what {
                "memo entry 3" => format!(
                    "reference to memo entry 3, a record listed already (shared \
                     records are not expected there) (at byte {second})"
                ),
                _ => format!("a MARK where a value was expected (at byte {second})"),
            };
            assert_eq!(
                err,
                format!("again.pickle: invalid PyTorch snapshot pickle: {expected}")
            );
        }
    }
}

/// The same entry dict listed in two batches: the second reference
/// comes after the first was read, and the memo refuses it.
#[test]
fn an_entry_listed_again_after_it_was_read_is_refused() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 13];
    p.extend(b"device_traces");
    p.extend([b']', 0x94, b'(', b']', 0x94]); // memo 1, 2
    p.extend([b'}', 0x94, b'(', 0x8c, 6]); // memo 3
    p.extend(b"action");
    p.extend([0x8c, 5]);
    p.extend(b"alloc");
    p.extend([0x8c, 4]);
    p.extend(b"size");
    p.extend([b'K', 8, b'u', b'a', b'h', 3, b'a', b'a', b'u', b'.']);
    for paths in [pickle::Paths::Fast, pickle::Paths::GeneralOnly] {
        let mut profile = Profile::default();
        let err = read(&mut profile, "again.pickle", &p, paths)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("memo entry 3, a record listed already"),
            "{err}"
        );
    }
}

/// An entry referenced from inside the next entry of its batch (fuzzing
/// found it): the fast path had read the first entry and refused the
/// reference, the general path, which read entries at APPENDS, took
/// the first entry as the second's `frames` and went on.
#[test]
fn an_entry_referenced_inside_a_later_entry_of_its_batch_is_refused_on_both_paths() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'(', 0x8c, 13];
    p.extend(b"device_traces");
    p.extend([b']', 0x94, b'(', b']', 0x94, b'(']); // memo 1, 2
                                                    // {'action': 'alloc', 'addr': 16, 'size': 8}, memo 3
    p.extend([b'}', 0x94, b'(', 0x8c, 6]);
    p.extend(b"action");
    p.extend([0x8c, 5]);
    p.extend(b"alloc");
    p.extend([0x8c, 4]);
    p.extend(b"addr");
    p.extend([b'K', 16, 0x8c, 4]);
    p.extend(b"size");
    p.extend([b'K', 8, b'u']);
    // {'action': 'alloc', 'addr': 32, 'frames': <memo 3>}
    p.extend([b'}', 0x94, b'(', 0x8c, 6]);
    p.extend(b"action");
    p.extend([0x8c, 5]);
    p.extend(b"alloc");
    p.extend([0x8c, 4]);
    p.extend(b"addr");
    p.extend([b'K', 32, 0x8c, 6]);
    p.extend(b"frames");
    p.extend([b'h', 3, b'u']);
    p.extend([b'e', b'e', b'u', b'.']);
    let errors = [pickle::Paths::Fast, pickle::Paths::GeneralOnly].map(|paths| {
        let mut profile = Profile::default();
        read(&mut profile, "nested.pickle", &p, paths)
            .unwrap_err()
            .to_string()
    });
    assert!(
        errors[0].contains("memo entry 3, a record listed already"),
        "{}",
        errors[0]
    );
    assert_eq!(errors[0], errors[1]);
}

/// `{'action': action, 'addr': addr, 'size': 8}`, not memoized, no time.
fn untimed_entry(bytes: &mut Vec<u8>, action: &str, addr: u32) {
    bytes.extend([b'}', b'(', 0x8c, 6]);
    bytes.extend(b"action");
    bytes.extend([0x8c, action.len() as u8]);
    bytes.extend(action.as_bytes());
    bytes.extend([0x8c, 4]);
    bytes.extend(b"addr");
    bytes.push(b'J');
    bytes.extend(addr.to_le_bytes());
    bytes.extend([0x8c, 4]);
    bytes.extend(b"size");
    bytes.extend([b'K', 8, b'u']);
}

/// Entries without `time_us` put events at their entry's index, however
/// far apart (kept a byte per event, larger gaps on the side).
#[test]
fn untimed_events_sit_at_their_entry_index() {
    let mut p = vec![0x80, 4, b'}', b'(', 0x8c, 13];
    p.extend(b"device_traces");
    p.extend([b']', b']', b'(']);
    untimed_entry(&mut p, "alloc", 4096); // 0
    for _ in 0..300 {
        untimed_entry(&mut p, "free_requested", 4096); // 1..=300
    }
    untimed_entry(&mut p, "free_completed", 4096); // 301
    untimed_entry(&mut p, "alloc", 8192); // 302
    untimed_entry(&mut p, "alloc", 8192); // 303: also frees the first at 8192
    untimed_entry(&mut p, "free_requested", 8192); // 304
    untimed_entry(&mut p, "free_completed", 8192); // 305
    p.extend([b'e', b'a', b'u', b'.']);
    for paths in [pickle::Paths::Fast, pickle::Paths::GeneralOnly] {
        let mut profile = Profile::default();
        read(&mut profile, "untimed.pickle", &p, paths).unwrap();
        let m = &profile.memories[0];
        assert_eq!(m.axis, Axis::EventIndex);
        let events: Vec<(i64, EventKind, u32)> = m
            .events
            .iter()
            .map(|e| (e.at, e.kind(), e.alloc().0))
            .collect();
        assert_eq!(
            events,
            [
                (0, EventKind::Alloc, 0),
                (301, EventKind::Free, 0),
                (302, EventKind::Alloc, 1),
                (303, EventKind::Free, 1),
                (303, EventKind::Alloc, 2),
                (305, EventKind::Free, 2),
            ]
        );
    }
}

/// With more than one job the traces are built on a thread of their own,
/// from batches of entries: the profile is the one job's, whatever the
/// actions (unknown ones counted by name, `oom`s at their entry) and
/// however the devices' entries fall across batches.
#[test]
fn traces_built_on_a_second_thread_are_the_one_jobs() {
    let mut p = vec![0x80, 4, b'}', b'(', 0x8c, 13];
    p.extend(b"device_traces");
    p.extend([b']', b'(']);
    for device in 0..2u32 {
        p.extend([b']', b'(']);
        for i in 0..2500u32 {
            let addr = 4096 * (i % 700 + 1) + device;
            let action = match i % 7 {
                0 | 3 => "alloc",
                1 | 4 => "free_completed",
                2 => "free_requested",
                5 if i % 5 == 0 => "oom",
                5 => "snapshot_marker",
                _ => "segment_alloc",
            };
            untimed_entry(&mut p, action, addr);
        }
        p.push(b'e');
    }
    p.extend([b'e', b'u', b'.']);
    for paths in [pickle::Paths::Fast, pickle::Paths::GeneralOnly] {
        let profiles: Vec<String> = [1, 2]
            .map(|jobs| {
                let mut profile = Profile::default();
                read_with_jobs(&mut profile, "jobs.pickle", &p, paths, jobs, 0).unwrap();
                let m = &profile.memories[1];
                assert_eq!(m.recorded_events["snapshot_marker"], 285);
                assert_eq!(m.recorded_events["alloc"], 715);
                assert_eq!(m.out_of_memory.len(), 72);
                format!("{profile:?}")
            })
            .into();
        assert_eq!(profiles[0], profiles[1]);
    }
}
