//! `peak`: the point with the most live bytes, per memory and overall, and
//! what was live there, broken down several ways.

use std::io::Write;

use serde::Serialize;

use crate::model::{Axis, Profile};
use crate::report::{Cell, Report, Table};

use super::group::{self, Group, GroupBy};
use super::{display_id, point_label, replay, MemoryHeader, Options, Provenance};

pub const SCHEMA: &str = "memtool/peak/v1";

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
    /// Breakdowns of the live set at the peak, one per [`GroupBy`]; a
    /// breakdown the profile has no data for (shapes in pprof) is left out.
    pub breakdowns: Vec<Breakdown>,
}

#[derive(Debug, Serialize)]
pub struct Breakdown {
    pub by: GroupBy,
    pub groups: Vec<Group>,
}

pub fn peak(profile: &Profile, options: &Options) -> PeakReport {
    let mut memories = Vec::new();
    for memory in options.selected(profile) {
        let Some(p) = replay::peak(memory) else {
            continue;
        };
        let live = replay::live_at(memory, p.index);
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
            header: MemoryHeader::of(memory),
            peak_bytes: p.bytes,
            peak_requested_bytes: p.requested,
            buffers: p.buffers,
            peak_at: p.at,
            peak_label: point_label(memory, p.index, p.at),
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
