//! The page model: what the template (`templates/report.html`) shows as
//! HTML, and the data embedded as JSON for its script.

use askama::Template;
use serde::Serialize;

use crate::model::Axis;
use crate::report::units;

use super::addr;
use super::flame::Node;
use super::timeline::{self, Timeline};

/// The fragmentation part of a memory's section (see `html::frag_section`); the
/// page shows the section, and a line in the memory's header, only when there
/// is one.
#[derive(Clone, Debug, Default)]
pub(super) struct FragSection {
    /// One line, shown in the memory's header too.
    pub verdict: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<FragCell>>,
}

/// A table cell: its text, and for numbers the exact value to sort by.
#[derive(Clone, Debug, Default)]
pub(super) struct FragCell {
    pub text: String,
    pub value: Option<String>,
}

impl FragSection {
    /// A section from one of a report's tables (as `Report::tables` gives
    /// them), so the page shows what `memtool frag` prints.
    pub(super) fn from_table(
        verdict: String,
        table: &crate::report::Table,
        top: usize,
    ) -> FragSection {
        use crate::report::Cell;
        // The page shows what the terminal table shows: a ranked table's
        // first `--top` rows.
        let (rows, _) = table.shown_rows(Some(top));
        FragSection {
            verdict,
            columns: table.columns.iter().map(|c| c.replace('_', " ")).collect(),
            rows: rows
                .iter()
                .map(|row| {
                    row.iter()
                        .map(|cell| FragCell {
                            text: cell.human(),
                            value: match cell {
                                Cell::Text(_) | Cell::Empty | Cell::Percent(None) => None,
                                other => Some(other.exact()),
                            },
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// An out-of-memory post-mortem at the top of the page: its verdict and
/// the tables `memtool oom` prints.
pub(super) struct OomView {
    pub(super) verdict: String,
    pub(super) tables: Vec<OomTable>,
}

/// One table of a post-mortem.
pub(super) struct OomTable {
    pub(super) title: String,
    pub(super) table: FragSection,
}

/// A step boundary drawn on the timeline: where a training or serving step
/// starts, relative to the timeline's `x0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct StepMark {
    pub x: i64,
    pub label: String,
}

/// A training phase drawn as a band along the top of the timeline, from
/// `start` to `end` relative to the timeline's `x0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct PhaseMark {
    pub start: i64,
    pub end: i64,
    pub phase: &'static str,
    pub color: String,
}

/// A landmark the pictures label (`render/marks.rs`): where it starts,
/// relative to the timeline's `x0`, its kind, the short text drawn, the
/// whole label (hover) and its bytes (the floor's height).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct LandmarkMark {
    pub at: i64,
    pub kind: &'static str,
    pub text: String,
    pub title: String,
    pub bytes: u64,
}

// ---------------------------------------------------------------------------
// Data embedded as JSON for the page's script.

#[derive(Serialize)]
pub(super) struct PageData {
    pub(super) memories: Vec<MemoryData>,
    /// Differential call tree (`render A B`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) diff: Option<Node>,
}

#[derive(Serialize)]
pub(super) struct PeakMark {
    pub(super) x: i64,
    pub(super) bytes: u64,
    /// The bytes as the header prints them (JavaScript rounds halves otherwise).
    pub(super) text: String,
    pub(super) label: String,
}

#[derive(Serialize)]
pub(super) struct LeakChart {
    pub(super) labels: Vec<String>,
    pub(super) total: Vec<u64>,
    pub(super) lines: Vec<timeline::Band>,
    /// Every line drawn is a handover (it grew while other groups freed as
    /// much): the total is drawn with them, on their scale, so the picture
    /// shows what the verdict says — bytes moved, the total did not grow.
    pub(super) handover: bool,
}

#[derive(Serialize)]
pub(super) struct MemoryData {
    pub(super) dom: String,
    pub(super) axis: Axis,
    /// The start of the recording relative to `timeline.x0`: times are
    /// shown as time since it.
    pub(super) t0: i64,
    /// Snapshot labels per column, for memories made of snapshots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) labels: Vec<String>,
    pub(super) timeline: Timeline,
    pub(super) peak: PeakMark,
    pub(super) capacity: Option<u64>,
    /// The allocator's reserved bytes, `[x, bytes]`, downsampled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) reserved: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) steps: Vec<StepMark>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) phases: Vec<PhaseMark>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) landmarks: Vec<LandmarkMark>,
    pub(super) flame: Node,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) addr: Option<addr::AddressView>,
    pub(super) leaks: LeakChart,
    /// The blocks the drill-down lists and the allocator-state view draws.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) blocks: Option<super::blocks::Blocks>,
    /// A compiled program's buffers, drawn as XProf's Memory Viewer does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) program: Option<super::program_chart::ProgramChart>,
    /// Every allocation its own band, stacked in allocation order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) alloc: Option<super::alloc_view::AllocView>,
}

// ---------------------------------------------------------------------------
// What the template shows as HTML (askama escapes every field).

pub(super) struct InputRow {
    pub(super) role: String,
    pub(super) path: String,
    pub(super) format: String,
}

/// A numeric cell: human text, exact value to sort by.
pub(super) struct Num {
    pub(super) text: String,
    pub(super) value: String,
}

pub(super) fn bytes_cell(b: u64) -> Num {
    Num {
        text: units::bytes(b),
        value: b.to_string(),
    }
}

pub(super) fn count_cell(n: u64) -> Num {
    Num {
        text: n.to_string(),
        value: n.to_string(),
    }
}

pub(super) struct BreakdownRow {
    pub(super) band: String,
    pub(super) color: String,
    pub(super) bytes: Num,
    pub(super) requested: Num,
    pub(super) count: Num,
    pub(super) share: Num,
    pub(super) op: String,
    pub(super) shape: String,
    pub(super) dtype: String,
    pub(super) category: String,
    pub(super) source: String,
    pub(super) stack: String,
    /// `band`, `source` and `stack` as shown (the full text is the tooltip).
    pub(super) band_short: String,
    pub(super) source_short: String,
    pub(super) stack_short: String,
}

pub(super) struct LeakRow {
    pub(super) key: String,
    /// `key` as shown, shortened as the text tables shorten it.
    pub(super) key_short: String,
    pub(super) color: String,
    pub(super) growth: String,
    pub(super) growth_bytes: Num,
    pub(super) per_point: Num,
    pub(super) first: Num,
    pub(super) last: Num,
}

pub(super) struct Fact {
    pub(super) name: &'static str,
    pub(super) value: String,
}

pub(super) struct MemoryView {
    /// The timeline as a static SVG, shown until the script draws the chart.
    pub(super) static_svg: String,
    pub(super) dom: String,
    pub(super) title: String,
    /// Peak in human units, for the contents list.
    pub(super) peak_short: String,
    pub(super) facts: Vec<Fact>,
    pub(super) leak_verdict: String,
    pub(super) frag: Option<FragSection>,
    /// The annotation stages (`summary`'s tables: the stages, what each
    /// added); empty when the memory has no annotated ranges.
    pub(super) stages: Vec<FragSection>,
    pub(super) group_by: String,
    pub(super) resolution: String,
    pub(super) rows: Vec<BreakdownRow>,
    pub(super) rows_omitted: String,
    pub(super) show_op: bool,
    pub(super) show_shape: bool,
    pub(super) show_dtype: bool,
    pub(super) show_category: bool,
    /// The source line (user frame) column: the profile has stacks and the
    /// rows are not grouped by user frame already.
    pub(super) show_source: bool,
    /// The stack column: the profile has stacks and the rows are not
    /// grouped by stack already.
    pub(super) show_stack: bool,
    pub(super) leak_rows: Vec<LeakRow>,
    pub(super) leak_omitted: usize,
    pub(super) leak_points: usize,
    pub(super) has_addr: bool,
    /// A compiled program's buffer blocks and its "at the peak" chart.
    pub(super) has_program: bool,
    /// The allocation view (event streams other than compiled programs).
    pub(super) has_alloc: bool,
    /// The drill-down from a band to its blocks (event streams).
    pub(super) has_blocks: bool,
    /// The allocator-state view: blocks with addresses in held ranges.
    pub(super) has_state: bool,
}

/// A memory trivial beside the largest of its profile
/// ([`crate::analysis::order_by_peak`]): a row of one compact table, no
/// section.
pub(super) struct TrivialRow {
    pub(super) memory: String,
    pub(super) kind: String,
    pub(super) peak: Num,
    pub(super) buffers: Num,
    pub(super) at: String,
}

/// Memories folded into one compact table instead of sections: its
/// one-line summary (what they are, why not drawn), a row each for the
/// first [`FoldedTable::ROWS`], and one row for the rest with their count
/// and totals, so the page's size is bounded whatever the number of
/// memories.
pub(super) struct FoldedTable {
    /// `trivial` (too small to matter) or `beyond` (past the sections drawn).
    pub(super) class: &'static str,
    pub(super) summary: String,
    pub(super) rows: Vec<TrivialRow>,
    /// The memories past the rows, summed into one.
    pub(super) rest: Option<TrivialRow>,
}

impl FoldedTable {
    /// Rows listed one memory each; the rest are one row.
    pub(super) const ROWS: usize = 200;

    /// The memories whose `(peak, buffers)` are `sums` (biggest peak
    /// first) folded: `rows`, the first [`Self::ROWS`]'s rows, kept, the
    /// others summed into `rest`. `None` for no memories.
    pub(super) fn new(
        class: &'static str,
        summary: String,
        mut rows: Vec<TrivialRow>,
        sums: &[(u64, u64)],
    ) -> Option<FoldedTable> {
        if sums.is_empty() {
            return None;
        }
        let rest = (sums.len() > Self::ROWS).then(|| {
            let more = &sums[Self::ROWS..];
            let (peaks, buffers) = more.iter().fold((0u64, 0u64), |(p, b), &(peak, buf)| {
                (p.saturating_add(peak), b.saturating_add(buf))
            });
            TrivialRow {
                memory: crate::analysis::beyond_label(more.len()),
                kind: String::new(),
                peak: bytes_cell(peaks),
                buffers: count_cell(buffers),
                at: "peaks summed".into(),
            }
        });
        rows.truncate(Self::ROWS);
        Some(FoldedTable {
            class,
            summary,
            rows,
            rest,
        })
    }
}

pub(super) struct ProfileView {
    pub(super) heading: String,
    /// Biggest peak first.
    pub(super) memories: Vec<MemoryView>,
    /// The memories not drawn: those past the sections the page draws,
    /// then those trivial beside the largest, each a compact table.
    pub(super) folded: Vec<FoldedTable>,
    /// Memories with no data at all (the first [`FoldedTable::ROWS`]).
    pub(super) empty: Vec<String>,
    /// How many more memories have no data.
    pub(super) empty_more: usize,
}

pub(super) struct DiffRowView {
    pub(super) key: String,
    pub(super) base: Num,
    pub(super) new: Num,
    pub(super) delta: Num,
    pub(super) percent: String,
    pub(super) grew: bool,
}

pub(super) struct DiffView {
    pub(super) summary: String,
    pub(super) memories: Vec<Fact>,
    pub(super) rows: Vec<DiffRowView>,
    pub(super) rows_omitted: usize,
}

#[derive(Template)]
#[template(path = "report.html")]
pub(super) struct Page {
    pub(super) title: String,
    pub(super) inputs: Vec<InputRow>,
    pub(super) warnings: Vec<String>,
    /// Out-of-memory post-mortems, shown first: an OOM is why such a
    /// profile is opened.
    pub(super) oom: Vec<OomView>,
    pub(super) diff: Option<DiffView>,
    pub(super) profiles: Vec<ProfileView>,
    /// Memories on the page (a contents list is shown when there are several).
    pub(super) memory_count: usize,
    pub(super) css: &'static str,
    pub(super) js: &'static str,
    /// The compiled-program chart's script, loaded before `js`, which calls it.
    pub(super) program_js: &'static str,
    /// The allocation view's script, loaded before `js`, which calls it.
    pub(super) alloc_js: &'static str,
    /// The address grid's script, loaded before `js`, which calls it.
    pub(super) addr_js: &'static str,
    /// The tables' sorting, filtering and folding, loaded before `js`, which
    /// applies them.
    pub(super) tables_js: &'static str,
    /// The page's self-test (`#memtool-selftest`), loaded before `js`, which
    /// runs it.
    pub(super) selftest_js: &'static str,
    pub(super) data_json: String,
}

pub(super) const CSS: &str = include_str!("../../templates/report.css");
pub(super) const JS: &str = include_str!("../../templates/report.js");
pub(super) const PROGRAM_JS: &str = include_str!("../../templates/program.js");
pub(super) const ALLOC_JS: &str = include_str!("../../templates/alloc.js");
pub(super) const ADDR_JS: &str = include_str!("../../templates/addr.js");
pub(super) const TABLES_JS: &str = include_str!("../../templates/tables.js");
pub(super) const SELFTEST_JS: &str = include_str!("../../templates/selftest.js");
