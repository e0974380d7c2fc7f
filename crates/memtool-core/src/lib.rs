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
mod input;
pub mod model;
pub mod parallel;
pub mod render;
pub mod report;
pub mod timings;

pub use error::{Error, Result};
pub use input::series_order::natural_cmp;
pub use input::{load, ByteSource, LoadOptions, Source};
