//! `leaks`: groups whose live bytes grow over repetitions of the same work
//! (the snapshots of a series, the ends of steps), net of what other groups
//! freed meanwhile, told apart into steady growth (still growing at the end:
//! a leak), bounded growth (grew, then stopped: a cache or pool that filled
//! up), growth once (state made once, or one pass of a recording without
//! repetitions) and handovers (bytes that moved from one group to another).

use std::io::Write;

use serde::Serialize;

use std::collections::BTreeMap;

use crate::model::{Memory, Names, Profile};
use crate::report::{units, Cell, Report, Table};

use super::gate::{GateResult, Limit};
use super::group::{self, FrameFilter, SiteTotals};
use super::series::{self, GroupSeries};
use super::steps::{self, StepStats};
use super::{display_id, point_label, replay, MemoryHeader, Options, Provenance};

/// The JSON schema name and version of `leaks`' document.
pub const SCHEMA: &str = "memtool/leaks/v1";

/// Points sampled from an event stream (snapshots are all used).
const EVENT_STREAM_POINTS: usize = 16;

/// What `leaks` reports: per memory, the groups whose live bytes grew over the points compared.
#[derive(Debug, Serialize)]
pub struct LeaksReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The inputs and warnings.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// One entry per memory (one per device for a series of files that
    /// each record it whole).
    pub memories: Vec<MemoryLeaks>,
    /// With `--fail-on-leak`: the gate's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateResult>,
}

/// Growth in one memory.
#[derive(Debug, Serialize)]
pub struct MemoryLeaks {
    /// Which memory.
    #[serde(flatten)]
    pub header: MemoryHeader,
    /// The points compared, in order.
    pub points: Vec<String>,
    /// Total live bytes at each point.
    pub total_bytes: Vec<u64>,
    /// What the points are: `snapshot`, `step` (the end of each step) or
    /// `event` (evenly spaced events of a stream without steps).
    pub point_kind: &'static str,
    /// Whether the steps are the forward → backward cycles the phases show,
    /// the file marking none (`Memory::steps_from_phases`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub steps_from_phases: bool,
    /// One line: the strongest finding, or why there is none, and what a
    /// point is.
    pub verdict: String,
    /// Whether a group grows steadily (a leak): what `--fail-on-leak` fails on.
    pub leaking: bool,
    /// The groups that grew: steady, bounded, once, handover, then by net
    /// bytes grown.
    pub findings: Vec<LeakFinding>,
    /// Allocations and frees per step, and what each step left in use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStats>,
    /// Allocations made inside the profile and still live at its end, by
    /// group and step, largest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub never_freed: Vec<NeverFreed>,
}

/// Allocations made in a step and still live at the end.
#[derive(Debug, Serialize)]
pub struct NeverFreed {
    /// The group (call stack, else op and shape).
    pub key: String,
    /// The step they were made in.
    pub step: Option<i64>,
    /// Their bytes.
    pub bytes: u64,
    /// How many buffers.
    pub count: u64,
}

/// How a group's live bytes grew, net of what other groups freed over the
/// same intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Growth {
    /// Grew over repetitions of the same work (snapshots of a series, step
    /// ends) and still growing over the last quarter of them: a leak.
    Steady,
    /// Grew over several repetitions, then stayed flat or fell: a cache or
    /// pool that filled up.
    Bounded,
    /// Grew in one interval only (state initialised, a cache made once), or
    /// over one recording whose points are not repetitions of the same work
    /// (the activations of a single pass).
    Once,
    /// Grew, but other groups freed as much over the same intervals: the
    /// bytes moved (a buffer re-made at another stack, optimizer state
    /// replacing blocks allocated before the recording), nothing accumulated.
    Handover,
}

impl Growth {
    /// The name JSON, CSV and the tables use.
    pub fn name(self) -> &'static str {
        match self {
            Growth::Steady => "steady",
            Growth::Bounded => "bounded",
            Growth::Once => "once",
            Growth::Handover => "handover",
        }
    }
}

