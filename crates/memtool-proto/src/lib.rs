//! Protobuf types generated from the vendored files in `proto/`.
//!
//! Only small, bounded messages are decoded with these types. Large formats
//! (XSpace) are read lazily with the core crate's wire reader instead, so a
//! multi-gigabyte file is never materialized at once.

/// pprof `profile.proto` (the format of `jax.profiler.save_device_memory_profile`).
pub mod pprof {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}
