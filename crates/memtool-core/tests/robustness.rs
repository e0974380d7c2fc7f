//! Parsing is total: truncated, bit-flipped and spliced versions of real
//! profiles give a profile or an error — never a panic. A deterministic
//! mutation sweep: `cargo test` runs a bounded sample of it (a few seconds
//! of a dev build), `MEMTOOL_FULL_SWEEP=1` the whole of it, which `.ci/run`
//! does in a release build; the fuzz targets under `fuzz/` explore further.

mod common;

use std::path::PathBuf;

use common::paths::assert_paths_agree;
use memtool_core::{load, ByteSource, LoadOptions, Source};

/// Small real profiles of every format, decompressed, from the repository's
/// own fixtures.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    // The repository's fixtures, and every input a fuzzer ever crashed on.
    let mut dirs = vec![
        crate_dir.join("../../tests"),
        crate_dir.join("tests/regressions"),
    ];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.metadata().unwrap().len() < 256 * 1024 && !p.ends_with(".gitkeep") {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    assert!(!out.is_empty(), "no seed fixtures found");
    out
}

/// Bytes served only through `read_exact_at`, as an opened file's are.
struct AsFile(Vec<u8>);

impl ByteSource for AsFile {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(offset, buf)
    }
}

/// xorshift: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn check(name: &str, bytes: Vec<u8>) {
    let options = LoadOptions {
        max_decompressed: Some(64 << 20),
        ..LoadOptions::default()
    };
    // In memory (pipes, gunzipped inputs) and read as from a file: readers
    // stream the second.
    let result = std::panic::catch_unwind(|| {
        let _ = load(
            vec![Source::new(name.to_string(), AsFile(bytes.clone()))],
            &options,
        );
        let _ = load(vec![Source::from_bytes(name.to_string(), bytes)], &options);
    });
    assert!(result.is_ok(), "panicked on a mutation of {name}");
}

/// [`check`], and the fast and general paths of the readers give one
/// profile, read from a file and from memory.
fn check_paths_agree(name: &str, bytes: Vec<u8>) {
    check(name, bytes.clone());
    let options = LoadOptions {
        max_decompressed: Some(64 << 20),
        ..LoadOptions::default()
    };
    let from_file = || vec![Source::new(name.to_string(), AsFile(bytes.clone()))];
    assert_paths_agree(name, from_file, &options);
    let in_memory = || vec![Source::from_bytes(name.to_string(), bytes.clone())];
    assert_paths_agree(name, in_memory, &options);
}

/// How much of the sweep runs: the whole of it with `MEMTOOL_FULL_SWEEP=1`
/// (minutes of CPU in a dev build), else a sample spread the same way over
/// every seed, so a newcomer's `cargo test` stays quick.
struct Sweep {
    /// Truncation points per seed (evenly spaced, the empty input first).
    cuts: usize,
    /// Mutations per seed.
    mutations: usize,
}

fn sweep() -> Sweep {
    if std::env::var_os("MEMTOOL_FULL_SWEEP").is_some_and(|v| v != "0") {
        Sweep {
            cuts: 200,
            mutations: 300,
        }
    } else {
        Sweep {
            cuts: 12,
            mutations: 20,
        }
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        if std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(bytes), &mut out)
            .is_ok()
        {
            return out;
        }
    }
    bytes.to_vec()
}

#[test]
fn fixtures_and_fuzz_regressions_never_panic() {
    for (name, bytes) in seeds() {
        check_paths_agree(&name, bytes.clone());
        check_paths_agree(&name, gunzip(&bytes));
    }
}

#[test]
fn truncations_never_panic() {
    let cuts = sweep().cuts;
    for (name, bytes) in seeds() {
        for raw in [bytes.clone(), gunzip(&bytes)] {
            let step = (raw.len() / cuts).max(1);
            for cut in (0..raw.len()).step_by(step) {
                check_paths_agree(&name, raw[..cut].to_vec());
            }
        }
    }
}

#[test]
fn bit_flips_and_splices_never_panic() {
    let mutations = sweep().mutations;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (name, bytes) in seeds() {
        let raw = gunzip(&bytes);
        for _ in 0..mutations {
            let mut m = raw.clone();
            match rng.below(4) {
                0 => {
                    for _ in 0..1 + rng.below(8) {
                        let i = rng.below(m.len());
                        if let Some(b) = m.get_mut(i) {
                            *b ^= 1 << rng.below(8);
                        }
                    }
                }
                1 => {
                    let i = rng.below(m.len());
                    if let Some(b) = m.get_mut(i) {
                        *b = [0x00, 0xff, 0x7f, 0x80][rng.below(4)];
                    }
                }
                2 => {
                    // Duplicate a slice in place (repeated fields, odd lengths).
                    let (a, len) = (rng.below(m.len()), rng.below(64));
                    let piece: Vec<u8> = m.iter().skip(a).take(len).copied().collect();
                    let at = rng.below(m.len());
                    m.splice(at..at, piece);
                }
                _ => {
                    let (a, b) = (rng.below(m.len()), rng.below(m.len()));
                    let (a, b) = (a.min(b), a.max(b));
                    m.drain(a..b.min(a + 32));
                }
            }
            check_paths_agree(&name, m);
        }
    }
}