/// One group whose live bytes grew.
#[derive(Debug, Serialize)]
pub struct LeakFinding {
    /// The call stack (user frames unless `--all-frames`); for allocations
    /// without one, their op and shape.
    pub key: String,
    /// How it grew.
    pub growth: Growth,
    /// Net growth: what the group gained from the first point to the last
    /// that other groups did not free over the same intervals (0 for a
    /// handover).
    pub growth_bytes: u64,
    /// The group's own live bytes at the last point minus at the first.
    pub gross_growth_bytes: u64,
    /// Net growth per point interval over the whole series.
    pub bytes_per_point: u64,
    /// Intervals in which the group grew by a share of its net growth (at
    /// least a quarter of the average per interval).
    pub increases: usize,
    /// For bounded and once: the point after which it did not grow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// The group's live bytes at each point compared.
    pub bytes: Vec<u64>,
    /// The group's live buffers at each point compared.
    pub counts: Vec<u64>,
}

/// What the points of a memory's series are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PointKind {
    /// Snapshots of a series (files, or instants): repetitions.
    Snapshot,
    /// The ends of the profile's steps: repetitions.
    Step,
    /// Evenly spaced events of one recording without steps: not repetitions.
    Event,
}

impl PointKind {
    fn name(self) -> &'static str {
        match self {
            PointKind::Snapshot => "snapshot",
            PointKind::Step => "step",
            PointKind::Event => "event",
        }
    }

    /// Whether the points are repetitions of the same work, the only
    /// points over which growth can be a leak.
    fn repeats(self) -> bool {
        self != PointKind::Event
    }
}

/// The points a memory (or a series of memories) is compared at.
struct Points {
    kind: PointKind,
    /// The steps are the phases' cycles (the file marks none).
    steps_from_phases: bool,
    labels: Vec<String>,
    per_point: Vec<SiteTotals>,
}

/// One memory's points: its snapshots, its step ends, or evenly spaced
/// events.
fn points_of(memory: &Memory) -> Points {
    let step_ends = series::step_end_points(memory);
    let (points, kind) = if replay::uses_instants(memory) {
        (
            series::sample_points(memory, EVENT_STREAM_POINTS),
            PointKind::Snapshot,
        )
    } else if step_ends.len() >= 2 {
        (step_ends.iter().map(|&(_, p)| p).collect(), PointKind::Step)
    } else {
        (
            series::sample_points(memory, EVENT_STREAM_POINTS),
            PointKind::Event,
        )
    };
    let labels = points
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            if kind == PointKind::Step {
                if let Some((step, _)) = step_ends.get(i) {
                    return format!("step {step}");
                }
            }
            let at = memory
                .instants
                .get(p)
                .map(|i| i.at)
                .or_else(|| {
                    p.checked_sub(1)
                        .and_then(|e| memory.events.get(e))
                        .map(|e| e.at)
                })
                .or_else(|| memory.events.first().map(|e| e.at))
                .unwrap_or(0);
            point_label(memory, p, at)
        })
        .collect();
    Points {
        kind,
        steps_from_phases: kind == PointKind::Step && memory.steps_from_phases,
        labels,
        per_point: series::site_totals_at(memory, &points),
    }
}

/// A series of files, each a whole recording of the same device (or the
/// same program in several runs): one point per file, what was live at its
/// end, labelled by the file.
fn points_of_files(profile: &Profile, parts: &[&Memory]) -> Points {
    Points {
        kind: PointKind::Snapshot,
        steps_from_phases: false,
        labels: parts
            .iter()
            .map(|m| match &m.series {
                Some(s) => s.file.clone(),
                None => profile
                    .inputs
                    .get(m.input)
                    .map_or_else(|| m.id.clone(), |i| crate::input::file_name(&i.path)),
            })
            .collect(),
        per_point: parts
            .iter()
            .flat_map(|m| series::site_totals_at(m, &[m.events.len()]))
            .collect(),
    }
}

