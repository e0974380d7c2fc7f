//! `leaks`: groups whose live bytes grow over a memory's timeline, told apart
//! into steady growth (still growing at the end: a leak) and bounded growth
//! (grew, then stopped: a cache or pool that filled up).

use std::io::Write;

use serde::Serialize;

use std::collections::BTreeMap;

use crate::model::{Memory, Names, Profile};
use crate::report::{units, Cell, Report, Table};

use super::group::{self, FrameFilter};
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
    /// One entry per memory.
    pub memories: Vec<MemoryLeaks>,
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
    /// One line: the strongest finding, or why there is none.
    pub verdict: String,
    /// The groups that grew, steady growth first, then by bytes grown.
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

/// How a group's live bytes grew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Growth {
    /// Still growing over the last quarter of the points.
    Steady,
    /// Grew, then stayed flat or fell: a cache that filled up.
    Bounded,
}

/// One group whose live bytes grew.
#[derive(Debug, Serialize)]
pub struct LeakFinding {
    /// The call stack (user frames unless `--all-frames`); for allocations
    /// without one, their op and shape.
    pub key: String,
    /// Still growing, or grown and stopped.
    pub growth: Growth,
    /// Live bytes at the last point minus at the first.
    pub growth_bytes: u64,
    /// Growth per point interval over the whole series.
    pub bytes_per_point: u64,
    /// Intervals in which the group grew.
    pub increases: usize,
    /// For bounded growth: the point after which it did not grow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// The group's live bytes at each point compared.
    pub bytes: Vec<u64>,
    /// The group's live buffers at each point compared.
    pub counts: Vec<u64>,
}

/// The groups of each memory of `profile` whose live bytes grew, over its snapshots or step boundaries.
pub fn leaks(profile: &Profile, options: &Options) -> LeaksReport {
    let mut memories = Vec::new();
    for memory in options.selected(profile) {
        let step_ends = series::step_end_points(memory);
        let (points, point_kind) = if replay::uses_instants(memory) {
            (
                series::sample_points(memory, EVENT_STREAM_POINTS),
                "snapshot",
            )
        } else if step_ends.len() >= 2 {
            (step_ends.iter().map(|&(_, p)| p).collect(), "step")
        } else {
            (series::sample_points(memory, EVENT_STREAM_POINTS), "event")
        };
        let per_point = series::site_totals_at(memory, &points);
        let labels: Vec<String> = points
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                if point_kind == "step" {
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
        let total_bytes: Vec<u64> = per_point
            .iter()
            .map(|m| m.values().fold(0u64, |s, t| s.saturating_add(t.bytes)))
            .collect();
        let names = &profile.names;
        let groups = series::group_series_by(&per_point, |site| {
            group::stack_or_op_shape(names, site, &options.frames)
        });
        let mut findings: Vec<LeakFinding> = groups
            .into_iter()
            .filter_map(|g| classify(g, &labels))
            .collect();
        findings.sort_by(|a, b| {
            (a.growth != Growth::Steady)
                .cmp(&(b.growth != Growth::Steady))
                .then(b.growth_bytes.cmp(&a.growth_bytes))
                .then_with(|| a.key.cmp(&b.key))
        });
        let verdict = verdict(&findings, &labels, point_kind);
        memories.push(MemoryLeaks {
            header: MemoryHeader::of(memory),
            points: labels,
            total_bytes,
            point_kind,
            verdict,
            findings,
            steps: steps::per_step(memory),
            never_freed: never_freed(names, memory, &options.frames),
        });
    }
    LeaksReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        memories,
    }
}

