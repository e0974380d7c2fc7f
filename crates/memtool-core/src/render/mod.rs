//! `render`: one self-contained HTML page per set of inputs (all CSS, JS and
//! data inline; no request of any kind, so it opens from `file://`, offline,
//! as a CI artifact), and collapsed stacks for other flame-graph tools.
//!
//! Everything the page draws is computed here and downsampled so the file
//! stays small at any input size: timelines keep at most [`RenderOptions::width`]
//! columns (each with its lowest and highest total, so no peak disappears),
//! the top [`RenderOptions::bands`] groups plus "other", call trees without
//! slivers, and a fixed address × time grid. Like every analysis it sees only
//! the model, so every input format renders the same way.

pub mod addr;
pub mod escape;
pub mod flame;
pub mod svg;
pub mod timeline;

use std::collections::BTreeMap;

use askama::Template;
use serde::Serialize;

use crate::analysis::group::{self, GroupBy, Totals};
use crate::analysis::leaks::{self, Growth, MemoryLeaks};
use crate::analysis::{diff, display_id, point_label, replay, Options};
use crate::model::{Axis, Memory, Profile};
use crate::report::units;

use flame::{Node, Tree};
use timeline::Timeline;

/// Choices for a rendered report.
#[derive(Clone, Debug)]
pub struct RenderOptions {
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
    One(&'a Profile),
    Diff { base: &'a Profile, new: &'a Profile },
}

/// Call-tree nodes narrower than this share of the root are left out.
const FLAME_MIN_SHARE: f64 = 0.001;
/// Address × time grid.
const ADDR_COLS: usize = 600;
const ADDR_ROWS: usize = 200;
/// Findings listed, and drawn, in a memory's leak section.
const LEAK_ROWS: usize = 15;
const LEAK_LINES: usize = 5;
/// Rows of the differential table.
const DIFF_ROWS: usize = 50;

/// The fragmentation part of a memory's section (see [`frag_section`]); the
/// page shows the section, and a line in the memory's header, only when there
/// is one.
#[derive(Clone, Debug, Default)]
pub struct FragSection {
    /// One line, shown in the memory's header too.
    pub verdict: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<FragCell>>,
}

/// A table cell: its text, and for numbers the exact value to sort by.
#[derive(Clone, Debug, Default)]
pub struct FragCell {
    pub text: String,
    pub value: Option<String>,
}

impl FragSection {
    /// A section from one of a report's tables (as `Report::tables` gives
    /// them), so the page shows what `memtool frag` prints.
    pub fn from_table(verdict: String, table: &crate::report::Table) -> FragSection {
        use crate::report::Cell;
        FragSection {
            verdict,
            columns: table.columns.iter().map(|c| c.replace('_', " ")).collect(),
            rows: table
                .rows
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

/// The fragmentation section of one memory, from `analysis::frag`: `None`
/// when the profile has neither the allocator's figure nor addresses.
fn frag_section(profile: &Profile, memory: &Memory, options: &Options) -> Option<FragSection> {
    use crate::report::Report;
    let options = Options {
        memories: vec![memory.id.clone()],
        ..options.clone()
    };
    let report = crate::analysis::frag::frag(profile, &options);
    let m = report.memories.first()?;
    let mut parts = Vec::new();
    if let Some(a) = &m.allocator {
        parts.push(format!(
            "allocator fragmentation max {:.1}%, mean {:.1}%",
            a.max * 100.0,
            a.mean * 100.0
        ));
    }
    if let Some(a) = m.at_peak.as_ref().and_then(|p| p.address) {
        parts.push(format!(
            "at peak {:.1}% of free address space is outside the largest gap ({} gaps, largest {})",
            a.fragmentation * 100.0,
            a.gaps,
            units::bytes(a.largest_gap_bytes)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let tables = report.tables();
    // tables[0] is the one-row-per-memory summary; [1] the worst points.
    let table = tables.get(1).or(tables.first())?;
    Some(FragSection::from_table(parts.join("; "), table))
}

/// A step boundary drawn on the timeline: where a training or serving step
/// starts, relative to the timeline's `x0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepMark {
    pub x: i64,
    pub label: String,
}

/// The step boundaries of one memory, drawn as dashed lines on its timeline.
fn step_marks(memory: &Memory, x0: i64) -> Vec<StepMark> {
    memory
        .steps
        .iter()
        .map(|s| StepMark {
            x: s.start.wrapping_sub(x0),
            label: format!("step {}", s.id),
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Data embedded as JSON for the page's script.

#[derive(Serialize)]
struct PageData {
    memories: Vec<MemoryData>,
    /// Differential call tree (`render A B`).
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<Node>,
}

#[derive(Serialize)]
struct PeakMark {
    x: i64,
    bytes: u64,
    /// The bytes as the header prints them (JavaScript rounds halves otherwise).
    text: String,
    label: String,
}

#[derive(Serialize)]
struct LeakChart {
    labels: Vec<String>,
    total: Vec<u64>,
    lines: Vec<timeline::Band>,
}

#[derive(Serialize)]
struct MemoryData {
    dom: String,
    axis: Axis,
    /// Snapshot labels per column, for memories made of snapshots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    labels: Vec<String>,
    timeline: Timeline,
    peak: PeakMark,
    capacity: Option<u64>,
    /// The allocator's reserved bytes, `[x, bytes]`, downsampled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reserved: Vec<[i64; 2]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    steps: Vec<StepMark>,
    flame: Node,
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<addr::AddressView>,
    leaks: LeakChart,
}

// ---------------------------------------------------------------------------
// What the template shows as HTML (askama escapes every field).

struct InputRow {
    role: String,
    path: String,
    format: String,
}

/// A numeric cell: human text, exact value to sort by.
struct Num {
    text: String,
    value: String,
}

fn bytes_cell(b: u64) -> Num {
    Num {
        text: units::bytes(b),
        value: b.to_string(),
    }
}

fn count_cell(n: u64) -> Num {
    Num {
        text: n.to_string(),
        value: n.to_string(),
    }
}

struct BreakdownRow {
    band: String,
    color: String,
    bytes: Num,
    requested: Num,
    count: Num,
    share: Num,
    op: String,
    shape: String,
    dtype: String,
    category: String,
    source: String,
    stack: String,
}

struct LeakRow {
    key: String,
    color: String,
    growth: String,
    growth_bytes: Num,
    per_point: Num,
    first: Num,
    last: Num,
}

struct Fact {
    name: &'static str,
    value: String,
}

struct MemoryView {
    dom: String,
    title: String,
    /// Peak in human units, for the contents list.
    peak_short: String,
    facts: Vec<Fact>,
    leak_verdict: String,
    frag: Option<FragSection>,
    group_by: String,
    resolution: String,
    rows: Vec<BreakdownRow>,
    rows_omitted: String,
    show_op: bool,
    show_shape: bool,
    show_dtype: bool,
    show_category: bool,
    leak_rows: Vec<LeakRow>,
    leak_omitted: usize,
    leak_points: usize,
    has_addr: bool,
}

struct ProfileView {
    heading: String,
    memories: Vec<MemoryView>,
    /// Memories with no data at all.
    empty: Vec<String>,
}

struct DiffRowView {
    key: String,
    base: Num,
    new: Num,
    delta: Num,
    percent: String,
    grew: bool,
}

struct DiffView {
    summary: String,
    memories: Vec<Fact>,
    rows: Vec<DiffRowView>,
    rows_omitted: usize,
}

#[derive(Template)]
#[template(path = "report.html")]
struct Page {
    title: String,
    inputs: Vec<InputRow>,
    warnings: Vec<String>,
    diff: Option<DiffView>,
    profiles: Vec<ProfileView>,
    /// Memories on the page (a contents list is shown when there are several).
    memory_count: usize,
    css: &'static str,
    js: &'static str,
    data_json: String,
}

const CSS: &str = include_str!("../../templates/report.css");
const JS: &str = include_str!("../../templates/report.js");

/// The HTML report. The same inputs and options give the same bytes.
pub fn html(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let mut data = PageData {
        memories: Vec::new(),
        diff: None,
    };
    let mut page_inputs = Vec::new();
    let mut warnings = Vec::new();
    let mut profiles = Vec::new();
    let list: Vec<(&str, &Profile)> = match inputs {
        Inputs::One(p) => vec![("", p)],
        Inputs::Diff { base, new } => vec![("base", base), ("new", new)],
    };
    for (n, (role, profile)) in list.iter().enumerate() {
        for i in &profile.inputs {
            page_inputs.push(InputRow {
                role: role.to_string(),
                path: i.path.clone(),
                format: i.format.name().to_string(),
            });
        }
        warnings.extend(
            profile
                .warnings
                .iter()
                .map(|w| format!("{}: {}", w.path, w.message)),
        );
        let heading = match *role {
            "" => String::new(),
            r => format!("{r}: {}", paths(profile)),
        };
        profiles.push(profile_view(
            profile,
            n,
            heading,
            options,
            &mut data.memories,
        ));
    }
    let diff = match inputs {
        Inputs::One(_) => None,
        Inputs::Diff { base, new } => {
            data.diff = Some(diff_tree(base, new, options));
            Some(diff_view(base, new, options))
        }
    };
    let title = match inputs {
        Inputs::One(p) => format!("memtool: {}", paths(p)),
        Inputs::Diff { base, new } => format!("memtool: {} → {}", paths(base), paths(new)),
    };
    let memory_count = profiles.iter().map(|p| p.memories.len()).sum();
    let page = Page {
        title,
        inputs: page_inputs,
        warnings,
        diff,
        profiles,
        memory_count,
        css: CSS,
        js: JS,
        data_json: escape::script_json(&data),
    };
    // Rendering fails only on a formatting error of our own fields, which
    // `String`'s `fmt::Write` never raises.
    page.render().unwrap_or_default()
}

/// Collapsed stacks (`frame;frame;frame bytes`) of what was live at each
/// memory's peak, all memories together (for `render A B`, the new profile).
pub fn folded(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let profile = match inputs {
        Inputs::One(p) => p,
        Inputs::Diff { new, .. } => new,
    };
    let mut tree = Tree::default();
    for memory in options.analysis.selected(profile) {
        tree.add_sites(
            &profile.names,
            &at_peak(memory),
            &options.analysis.frames,
            1,
        );
    }
    let mut out = String::new();
    tree.folded(&mut out);
    out
}

/// A static SVG of every memory's timeline (for `render A B`, base then new).
pub fn svg(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let list: Vec<(&str, &Profile)> = match inputs {
        Inputs::One(p) => vec![("", p)],
        Inputs::Diff { base, new } => vec![("base: ", base), ("new: ", new)],
    };
    let mut timelines = Vec::new();
    for (role, profile) in list {
        for memory in options.analysis.selected(profile) {
            let Some(reported) = replay::reported_peak(memory, options.analysis.ties) else {
                continue;
            };
            let peak = reported.point;
            let by = options
                .group_by
                .unwrap_or_else(|| timeline::default_group_by(&profile.names, memory));
            let tl = timeline::timeline(
                &profile.names,
                memory,
                by,
                &options.analysis.frames,
                options.width,
                options.bands,
            );
            let label = |col: Option<usize>| {
                col.and_then(|c| Some((*tl.top_points.get(c)?, tl.x.get(c)?.wrapping_add(tl.x0))))
                    .map_or(String::new(), |(i, at)| point_label(memory, i, at))
            };
            let x_labels = [label(Some(0)), label(tl.x.len().checked_sub(1))];
            let peak_label = point_label(memory, peak.index, peak.at);
            let title = format!(
                "{role}{} — peak {} at {peak_label} (stacked by {})",
                display_id(&memory.id),
                units::bytes(reported.bytes),
                by.name().replace('_', " ")
            );
            let peak_text = units::bytes(reported.bytes);
            timelines.push((
                title,
                x_labels,
                peak,
                (peak_label, peak_text),
                memory.capacity,
                tl,
            ));
        }
    }
    let panels: Vec<svg::Panel<'_>> = timelines
        .iter()
        .map(
            |(title, x_labels, peak, peak_label, capacity, tl)| svg::Panel {
                title: title.clone(),
                timeline: tl,
                x_labels: x_labels.clone(),
                peak_x: peak.at.wrapping_sub(tl.x0),
                peak_bytes: peak.bytes,
                peak_label: peak_label.0.clone(),
                peak_text: peak_label.1.clone(),
                capacity: *capacity,
            },
        )
        .collect();
    svg::document(&panels)
}

fn paths(profile: &Profile) -> String {
    let p: Vec<&str> = profile.inputs.iter().map(|i| i.path.as_str()).collect();
    match p.len() {
        0..=3 => p.join(", "),
        n => format!("{}, … {} ({n} files)", p[0], p[n - 1]),
    }
}

/// Live totals per site at the memory's peak (empty for a memory with no points).
fn at_peak(memory: &Memory) -> group::SiteTotals {
    match replay::peak(memory) {
        Some(p) => group::totals_by_site(memory, &replay::live_at(memory, p.index)),
        None => group::SiteTotals::default(),
    }
}

fn profile_view(
    profile: &Profile,
    n: usize,
    heading: String,
    options: &RenderOptions,
    data: &mut Vec<MemoryData>,
) -> ProfileView {
    let leaks = leaks::leaks(profile, &options.analysis);
    let mut memories = Vec::new();
    let mut empty = Vec::new();
    for (m, memory) in options.analysis.selected(profile).enumerate() {
        // The peak the `peak` and `summary` commands report (the allocator's
        // own figure when it gives one, `--ties`).
        let Some(peak) = replay::reported_peak(memory, options.analysis.ties) else {
            empty.push(display_id(&memory.id));
            continue;
        };
        let leak = leaks.memories.iter().find(|l| l.header.id == memory.id);
        let dom = format!("m{n}-{m}");
        let (view, memory_data) = memory_view(profile, memory, peak, leak, dom, options);
        memories.push(view);
        data.push(memory_data);
    }
    ProfileView {
        heading,
        memories,
        empty,
    }
}

/// A breakdown row as shown: op, shape, dtype, category, stack.
type RowKey = (String, String, String, String, String);

fn memory_view(
    profile: &Profile,
    memory: &Memory,
    reported: replay::Peak,
    leak: Option<&MemoryLeaks>,
    dom: String,
    options: &RenderOptions,
) -> (MemoryView, MemoryData) {
    // The point drawn and broken down; `reported.bytes` is what the header says.
    let peak = reported.point;
    let names = &profile.names;
    let filter = &options.analysis.frames;
    let by = options
        .group_by
        .unwrap_or_else(|| timeline::default_group_by(names, memory));
    let tl = timeline::timeline(names, memory, by, filter, options.width, options.bands);
    let by_site = group::totals_by_site(memory, &replay::live_at(memory, peak.index));

    // Breakdown rows: one per distinct site as shown (op, shape, dtype,
    // category, stack), largest first.
    let text =
        |s: Option<crate::model::StrId>| s.map(|id| names.str(id).to_string()).unwrap_or_default();
    let mut rows: BTreeMap<RowKey, Totals> = BTreeMap::new();
    let mut band_of: BTreeMap<RowKey, (String, String)> = BTreeMap::new();
    for (site_id, totals) in by_site.iter() {
        let site = names.site_of(site_id);
        let key = (
            text(site.op),
            text(site.shape),
            text(site.dtype),
            text(site.category),
            group::label(names, site_id, GroupBy::Stack, filter),
        );
        rows.entry(key.clone()).or_default().add(totals);
        band_of.entry(key).or_insert_with(|| {
            let b = timeline::band_of_site(names, site_id, by, filter, &tl.bands);
            let label = group::label(names, site_id, by, filter);
            let color = tl
                .bands
                .get(b)
                .filter(|band| band.key == label)
                .map_or(escape::OTHER_COLOR.to_string(), |band| band.color.clone());
            (label, color)
        });
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    let total_rows = rows.len();
    let omitted_bytes: u64 = rows
        .iter()
        .skip(options.table_rows)
        .map(|r| r.1.bytes)
        .sum();
    let show = |f: fn(&crate::model::Site) -> bool| by_site.keys().any(|s| f(names.site_of(s)));
    // The first column already holds the grouping key: no second copy.
    let (show_op, show_shape, show_dtype, show_category) = (
        by != GroupBy::Op && show(|s| s.op.is_some()),
        by != GroupBy::Shape && show(|s| s.shape.is_some()),
        by != GroupBy::Dtype && show(|s| s.dtype.is_some()),
        by != GroupBy::Category && show(|s| s.category.is_some()),
    );
    let rows: Vec<BreakdownRow> = rows
        .into_iter()
        .take(options.table_rows)
        .map(|(key, t)| {
            let (band, color) = band_of.get(&key).cloned().unwrap_or_default();
            let source = key.4.split(" <- ").next().unwrap_or("").to_string();
            let share = if peak.bytes > 0 {
                t.bytes as f64 * 100.0 / peak.bytes as f64
            } else {
                0.0
            };
            BreakdownRow {
                band,
                color,
                bytes: bytes_cell(t.bytes),
                requested: bytes_cell(t.requested_bytes),
                count: count_cell(t.count),
                share: Num {
                    text: format!("{share:.1}%"),
                    value: format!("{share:.4}"),
                },
                op: key.0,
                shape: key.1,
                dtype: key.2,
                category: key.3,
                source,
                stack: key.4,
            }
        })
        .collect();
    let rows_omitted = if total_rows > rows.len() {
        format!(
            "{} more rows ({}) not shown",
            total_rows - rows.len(),
            units::bytes(omitted_bytes)
        )
    } else {
        String::new()
    };

    let mut tree = Tree::default();
    tree.add_sites(names, &by_site, filter, 1);
    let flame = tree.nodes(
        &format!("{} at peak", display_id(&memory.id)),
        false,
        FLAME_MIN_SHARE,
    );

    let bands = tl.bands.clone();
    let addr = addr::address_view(memory, tl.x0, ADDR_COLS, ADDR_ROWS, |site| {
        timeline::band_of_site(names, site, by, filter, &bands)
    });

    let labels: Vec<String> = if replay::uses_instants(memory) {
        tl.top_points
            .iter()
            .map(|&i| {
                memory
                    .instants
                    .get(i)
                    .map(|s| s.label.clone())
                    .unwrap_or_default()
            })
            .collect()
    } else {
        Vec::new()
    };

    let (leak_verdict, leak_rows, leak_omitted, leak_points, leak_chart) = match leak {
        Some(l) => {
            let rows = l
                .findings
                .iter()
                .take(LEAK_ROWS)
                .map(|f| LeakRow {
                    key: f.key.clone(),
                    color: escape::group_color(&f.key),
                    growth: match f.growth {
                        Growth::Steady => "steady".into(),
                        Growth::Bounded => "bounded".into(),
                    },
                    growth_bytes: bytes_cell(f.growth_bytes),
                    per_point: bytes_cell(f.bytes_per_point),
                    first: bytes_cell(f.bytes.first().copied().unwrap_or(0)),
                    last: bytes_cell(f.bytes.last().copied().unwrap_or(0)),
                })
                .collect();
            let chart = LeakChart {
                labels: l.points.clone(),
                total: l.total_bytes.clone(),
                lines: l
                    .findings
                    .iter()
                    .take(LEAK_LINES)
                    .map(|f| timeline::Band {
                        key: f.key.clone(),
                        color: escape::group_color(&f.key),
                        v: f.bytes.clone(),
                    })
                    .collect(),
            };
            (
                l.verdict.clone(),
                rows,
                l.findings.len().saturating_sub(LEAK_ROWS),
                l.points.len(),
                chart,
            )
        }
        None => (
            String::new(),
            Vec::new(),
            0,
            0,
            LeakChart {
                labels: Vec::new(),
                total: Vec::new(),
                lines: Vec::new(),
            },
        ),
    };

    let frag = frag_section(profile, memory, &options.analysis);
    let peak_label = point_label(memory, peak.index, peak.at);
    let mut facts = vec![
        Fact {
            name: "kind",
            value: memory.kind.name().to_string(),
        },
        Fact {
            name: "peak",
            value: if reported.bytes == peak.bytes {
                format!(
                    "{} ({} bytes, {} buffers)",
                    units::bytes(peak.bytes),
                    peak.bytes,
                    peak.buffers
                )
            } else {
                format!(
                    "{} ({} bytes, as the allocator reported it; the events replayed there hold {} in {} buffers)",
                    units::bytes(reported.bytes),
                    reported.bytes,
                    units::bytes(peak.bytes),
                    peak.buffers
                )
            },
        },
        Fact {
            name: "peak at",
            value: peak_label.clone(),
        },
    ];
    if let Some(c) = memory.capacity {
        let share = if c > 0 {
            format!(
                " — peak is {:.1}%",
                reported.bytes as f64 * 100.0 / c as f64
            )
        } else {
            String::new()
        };
        facts.push(Fact {
            name: "capacity",
            value: format!("{}{share}", units::bytes(c)),
        });
    }
    facts.push(Fact {
        name: "content",
        value: if replay::uses_instants(memory) {
            format!(
                "{} snapshots, {} allocations",
                memory.instants.len(),
                memory.allocations.len()
            )
        } else {
            format!(
                "{} events, {} allocations",
                memory.events.len(),
                memory.allocations.len()
            )
        },
    });
    let resolution = if tl.points > tl.x.len() {
        format!(
            "{} points drawn as {} columns (each column: highest total, with the lowest as a line)",
            tl.points,
            tl.x.len()
        )
    } else {
        format!("{} points", tl.points)
    };
    let view = MemoryView {
        dom: dom.clone(),
        title: format!("{} ({})", display_id(&memory.id), axis_name(memory.axis)),
        peak_short: format!("{} at {}", units::bytes(reported.bytes), peak_label),
        facts,
        leak_verdict,
        frag,
        group_by: by.name().replace('_', " "),
        resolution,
        rows,
        rows_omitted,
        show_op,
        show_shape,
        show_dtype,
        show_category,
        leak_rows,
        leak_omitted,
        leak_points,
        has_addr: addr.is_some(),
    };
    let reserved = reserved_series(memory, tl.x0, options.width);
    let steps = step_marks(memory, tl.x0);
    let data = MemoryData {
        dom,
        axis: memory.axis,
        labels,
        peak: PeakMark {
            x: peak.at.wrapping_sub(tl.x0),
            bytes: peak.bytes,
            text: units::bytes(reported.bytes),
            label: peak_label,
        },
        timeline: tl,
        capacity: memory.capacity,
        reserved,
        steps,
        flame,
        addr,
        leaks: leak_chart,
    };
    (view, data)
}

fn axis_name(axis: Axis) -> &'static str {
    match axis {
        Axis::TimePs | Axis::TimeUs => "time",
        Axis::EventIndex => "event order",
        Axis::Snapshot => "snapshots",
        Axis::ProgramOrder => "program order",
    }
}

/// The allocator's reserved bytes over time, at most `2 × width` points
/// (the highest of each run of samples, so no spike disappears).
fn reserved_series(memory: &Memory, x0: i64, width: usize) -> Vec<[i64; 2]> {
    let samples: Vec<(i64, u64)> = memory
        .allocator_samples
        .iter()
        .filter_map(|s| s.reserved_bytes().map(|r| (s.at, r)))
        .collect();
    let per = samples.len().div_ceil(width.max(1) * 2).max(1);
    samples
        .chunks(per)
        .filter_map(|chunk| {
            chunk
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|&(at, r)| [at.wrapping_sub(x0), r.min(i64::MAX as u64) as i64])
        })
        .collect()
}

fn diff_tree(base: &Profile, new: &Profile, options: &RenderOptions) -> Node {
    let mut tree = Tree::default();
    for (side, profile) in [(0, base), (1, new)] {
        for memory in options.analysis.selected(profile) {
            tree.add_sites(
                &profile.names,
                &at_peak(memory),
                &options.analysis.frames,
                side,
            );
        }
    }
    tree.nodes("all memories at peak", true, FLAME_MIN_SHARE)
}

fn diff_view(base: &Profile, new: &Profile, options: &RenderOptions) -> DiffView {
    let report = diff::diff(base, new, &options.analysis, None);
    let pct = |p: Option<f64>| {
        p.map_or("n/a".to_string(), |p| {
            format!("{p:+.1}%").replace("+-", "-")
        })
    };
    let t = &report.total;
    let summary = format!(
        "at peak, all memories: {} → {} ({}, {})",
        units::bytes(t.base_bytes),
        units::bytes(t.new_bytes),
        units::delta_bytes(t.delta_bytes),
        pct(t.delta_percent)
    );
    let memories = report
        .memories
        .iter()
        .map(|m| Fact {
            name: "memory",
            value: format!(
                "{}: {} → {} ({})",
                display_id(&m.id),
                units::bytes(m.totals.base_bytes),
                units::bytes(m.totals.new_bytes),
                units::delta_bytes(m.totals.delta_bytes)
            ),
        })
        .collect();
    let rows: Vec<DiffRowView> = report
        .rows
        .iter()
        .filter(|r| r.delta_bytes != 0)
        .take(DIFF_ROWS)
        .map(|r| DiffRowView {
            key: r.key.clone(),
            base: bytes_cell(r.base_bytes),
            new: bytes_cell(r.new_bytes),
            delta: Num {
                text: units::delta_bytes(r.delta_bytes),
                value: r.delta_bytes.to_string(),
            },
            percent: pct(r.delta_percent),
            grew: r.delta_bytes > 0,
        })
        .collect();
    let changed = report.rows.iter().filter(|r| r.delta_bytes != 0).count();
    DiffView {
        summary,
        memories,
        rows_omitted: changed.saturating_sub(rows.len()),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        AllocId, Allocation, AllocatorSample, Event, EventKind, Format, Frame, InputInfo,
        MemoryKind, Site, SiteId,
    };

    const XSS: &str = "</script><img src=x onerror=alert(1)>";
    /// Leaves a mark the browser check looks for, should it ever run.
    const XSS_MARK: &str =
        "<img src=x onerror=\"document.documentElement.setAttribute('data-xss','ran')\">\u{2028}<!--";

    /// An allocator event stream as the XSpace and PyTorch readers fill it:
    /// addresses, stacks, ops and categories, reserved bytes and a capacity.
    /// `steps` training-like steps, each allocating `per_step` buffers and
    /// freeing all but one of them (a slow leak).
    fn event_profile(steps: u64, per_step: u64, hostile: bool) -> Profile {
        let mut profile = Profile::default();
        profile.inputs.push(InputInfo {
            path: if hostile {
                format!("{XSS}.pb")
            } else {
                "synthetic.xplane.pb".into()
            },
            format: Format::Pprof,
            executables: None,
        });
        let names = &mut profile.names;
        let file = names.string("train.py");
        let main_fn = names.string("main");
        let main = names.frame(Frame {
            function: main_fn,
            file,
            line: 1,
        });
        let sites: Vec<SiteId> = (0..8)
            .map(|i| {
                let function = names.string(&match (hostile, i) {
                    (true, 0) => XSS.to_string(),
                    (true, 2) => XSS_MARK.to_string(),
                    _ => format!("layer{i}"),
                });
                let f = names.frame(Frame {
                    function,
                    file,
                    line: 10 + i,
                });
                let stack = names.stack_leaf_first(&[f, main]);
                let op = names.string(&if hostile && i == 1 {
                    XSS.to_string()
                } else {
                    format!("op{i}")
                });
                let category = names.string(["activation", "parameter", "temp"][i as usize % 3]);
                let odd = (hostile && i == 3).then(|| names.string(XSS));
                names.site(Site {
                    stack,
                    op: Some(op),
                    shape: odd,
                    dtype: odd,
                    category: Some(odd.unwrap_or(category)),
                })
            })
            .collect();
        let mut m = Memory::new("GPU_0_bfc", MemoryKind::Allocator, Axis::TimePs);
        m.capacity = Some(1 << 34);
        let mut at = 1_000i64;
        let mut next_addr = 0x7f00_0000_0000u64;
        let (mut live, mut reserved) = (0u64, 0u64);
        for step in 0..steps {
            let step_start = at + 100;
            let mut ids = Vec::new();
            for j in 0..per_step {
                let bytes = 4096 * (1 + (step * 7 + j) % 64);
                let id = m.push_allocation(Allocation {
                    bytes,
                    requested: bytes - 16,
                    count: 1,
                    address: Some(next_addr),
                    site: sites[(j % 8) as usize],
                });
                next_addr = 0x7f00_0000_0000 + (next_addr + bytes - 0x7f00_0000_0000) % (1 << 30);
                at += 100;
                m.events.push(Event {
                    at,
                    kind: EventKind::Alloc,
                    alloc: id,
                });
                ids.push(id);
                live += bytes;
            }
            // A caching allocator keeps what it once held, in 2 MiB blocks.
            reserved = reserved.max(live.div_ceil(2 << 20) * (2 << 20));
            for &id in ids.iter().skip(1) {
                at += 100;
                m.events.push(Event {
                    at,
                    kind: EventKind::Free,
                    alloc: AllocId(id.0),
                });
                live -= m.allocations[id.index()].bytes;
            }
            m.steps.push(crate::model::Step {
                id: step as i64,
                start: step_start,
                end: at,
            });
            m.allocator_samples
                .push(AllocatorSample::new(at).with_reserved_bytes(Some(reserved)));
        }
        profile.memories.push(m);
        profile
    }

    #[test]
    fn same_input_same_bytes() {
        let profile = event_profile(50, 40, false);
        let options = RenderOptions::default();
        let a = html(Inputs::One(&profile), &options);
        let b = html(Inputs::One(&profile), &options);
        assert_eq!(a, b);
        let other = event_profile(50, 40, false);
        assert_eq!(a, html(Inputs::One(&other), &options));
        let d1 = html(
            Inputs::Diff {
                base: &profile,
                new: &other,
            },
            &options,
        );
        assert_eq!(
            d1,
            html(
                Inputs::Diff {
                    base: &profile,
                    new: &other
                },
                &options
            )
        );
    }

    #[test]
    fn event_streams_render_every_section() {
        let profile = event_profile(50, 40, false);
        let page = html(Inputs::One(&profile), &RenderOptions::default());
        let peak = replay::peak(&profile.memories[0]).unwrap();
        assert!(page.contains(&format!("({} bytes, ", peak.bytes)));
        assert!(page.contains("Addresses over time"));
        assert!(page.contains("class=\"addr\" data-mem=\"m0-0\""));
        // Categories exist, so the timeline is stacked by them.
        assert!(page.contains("Stacked by category"));
        assert!(page.contains("capacity</dt><dd>16.00 GiB"));
        // One buffer per step is never freed: steady growth.
        assert!(
            page.contains("<dt>leaks</dt><dd>steady growth"),
            "{}",
            &page[..2000]
        );
        // Addresses give `frag` its address-gap figure: the section and the
        // header line say what it says.
        let frag = crate::analysis::frag::frag(&profile, &Options::default());
        let gaps = frag.memories[0].at_peak.as_ref().unwrap().address.unwrap();
        assert!(page.contains("<h3>Fragmentation</h3>"));
        assert!(page.contains(&format!(
            "({} gaps, largest {})</dd>",
            gaps.gaps,
            units::bytes(gaps.largest_gap_bytes)
        )));
        let data = embedded_data(&page);
        let m = &data["memories"][0];
        assert_eq!(m["peak"]["bytes"], peak.bytes);
        let hi: Vec<u64> = serde_json::from_value(m["timeline"]["hi"].clone()).unwrap();
        assert_eq!(hi.iter().max().copied(), Some(peak.bytes));
        let reserved: Vec<[u64; 2]> = serde_json::from_value(m["reserved"].clone()).unwrap();
        assert!(reserved.iter().all(|r| r[1] % (2 << 20) == 0));
        assert_eq!(
            reserved.iter().map(|r| r[1]).max(),
            Some(peak.bytes.div_ceil(2 << 20) * (2 << 20))
        );
        assert_eq!(m["flame"]["v"], peak.bytes);
        let steps = m["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 50);
        assert_eq!(steps[1]["label"], "step 1");
    }

    #[test]
    fn frag_sections_show_when_given() {
        // Without addresses or the allocator's own figure: no section at all.
        let mut profile = event_profile(5, 4, false);
        for a in &mut profile.memories[0].allocations {
            a.address = None;
        }
        let page = html(Inputs::One(&profile), &RenderOptions::default());
        assert!(!page.contains("<dt>fragmentation</dt>") && !page.contains("Fragmentation"));
        // The template block the frag analysis feeds.
        let view = Page {
            title: "t".into(),
            inputs: Vec::new(),
            warnings: Vec::new(),
            diff: None,
            memory_count: 1,
            profiles: vec![ProfileView {
                heading: String::new(),
                memories: vec![MemoryView {
                    frag: Some(FragSection::from_table(
                        "external fragmentation 12%".into(),
                        &{
                            let mut t = crate::report::Table::new(
                                "Fragmentation",
                                vec!["at", "largest_free"],
                            );
                            t.rows
                                .push(vec!["<b>".into(), crate::report::Cell::Bytes(3 << 20)]);
                            t
                        },
                    )),
                    ..test_memory_view()
                }],
                empty: Vec::new(),
            }],
            css: "",
            js: "",
            data_json: "{}".into(),
        };
        let page = view.render().unwrap();
        assert!(page.contains("<dt>fragmentation</dt><dd>external fragmentation 12%</dd>"));
        assert!(page.contains("<h3>Fragmentation</h3>"));
        assert!(page.contains("<td>&#60;b&#62;</td>") || page.contains("<td>&lt;b&gt;</td>"));
        assert!(page.contains("<th>largest free</th>"));
        assert!(page.contains("<td class=\"num\" data-v=\"3145728\">3.00 MiB</td>"));
    }

    /// Writes reports of synthetic event streams (including the hostile one)
    /// where `scripts/browser-check.sh` asks for them, so the browser check
    /// covers the event-stream sections that no reader produces yet.
    #[test]
    fn samples_for_the_browser_check() {
        let events = event_profile(300, 40, false);
        let hostile = event_profile(30, 12, true);
        let pages = [
            (
                "events.html",
                html(Inputs::One(&events), &RenderOptions::default()),
            ),
            (
                "xss.html",
                html(Inputs::One(&hostile), &RenderOptions::default()),
            ),
            (
                "events-diff.html",
                html(
                    Inputs::Diff {
                        base: &hostile,
                        new: &events,
                    },
                    &RenderOptions::default(),
                ),
            ),
        ];
        for (_, page) in &pages {
            assert!(page.contains("id=\"memtool-data\""));
        }
        if let Some(dir) = std::env::var_os("MEMTOOL_RENDER_SAMPLES") {
            let dir = std::path::PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, page) in &pages {
                std::fs::write(dir.join(name), page).unwrap();
            }
        }
    }

    fn test_memory_view() -> MemoryView {
        MemoryView {
            dom: "m0-0".into(),
            title: "gpu".into(),
            peak_short: String::new(),
            facts: Vec::new(),
            leak_verdict: String::new(),
            frag: None,
            group_by: "op".into(),
            resolution: String::new(),
            rows: Vec::new(),
            rows_omitted: String::new(),
            show_op: false,
            show_shape: false,
            show_dtype: false,
            show_category: false,
            leak_rows: Vec::new(),
            leak_omitted: 0,
            leak_points: 0,
            has_addr: false,
        }
    }

    /// Where the embedded JSON starts and ends in a page.
    fn data_span(page: &str) -> (usize, usize) {
        let start = page.find("id=\"memtool-data\">").unwrap() + "id=\"memtool-data\">".len();
        (start, start + page[start..].find("</script>").unwrap())
    }

    fn embedded_data(page: &str) -> serde_json::Value {
        let (start, end) = data_span(page);
        serde_json::from_str(&page[start..end]).unwrap()
    }

    #[test]
    fn profile_text_is_escaped_everywhere() {
        let profile = event_profile(10, 8, true);
        for page in [
            html(Inputs::One(&profile), &RenderOptions::default()),
            html(
                Inputs::Diff {
                    base: &profile,
                    new: &profile,
                },
                &RenderOptions::default(),
            ),
        ] {
            assert!(
                !page.contains("<img"),
                "raw markup from the profile reached the page"
            );
            // Only our own two script elements close.
            assert_eq!(page.matches("</script>").count(), 2);
            assert_eq!(page.matches("<!--").count(), 0);
            // The text is there, escaped, in the tables and the title.
            assert!(
                page.contains("&#60;/script&#62;&#60;img src=x onerror=alert(1)&#62;")
                    || page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;")
            );
            // And intact once the script parses the data.
            let data = embedded_data(&page);
            let text = data.to_string();
            assert!(text.contains(XSS), "the JSON lost the name");
        }
    }

    #[test]
    fn a_million_events_make_a_small_report() {
        // 20,000 steps × 25 allocations, 24 freed each: 980,000 events.
        let mut profile = event_profile(20_000, 25, false);
        let m = &mut profile.memories[0];
        // Round it past a million with short-lived buffers.
        let site = m.allocations[0].site;
        let mut at = m.events.last().unwrap().at;
        while m.events.len() < 1_000_000 {
            let id = m.push_allocation(Allocation {
                bytes: 256,
                requested: 256,
                count: 1,
                address: Some(0x10_0000 + (m.events.len() as u64 % 1024) * 256),
                site,
            });
            at += 10;
            m.events.push(Event {
                at,
                kind: EventKind::Alloc,
                alloc: id,
            });
            at += 10;
            m.events.push(Event {
                at,
                kind: EventKind::Free,
                alloc: id,
            });
        }
        assert!(profile.memories[0].events.len() >= 1_000_000);
        let page = html(Inputs::One(&profile), &RenderOptions::default());
        eprintln!("1M-event report: {} bytes", page.len());
        assert!(page.len() < 5_000_000, "report is {} bytes", page.len());
        let data = embedded_data(&page);
        let peak = replay::peak(&profile.memories[0]).unwrap();
        assert_eq!(data["memories"][0]["peak"]["bytes"], peak.bytes);
        let cols = data["memories"][0]["timeline"]["x"]
            .as_array()
            .unwrap()
            .len();
        assert!(cols <= RenderOptions::default().width, "{cols} columns");
    }

    #[test]
    fn svg_timelines_are_static_and_escaped() {
        let profile = event_profile(30, 12, true);
        let image = svg(Inputs::One(&profile), &RenderOptions::default());
        assert_eq!(image, svg(Inputs::One(&profile), &RenderOptions::default()));
        assert!(image.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(image.ends_with("</svg>\n"));
        assert!(!image.contains("<script") && !image.contains("<img"));
        let peak = replay::peak(&profile.memories[0]).unwrap();
        assert!(image.contains(&format!("GPU_0_bfc — peak {}", units::bytes(peak.bytes))));
        // One area per band, each named by its group.
        let bands = image.matches("<path ").count();
        assert_eq!(bands, 4, "one band per category");
        assert!(image.contains("<title>activation</title>"));
        // The hostile category is a band too, as text.
        assert!(image.contains("<title>&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</title>"));
        let diff = svg(
            Inputs::Diff {
                base: &profile,
                new: &profile,
            },
            &RenderOptions::default(),
        );
        assert_eq!(
            diff.matches("peak ").count(),
            4,
            "two titles and two peak marks"
        );
        assert!(
            svg(Inputs::One(&Profile::default()), &RenderOptions::default()).contains("No memory")
        );
    }

    #[test]
    fn extreme_values_render_without_panicking() {
        let mut profile = Profile::default();
        let site = profile.names.site(Site::default());
        let mut m = Memory::new("x", MemoryKind::Allocator, Axis::TimePs);
        m.capacity = Some(u64::MAX);
        for (i, (at, address)) in [(i64::MIN, u64::MAX - 1), (i64::MAX, 0), (0, u64::MAX / 2)]
            .into_iter()
            .enumerate()
        {
            let id = m.push_allocation(Allocation {
                bytes: u64::MAX / 4,
                requested: u64::MAX / 4,
                count: 1,
                address: Some(address),
                site,
            });
            m.events.push(Event {
                at,
                kind: EventKind::Alloc,
                alloc: id,
            });
            if i == 1 {
                m.events.push(Event {
                    at: i64::MIN,
                    kind: EventKind::Free,
                    alloc: AllocId(0),
                });
            }
        }
        m.allocator_samples
            .push(AllocatorSample::new(i64::MAX).with_reserved_bytes(Some(u64::MAX)));
        profile.memories.push(m);
        let options = RenderOptions::default();
        let page = html(Inputs::One(&profile), &options);
        assert!(page.contains("data-mem=\"m0-0\""));
        assert!(svg(Inputs::One(&profile), &options).ends_with("</svg>\n"));
        assert!(!folded(
            Inputs::Diff {
                base: &profile,
                new: &profile
            },
            &options
        )
        .is_empty());
        let both = html(
            Inputs::Diff {
                base: &profile,
                new: &profile,
            },
            &options,
        );
        assert!(both.contains("What changed"));
    }

    #[test]
    fn folded_stacks_sum_to_the_peak() {
        let profile = event_profile(20, 10, false);
        let text = folded(Inputs::One(&profile), &RenderOptions::default());
        let sum: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, replay::peak(&profile.memories[0]).unwrap().bytes);
        assert!(text.lines().all(|l| l.starts_with("main train.py:1;layer")));
    }
}