/// The memories `leaks` compares, each a series of one or more memories
/// with the key it is shown by when several: the files of a series that
/// record one device whole (`Memory::series`) are one series; a compiled
/// program read from several runs (files) is one, its runs paired with the
/// first run's programs as `diff` pairs them (`program_match`: name, then
/// signature, then order; never the compile counter); every other memory is
/// a series of itself.
fn series_of<'a>(selected: &[&'a Memory]) -> Vec<(Option<String>, Vec<&'a Memory>)> {
    let mut runs: Vec<usize> = selected
        .iter()
        .filter(|m| m.program.is_some())
        .map(|m| m.input)
        .collect();
    runs.sort_unstable();
    runs.dedup();
    let joined_programs = runs.len() > 1;
    let mut programs: Vec<(Option<String>, Vec<&Memory>)> = Vec::new();
    if joined_programs {
        let of_run = |run: usize| -> Vec<&'a Memory> {
            selected
                .iter()
                .copied()
                .filter(|m| m.program.is_some() && m.input == run)
                .collect()
        };
        let reference = of_run(runs[0]);
        for &run in &runs {
            for pair in super::program_match::pair(&reference, &of_run(run)) {
                let Some(memory) = pair.new else { continue };
                match programs
                    .iter_mut()
                    .find(|(k, _)| k.as_ref() == Some(&pair.key))
                {
                    Some((_, series)) => series.push(memory),
                    None => programs.push((Some(pair.key), vec![memory])),
                }
            }
        }
    }
    let mut out: Vec<Vec<&Memory>> = Vec::new();
    for &memory in selected {
        if joined_programs && memory.program.is_some() {
            continue;
        }
        let joined = memory.series.as_ref().and_then(|part| {
            out.iter_mut().find(|s| {
                s[0].series
                    .as_ref()
                    .is_some_and(|first| first.device == part.device)
            })
        });
        match joined {
            Some(series) => series.push(memory),
            None => out.push(vec![memory]),
        }
    }
    let mut out: Vec<(Option<String>, Vec<&Memory>)> = out
        .into_iter()
        .map(|s| {
            let key = (s.len() > 1)
                .then(|| s[0].series.as_ref().map(|p| p.device.clone()))
                .flatten();
            (key, s)
        })
        .collect();
    out.extend(programs);
    out
}

/// The groups of each memory of `profile` whose live bytes grew, over its snapshots or step boundaries.
pub fn leaks(profile: &Profile, options: &Options) -> LeaksReport {
    let names = &profile.names;
    let selected: Vec<&Memory> = options.selected(profile).collect();
    let mut memories = Vec::new();
    for (key, parts) in series_of(&selected) {
        let memory = parts[0];
        let points = if parts.len() > 1 {
            points_of_files(profile, &parts)
        } else {
            points_of(memory)
        };
        let total_bytes: Vec<u64> = points
            .per_point
            .iter()
            .map(|m| m.values().fold(0u64, |s, t| s.saturating_add(t.bytes)))
            .collect();
        let groups = series::group_series_by(&points.per_point, |site| {
            group::stack_or_op_shape(names, site, &options.frames)
        });
        let net = net_growth(&groups);
        let mut findings: Vec<LeakFinding> = groups
            .into_iter()
            .zip(net)
            .filter_map(|(g, net)| classify(g, &net, &points.labels, points.kind.repeats()))
            .collect();
        findings.sort_by(|a, b| {
            a.growth
                .cmp(&b.growth)
                .then(b.growth_bytes.cmp(&a.growth_bytes))
                .then(b.gross_growth_bytes.cmp(&a.gross_growth_bytes))
                .then_with(|| a.key.cmp(&b.key))
        });
        let verdict = verdict(&findings, &points, &total_bytes);
        let leaking = findings.iter().any(|f| f.growth == Growth::Steady);
        let (steps, never_freed) = if parts.len() > 1 {
            (Vec::new(), Vec::new())
        } else {
            (
                steps::per_step(memory),
                never_freed(names, memory, &options.frames),
            )
        };
        let mut header = MemoryHeader::of(memory);
        if let Some(key) = key.filter(|_| parts.len() > 1) {
            header.id = key;
        }
        memories.push(MemoryLeaks {
            header,
            points: points.labels,
            total_bytes,
            point_kind: points.kind.name(),
            steps_from_phases: points.steps_from_phases,
            verdict,
            leaking,
            findings,
            steps,
            never_freed,
        });
    }
    LeaksReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        memories,
        gate: None,
    }
}

