//! A static timeline image (`render --format svg`) for READMEs and tickets
//! that strip HTML: the same downsampled stacked areas as the page, one panel
//! per memory, no script.

use std::fmt::Write;

use crate::analysis::group::GroupBy;
use crate::analysis::{display_id, point_label, PeakFacts};
use crate::model::{Memory, Profile};
use crate::report::units;

use super::escape::xml;
use super::marks::{label_rows, landmark_marks, phase_marks, relative_label, SECTIONS};
use super::page::{LandmarkMark, PhaseMark};
use super::timeline::{self, Timeline};
use super::{Inputs, RenderOptions};

const WIDTH: f64 = 1000.0;
const PLOT_HEIGHT: f64 = 240.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 16.0;
const TITLE: f64 = 30.0;
const AXIS: f64 = 24.0;
const LEGEND_ROW: f64 = 16.0;
/// Rows of landmark labels under the axis, and their height.
const LANDMARK_ROWS: usize = 4;
const LANDMARK_ROW: f64 = 13.0;

/// One memory's panel.
pub(super) struct Panel<'a> {
    pub title: String,
    pub timeline: &'a Timeline,
    /// First and last x label (snapshot names, times).
    pub x_labels: [String; 2],
    pub peak_x: i64,
    /// Height of the peak mark (the replayed total there).
    pub peak_bytes: u64,
    /// The peak as reported (the allocator's figure when it gives one).
    pub peak_text: String,
    pub peak_label: String,
    pub capacity: Option<u64>,
    /// The training phases, drawn as a strip along the top of the plot.
    pub phases: Vec<PhaseMark>,
    /// The landmarks named under the axis.
    pub landmarks: Vec<LandmarkMark>,
}

/// A static SVG of every memory's timeline (for `render A B`, base then new).
pub fn svg(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let list: Vec<(&str, &Profile)> = match inputs {
        Inputs::One(p) => vec![("", p)],
        Inputs::Diff { base, new } => vec![("base: ", base), ("new: ", new)],
    };
    let mut timelines = Vec::new();
    let mut not_drawn = 0;
    for (role, profile) in list {
        let with_peaks: Vec<(&Memory, PeakFacts)> = options
            .analysis
            .selected(profile)
            .filter_map(|m| PeakFacts::of(m, options.analysis.ties).map(|f| (m, f)))
            .collect();
        // As the page: past [`SECTIONS`] memories, the largest peaks only
        // (in profile order), so the image's size is bounded.
        let mut drawn = vec![true; with_peaks.len()];
        if with_peaks.len() > SECTIONS {
            let peaks: Vec<(&str, u64)> = with_peaks
                .iter()
                .map(|(m, f)| (m.id.as_str(), f.peak.bytes))
                .collect();
            drawn.fill(false);
            for i in crate::analysis::order_by_peak(&peaks).all().take(SECTIONS) {
                drawn[i] = true;
            }
            not_drawn += with_peaks.len() - SECTIONS;
        }
        for ((memory, facts), _) in with_peaks.into_iter().zip(drawn).filter(|(_, d)| *d) {
            let (by, tl) =
                timeline::of_memory(&profile.names, memory, facts.point().index, options);
            let landmarks = landmark_marks(&profile.names, memory, &options.analysis.frames, tl.x0);
            timelines.push((role, memory, facts, by, tl, landmarks));
        }
    }
    let panels: Vec<Panel<'_>> = timelines
        .iter()
        .map(|(role, memory, facts, by, tl, landmarks)| {
            let mut p = panel(role, memory, facts, *by, tl);
            p.landmarks = landmarks.clone();
            p
        })
        .collect();
    // A line under the panels says what is missing.
    let note = (not_drawn > 0).then(|| {
        format!(
            "{not_drawn} more memories not drawn: the image draws the {SECTIONS} with the \
             largest peaks (render's page lists them all)"
        )
    });
    document(&panels, note.as_deref())
}

