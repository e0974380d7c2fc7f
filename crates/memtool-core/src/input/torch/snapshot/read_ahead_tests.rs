//! Tests: a snapshot read with its bytes read ahead on a thread of their
//! own gives the profile (or the error) it gives read in turn, on every
//! snapshot of the repository and of `../shared/fixtures`, and on a
//! generated one cut into chunks of every size down to a byte.

use std::path::{Path, PathBuf};

use super::*;
use crate::input::torch::pickle::{Paths, Reading};

/// Everything the reader makes, printed: the model, its names, warnings.
fn dump(result: Result<()>, profile: &Profile) -> String {
    format!(
        "{result:?}\n{:?}\n{:?}\n{:?}\n{:#?}",
        profile.inputs, profile.warnings, profile.names, profile.memories
    )
}

fn read_as(bytes: &Vec<u8>, paths: Paths, reading: Reading) -> String {
    let mut profile = Profile::default();
    let result = read_with(&mut profile, "t.pickle", bytes, paths, reading);
    dump(result, &profile)
}

/// The snapshots under `dir`, gunzipped where they are gzip'd.
fn snapshots(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.to_string_lossy().to_string();
        if path.is_dir() {
            snapshots(&path, out);
        } else if name.ends_with(".pickle") || name.ends_with(".pt") {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        } else if name.ends_with(".pickle.gz") {
            let file = std::fs::File::open(&path).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(file), &mut bytes)
                .unwrap();
            out.push((path.clone(), bytes));
        }
    }
}

#[test]
fn every_snapshot_read_ahead_gives_the_profile_read_in_turn() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "../memtool/tests/data",
        "../../tests",
        "../../../shared/fixtures",
    ] {
        snapshots(&root.join(dir), &mut files);
    }
    // The repository's own: at least its 13 test snapshots and the broken
    // and hostile pickles of tests/.
    assert!(files.len() >= 25, "{} snapshots", files.len());
    for (path, bytes) in &files {
        let want = read_as(bytes, Paths::Fast, Reading::InTurn);
        let chunks = [
            Reading::Ahead,
            Reading::AheadInChunks {
                chunk: 4096,
                head: 64,
            },
            Reading::AheadInChunks { chunk: 97, head: 5 },
        ];
        for reading in chunks {
            let got = read_as(bytes, Paths::Fast, reading);
            assert!(got == want, "{}: {reading:?}", path.display());
        }
    }
}

/// A CPython-style trace (protocol 4, FRAMEs, memoized keys, `frames`
/// lists of references to frames met before) of `entries` entries, one of
/// them with a `compile_context` longer than any chunk below.
fn generated(entries: u32) -> Vec<u8> {
    struct P {
        bytes: Vec<u8>,
        next: u32,
        memo: std::collections::HashMap<String, u32>,
    }
    impl P {
        fn memoize(&mut self) -> u32 {
            self.bytes.push(0x94);
            self.next += 1;
            self.next - 1
        }
        fn get(&mut self, id: u32) {
            match u8::try_from(id) {
                Ok(id) => self.bytes.extend([b'h', id]),
                Err(_) => {
                    self.bytes.push(b'j');
                    self.bytes.extend(id.to_le_bytes());
                }
            }
        }
        /// A string, memoized the first time and referenced after.
        fn str(&mut self, s: &str) {
            if let Some(&id) = self.memo.get(s) {
                return self.get(id);
            }
            self.bytes.extend([0x8c, s.len() as u8]);
            self.bytes.extend(s.as_bytes());
            let id = self.memoize();
            self.memo.insert(s.to_string(), id);
        }
        fn int(&mut self, v: u32) {
            self.bytes.push(b'J');
            self.bytes.extend(v.to_le_bytes());
        }
    }
    let mut p = P {
        bytes: vec![0x80, 4],
        next: 0,
        memo: Default::default(),
    };
    p.bytes.push(b'}');
    p.memoize();
    p.bytes.push(b'(');
    p.str("segments");
    p.bytes.push(b']');
    p.memoize();
    p.str("device_traces");
    p.bytes.extend([b']']);
    p.memoize();
    p.bytes.push(b']');
    p.memoize();
    p.bytes.push(b'(');
    let mut frames: Vec<u32> = Vec::new();
    let actions = ["alloc", "free_requested", "free_completed"];
    for i in 0..entries {
        if i % 40 == 0 {
            // A FRAME (its length a hint the decoder steps over).
            p.bytes.push(0x95);
            p.bytes.extend(4000u64.to_le_bytes());
        }
        p.bytes.push(b'}');
        p.memoize();
        p.bytes.push(b'(');
        p.str("action");
        p.str(actions[(i % 3) as usize]);
        p.str("addr");
        p.int(4096 * (i / 3 + 1));
        p.str("size");
        p.int(512 * (i % 7 + 1));
        p.str("time_us");
        p.int(10 * i);
        p.str("stream");
        p.bytes.extend([b'K', 0]);
        p.str("frames");
        p.bytes.push(b']');
        p.memoize();
        p.bytes.push(b'(');
        let depth = 1 + i % 5;
        for d in 0..depth {
            let f = ((i / 50 + d) % 9) as usize;
            if let Some(&id) = frames.get(f) {
                p.get(id);
                continue;
            }
            // A new frame, written whole where it is first used.
            p.bytes.push(b'}');
            let id = p.memoize();
            frames.push(id);
            p.bytes.push(b'(');
            p.str("name");
            p.str(&format!("f{}", frames.len()));
            p.str("filename");
            p.str("model.py");
            p.str("line");
            p.int(frames.len() as u32);
            p.bytes.push(b'u');
        }
        p.bytes.push(b'e');
        if i == entries / 2 {
            p.str("compile_context");
            let long = "c".repeat(10_000);
            p.bytes.push(b'X');
            p.bytes.extend((long.len() as u32).to_le_bytes());
            p.bytes.extend(long.as_bytes());
            p.memoize();
        }
        p.bytes.push(b'u');
    }
    p.bytes.extend([b'e', b'a', b'u', b'.']);
    p.bytes
}