impl LeaksReport {
    /// Whether any memory has a group that was still growing at the end.
    pub fn has_steady_growth(&self) -> bool {
        self.memories.iter().any(|m| m.leaking)
    }

    /// Applies `--fail-on-leak`: the gate fails when some group grows
    /// steadily. Its result goes into the report.
    pub fn check_gate(&mut self) -> &GateResult {
        let leaking: Vec<&MemoryLeaks> = self.memories.iter().filter(|m| m.leaking).collect();
        let limit = Limit::SteadyGroups(0);
        let rule = "a group still growing, net, over 3 or more snapshots or step ends";
        let message = if leaking.is_empty() {
            let compared: Vec<String> = self
                .memories
                .iter()
                .map(|m| {
                    format!(
                        "{} ({})",
                        display_id(&m.header.id),
                        counted(m.points.len(), m.point_kind)
                    )
                })
                .collect();
            format!(
                "leak gate passed: no steady growth in {} (the gate fails on {rule})",
                if compared.is_empty() {
                    "no memory".to_string()
                } else {
                    compared.join(", ")
                }
            )
        } else {
            let found: Vec<String> = leaking
                .iter()
                .filter_map(|m| {
                    let f = m.findings.first()?;
                    Some(format!(
                        "{} +{} net over {} ({})",
                        display_id(&m.header.id),
                        units::exact_bytes(f.growth_bytes),
                        counted(m.points.len(), m.point_kind),
                        shown_key(&f.key)
                    ))
                })
                .collect();
            format!(
                "leak gate FAILED: steady growth in {} (the gate fails on {rule})",
                found.join("; ")
            )
        };
        let measured = leaking
            .iter()
            .flat_map(|m| m.findings.iter().filter(|f| f.growth == Growth::Steady))
            .fold(0u64, |s, f| s.saturating_add(f.growth_bytes));
        let failed_memories = leaking.iter().map(|m| m.header.id.clone()).collect();
        self.gate.insert(GateResult {
            gate: "fail_on_leak",
            passed: leaking.is_empty(),
            limit,
            measured_bytes: i64::try_from(measured).unwrap_or(i64::MAX),
            measured_percent: None,
            failed_memories,
            group: None,
            message,
        })
    }
}