/// The panel of `memory`'s timeline `tl`, grouped `by`, with the peak of
/// `facts`; `role` before its name (`base: `).
pub(super) fn panel<'a>(
    role: &str,
    memory: &Memory,
    facts: &PeakFacts,
    by: GroupBy,
    tl: &'a Timeline,
) -> Panel<'a> {
    let (reported, peak) = (facts.peak, facts.point());
    let label = |col: Option<usize>| {
        col.and_then(|c| Some((*tl.top_points.get(c)?, tl.x.get(c)?.wrapping_add(tl.x0))))
            .map_or(String::new(), |(i, at)| {
                relative_label(memory, at, None).unwrap_or_else(|| point_label(memory, i, at))
            })
    };
    let peak_label =
        relative_label(memory, peak.at, facts.step).unwrap_or_else(|| facts.label.clone());
    Panel {
        title: format!(
            "{role}{} — peak {} at {peak_label} (stacked by {})",
            display_id(&memory.id),
            units::bytes(reported.bytes),
            by.name().replace('_', " ")
        ),
        timeline: tl,
        x_labels: [label(Some(0)), label(tl.x.len().checked_sub(1))],
        peak_x: peak.at.wrapping_sub(tl.x0),
        peak_bytes: peak.bytes,
        peak_text: units::bytes(reported.bytes),
        peak_label,
        capacity: memory.capacity,
        phases: phase_marks(memory, tl.x0, tl.x.len()),
        landmarks: Vec::new(),
    }
}

fn fmt(v: f64) -> String {
    format!("{v:.1}")
}

/// Byte ticks at a round step of the largest binary unit below `max`.
fn tick_step(max: u64) -> u64 {
    let mut unit: u64 = 1;
    while max / unit >= 1024 && unit < 1 << 50 {
        unit *= 1024;
    }
    let raw = (max as f64 / unit as f64 / 4.0).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|s| s * p)
        .find(|&s| raw <= s)
        .unwrap_or(10.0 * p);
    ((step * unit as f64).round() as u64).max(1)
}

