//! Whatever a reader accepts, every analysis and exporter must handle, in
//! time and memory proportional to the input (see `common.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| common::analyses(data));
