//! Any bytes through format detection, decompression and every reader: a
//! profile or an error, never a panic, a hang or unbounded memory; and the
//! readers' fast and general paths give the same profile or the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memtool_core::{LoadOptions, Source};

#[path = "../../crates/memtool-core/tests/common/paths.rs"]
mod paths;

fuzz_target!(|data: &[u8]| {
    let options = LoadOptions {
        max_decompressed: Some(16 << 20),
        ..LoadOptions::default()
    };
    paths::assert_paths_agree(
        "fuzz input",
        || vec![Source::from_bytes("fuzz", data.to_vec())],
        &options,
    );
});