#[test]
fn a_generated_snapshot_read_ahead_in_chunks_of_any_size_gives_one_profile() {
    let bytes = generated(3_000);
    let want = read_as(&bytes, Paths::Fast, Reading::InTurn);
    assert!(want.starts_with("Ok(())"), "{}", &want[..200]);
    let mut profile = Profile::default();
    read_with(
        &mut profile,
        "t.pickle",
        &bytes,
        Paths::Fast,
        Reading::InTurn,
    )
    .unwrap();
    assert_eq!(profile.memories.len(), 1);
    assert_eq!(profile.memories[0].allocations.len(), 1_000);
    assert_eq!(
        want,
        read_as(&bytes, Paths::GeneralOnly, Reading::InTurn),
        "the opcode loop alone"
    );
    for (chunk, head) in [(1, 0), (2, 1), (7, 3), (64, 0), (333, 16), (4096, 1 << 16)] {
        let reading = Reading::AheadInChunks { chunk, head };
        assert!(
            read_as(&bytes, Paths::Fast, reading) == want,
            "chunks of {chunk} bytes, room for {head}"
        );
    }
    // Cut short anywhere: the same error read either way.
    for cut in [1, 100, bytes.len() / 3, bytes.len() - 2] {
        let short = bytes[..cut].to_vec();
        let want = read_as(&short, Paths::Fast, Reading::InTurn);
        assert!(want.starts_with("Err("), "{cut}");
        let got = read_as(
            &short,
            Paths::Fast,
            Reading::AheadInChunks { chunk: 5, head: 2 },
        );
        assert_eq!(got, want, "cut at {cut}");
    }
}

/// Bit flips and splices of the generated snapshot: read ahead in small
/// chunks, each gives what it gives read in turn (a profile or the same
/// error), and nothing panics.
#[test]
fn mutated_snapshots_read_ahead_give_what_they_give_read_in_turn() {
    let bytes = generated(600);
    // xorshift: deterministic, so a failure reproduces.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for round in 0..60 {
        let mut mutant = bytes.clone();
        if round % 3 == 2 {
            // A splice: a run of the pickle copied over another place.
            let (from, to, len) = (next(mutant.len()), next(mutant.len()), 1 + next(64));
            let run: Vec<u8> = bytes[from..(from + len).min(bytes.len())].to_vec();
            let end = (to + run.len()).min(mutant.len());
            mutant[to..end].copy_from_slice(&run[..end - to]);
        } else {
            for _ in 0..1 + next(4) {
                let at = next(mutant.len());
                mutant[at] ^= 1 << next(8);
            }
        }
        let want = read_as(&mutant, Paths::Fast, Reading::InTurn);
        for (chunk, head) in [(13, 4), (256, 0)] {
            let got = read_as(&mutant, Paths::Fast, Reading::AheadInChunks { chunk, head });
            assert!(got == want, "round {round}, chunks of {chunk}");
        }
    }
}