pub(super) fn document(panels: &[Panel<'_>], note: Option<&str>) -> String {
    let heights: Vec<f64> = panels
        .iter()
        .map(|p| {
            let rows = p.timeline.bands.len().div_ceil(2) as f64;
            TITLE + PLOT_HEIGHT + AXIS + landmark_lane(p) + rows * LEGEND_ROW + 20.0
        })
        .collect();
    let panels_height: f64 = heights.iter().sum();
    let total: f64 = (panels_height + if note.is_some() { 30.0 } else { 0.0 }).max(40.0);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {h}\" width=\"{WIDTH}\" height=\"{h}\" \
         font-family=\"system-ui, sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n",
        h = fmt(total)
    );
    if panels.is_empty() {
        out.push_str(
            "<text x=\"10\" y=\"24\" fill=\"#333\">No memory holds any allocation.</text>\n",
        );
    }
    let mut top = 0.0;
    for (panel, height) in panels.iter().zip(&heights) {
        write_panel(&mut out, panel, top);
        top += height;
    }
    if let Some(note) = note {
        let _ = writeln!(
            out,
            "<text x=\"10\" y=\"{}\" fill=\"#333\">{}</text>",
            fmt(panels_height + 20.0),
            xml(note)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn write_panel(out: &mut String, p: &Panel<'_>, top: f64) {
    let t = p.timeline;
    let n = t.x.len();
    let plot_top = top + TITLE;
    let plot_bottom = plot_top + PLOT_HEIGHT;
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"600\" fill=\"#1d2127\">{}</text>",
        LEFT,
        fmt(top + 20.0),
        xml(&p.title)
    );
    let mut max = t.hi.iter().copied().max().unwrap_or(0);
    let cap_on_scale = p.capacity.filter(|&c| c as f64 <= max.max(1) as f64 * 1.5);
    if let Some(c) = cap_on_scale {
        max = max.max(c);
    }
    let step = tick_step(max.max(1));
    let y_max = (((max as f64 * 1.04) / step as f64).ceil() as u64)
        .max(1)
        .saturating_mul(step);
    // Each column holds until the next; the last for one average column.
    let (x0, x1) = match (t.x.first(), t.x.last()) {
        (Some(&a), Some(&b)) if b > a => {
            (a as f64, b as f64 + (b as f64 - a as f64) / (n - 1) as f64)
        }
        (Some(&a), _) => (a as f64 - 0.5, a as f64 + 0.5),
        _ => (0.0, 1.0),
    };
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT);
    let sy = |b: u64| plot_top + (1.0 - b as f64 / y_max as f64) * PLOT_HEIGHT;
    let mut y = 0;
    while y <= y_max {
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#e6e9ee\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#5d6673\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            fmt(sy(y) + 4.0),
            xml(&units::bytes(y)),
            yy = fmt(sy(y)),
        );
        let Some(next) = y.checked_add(step) else {
            break;
        };
        y = next;
    }
    // Bands, bottom up; a single point is drawn across the whole width.
    let xs: Vec<f64> = if n == 1 {
        vec![sx(x0), sx(x1)]
    } else {
        t.x.iter().map(|&x| sx(x as f64)).collect()
    };
    let value = |band: &[u64], i: usize| if n == 1 { band[0] } else { band[i] };
    // Memory holds its value until the next point: steps, not slopes.
    let next_x = |i: usize| xs.get(i + 1).copied().unwrap_or(sx(x1));
    let mut below = vec![0u64; xs.len()];
    for band in &t.bands {
        let mut d = String::from("M");
        let mut above = below.clone();
        for (i, (&x, a)) in xs.iter().zip(above.iter_mut()).enumerate() {
            *a = a.saturating_add(value(&band.v, i));
            if i > 0 {
                d.push('L');
            }
            let y = fmt(sy(*a));
            let _ = write!(d, "{},{y}L{},{y}", fmt(x), fmt(next_x(i)));
        }
        for (i, &x) in xs.iter().enumerate().rev() {
            let y = fmt(sy(below[i]));
            let _ = write!(d, "L{},{y}L{},{y}", fmt(next_x(i)), fmt(x));
        }
        d.push('Z');
        let _ = writeln!(
            out,
            "<path d=\"{d}\" fill=\"{c}\" fill-opacity=\"0.9\" stroke=\"{c}\" stroke-width=\"0.5\"><title>{}</title></path>",
            xml(&band.key),
            c = band.color
        );
        below = above;
    }
    if n > 1 && t.lo.iter().zip(&t.hi).any(|(l, h)| l < h) {
        let pts: Vec<String> = xs
            .iter()
            .zip(&t.lo)
            .enumerate()
            .map(|(i, (&x, &l))| {
                format!("{x},{y} {},{y}", fmt(next_x(i)), x = fmt(x), y = fmt(sy(l)))
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1d2127\" stroke-opacity=\"0.55\" stroke-dasharray=\"2 2\"/>",
            pts.join(" ")
        );
    }
    if let Some(c) = cap_on_scale {
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#1d2127\" stroke-dasharray=\"6 4\"/>",
            WIDTH - RIGHT,
            yy = fmt(sy(c))
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy}\" y2=\"{yy}\" stroke=\"#d5dae1\"/>",
        WIDTH - RIGHT,
        yy = fmt(plot_bottom)
    );
    // Training phases: a strip along the top of the plot, named where there
    // is room (the page draws the same strip above its chart).
    for ph in &p.phases {
        let (a, b) = (
            sx(ph.start as f64).clamp(LEFT, WIDTH - RIGHT),
            sx(ph.end as f64).clamp(LEFT, WIDTH - RIGHT),
        );
        let w = (b - a).max(1.0);
        let _ = writeln!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"10\" fill=\"{}\" fill-opacity=\"0.85\"><title>{}</title></rect>",
            fmt(a),
            fmt(plot_top),
            fmt(w),
            ph.color,
            ph.phase
        );
        if w > 6.5 * ph.phase.len() as f64 + 6.0 {
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" font-size=\"9\" fill=\"#1d2127\">{}</text>",
                fmt(a + 3.0),
                fmt(plot_top + 8.0),
                ph.phase
            );
        }
    }
    let px = if n == 1 {
        sx((x0 + x1) / 2.0)
    } else {
        sx(p.peak_x as f64)
    };
    let right = px > WIDTH * 0.75;
    let _ = writeln!(
        out,
        "<line x1=\"{x}\" x2=\"{x}\" y1=\"{}\" y2=\"{}\" stroke=\"#c0392b\" stroke-width=\"1.5\"/><text x=\"{}\" y=\"{}\" fill=\"#c0392b\" font-weight=\"600\" text-anchor=\"{}\">{}</text>",
        fmt(sy(p.peak_bytes)),
        fmt(plot_bottom),
        fmt(if right { px - 6.0 } else { px + 6.0 }),
        // Under the phase strip, whose names it would cross.
        fmt((sy(p.peak_bytes) - 6.0).max(plot_top + if p.phases.is_empty() { 10.0 } else { 22.0 })),
        if right { "end" } else { "start" },
        xml(&format!("peak {} at {}", p.peak_text, p.peak_label)),
        x = fmt(px),
    );
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"{y}\" fill=\"#5d6673\">{}</text><text x=\"{}\" y=\"{y}\" text-anchor=\"end\" fill=\"#5d6673\">{}</text>",
        xml(&p.x_labels[0]),
        WIDTH - RIGHT,
        if n > 1 { xml(&p.x_labels[1]) } else { String::new() },
        y = fmt(plot_bottom + 16.0),
    );
    write_landmarks(out, p, &sx, &sy, plot_top, plot_bottom);
    let legend_top = plot_bottom + AXIS + landmark_lane(p) + 8.0;
    for (i, band) in t.bands.iter().enumerate() {
        let col = (i % 2) as f64;
        let row = (i / 2) as f64;
        let x = LEFT + col * (WIDTH - LEFT) / 2.0;
        let y = legend_top + row * LEGEND_ROW;
        // Shortened as the page's legend and the tables shorten theirs: the
        // frame's function, file name and line kept; the full key on hover.
        let key = if band.short.is_empty() {
            crate::report::shorten(&band.key, 70)
        } else {
            crate::report::shorten(&band.short, 70)
        };
        let _ = writeln!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" rx=\"2\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" fill=\"#1d2127\">{}<title>{}</title></text>",
            fmt(x),
            fmt(y - 9.0),
            band.color,
            fmt(x + 14.0),
            fmt(y),
            xml(&key),
            xml(&band.key)
        );
    }
}