impl LeaksReport {
    /// Whether any memory has a group that was still growing at the end.
    pub fn has_steady_growth(&self) -> bool {
        self.memories
            .iter()
            .any(|m| m.findings.iter().any(|f| f.growth == Growth::Steady))
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
        g.1 = g.1.saturating_add(a.count);
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

/// Classifies one group's series; `None` when it did not grow.
pub fn classify(g: GroupSeries, labels: &[String]) -> Option<LeakFinding> {
    let n = g.bytes.len();
    let (first, last) = (*g.bytes.first()?, *g.bytes.last()?);
    if n < 2 || last <= first {
        return None;
    }
    let increases = g.bytes.windows(2).filter(|w| w[1] > w[0]).count();
    let last_increase = g
        .bytes
        .windows(2)
        .rposition(|w| w[1] > w[0])
        .map_or(0, |i| i + 1);
    // Flat (or falling) over the last quarter of the intervals, and at least
    // two of them, means the growth stopped.
    let tail = ((n - 1) / 4).max(2);
    let stopped = n >= 4 && last_increase + tail < n;
    let growth_bytes = last - first;
    Some(LeakFinding {
        growth: if stopped {
            Growth::Bounded
        } else {
            Growth::Steady
        },
        growth_bytes,
        bytes_per_point: growth_bytes / (n as u64 - 1),
        increases,
        stopped_at: stopped.then(|| labels.get(last_increase).cloned().unwrap_or_default()),
        key: g.key,
        bytes: g.bytes,
        counts: g.counts,
    })
}

fn verdict(findings: &[LeakFinding], labels: &[String], point_kind: &str) -> String {
    if labels.len() < 2 {
        return "one point only: give a series of snapshots (memory1.prof memory2.prof ...) to look for growth".into();
    }
    let unit = if point_kind == "step" {
        "step"
    } else {
        "point"
    };
    match findings.first() {
        Some(f) if f.growth == Growth::Steady => format!(
            "steady growth: +{} over {} {unit}s ({}/{unit}), still growing at {}: {}",
            units::bytes(f.growth_bytes),
            labels.len(),
            units::bytes(f.bytes_per_point),
            labels.last().map(String::as_str).unwrap_or(""),
            f.key
        ),
        Some(f) => format!(
            "bounded growth only: +{} that stopped at {} (a cache or pool filling up, not a leak): {}",
            units::bytes(f.growth_bytes),
            f.stopped_at.as_deref().unwrap_or(""),
            f.key
        ),
        None if point_kind == "step" => {
            "no growth: no group holds more at the end of the last step than at the end of the first".into()
        }
        None => "no growth: no stack holds more at the end than at the start".into(),
    }
}

impl Report for LeaksReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        for m in &self.memories {
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
                    Cell::Text(format!("{:?}", f.growth).to_lowercase()),
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
                        Cell::Text(format!("{:?}", f.growth).to_lowercase()),
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
        self.memories
            .iter()
            .map(|m| format!("{}: {}", display_id(&m.header.id), m.verdict))
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.provenance.warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(bytes: &[u64]) -> GroupSeries {
        GroupSeries {
            key: "k".into(),
            bytes: bytes.to_vec(),
            counts: vec![1; bytes.len()],
        }
    }

    fn labels(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("s{i}")).collect()
    }

    #[test]
    fn growth_to_the_end_is_steady() {
        let f = classify(series(&[10, 20, 30, 40, 50, 60, 70, 80, 90]), &labels(9)).unwrap();
        assert_eq!(
            (f.growth, f.growth_bytes, f.bytes_per_point, f.increases),
            (Growth::Steady, 80, 10, 8)
        );
        assert_eq!(f.stopped_at, None);
    }

    #[test]
    fn growth_that_stops_is_bounded() {
        let f = classify(series(&[10, 50, 90, 100, 100, 100, 100, 100]), &labels(8)).unwrap();
        assert_eq!(f.growth, Growth::Bounded);
        assert_eq!(f.stopped_at.as_deref(), Some("s4"));
    }

    #[test]
    fn no_growth_is_no_finding() {
        assert!(classify(series(&[10, 10, 10]), &labels(3)).is_none());
        assert!(classify(series(&[30, 20, 10]), &labels(3)).is_none());
        assert!(classify(series(&[5]), &labels(1)).is_none());
    }
}
