//! `peak`: the point with the most live bytes, per memory and overall, and
//! what was live there, broken down several ways.

use std::io::Write;

use serde::Serialize;

use std::collections::BTreeMap;

use crate::model::{AllocId, Axis, Memory, Names, Profile};
use crate::report::{Cell, Report, Table};

use super::group::{self, Group, GroupBy};
use super::{display_id, point_label, replay, AllocatorState, MemoryHeader, Options, Provenance};

pub const SCHEMA: &str = "memtool/peak/v1";

/// The `at_peak` row for bytes the allocator reports in use that no recorded
/// allocation accounts for.
pub const UNEXPLAINED_OP: &str = "<in use by the allocator's count, not in any recorded event>";

/// Breakdowns shown for every memory, in this order.
const BREAKDOWNS: [GroupBy; 6] = [
    GroupBy::Stack,
    GroupBy::UserFrame,
    GroupBy::Shape,
    GroupBy::Op,
    GroupBy::Dtype,
    GroupBy::Category,
];

#[derive(Debug, Serialize)]
pub struct PeakReport {
    pub schema: &'static str,
    #[serde(flatten)]
    pub provenance: Provenance,
    /// For a series of snapshots: the snapshot with the largest total over all
    /// memories.
    pub overall: Option<OverallPeak>,
    pub memories: Vec<MemoryPeak>,
    #[serde(skip)]
    top: usize,
}

#[derive(Debug, Serialize)]
pub struct OverallPeak {
    pub label: String,
    pub at: i64,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct MemoryPeak {
    #[serde(flatten)]
    pub header: MemoryHeader,
    pub peak_bytes: u64,
    pub peak_requested_bytes: u64,
    pub buffers: u64,
    pub peak_at: i64,
    pub peak_label: String,
    /// Picoseconds since the profile start, for memories on a ps time axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_time_ps: Option<i64>,
    /// The step the peak falls in, when the profile marks steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_step: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragmentation_at_peak: Option<f64>,
    /// Everything live at the peak grouped by (op, shape, dtype, region,
    /// step), largest first; empty when allocations carry none of these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub at_peak: Vec<AtPeakRow>,
    /// With `--budget`: what would have to go for the peak to fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetCut>,
    /// Breakdowns of the live set at the peak, one per [`GroupBy`]; a
    /// breakdown the profile has no data for (shapes in pprof) is left out.
    pub breakdowns: Vec<Breakdown>,
}

/// The fewest groups live at the peak whose removal brings it under a budget:
/// the largest first (taking the largest groups is what needs the fewest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetCut {
    pub budget_bytes: u64,
    /// Bytes over the budget at the peak (0: it fits).
    pub over_bytes: u64,
    /// Whether removing every listed group is enough.
    pub fits: bool,
    /// The groups to remove (`at_peak` groups, else call stacks), largest first.
    pub remove: Vec<BudgetGroup>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetGroup {
    pub key: String,
    pub bytes: u64,
}

impl MemoryPeak {
    fn budget_cut(&self, budget: u64) -> BudgetCut {
        let over = self.peak_bytes.saturating_sub(budget);
        let mut groups: Vec<BudgetGroup> = if self.at_peak.is_empty() {
            self.breakdowns
                .first()
                .map(|b| {
                    b.groups
                        .iter()
                        .map(|g| BudgetGroup {
                            key: g.key.clone(),
                            bytes: g.totals.bytes,
                        })
                        .collect()
                })
                .unwrap_or_default()
        } else {
            self.at_peak
                .iter()
                .map(|r| BudgetGroup {
                    key: row_label(r),
                    bytes: r.bytes,
                })
                .collect()
        };
        groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
        let mut removed = 0u64;
        let mut remove = Vec::new();
        for g in groups {
            if removed >= over {
                break;
            }
            removed = removed.saturating_add(g.bytes);
            remove.push(g);
        }
        BudgetCut {
            budget_bytes: budget,
            over_bytes: over,
            fits: removed >= over,
            remove,
        }
    }
}

/// `op shape dtype region (step k)`, the parts that are known.
fn row_label(r: &AtPeakRow) -> String {
    let mut parts: Vec<String> = [&r.op, &r.shape, &r.dtype, &r.region]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    if let Some(step) = r.step {
        parts.push(format!("(step {step})"));
    }
    parts.join(" ")
}

impl PeakReport {
    /// Lists, per memory, the groups to remove for its peak to fit `budget`.
    pub fn with_budget(mut self, budget: u64) -> Self {
        for m in &mut self.memories {
            m.budget = Some(m.budget_cut(budget));
        }
        self
    }
}

/// One group of allocations live at the peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AtPeakRow {
    pub op: Option<String>,
    pub shape: Option<String>,
    pub dtype: Option<String>,
    pub region: Option<String>,
    /// The step the allocations were made in (`None`: before the profile
    /// started, or outside every step).
    pub step: Option<i64>,
    pub bytes: u64,
    pub requested_bytes: u64,
    pub count: u64,
    /// How long the oldest of them had been live at the peak (axis units);
    /// `None` when it was live before the profile started.
    pub oldest_age: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct Breakdown {
    pub by: GroupBy,
    pub groups: Vec<Group>,
}

pub fn peak(profile: &Profile, options: &Options) -> PeakReport {
    let mut memories = Vec::new();
    for memory in options.selected(profile) {
        let Some(reported) = replay::reported_peak(memory, options.ties) else {
            continue;
        };
        let p = reported.point;
        let state = AllocatorState::at(memory, reported.sample);
        let mut header = MemoryHeader::of(memory);
        header.capacity_bytes = state.capacity_bytes.or(header.capacity_bytes);
        let live = replay::live_at(memory, p.index);
        let mut at_peak = at_peak_rows(&profile.names, memory, &live, p.index, p.at);
        // The allocator counted more than the recorded events explain (events
        // lost, or allocations it made for itself): say so, so the rows add
        // up to the peak.
        let unexplained = reported.bytes.saturating_sub(p.bytes);
        if unexplained > 0 && !at_peak.is_empty() {
            at_peak.push(AtPeakRow {
                op: Some(UNEXPLAINED_OP.to_string()),
                shape: None,
                dtype: None,
                region: None,
                step: None,
                bytes: unexplained,
                requested_bytes: unexplained,
                count: 0,
                oldest_age: None,
            });
            at_peak.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        }
        let by_site = group::totals_by_site(memory, &live);
        let breakdowns = BREAKDOWNS
            .iter()
            .filter(|&&by| group::has_values(&profile.names, &by_site, by) || by == GroupBy::Stack)
            .map(|&by| Breakdown {
                by,
                groups: group::breakdown(&profile.names, &by_site, by, &options.frames),
            })
            .collect();
        memories.push(MemoryPeak {
            header,
            peak_bytes: reported.bytes,
            peak_requested_bytes: p.requested,
            buffers: p.buffers,
            peak_at: p.at,
            peak_label: point_label(memory, p.index, p.at),
            peak_time_ps: (memory.axis == Axis::TimePs).then_some(p.at),
            peak_step: memory.step_at(p.at).map(|s| s.id),
            fragmentation_at_peak: state.fragmentation,
            at_peak,
            budget: None,
            breakdowns,
        });
    }
    PeakReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        overall: overall(profile, options),
        memories,
        top: options.top,
    }
}