/// Allocations made during the profile (not live at its start) that are
/// still live after the last event.
fn never_freed(names: &Names, memory: &Memory, filter: &FrameFilter) -> Vec<NeverFreed> {
    if replay::uses_instants(memory) || memory.events.is_empty() {
        return Vec::new();
    }
    let end = memory.events.len();
    let made_at = replay::allocated_at(memory, end);
    let mut groups: BTreeMap<(String, Option<i64>), (u64, u64)> = BTreeMap::new();
    for id in replay::live_at(memory, end) {
        let Some(at) = made_at.get(id.index()).copied().flatten() else {
            continue;
        };
        let a = memory.allocation(id);
        let step = memory.step_at(at).map(|s| s.id);
        let g = groups
            .entry((group::stack_or_op_shape(names, a.site, filter), step))
            .or_default();
        g.0 = g.0.saturating_add(a.bytes);
        g.1 = g.1.saturating_add(u64::from(a.count));
    }
    let mut rows: Vec<NeverFreed> = groups
        .into_iter()
        .map(|((key, step), (bytes, count))| NeverFreed {
            key,
            step,
            bytes,
            count,
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    rows
}

/// Each group's rise from `before` to `after` net of what the other groups
/// freed meanwhile. What the shrinking groups freed cancels the largest
/// rises first: a buffer that moved from one group to another is a rise as
/// large as the fall, and is no growth at all. The net rises add up to the
/// rise of the total, or to 0 when the total fell.
fn net_rises(groups: &[GroupSeries], before: usize, after: usize) -> Vec<u64> {
    let mut net = vec![0u64; groups.len()];
    let mut rising: Vec<(u64, usize)> = Vec::new();
    let mut freed = 0u64;
    for (g, series) in groups.iter().enumerate() {
        let (b, a) = (series.bytes[before], series.bytes[after]);
        if a > b {
            rising.push((a - b, g));
        } else {
            freed = freed.saturating_add(b - a);
        }
    }
    rising.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (rise, g) in rising {
        let cancelled = rise.min(freed);
        freed -= cancelled;
        net[g] = rise - cancelled;
    }
    net
}

/// Each group's net rise (`net_rises`) in each interval between points,
/// and over the whole series, first point to last.
pub fn net_growth(groups: &[GroupSeries]) -> Vec<NetGrowth> {
    let n = groups.first().map_or(0, |g| g.bytes.len());
    let mut out: Vec<NetGrowth> = vec![NetGrowth::default(); groups.len()];
    if n < 2 {
        return out;
    }
    for i in 0..n - 1 {
        for (g, rise) in net_rises(groups, i, i + 1).into_iter().enumerate() {
            out[g].per_interval.push(rise);
        }
    }
    for (g, rise) in net_rises(groups, 0, n - 1).into_iter().enumerate() {
        out[g].overall = rise;
    }
    out
}

/// A group's rises net of what the others freed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetGrowth {
    /// In each interval between consecutive points.
    pub per_interval: Vec<u64>,
    /// From the first point to the last.
    pub overall: u64,
}

/// Classifies one group's series given its net rise in each interval
/// ([`net_growth`]); `None` when it holds no more at the end than at the
/// start. `repeats`: the points are repetitions of the same work.
pub fn classify(
    g: GroupSeries,
    net: &NetGrowth,
    labels: &[String],
    repeats: bool,
) -> Option<LeakFinding> {
    let n = g.bytes.len();
    let (first, last) = (*g.bytes.first()?, *g.bytes.last()?);
    if n < 2 || last <= first {
        return None;
    }
    let gross = last - first;
    // Growth must be net over each interval (a rise the same interval freed
    // elsewhere is a move) and over the whole series (a rise that other
    // groups' falls in other intervals paid for is a move too).
    let growth_bytes = net
        .per_interval
        .iter()
        .fold(0u64, |s, &r| s.saturating_add(r))
        .min(net.overall)
        .min(gross);
    let net = &net.per_interval;
    let intervals = n - 1;
    // A rise counts when it is a quarter of the average or more: a wiggle of
    // a few bytes at the end is not "still growing".
    let counts = |rise: u64| {
        rise > 0 && u128::from(rise) * 4 * intervals as u128 >= u128::from(growth_bytes)
    };
    let increases = net.iter().filter(|&&r| counts(r)).count();
    let last_increase = net.iter().rposition(|&r| counts(r)).map_or(0, |i| i + 1);
    // Flat (or falling) over the last quarter of the intervals, and at least
    // two of them, means the growth stopped.
    let tail = (intervals / 4).max(2);
    let stopped = n >= 4 && last_increase + tail < n;
    let growth = if growth_bytes == 0 {
        Growth::Handover
    } else if !repeats || increases <= 1 {
        Growth::Once
    } else if stopped {
        Growth::Bounded
    } else {
        Growth::Steady
    };
    let stopped_at = match growth {
        Growth::Bounded | Growth::Once if repeats => labels.get(last_increase).cloned(),
        _ => None,
    };
    Some(LeakFinding {
        growth,
        growth_bytes,
        gross_growth_bytes: gross,
        bytes_per_point: growth_bytes / intervals as u64,
        increases,
        stopped_at,
        key: g.key,
        bytes: g.bytes,
        counts: g.counts,
    })
}

/// What the points of a `point_kind` are called, counted.
fn plural(point_kind: &str) -> &'static str {
    match point_kind {
        "snapshot" => "snapshots",
        "step" => "step ends",
        _ => "points",
    }
}

/// `n` points of a `point_kind`, counted: `1 snapshot`, `6 step ends`.
fn counted(n: usize, point_kind: &str) -> String {
    let name = plural(point_kind);
    match (n, name.strip_suffix('s')) {
        (1, Some(one)) => format!("1 {one}"),
        _ => format!("{n} {name}"),
    }
}