/// The height of a panel's landmark labels under its axis.
fn landmark_lane(p: &Panel<'_>) -> f64 {
    if p.landmarks.is_empty() {
        0.0
    } else {
        LANDMARK_ROWS as f64 * LANDMARK_ROW + 4.0
    }
}

/// Landmarks: a tick on the plot's bottom edge at each, the floor a dotted
/// line across, and their names in rows under the axis labels, each in the
/// first row where it overlaps none ([`label_rows`]), else left out (the
/// tick keeps the whole label as its title).
fn write_landmarks(
    out: &mut String,
    p: &Panel<'_>,
    sx: &dyn Fn(f64) -> f64,
    sy: &dyn Fn(u64) -> f64,
    plot_top: f64,
    plot_bottom: f64,
) {
    let lane_top = plot_bottom + AXIS;
    // 10 px type: about 5.6 px a character.
    let xs: Vec<(f64, f64)> = p
        .landmarks
        .iter()
        .map(|l| {
            let x = sx(l.at as f64).clamp(LEFT, WIDTH - RIGHT);
            (x, 5.6 * l.text.chars().count() as f64)
        })
        .collect();
    let rows = label_rows(&xs, LANDMARK_ROWS, 6.0, (LEFT, WIDTH - RIGHT));
    for ((l, &(tick, _)), place) in p.landmarks.iter().zip(&xs).zip(rows) {
        if l.kind == "floor" {
            let _ = writeln!(
                out,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#1d2127\" stroke-opacity=\"0.6\" stroke-dasharray=\"1 3\"><title>{}</title></line>",
                WIDTH - RIGHT,
                xml(&l.title),
                y = fmt(sy(l.bytes).max(plot_top)),
            );
        }
        let _ = writeln!(
            out,
            "<line x1=\"{x}\" x2=\"{x}\" y1=\"{}\" y2=\"{}\" stroke=\"#1d2127\" stroke-width=\"1.5\"><title>{}</title></line>",
            fmt(plot_bottom - 6.0),
            fmt(plot_bottom),
            xml(&l.title),
            x = fmt(tick),
        );
        let Some((row, x)) = place else {
            continue;
        };
        let _ = writeln!(
            out,
            "<text class=\"landmark\" x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#1d2127\">{}<title>{}</title></text>",
            fmt(x),
            fmt(lane_top + LANDMARK_ROW * (row as f64 + 1.0) - 2.0),
            xml(&l.text),
            xml(&l.title)
        );
    }
}