type RowKey = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// Groups the live allocations by (op, shape, dtype, region, step).
fn at_peak_rows(
    names: &Names,
    memory: &Memory,
    live: &[AllocId],
    index: usize,
    peak_at: i64,
) -> Vec<AtPeakRow> {
    let text = |id: Option<crate::model::StrId>| id.map(|id| names.str(id).to_string());
    let described = live.iter().any(|&id| {
        let site = names.site_of(memory.allocation(id).site);
        site.op.is_some() || site.shape.is_some() || site.dtype.is_some() || site.category.is_some()
    });
    if !described {
        return Vec::new();
    }
    let made_at = replay::allocated_at(memory, index);
    let mut groups: BTreeMap<RowKey, AtPeakRow> = BTreeMap::new();
    for &id in live {
        let a = memory.allocation(id);
        let site = names.site_of(a.site);
        let at = made_at.get(id.index()).copied().flatten();
        let step = at.and_then(|at| memory.step_at(at)).map(|s| s.id);
        let key = (
            text(site.op),
            text(site.shape),
            text(site.dtype),
            text(site.category),
            step,
        );
        let row = groups.entry(key.clone()).or_insert_with(|| AtPeakRow {
            op: key.0,
            shape: key.1,
            dtype: key.2,
            region: key.3,
            step,
            bytes: 0,
            requested_bytes: 0,
            count: 0,
            oldest_age: at.map(|at| peak_at.saturating_sub(at)),
        });
        row.bytes = row.bytes.saturating_add(a.bytes);
        row.requested_bytes = row.requested_bytes.saturating_add(a.requested);
        row.count = row.count.saturating_add(a.count);
        row.oldest_age = match (row.oldest_age, at) {
            (Some(age), Some(at)) => Some(age.max(peak_at.saturating_sub(at))),
            _ => None,
        };
    }
    let mut rows: Vec<AtPeakRow> = groups.into_values().collect();
    // BTreeMap order breaks ties deterministically; the stable sort keeps it.
    rows.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    rows
}

