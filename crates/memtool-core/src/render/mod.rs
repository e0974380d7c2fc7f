//! `render`: one self-contained HTML page per set of inputs (all CSS, JS and
//! data inline; no request of any kind, so it opens from `file://`, offline,
//! as a CI artifact), collapsed stacks for other flame-graph tools, the
//! timelines as a Perfetto (Chrome JSON) trace, and the live sets at the
//! peaks as a pprof profile ([`peak_pprof`]).
//!
//! Everything the page draws is computed here and downsampled so the file
//! stays small at any input size: timelines keep at most [`RenderOptions::width`]
//! columns (each with its lowest and highest total, so no peak disappears),
//! the top [`RenderOptions::bands`] groups plus "other", call trees without
//! slivers, and a fixed address × time grid. Like every analysis it sees only
//! the model, so every input format renders the same way.

mod addr;
mod alloc_view;
mod blocks;
mod color;
mod escape;
mod flame;
mod folded;
mod html;
mod marks;
mod page;
mod perfetto;
mod pprof;
mod program_chart;
mod ranks_page;
mod svg;
mod timeline;

use crate::analysis::group::{self, GroupBy};
use crate::analysis::{replay, Options};
use crate::model::{Memory, Profile};

pub use folded::folded;
pub use html::html;
pub use perfetto::{perfetto, GROUP_COUNTER_PREFIX, TOTAL_COUNTER};
pub use pprof::{peak_pprof, MEMORY_LABEL, NOTHING_LIVE_FRAME};
pub use ranks_page::{ranks_html, ALONE_UP_TO, PEAK_GROUPS, SHOWN_ALONE};
pub use svg::svg;

/// Choices for a rendered report.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// The analyses' choices (frames shown, memories, ties, `--top`).
    pub analysis: Options,
    /// Group the timeline by this key; by default the most telling one the
    /// profile has (category, else op, else the user's frame).
    pub group_by: Option<GroupBy>,
    /// Columns of a timeline (about one per pixel of the chart).
    pub width: usize,
    /// Groups drawn on their own; the rest are summed as "other".
    pub bands: usize,
    /// Rows of the breakdown table (the rest are counted under it).
    pub table_rows: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            analysis: Options::default(),
            group_by: None,
            width: 1000,
            bands: 12,
            table_rows: 500,
        }
    }
}

/// What is rendered: one profile (a single file or a series), or two compared.
#[derive(Clone, Copy)]
pub enum Inputs<'a> {
    /// One profile: a single file or a series.
    One(&'a Profile),
    /// Two profiles compared: what changed from `base` to `new`.
    Diff {
        /// The profile compared against.
        base: &'a Profile,
        /// The profile whose changes are shown.
        new: &'a Profile,
    },
}

/// Live totals per site at the memory's peak (empty for a memory with no
/// points): the peak every other output reports ([`replay::reported_peak`],
/// as in [`crate::analysis::peak_facts::PeakFacts`]), so the page's tables,
/// its call trees and the folded stacks break down one moment.
fn at_peak(memory: &Memory, ties: replay::Ties) -> group::SiteTotals {
    match replay::reported_peak(memory, ties) {
        Some(p) => group::totals_by_site(memory, &replay::live_at(memory, p.point.index)),
        None => group::SiteTotals::default(),
    }
}

#[cfg(test)]
mod many_tests;
#[cfg(test)]
mod tests;
