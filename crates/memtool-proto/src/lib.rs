//! Protobuf types generated from the vendored files in `proto/` (by
//! `scripts/proto-regen`, committed under `src/generated/`, so building
//! memtool compiles no protobuf compiler; `.ci/run` checks they are current).
//!
//! Only small, bounded messages are decoded with these types. Large formats
//! (XSpace) are read lazily with the wire reader ([`wire::reader`]) instead,
//! so a multi-gigabyte file is never materialized at once.

#![forbid(unsafe_code)]

pub mod wire;

/// pprof `profile.proto` (the format of `jax.profiler.save_device_memory_profile`).
pub mod pprof {
    #![allow(clippy::all, missing_docs)]
    include!("generated/perftools.profiles.rs");
}

/// The subset of XLA's `hlo.proto` / `xla_data.proto` that memtool reads: one
/// compiled module with its buffer assignment (bounded per module, so decoded
/// whole; the XSpace around it is walked with the wire reader).
pub mod xla {
    #![allow(clippy::all, missing_docs)]
    include!("generated/xla.rs");
}