/// Sums snapshot memories instant by instant; the largest total wins.
fn overall(profile: &Profile, options: &Options) -> Option<OverallPeak> {
    let snapshots: Vec<_> = options
        .selected(profile)
        .filter(|m| m.axis == Axis::Snapshot)
        .collect();
    let first = snapshots.first()?;
    let mut totals = vec![0u64; first.instants.len()];
    for m in &snapshots {
        replay::for_each_point(m, |p| {
            if let Some(t) = totals.get_mut(p.index) {
                *t += p.bytes;
            }
        });
    }
    let (index, &bytes) = totals
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?;
    Some(OverallPeak {
        label: first.instants[index].label.clone(),
        at: first.instants[index].at,
        bytes,
    })
}

impl Report for PeakReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        let mut t = Table::new(
            "Peaks",
            vec![
                "memory",
                "peak_bytes",
                "requested_bytes",
                "buffers",
                "peak_at",
            ],
        );
        for m in &self.memories {
            t.rows.push(vec![
                display_id(&m.header.id).into(),
                Cell::Bytes(m.peak_bytes),
                Cell::Bytes(m.peak_requested_bytes),
                Cell::Count(m.buffers),
                m.peak_label.clone().into(),
            ]);
        }
        tables.push(t);
        for m in &self.memories {
            let Some(cut) = &m.budget else {
                continue;
            };
            let mut t = Table::new(
                format!(
                    "To fit {} — {} ({} over{})",
                    crate::report::units::bytes(cut.budget_bytes),
                    display_id(&m.header.id),
                    crate::report::units::bytes(cut.over_bytes),
                    if cut.fits {
                        ""
                    } else {
                        "; removing everything is not enough"
                    }
                ),
                vec!["remove", "bytes"],
            );
            for g in &cut.remove {
                t.rows
                    .push(vec![g.key.clone().into(), Cell::Bytes(g.bytes)]);
            }
            tables.push(t);
        }
        for m in self.memories.iter().filter(|m| !m.at_peak.is_empty()) {
            let mut t = Table::new(
                format!(
                    "Live at peak by op, shape, dtype, region, step — {}",
                    display_id(&m.header.id)
                ),
                vec![
                    "op",
                    "shape",
                    "dtype",
                    "region",
                    "step",
                    "bytes",
                    "requested",
                    "count",
                ],
            );
            let text = |s: &Option<String>| Cell::Text(s.clone().unwrap_or_default());
            for r in m.at_peak.iter().take(self.top) {
                t.rows.push(vec![
                    text(&r.op),
                    text(&r.shape),
                    text(&r.dtype),
                    text(&r.region),
                    Cell::Text(r.step.map_or("-".into(), |s| s.to_string())),
                    Cell::Bytes(r.bytes),
                    Cell::Bytes(r.requested_bytes),
                    Cell::Count(r.count),
                ]);
            }
            t.omitted = m.at_peak.len().saturating_sub(self.top);
            tables.push(t);
        }
        for m in &self.memories {
            for b in &m.breakdowns {
                let mut t = Table::new(
                    format!(
                        "Live at peak by {} — {}",
                        b.by.name().replace('_', " "),
                        display_id(&m.header.id)
                    ),
                    vec![b.by.name(), "bytes", "share", "buffers"],
                );
                for g in b.groups.iter().take(self.top) {
                    let share = (m.peak_bytes > 0)
                        .then(|| g.totals.bytes as f64 * 100.0 / m.peak_bytes as f64);
                    t.rows.push(vec![
                        g.key.clone().into(),
                        Cell::Bytes(g.totals.bytes),
                        Cell::Text(share.map_or("n/a".into(), |s| format!("{s:.1}%"))),
                        Cell::Count(g.totals.count),
                    ]);
                }
                t.omitted = b.groups.len().saturating_sub(self.top);
                tables.push(t);
            }
        }
        tables
    }

    fn csv_table(&self) -> Table {
        let mut t = Table::new(
            "Live at peak",
            vec![
                "memory",
                "peak_at",
                "group_by",
                "key",
                "bytes",
                "requested_bytes",
                "count",
            ],
        );
        for m in &self.memories {
            for b in &m.breakdowns {
                for g in &b.groups {
                    t.rows.push(vec![
                        m.header.id.clone().into(),
                        m.peak_label.clone().into(),
                        b.by.name().into(),
                        g.key.clone().into(),
                        Cell::Bytes(g.totals.bytes),
                        Cell::Bytes(g.totals.requested_bytes),
                        Cell::Count(g.totals.count),
                    ]);
                }
            }
        }
        t
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .provenance
            .warnings
            .iter()
            .map(|w| format!("warning: {}: {}", w.path, w.message))
            .collect();
        if let Some(o) = &self.overall {
            if self.memories.len() > 1 || self.memories.iter().any(|m| m.peak_label != o.label) {
                notes.push(format!(
                    "overall peak: {} in {} (all memories together)",
                    crate::report::units::bytes(o.bytes),
                    o.label
                ));
            }
        }
        notes
    }
}