/// What one point is, for the verdict line.
fn point_meaning(points: &Points) -> &'static str {
    match points.kind {
        PointKind::Snapshot => "a point is one snapshot of the series",
        PointKind::Step if points.steps_from_phases => {
            "a point is the end of a step; the file marks no steps, so a step is a forward → \
             backward cycle of the training phases"
        }
        PointKind::Step => "a point is the end of a step",
        PointKind::Event => {
            "a point is an event of one recording without steps, not a repetition of the same \
             work; mark steps or give a series of snapshots to look for a leak"
        }
    }
}

/// Characters of a group's key in the verdict and gate lines, and of its
/// innermost frame there.
const VERDICT_KEY_CHARS: usize = 100;
const VERDICT_LEAF_CHARS: usize = 60;

/// A group's key in a verdict or gate line, as the tables show a frame: the
/// innermost frame's function, file name and line with the file's
/// directories cut (`step …/cs336_basics/optimizer.py:74`), then its
/// callers as they fit; the full key is the finding's.
fn shown_key(key: &str) -> String {
    let (leaf, callers) = match key.split_once(" <- ") {
        Some((leaf, callers)) => (leaf, Some(callers)),
        None => (key, None),
    };
    let leaf = crate::report::shorten(leaf, VERDICT_LEAF_CHARS);
    match callers {
        None => leaf,
        Some(callers) => {
            let room = VERDICT_KEY_CHARS.saturating_sub(leaf.chars().count() + 4);
            format!("{leaf} <- {}", crate::report::shorten(callers, room.max(1)))
        }
    }
}

fn verdict(findings: &[LeakFinding], points: &Points, total_bytes: &[u64]) -> String {
    let labels = &points.labels;
    if labels.len() < 2 {
        return "one point only: give a series of snapshots (memory1.prof memory2.prof ...) to look for growth".into();
    }
    let unit = match points.kind {
        PointKind::Snapshot => "snapshot",
        PointKind::Step => "step",
        PointKind::Event => "point",
    };
    let units_name = plural(points.kind.name());
    let n = labels.len();
    let first = labels.first().map(String::as_str).unwrap_or("");
    let last = labels.last().map(String::as_str).unwrap_or("");
    let meaning = point_meaning(points);
    let Some(f) = findings.first() else {
        return format!("no growth: no group holds more at {last} than at {first} ({n} {units_name}; {meaning})");
    };
    match f.growth {
        Growth::Steady => format!(
            "steady growth: +{} over {n} {units_name} ({}/{unit}), still growing at {last}, net of \
             what was freed elsewhere ({meaning}): {}",
            units::bytes(f.growth_bytes),
            units::bytes(f.bytes_per_point),
            shown_key(&f.key)
        ),
        Growth::Bounded => format!(
            "bounded growth only: +{} that stopped at {} (a cache or pool filling up, not a leak; \
             {n} {units_name}, {meaning}): {}",
            units::bytes(f.growth_bytes),
            f.stopped_at.as_deref().unwrap_or(""),
            shown_key(&f.key)
        ),
        Growth::Once if points.kind.repeats() => format!(
            "grew once: +{} by {}, then no further growth (state or a cache made once, not a \
             leak; {n} {units_name}, {meaning}): {}",
            units::bytes(f.growth_bytes),
            f.stopped_at.as_deref().unwrap_or(""),
            shown_key(&f.key)
        ),
        Growth::Once => format!(
            "grew once: +{} from {first} to {last} over one recording, not a leak ({n} \
             {units_name}; {meaning}): {}",
            units::bytes(f.growth_bytes),
            shown_key(&f.key)
        ),
        Growth::Handover => {
            let (t0, t1) = (
                total_bytes.first().copied().unwrap_or(0),
                total_bytes.last().copied().unwrap_or(0),
            );
            format!(
                "no net growth: {} live at {last} against {} at {first}; {} grew by +{} while \
                 other groups freed as much (a handover, not a leak; {n} {units_name}, {meaning})",
                units::bytes(t1),
                units::bytes(t0),
                shown_key(&f.key),
                units::bytes(f.gross_growth_bytes)
            )
        }
    }
}

