//! `summary`: per memory, the peak, the end state, and the top stacks at peak.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::model::Profile;
use crate::report::{Cell, Report, Table};

use super::group::{self, Group, GroupBy};
use super::{display_id, point_label, replay, MemoryHeader, Options, Provenance};

pub const SCHEMA: &str = "memtool/summary/v1";

#[derive(Debug, Serialize)]
pub struct SummaryReport {
    pub schema: &'static str,
    #[serde(flatten)]
    pub provenance: Provenance,
    pub memories: Vec<MemorySummary>,
    #[serde(skip)]
    top: usize,
}

#[derive(Debug, Serialize)]
pub struct MemorySummary {
    #[serde(flatten)]
    pub header: MemoryHeader,
    pub peak_bytes: u64,
    pub peak_requested_bytes: u64,
    /// Buffers live at the peak.
    pub buffers: u64,
    /// Position of the peak on the memory's axis.
    pub peak_at: i64,
    pub peak_label: String,
    pub final_bytes: u64,
    pub final_buffers: u64,
    pub allocations: usize,
    pub events: usize,
    /// Events per kind as the file records them (PyTorch trace actions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub events_by_action: BTreeMap<String, u64>,
    /// Memory the allocator held from the device at the end, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// Memory handed out at the end as the allocator reports it (PyTorch:
    /// live blocks' requested sizes), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// One row per snapshot, for memories made of snapshots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotRow>,
    /// Live bytes at the peak by call stack, largest first.
    pub top_stacks: Vec<Group>,
}

#[derive(Debug, Serialize)]
pub struct SnapshotRow {
    pub label: String,
    pub at: i64,
    pub bytes: u64,
    pub buffers: u64,
}

pub fn summarize(profile: &Profile, options: &Options) -> SummaryReport {
    let mut memories = Vec::new();
    for memory in options.selected(profile) {
        let Some(peak) = replay::peak(memory) else {
            continue;
        };
        let last = replay::last(memory).unwrap_or(peak);
        let mut snapshots = Vec::new();
        if replay::uses_instants(memory) {
            replay::for_each_point(memory, |p| {
                snapshots.push(SnapshotRow {
                    label: point_label(memory, p.index, p.at),
                    at: p.at,
                    bytes: p.bytes,
                    buffers: p.buffers,
                })
            });
        }
        let live = replay::live_at(memory, peak.index);
        let by_site = group::totals_by_site(memory, &live);
        memories.push(MemorySummary {
            header: MemoryHeader::of(memory),
            peak_bytes: peak.bytes,
            peak_requested_bytes: peak.requested,
            buffers: peak.buffers,
            peak_at: peak.at,
            peak_label: point_label(memory, peak.index, peak.at),
            final_bytes: last.bytes,
            final_buffers: last.buffers,
            allocations: memory.allocations.len(),
            events: memory.events.len(),
            events_by_action: memory.recorded_events.clone(),
            reserved_bytes: memory
                .allocator_samples
                .iter()
                .rev()
                .find_map(|s| s.reserved_bytes),
            allocated_bytes: memory
                .allocator_samples
                .iter()
                .rev()
                .find_map(|s| s.allocated_bytes),
            snapshots,
            top_stacks: group::breakdown(&profile.names, &by_site, GroupBy::Stack, &options.frames),
        });
    }
    SummaryReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        memories,
        top: options.top,
    }
}

impl SummaryReport {
    fn memories_table(&self) -> Table {
        let mut t = Table::new(
            "Memories",
            vec![
                "memory",
                "kind",
                "peak_bytes",
                "buffers",
                "peak_at",
                "final_bytes",
                "final_buffers",
            ],
        );
        for m in &self.memories {
            t.rows.push(vec![
                display_id(&m.header.id).into(),
                Cell::Text(format!("{:?}", m.header.kind).to_lowercase()),
                Cell::Bytes(m.peak_bytes),
                Cell::Count(m.buffers),
                m.peak_label.clone().into(),
                Cell::Bytes(m.final_bytes),
                Cell::Count(m.final_buffers),
            ]);
        }
        t
    }
}

impl Report for SummaryReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = vec![self.memories_table()];
        let series = self.memories.iter().any(|m| m.snapshots.len() > 1);
        if series {
            let mut t = Table::new("Snapshots", vec!["snapshot", "memory", "bytes", "buffers"]);
            for m in &self.memories {
                for s in &m.snapshots {
                    t.rows.push(vec![
                        s.label.clone().into(),
                        display_id(&m.header.id).into(),
                        Cell::Bytes(s.bytes),
                        Cell::Count(s.buffers),
                    ]);
                }
            }
            tables.push(t);
        }
        if self
            .memories
            .iter()
            .any(|m| m.reserved_bytes.is_some() || !m.events_by_action.is_empty())
        {
            let mut t = Table::new(
                "Allocator (as the profile records it)",
                vec!["memory", "reserved", "allocated", "events by kind"],
            );
            for m in &self.memories {
                let events: Vec<String> = m
                    .events_by_action
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let bytes = |b: Option<u64>| b.map_or(Cell::Empty, Cell::Bytes);
                t.rows.push(vec![
                    display_id(&m.header.id).into(),
                    bytes(m.reserved_bytes),
                    bytes(m.allocated_bytes),
                    Cell::Text(events.join(", ")),
                ]);
            }
            tables.push(t);
        }
        let exes: Vec<_> = self
            .provenance
            .inputs
            .iter()
            .filter_map(|i| i.executables.map(|e| (i, e)))
            .collect();
        if !exes.is_empty() {
            let mut t = Table::new(
                "Executables (compiled programs, not counted in buffers)",
                vec!["input", "count", "bytes"],
            );
            for (input, e) in exes {
                t.rows.push(vec![
                    input.path.clone().into(),
                    Cell::Count(e.count),
                    Cell::Int(e.bytes),
                ]);
            }
            tables.push(t);
        }
        for m in &self.memories {
            let mut t = Table::new(
                format!(
                    "Top stacks at peak — {} ({})",
                    display_id(&m.header.id),
                    m.peak_label
                ),
                vec!["stack", "bytes", "buffers"],
            );
            for g in m.top_stacks.iter().take(self.top) {
                t.rows.push(vec![
                    g.key.clone().into(),
                    Cell::Bytes(g.totals.bytes),
                    Cell::Count(g.totals.count),
                ]);
            }
            t.omitted = m.top_stacks.len().saturating_sub(self.top);
            tables.push(t);
        }
        tables
    }

    fn csv_table(&self) -> Table {
        self.memories_table()
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .provenance
            .warnings
            .iter()
            .map(|w| format!("warning: {}: {}", w.path, w.message))
            .collect();
        if let Some(biggest) = self.memories.iter().max_by_key(|m| m.peak_bytes) {
            if self.memories.len() > 1 {
                notes.push(format!(
                    "largest peak: {} with {} at {}",
                    display_id(&biggest.header.id),
                    crate::report::units::bytes(biggest.peak_bytes),
                    biggest.peak_label
                ));
            }
        }
        notes
    }
}
