//! Any bytes through format detection, decompression and every reader: a
//! profile or an error, never a panic, a hang or unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memtool_core::{load, LoadOptions, Source};

fuzz_target!(|data: &[u8]| {
    let options = LoadOptions {
        max_decompressed: Some(16 << 20),
    };
    let _ = load(
        vec![Source::from_bytes("fuzz", data.to_vec())],
        &options,
    );
});