impl LeaksReport {
    /// The memories given a growth table, in profile order: all of them up
    /// to [`super::LISTED_MEMORIES`], else that many, those that leak
    /// first, then those with findings, then the others.
    fn listed(&self) -> Vec<&MemoryLeaks> {
        if self.memories.len() <= super::LISTED_MEMORIES {
            return self.memories.iter().collect();
        }
        let mut order: Vec<usize> = (0..self.memories.len()).collect();
        let rank = |m: &MemoryLeaks| (!m.leaking, m.findings.is_empty());
        order.sort_by_key(|&i| rank(&self.memories[i]));
        order.truncate(super::LISTED_MEMORIES);
        order.sort_unstable();
        order.into_iter().map(|i| &self.memories[i]).collect()
    }
}

impl Report for LeaksReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        for m in self.listed() {
            let mut t = Table::ranked(
                format!(
                    "Growth — {} ({} points: {} … {})",
                    display_id(&m.header.id),
                    m.points.len(),
                    m.points.first().map(String::as_str).unwrap_or(""),
                    m.points.last().map(String::as_str).unwrap_or("")
                ),
                vec![
                    "stack",
                    "growth",
                    "growth_bytes",
                    "per_point",
                    "first",
                    "last",
                ],
            );
            for f in m.findings.iter() {
                t.rows.push(vec![
                    f.key.clone().into(),
                    Cell::Text(f.growth.name().into()),
                    Cell::Bytes(f.growth_bytes),
                    Cell::Bytes(f.bytes_per_point),
                    Cell::Bytes(f.bytes.first().copied().unwrap_or(0)),
                    Cell::Bytes(f.bytes.last().copied().unwrap_or(0)),
                ]);
            }
            tables.push(t);
        }
        tables
    }

    fn csv_table(&self) -> Table {
        let mut t = Table::new(
            "Growth",
            vec!["memory", "key", "growth", "point", "bytes", "count"],
        );
        for m in &self.memories {
            for f in &m.findings {
                for (i, label) in m.points.iter().enumerate() {
                    t.rows.push(vec![
                        m.header.id.clone().into(),
                        f.key.clone().into(),
                        Cell::Text(f.growth.name().into()),
                        label.clone().into(),
                        Cell::Bytes(f.bytes[i]),
                        Cell::Count(f.counts[i]),
                    ]);
                }
            }
        }
        t
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = super::memory_notes(
            self.memories
                .iter()
                .map(|m| (display_id(&m.header.id), m.verdict.clone()))
                .collect(),
        );
        let more = self.memories.len() - self.listed().len();
        if more > 0 {
            notes.push(format!(
                "+{more} more memories have no growth table: the {} listed are those that \
                 leak, then those with findings, then the first (JSON and CSV list every \
                 memory)",
                super::LISTED_MEMORIES
            ));
        }
        notes
    }

    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.provenance.warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(key: &str, bytes: &[u64]) -> GroupSeries {
        GroupSeries {
            key: key.into(),
            bytes: bytes.to_vec(),
            counts: vec![1; bytes.len()],
        }
    }

    fn labels(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("s{i}")).collect()
    }

    /// Classifies each group of `groups` net of the others.
    fn findings(groups: &[&[u64]], repeats: bool) -> Vec<Option<LeakFinding>> {
        let groups: Vec<GroupSeries> = groups
            .iter()
            .enumerate()
            .map(|(i, b)| series(&format!("g{i}"), b))
            .collect();
        let n = groups[0].bytes.len();
        let net = net_growth(&groups);
        groups
            .into_iter()
            .zip(net)
            .map(|(g, net)| classify(g, &net, &labels(n), repeats))
            .collect()
    }

    fn alone(bytes: &[u64]) -> Option<LeakFinding> {
        findings(&[bytes], true).pop().flatten()
    }

    #[test]
    fn growth_to_the_end_is_steady() {
        let f = alone(&[10, 20, 30, 40, 50, 60, 70, 80, 90]).unwrap();
        assert_eq!(
            (f.growth, f.growth_bytes, f.bytes_per_point, f.increases),
            (Growth::Steady, 80, 10, 8)
        );
        assert_eq!(f.stopped_at, None);
    }

    #[test]
    fn growth_that_stops_is_bounded() {
        let f = alone(&[10, 50, 90, 100, 100, 100, 100, 100]).unwrap();
        assert_eq!(f.growth, Growth::Bounded);
        assert_eq!(f.stopped_at.as_deref(), Some("s4"));
    }

    #[test]
    fn one_rise_is_growth_once_and_a_wiggle_after_it_is_not_growth() {
        // State made in the first interval, then flat but for +4 B at the end.
        let f = alone(&[4096, 7_846_732, 7_846_732, 7_846_728, 7_846_732]).unwrap();
        assert_eq!((f.growth, f.increases), (Growth::Once, 1));
        assert_eq!(f.stopped_at.as_deref(), Some("s2"));
        // Two points are one interval: never more than once.
        assert_eq!(alone(&[10, 20]).unwrap().growth, Growth::Once);
    }

    #[test]
    fn growth_over_points_that_are_not_repetitions_is_once() {
        let f = findings(&[&[10, 20, 30, 40, 50]], false)
            .pop()
            .flatten()
            .unwrap();
        assert_eq!(
            (f.growth, f.growth_bytes, f.stopped_at),
            (Growth::Once, 40, None)
        );
    }

    #[test]
    fn a_group_growing_while_another_frees_as_much_is_a_handover() {
        // Optimizer state replacing blocks allocated before the recording.
        let got = findings(&[&[0, 100, 200, 300], &[300, 200, 100, 0]], true);
        let f = got[0].as_ref().unwrap();
        assert_eq!(
            (f.growth, f.growth_bytes, f.gross_growth_bytes),
            (Growth::Handover, 0, 300)
        );
        assert!(got[1].is_none());
    }

    #[test]
    fn growth_paid_for_by_falls_in_other_intervals_is_a_handover() {
        // The total rises and falls (activations) while state replaces
        // blocks made before the recording: equal totals at both ends.
        let got = findings(
            &[&[0, 0, 50, 100], &[100, 100, 50, 0], &[0, 40, 0, 0]],
            true,
        );
        let f = got[0].as_ref().unwrap();
        assert_eq!((f.growth, f.growth_bytes), (Growth::Handover, 0));
    }

    #[test]
    fn a_buffer_that_moved_stacks_is_not_growth() {
        // 1 MiB moves from a library stack (g0) to a user stack (g1) while a
        // third stack grows by 10 KiB: only the 10 KiB is growth.
        let mib = 1 << 20;
        let got = findings(&[&[mib, 0], &[0, mib], &[0, 10 << 10]], true);
        assert!(got[0].is_none());
        let moved = got[1].as_ref().unwrap();
        assert_eq!((moved.growth, moved.growth_bytes), (Growth::Handover, 0));
        let grew = got[2].as_ref().unwrap();
        assert_eq!((grew.growth, grew.growth_bytes), (Growth::Once, 10 << 10));
    }

    #[test]
    fn net_rises_add_up_to_the_rise_of_the_total() {
        let groups = [
            series("a", &[5, 50, 20, 90]),
            series("b", &[40, 0, 60, 10]),
            series("c", &[0, 7, 7, 30]),
        ];
        let net = net_growth(&groups);
        let total = |p: usize| groups.iter().map(|g| g.bytes[p] as i64).sum::<i64>();
        for i in 0..3 {
            let rise = (total(i + 1) - total(i)).max(0) as u64;
            let sum: u64 = net.iter().map(|n| n.per_interval[i]).sum();
            assert_eq!(sum, rise, "interval {i}");
        }
        let overall: u64 = net.iter().map(|n| n.overall).sum();
        assert_eq!(overall, (total(3) - total(0)) as u64);
    }

    #[test]
    fn no_growth_is_no_finding() {
        assert!(alone(&[10, 10, 10]).is_none());
        assert!(alone(&[30, 20, 10]).is_none());
        assert!(alone(&[5]).is_none());
    }
}
