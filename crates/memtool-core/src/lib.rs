//! memtool's core: reads accelerator memory profiles into one model
//! ([`model`]), analyses them ([`analysis`]) and writes reports ([`report`]).
//!
//! Invariants (see ARCHITECTURE.md):
//! - The core does no I/O of its own and never prints or exits: callers pass
//!   bytes in and get a [`model::Profile`] (with warnings) or one [`Error`].
//! - Parsing is total: any bytes give a result or an error, never a panic, and
//!   no allocation is sized by a length the file merely claims.
//! - Output is deterministic: the same input gives byte-identical JSON and CSV.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod analysis;
mod error;
/// Tests through every output, from the crate's root: they run the loader,
/// every analysis and render, which no layer below may import.
#[cfg(test)]
mod huge_size_tests;
mod input;
pub mod model;
pub mod parallel;
pub mod render;
pub mod report;
pub mod timings;
pub mod units;

pub use analysis::series_order::natural_cmp;
pub use error::{Error, Result};
pub use input::{check_stream_head, ByteSource, LoadOptions, Source, STREAM_HEAD_BYTES};

/// Reads one or more inputs into one profile (see [`LoadOptions`]). Several
/// inputs form a series (pprof snapshots in command-line order) and must
/// share a format. The readers fill the model; then the profile's figures
/// are checked against each other, a warning for each contradiction, by
/// the analyses (the loader itself imports none of them).
pub fn load(sources: Vec<Source>, options: &LoadOptions) -> Result<model::Profile> {
    let mut profile = input::load(sources, options)?;
    analysis::series_order::warn_of_misordered_series(&mut profile);
    analysis::consistency::warn_of_inconsistent_figures(&mut profile);
    Ok(profile)
}
