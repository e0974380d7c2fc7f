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
    let sizes = input::impossible_sizes(
        &profile.inputs,
        profile
            .memories
            .iter()
            .map(|m| (m.id.as_str(), input::ClaimedSizes::of(m))),
    );
    profile.warnings.extend(sizes);
    analysis::series_order::warn_of_misordered_series(&mut profile);
    analysis::consistency::warn_of_inconsistent_figures(&mut profile);
    Ok(profile)
}

/// How [`load_each`] reads each of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Each input is a profile of its own, checked as [`load`] checks one
    /// (`ranks`: a rank per file).
    Alone,
    /// Each input is a part of one profile that is never made whole: the
    /// checks of the whole (sizes, series order, contradicting figures)
    /// are the caller's, on what each part is reduced to
    /// ([`analysis::summary_parts`]).
    Part,
}

/// Each item opened by `open`, read into a profile of its own and reduced
/// by `reduce`, on a pool of `jobs` threads (0: every core;
/// [`parallel::map_bounded`]), results in item order. The profile — every
/// event of the input — is dropped before the thread takes its next item,
/// so memory holds about `jobs` inputs' profiles and the reductions, not
/// every input's events: the per-file reduction `ranks` and `summary` of
/// many files run on. `open` gives the item's source and what `reduce`
/// needs of the item besides its profile, or the result of an item that
/// cannot be opened; `reduce` gets the profile or the error reading it gave.
pub fn load_each<T: Send, C, R: Send>(
    items: Vec<T>,
    jobs: usize,
    reading: Reading,
    options: &LoadOptions,
    open: impl Fn(T) -> std::result::Result<(Source, C), R> + Sync,
    reduce: impl Fn(C, Result<model::Profile>) -> R + Sync,
) -> Vec<R> {
    parallel::map_bounded(items, jobs, |item| {
        let (source, context) = match open(item) {
            Ok(opened) => opened,
            Err(failed) => return failed,
        };
        let profile = match reading {
            Reading::Alone => load(vec![source], options),
            Reading::Part => input::load_part(source, options),
        };
        // The profile is dropped when `reduce` returns.
        reduce(context, profile)
    })
}
