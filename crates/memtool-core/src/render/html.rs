//! The HTML page: the views of each profile, memory and diff that the page
//! model is filled from.

use std::sync::Arc;

use askama::Template;

use crate::analysis::group::{self, GroupBy};
use crate::analysis::leaks::{self, MemoryLeaks};
use crate::analysis::{diff, display_id, replay, Options, PeakFacts};
use crate::model::{Axis, CategorySource, Memory, Profile};
use crate::report::units;

use super::flame::{self, Node, Tree};
use super::marks::{
    landmark_marks, phase_marks, recording_start, relative_label, relative_time, SECTIONS,
};
use super::page::*;
use super::{
    addr, alloc_view, at_peak, blocks, color, escape, program_chart, timeline, Inputs,
    RenderOptions,
};

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
    if let Some(u) = &m.unused_reserved {
        parts.push(format!(
            "reserved but not in use: at most {} (at {}, of {} reserved)",
            units::bytes(u.max_bytes),
            relative_time(memory.axis, u.max_at, recording_start(memory))
                .unwrap_or_else(|| u.max_label.clone()),
            units::bytes(u.max_reserved_bytes)
        ));
    }
    if let Some(a) = m.at_peak.as_ref().and_then(|p| p.address) {
        parts.push(format!(
            "at peak {:.1}% of the free memory inside what the allocator holds is outside the largest gap ({} gaps, largest {})",
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
    Some(FragSection::from_table(
        parts.join("; "),
        table,
        options.top,
    ))
}

/// The annotation stages of one memory as `summary` shows them; none when
/// it has no annotated ranges.
fn stages_sections(profile: &Profile, memory: &Memory, options: &Options) -> Vec<FragSection> {
    let stages = crate::analysis::stages::stages(memory, &profile.names, &options.frames);
    if stages.is_empty() {
        return Vec::new();
    }
    crate::analysis::stages::tables(&memory.id, &stages)
        .iter()
        .map(|t| FragSection::from_table(String::new(), t, options.top))
        .collect()
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
    let oom = match inputs {
        Inputs::One(p) => oom_views(p, &options.analysis),
        Inputs::Diff { .. } => Vec::new(),
    };
    let page = Page {
        title,
        inputs: page_inputs,
        warnings,
        oom,
        diff,
        profiles,
        memory_count,
        css: CSS,
        js: JS,
        program_js: PROGRAM_JS,
        alloc_js: ALLOC_JS,
        addr_js: ADDR_JS,
        tables_js: TABLES_JS,
        selftest_js: SELFTEST_JS,
        data_json: escape::script_json(&data),
    };
    // Rendering fails only on a formatting error of our own fields, which
    // `String`'s `fmt::Write` never raises.
    page.render().unwrap_or_default()
}

/// The out-of-memory post-mortems of `profile`, as `memtool oom` gives them.
fn oom_views(profile: &Profile, options: &Options) -> Vec<OomView> {
    crate::analysis::oom_report::post_mortems(profile, options)
        .iter()
        .map(|pm| OomView {
            verdict: pm.note(),
            tables: pm
                .tables()
                .iter()
                .map(|t| OomTable {
                    title: t.title.clone(),
                    table: FragSection::from_table(String::new(), t, options.top),
                })
                .collect(),
        })
        .collect()
}

fn paths(profile: &Profile) -> String {
    let p: Vec<&str> = profile.inputs.iter().map(|i| i.path.as_str()).collect();
    match p.len() {
        0..=3 => p.join(", "),
        n => format!("{}, … {} ({n} files)", p[0], p[n - 1]),
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
    // Found by id through a map: a scan per memory is quadratic in them.
    let leaks_of: std::collections::HashMap<&str, &MemoryLeaks> = leaks
        .memories
        .iter()
        .map(|l| (l.header.id.as_str(), l))
        .collect();
    let mut empty = Vec::new();
    let mut empty_more = 0;
    // The peak the `peak` and `summary` commands report (the allocator's
    // own figure when it gives one, `--ties`).
    let mut with_peaks: Vec<(usize, &Memory, PeakFacts)> = Vec::new();
    for (m, memory) in options.analysis.selected(profile).enumerate() {
        match PeakFacts::of(memory, options.analysis.ties) {
            Some(peak) => with_peaks.push((m, memory, peak)),
            None if empty.len() < FoldedTable::ROWS => empty.push(display_id(&memory.id)),
            None => empty_more += 1,
        }
    }
    // The page opens on the memory that matters: biggest peak first, the
    // first [`SECTIONS`] drawn, the others one row each in a compact table
    // (and the trivial ones in another), so the page stays a few MB
    // whatever the number of memories.
    let peaks: Vec<(&str, u64)> = with_peaks
        .iter()
        .map(|(_, memory, facts)| (memory.id.as_str(), facts.peak.bytes))
        .collect();
    let order = crate::analysis::order_by_peak(&peaks);
    let drawn = order.main.len().min(SECTIONS);
    let folded_table = |class: &'static str, summary: String, indices: &[usize]| {
        let rows = indices
            .iter()
            .take(FoldedTable::ROWS)
            .map(|&i| {
                let (_, memory, facts) = &with_peaks[i];
                TrivialRow {
                    memory: display_id(&memory.id),
                    kind: memory.kind.name().to_string(),
                    peak: bytes_cell(facts.peak.bytes),
                    buffers: count_cell(facts.point().buffers),
                    at: facts.label.clone(),
                }
            })
            .collect();
        let sums: Vec<(u64, u64)> = indices
            .iter()
            .map(|&i| (with_peaks[i].2.peak.bytes, with_peaks[i].2.point().buffers))
            .collect();
        FoldedTable::new(class, summary, rows, &sums)
    };
    let plural = |n: usize| if n == 1 { "memory" } else { "memories" };
    let beyond = &order.main[drawn..];
    let trivial = &order.trivial;
    let folded = [
        folded_table(
            "beyond",
            format!(
                "{} more {} not drawn: the page draws the {SECTIONS} with the largest peaks \
                 (JSON output keeps every memory){}",
                beyond.len(),
                plural(beyond.len()),
                listed_note(beyond.len()),
            ),
            beyond,
        ),
        folded_table(
            "trivial",
            format!(
                "{} more {} too small to matter (peak under 1% of the largest and under 1 MiB), \
                 not drawn{}",
                trivial.len(),
                plural(trivial.len()),
                listed_note(trivial.len()),
            ),
            trivial,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut memories = Vec::new();
    for &i in &order.main[..drawn] {
        let (m, memory, peak) = &with_peaks[i];
        let leak = leaks_of
            .get(memory.id.as_str())
            .copied()
            .filter(|_| memory.program.is_none());
        let dom = format!("m{n}-{m}");
        let (view, memory_data) = memory_view(profile, memory, peak.clone(), leak, dom, options);
        memories.push(view);
        data.push(memory_data);
    }
    ProfileView {
        heading,
        memories,
        folded,
        empty,
        empty_more,
    }
}

/// What a folded table's summary adds when it lists only some rows.
fn listed_note(n: usize) -> String {
    if n > FoldedTable::ROWS {
        format!(
            "; the {} largest listed, the other {} summed in the last row",
            FoldedTable::ROWS,
            n - FoldedTable::ROWS
        )
    } else {
        String::new()
    }
}

/// Columns of the static timeline in the page: a third of the chart's, for
/// a picture a third the size that still shows every peak.
const STATIC_COLUMNS: usize = 333;

fn memory_view(
    profile: &Profile,
    memory: &Memory,
    facts: PeakFacts,
    leak: Option<&MemoryLeaks>,
    dom: String,
    options: &RenderOptions,
) -> (MemoryView, MemoryData) {
    // The point drawn and broken down; `reported.bytes` is what the header says.
    let (reported, peak) = (facts.peak, facts.point());
    let names = &profile.names;
    let filter = &options.analysis.frames;
    let (by, mut tl) = timeline::of_memory(names, memory, peak.index, options);
    mark_before_recording(names, memory, by, filter, &mut tl);
    // The chart as a picture, for viewers that run no script (a ticket's
    // attachment preview, a mail client); the script replaces it.
    let static_svg = super::svg::document(
        &[super::svg::panel(
            "",
            memory,
            &facts,
            by,
            &tl.coarsened(STATIC_COLUMNS),
        )],
        None,
    )
    // Inline in HTML the namespace is implied; the page names no address.
    .replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
    let by_site = group::totals_by_site(memory, &replay::live_at(memory, peak.index));

    // Breakdown rows: one per distinct site as shown (op, shape, dtype,
    // category, stack), largest first.
    let rows = group::Grouper::new(names, filter).site_rows(&by_site);
    let total_rows = rows.len();
    let omitted_bytes: u64 = rows
        .iter()
        .skip(options.table_rows)
        .fold(0u64, |s, r| s.saturating_add(r.totals.bytes));
    let show = |field| group::has_values(names, &by_site, field);
    // The first column already holds the grouping key: no second copy.
    let (show_op, show_shape, show_dtype, show_category) = (
        by != GroupBy::Op && show(GroupBy::Op),
        by != GroupBy::Shape && show(GroupBy::Shape),
        by != GroupBy::Dtype && show(GroupBy::Dtype),
        by != GroupBy::Category && show(GroupBy::Category),
    );
    // Without call stacks both columns would read `<no stack>` on every
    // row; grouped by user frame, the source line is the first column.
    let stacks = show(GroupBy::Stack);
    let (show_source, show_stack) = (
        stacks && by != GroupBy::UserFrame,
        stacks && by != GroupBy::Stack,
    );
    let text = |field: Option<Arc<str>>| escape::label(field.as_deref().unwrap_or_default());
    let rows: Vec<BreakdownRow> = rows
        .into_iter()
        .take(options.table_rows)
        .map(|row| {
            let b = timeline::band_of_site(names, row.site, by, filter, &tl.bands);
            let band = escape::label(&group::label(names, row.site, by, filter));
            let color = tl
                .bands
                .get(b)
                .filter(|b| b.key == band)
                .map_or(color::OTHER_COLOR.to_string(), |b| b.color.clone());
            let t = row.totals;
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
                op: text(row.op),
                shape: text(row.shape),
                dtype: text(row.dtype),
                category: text(row.category),
                source: escape::label(&row.user_frame),
                stack: escape::label(&row.stack),
                band_short: String::new(),
                source_short: String::new(),
                stack_short: String::new(),
            }
        })
        .collect();
    // Cells as the text tables shorten them, rows kept apart; the full text
    // is the cell's tooltip.
    let mut rows = rows;
    for (column, max) in [(0, flame::LABEL_CHARS), (1, flame::LABEL_CHARS), (2, 90)] {
        let full: Vec<&str> = rows
            .iter()
            .map(|r| match column {
                0 => r.band.as_str(),
                1 => r.source.as_str(),
                _ => r.stack.as_str(),
            })
            .collect();
        let shorts = crate::report::fit_column(&full, max);
        for (r, short) in rows.iter_mut().zip(shorts) {
            match column {
                0 => r.band_short = short,
                1 => r.source_short = short,
                _ => r.stack_short = short,
            }
        }
    }
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
    // A compiled program is drawn buffer by buffer, as XProf draws it; the
    // address grid would show the same offsets coloured by group only.
    let program = program_chart::program_chart(names, memory, peak.index, peak.bytes);
    let addr = if program.is_some() {
        None
    } else {
        addr::address_view(memory, tl.x0, ADDR_COLS, ADDR_ROWS, |site| {
            timeline::band_of_site(names, site, by, filter, &bands)
        })
    };

    let blocks = blocks::blocks(names, memory, filter, tl.x0, |site| {
        timeline::band_of_site(names, site, by, filter, &bands)
    });
    // Every allocation its own band (memory_viz's picture), a click showing
    // the drill-down's stacks; a program's buffers are drawn by its chart.
    let alloc = if program.is_some() {
        None
    } else {
        alloc_view::alloc_view(
            names,
            memory,
            tl.x0,
            filter,
            blocks.as_ref().map(|b| &b.site_of),
        )
        .map(|mut view| {
            // Coloured as the timeline is stacked, where it can be.
            let name = by.name().replace('_', " ");
            view.by = view.groupings.iter().position(|g| *g == name).unwrap_or(0) as u32;
            view
        })
    };

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
            let keys: Vec<String> = l
                .findings
                .iter()
                .take(LEAK_ROWS)
                .map(|f| escape::label(&f.key))
                .collect();
            let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let shorts = crate::report::fit_column(&key_refs, 90);
            let rows: Vec<LeakRow> = l
                .findings
                .iter()
                .take(LEAK_ROWS)
                .zip(shorts)
                .map(|(f, key_short)| LeakRow {
                    key: escape::label(&f.key),
                    key_short,
                    color: color::group_color(&f.key),
                    growth: f.growth.name().into(),
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
                        key: escape::label(&f.key),
                        short: String::new(),
                        pre: false,
                        color: color::group_color(&f.key),
                        v: f.bytes.clone(),
                    })
                    .collect(),
                handover: l
                    .findings
                    .iter()
                    .take(LEAK_LINES)
                    .all(|f| f.growth == leaks::Growth::Handover)
                    && !l.findings.is_empty(),
            };
            let mut chart = chart;
            timeline::shorten_keys(&mut chart.lines);
            (
                escape::label(&l.verdict),
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
                handover: false,
            },
        ),
    };

    // A compiled program's buffer assignment has no allocator to fragment
    // and runs once: neither section can say anything.
    let frag = if memory.program.is_some() {
        None
    } else {
        frag_section(profile, memory, &options.analysis)
    };
    let start = recording_start(memory);
    let facts_phase = facts.phase;
    let facts_moments = facts.moments;
    let peak_label = relative_label(memory, peak.at, facts.step).unwrap_or(facts.label);
    // A memory timeline's rows are categories' totals, not buffers.
    let counted = if memory.category_totals {
        "categories"
    } else {
        "buffers"
    };
    let mut facts = vec![
        Fact {
            name: "kind",
            value: memory.kind.name().to_string(),
        },
        Fact {
            name: "peak",
            value: if reported.bytes == peak.bytes {
                format!(
                    "{} ({} bytes, {} {counted})",
                    units::bytes(peak.bytes),
                    peak.bytes,
                    peak.buffers
                )
            } else {
                format!(
                    "{} ({} bytes, as the allocator reported it; the events replayed there hold {} in {} {counted})",
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
    // A peak reached more than once says so, as `peak`'s table does.
    if facts_moments > 1 {
        facts.push(Fact {
            name: "peak reached",
            value: format!(
                "{facts_moments} separate times (the peak is tied); the chart marks the first"
            ),
        });
    }
    if let Some(phase) = facts_phase {
        facts.push(Fact {
            name: "peak in",
            value: format!("the {} phase", phase.name().replace('_', " ")),
        });
    }
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
        } else if memory.category_totals {
            format!(
                "{} events, {} category totals (each held until its category's next change)",
                memory.events.len(),
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
    // A memory timeline holds what was made before profiling, which the
    // trace of the same run cannot see: said where its figures are read,
    // not only among the notes of the reading.
    if memory.category_totals {
        let before = match memory.made_before_profiling.filter(|&b| b > 0) {
            Some(bytes) => format!(
                "{} of it made before profiling, which the trace of the same run cannot see",
                units::exact_bytes(bytes)
            ),
            None => "none of it made before profiling".to_string(),
        };
        facts.push(Fact {
            name: "holds",
            value: format!(
                "each category's total (parameter, activation, ...), not buffers; {before}"
            ),
        });
    }
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
        static_svg,
        dom: dom.clone(),
        title: format!("{} ({})", display_id(&memory.id), axis_name(memory.axis)),
        peak_short: format!("{} at {}", units::bytes(reported.bytes), peak_label),
        facts,
        leak_verdict,
        frag,
        stages: stages_sections(profile, memory, &options.analysis),
        group_by: group_by_words(memory, by),
        resolution,
        rows,
        rows_omitted,
        show_op,
        show_shape,
        show_dtype,
        show_category,
        show_source,
        show_stack,
        leak_rows,
        leak_omitted,
        leak_points,
        has_addr: addr.is_some(),
        has_program: program.is_some(),
        has_alloc: alloc.is_some(),
        has_blocks: blocks.is_some(),
        has_state: blocks.as_ref().is_some_and(|b| !b.segments.is_empty()),
    };
    let reserved = reserved_series(memory, tl.x0, options.width);
    let steps = step_marks(memory, tl.x0);
    let phases = phase_marks(memory, tl.x0, options.width);
    let landmarks = landmark_marks(&profile.names, memory, filter, tl.x0);
    let data = MemoryData {
        dom,
        axis: memory.axis,
        t0: start.map_or(0, |s| s.wrapping_sub(tl.x0)),
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
        phases,
        landmarks,
        flame,
        addr,
        program,
        alloc,
        blocks,
        leaks: leak_chart,
    };
    (view, data)
}

/// Flags the bands that are memory allocated before the recording (the
/// sites `Names::before_recording_site` made, as labelled by `by`).
fn mark_before_recording(
    names: &crate::model::Names,
    memory: &Memory,
    by: GroupBy,
    filter: &crate::analysis::FrameFilter,
    tl: &mut timeline::Timeline,
) {
    let mut seen = std::collections::HashSet::new();
    for id in &memory.live_at_start {
        let Some(a) = memory.allocations.get(id.index()) else {
            continue;
        };
        if !seen.insert(a.site)
            || names
                .before_recording_op(names.site_of(a.site).op)
                .is_none()
        {
            continue;
        }
        let key = escape::label(&group::label(names, a.site, by, filter));
        if let Some(band) = tl.bands.iter_mut().find(|b| b.key == key) {
            band.pre = true;
        }
    }
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

pub(super) fn diff_tree(base: &Profile, new: &Profile, options: &RenderOptions) -> Node {
    let mut tree = Tree::default();
    for (side, profile) in [(0, base), (1, new)] {
        for memory in options.analysis.selected(profile) {
            tree.add_sites(
                &profile.names,
                &at_peak(memory, options.analysis.ties),
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
            key: escape::label(&r.key),
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

/// What the page says the bands and rows are grouped by: for categories,
/// also who named them where memtool or the user did (docs/categories.md).
fn group_by_words(memory: &Memory, by: GroupBy) -> String {
    let name = by.name().replace('_', " ");
    if by != GroupBy::Category {
        return name;
    }
    let named_by = |source: CategorySource| {
        memory
            .category_sources
            .iter()
            .filter(|&(_, &s)| s == source)
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
    };
    let (inferred, user) = (
        named_by(CategorySource::Inferred),
        named_by(CategorySource::User),
    );
    let mut said = Vec::new();
    if !inferred.is_empty() {
        said.push("inferred".to_string());
    }
    if !user.is_empty() {
        said.push(format!("yours: {}", user.join(", ")));
    }
    if said.is_empty() {
        name
    } else {
        format!("{name} ({})", said.join("; "))
    }
}
