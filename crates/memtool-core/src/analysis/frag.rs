//! `frag`: how fragmented each allocator was, from two independent sources.
//!
//! - The allocator's own figure, from its samples (`fragmentation`, or
//!   `1 − largest free block / free` when it reports those instead).
//! - memtool's own figure from the addresses of the live allocations: the
//!   gaps between them inside the span they cover, `1 − largest gap / total
//!   gap`. Profiles whose allocator reports nothing still get this one.
//!
//! Both are read from the model only; any format that fills
//! `allocator_samples` or allocation addresses gets a `frag` report.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use crate::model::{AllocId, AllocatorSample, Memory, Profile};
use crate::report::{Cell, Report, Table};

use super::group::stack_or_op_shape;
use super::{display_id, point_label, replay, MemoryHeader, Options, PeakFacts, Provenance};

/// The JSON schema name and version of `frag`'s document.
pub const SCHEMA: &str = "memtool/frag/v1";

/// Groups listed for the live set at each worst point.
const GROUPS_PER_POINT: usize = 5;

/// What `frag` reports: per memory, the allocator's fragmentation over time, its worst points, and the layout at the end.
#[derive(Debug, Serialize)]
pub struct FragReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The inputs and warnings.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// One entry per memory.
    pub memories: Vec<MemoryFrag>,
}

/// Fragmentation of one memory.
#[derive(Debug, Serialize)]
pub struct MemoryFrag {
    /// Which memory.
    #[serde(flatten)]
    pub header: MemoryHeader,
    /// Samples in which the allocator reported a fragmentation figure.
    pub samples_with_fragmentation: usize,
    /// Summary of the allocator's own figure over the profile.
    pub allocator: Option<SeriesStats>,
    /// memtool's address-gap figure at the peak and at the end.
    pub at_peak: Option<PointFrag>,
    /// The same at the end of the profile.
    pub at_end: Option<PointFrag>,
    /// The points where the allocator reported the most fragmentation, worst
    /// first (at most `--top`).
    pub worst: Vec<PointFrag>,
    /// The allocator's end-state layout by segment, when the profile records
    /// one (PyTorch snapshots): `reserved_bytes`, `allocated_bytes`,
    /// `free_external_bytes`, `free_internal_bytes`, `largest_free_block_bytes`,
    /// `segments`.
    #[serde(flatten)]
    pub layout: Option<super::segments::SegmentLayout>,
}

/// The allocator's fragmentation figures over the profile.
#[derive(Debug, Serialize)]
pub struct SeriesStats {
    /// The lowest figure.
    pub min: f64,
    /// The mean of the figures.
    pub mean: f64,
    /// The highest figure.
    pub max: f64,
    /// The figure at the last sample.
    pub last: f64,
}

/// Fragmentation and the live set at one point of the timeline.
#[derive(Debug, Serialize)]
pub struct PointFrag {
    /// Position on the memory's axis.
    pub at: i64,
    /// The position as a person reads it.
    pub label: String,
    /// The allocator's own figure at this point, when it reports one.
    pub allocator_fragmentation: Option<f64>,
    /// In use, as the allocator reports it (else replayed).
    pub in_use_bytes: u64,
    /// Free memory the allocator reports, when it does.
    pub free_bytes: Option<u64>,
    /// Allocations live at this point.
    pub live_allocations: u64,
    /// From addresses: gaps between live allocations inside their span.
    pub address: Option<AddressFrag>,
    /// The largest groups live here (stack, else op and shape).
    pub top_groups: Vec<GroupBytes>,
}

/// Fragmentation worked out from the addresses of the live allocations.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AddressFrag {
    /// `1 − largest gap / total gap`, 0 when there is no gap.
    pub fragmentation: f64,
    /// From the lowest live address to the end of the highest allocation.
    pub span_bytes: u64,
    /// Bytes between live allocations inside the span.
    pub gap_bytes: u64,
    /// The largest of those gaps.
    pub largest_gap_bytes: u64,
    /// How many gaps there are.
    pub gaps: u64,
}

/// Live bytes of one group at a point.
#[derive(Debug, Serialize)]
pub struct GroupBytes {
    /// The group: a call stack, else op and shape.
    pub key: String,
    /// Live bytes.
    pub bytes: u64,
    /// Live buffers.
    pub count: u64,
}

/// The allocator's fragmentation figure in a sample, when it has one.
pub fn sample_fragmentation(s: &AllocatorSample) -> Option<f64> {
    s.fragmentation().filter(|f| f.is_finite()).or_else(|| {
        let (largest, free) = (s.largest_free_block()?, s.free_bytes()?);
        (free > 0).then(|| 1.0 - largest.min(free) as f64 / free as f64)
    })
}

/// Fragmentation of the address space covered by `live`: allocations without
/// an address are left out; overlapping ones close the gap between them.
pub fn address_fragmentation(memory: &Memory, live: &[AllocId]) -> Option<AddressFrag> {
    let mut ranges: Vec<(u64, u64)> = live
        .iter()
        .filter_map(|&id| {
            let a = memory.allocation(id);
            let start = a.address?;
            Some((start, start.saturating_add(a.bytes)))
        })
        .collect();
    if ranges.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let (first, mut end) = ranges[0];
    let (mut gap_bytes, mut largest, mut gaps) = (0u64, 0u64, 0u64);
    for &(start, stop) in &ranges[1..] {
        if start > end {
            let gap = start - end;
            gap_bytes = gap_bytes.saturating_add(gap);
            largest = largest.max(gap);
            gaps += 1;
        }
        end = end.max(stop);
    }
    Some(AddressFrag {
        fragmentation: if gap_bytes == 0 {
            0.0
        } else {
            1.0 - largest as f64 / gap_bytes as f64
        },
        span_bytes: end - first,
        gap_bytes,
        largest_gap_bytes: largest,
        gaps,
    })
}

/// Fragmentation per memory of `profile`: the allocator's figure over time, its worst points with what was live there, and address gaps.
pub fn frag(profile: &Profile, options: &Options) -> FragReport {
    let mut memories = Vec::new();
    for memory in options.selected(profile) {
        let Some(facts) = PeakFacts::of(memory, options.ties) else {
            continue;
        };
        let peak = facts.peak;
        let figures: Vec<(usize, f64)> = memory
            .allocator_samples
            .iter()
            .enumerate()
            .filter_map(|(i, s)| sample_fragmentation(s).map(|f| (i, f)))
            .collect();
        let allocator = series_stats(&figures);
        let mut worst: Vec<(usize, f64)> = figures.clone();
        // Worst first; the earlier point first among equals.
        worst.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        worst.truncate(options.top);
        let point = |index: usize, sample: Option<usize>| {
            point_frag(profile, memory, options, index, sample)
        };
        let end_index = if replay::uses_instants(memory) {
            memory.instants.len().saturating_sub(1)
        } else {
            memory.events.len()
        };
        let end_sample = memory
            .allocator_samples
            .len()
            .checked_sub(1)
            .filter(|_| !memory.allocator_samples.is_empty());
        memories.push(MemoryFrag {
            header: facts.header,
            samples_with_fragmentation: figures.len(),
            allocator,
            at_peak: point(peak.point.index, peak.sample),
            at_end: point(end_index, end_sample),
            worst: worst
                .iter()
                .filter_map(|&(s, _)| point(replay::point_of_sample(memory, s), Some(s)))
                .collect(),
            layout: super::segments::layout(&profile.names, memory),
        });
    }
    FragReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        memories,
    }
}

fn series_stats(figures: &[(usize, f64)]) -> Option<SeriesStats> {
    let last = figures.last()?.1;
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    for &(_, f) in figures {
        min = min.min(f);
        max = max.max(f);
        sum += f;
    }
    Some(SeriesStats {
        min,
        mean: sum / figures.len() as f64,
        max,
        last,
    })
}

fn point_frag(
    profile: &Profile,
    memory: &Memory,
    options: &Options,
    index: usize,
    sample: Option<usize>,
) -> Option<PointFrag> {
    let p = replay::point_at(memory, index)?;
    let s = sample.and_then(|i| memory.allocator_samples.get(i));
    let live = replay::live_at(memory, index);
    let mut groups: HashMap<String, (u64, u64)> = HashMap::new();
    let mut labels: HashMap<crate::model::SiteId, String> = HashMap::new();
    for &id in &live {
        let a = memory.allocation(id);
        let key = labels
            .entry(a.site)
            .or_insert_with(|| stack_or_op_shape(&profile.names, a.site, &options.frames))
            .clone();
        let g = groups.entry(key).or_default();
        g.0 = g.0.saturating_add(a.bytes);
        g.1 = g.1.saturating_add(a.count);
    }
    let mut top_groups: Vec<GroupBytes> = groups
        .into_iter()
        .map(|(key, (bytes, count))| GroupBytes { key, bytes, count })
        .collect();
    top_groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
    top_groups.truncate(GROUPS_PER_POINT);
    Some(PointFrag {
        at: p.at,
        label: point_label(memory, p.index, p.at),
        allocator_fragmentation: s.and_then(sample_fragmentation),
        in_use_bytes: s.and_then(|s| s.allocated_bytes()).unwrap_or(p.bytes),
        free_bytes: s.and_then(|s| s.free_bytes()),
        live_allocations: p.buffers,
        address: address_fragmentation(memory, &live),
        top_groups,
    })
}

fn percent(f: Option<f64>) -> Cell {
    Cell::Text(f.map_or("n/a".into(), |f| format!("{:.1}%", f * 100.0)))
}

impl Report for FragReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = vec![self.csv_table()];
        for m in &self.memories {
            let Some(layout) = &m.layout else { continue };
            let mut t = Table::ranked(
                format!(
                    "Segments at the end — {}: {} reserved, {} allocated",
                    display_id(&m.header.id),
                    crate::report::units::bytes(layout.reserved_bytes),
                    crate::report::units::bytes(layout.allocated_bytes)
                ),
                vec![
                    "segment",
                    "pool",
                    "reserved",
                    "allocated",
                    "free_external",
                    "free_internal",
                    "largest_free",
                    "blocks",
                ],
            );
            t.leading_rows = 1;
            t.rows.push(vec![
                "total".into(),
                Cell::Empty,
                Cell::Bytes(layout.reserved_bytes),
                Cell::Bytes(layout.allocated_bytes),
                Cell::Bytes(layout.free_external_bytes),
                Cell::Bytes(layout.free_internal_bytes),
                Cell::Bytes(layout.largest_free_block_bytes),
                Cell::Count(layout.segments.iter().map(|s| s.blocks as u64).sum()),
            ]);
            for s in layout.segments.iter() {
                t.rows.push(vec![
                    s.address
                        .map_or("-".to_string(), |a| format!("{a:#x}"))
                        .into(),
                    s.pool.clone().unwrap_or_default().into(),
                    Cell::Bytes(s.reserved_bytes),
                    Cell::Bytes(s.allocated_bytes),
                    Cell::Bytes(s.free_external_bytes),
                    Cell::Bytes(s.free_internal_bytes),
                    Cell::Bytes(s.largest_free_block_bytes),
                    Cell::Count(s.blocks as u64),
                ]);
            }
            tables.push(t);
        }
        for m in &self.memories {
            let mut t = Table::ranked(
                format!(
                    "Worst fragmentation reported by the allocator — {}",
                    display_id(&m.header.id)
                ),
                vec![
                    "at",
                    "allocator",
                    "address_gaps",
                    "in_use",
                    "free",
                    "live",
                    "largest_group",
                ],
            );
            for w in m.worst.iter() {
                t.rows.push(vec![
                    w.label.clone().into(),
                    percent(w.allocator_fragmentation),
                    percent(w.address.map(|a| a.fragmentation)),
                    Cell::Bytes(w.in_use_bytes),
                    w.free_bytes.map_or(Cell::Text("n/a".into()), Cell::Bytes),
                    Cell::Count(w.live_allocations),
                    Cell::Text(
                        w.top_groups
                            .first()
                            .map(|g| g.key.clone())
                            .unwrap_or_default(),
                    ),
                ]);
            }
            if !t.rows.is_empty() {
                tables.push(t);
            }
        }
        tables
    }

    fn csv_table(&self) -> Table {
        let mut t = Table::new(
            "Fragmentation",
            vec![
                "memory",
                "allocator_max",
                "allocator_mean",
                "allocator_at_peak",
                "address_at_peak",
                "address_at_end",
                "largest_gap_at_peak",
            ],
        );
        for m in &self.memories {
            let peak = m.at_peak.as_ref();
            t.rows.push(vec![
                display_id(&m.header.id).into(),
                percent(m.allocator.as_ref().map(|a| a.max)),
                percent(m.allocator.as_ref().map(|a| a.mean)),
                percent(peak.and_then(|p| p.allocator_fragmentation)),
                percent(peak.and_then(|p| p.address.map(|a| a.fragmentation))),
                percent(
                    m.at_end
                        .as_ref()
                        .and_then(|p| p.address.map(|a| a.fragmentation)),
                ),
                peak.and_then(|p| p.address)
                    .map_or(Cell::Text("n/a".into()), |a| {
                        Cell::Bytes(a.largest_gap_bytes)
                    }),
            ]);
        }
        t
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = super::warning_notes(&self.provenance.warnings);
        for m in &self.memories {
            if m.allocator.is_none() && m.at_peak.as_ref().is_none_or(|p| p.address.is_none()) {
                notes.push(format!(
                    "{}: neither allocator fragmentation nor addresses in this profile",
                    display_id(&m.header.id)
                ));
            }
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, MemoryKind, SiteId};

    #[test]
    fn address_gaps_measure_how_split_the_free_space_is() {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        // [0,100) gap 50 [150,200) gap 150 [350,400), plus one inside the first.
        for (address, bytes) in [(0, 100), (150, 50), (350, 50), (10, 20)] {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: Some(address),
                site: SiteId(0),
            });
        }
        let live: Vec<AllocId> = (0..4).map(AllocId).collect();
        let f = address_fragmentation(&m, &live).unwrap();
        assert_eq!(
            (f.span_bytes, f.gap_bytes, f.largest_gap_bytes, f.gaps),
            (400, 200, 150, 2)
        );
        assert!((f.fragmentation - 0.25).abs() < 1e-12);
        assert_eq!(
            address_fragmentation(&m, &[AllocId(0)])
                .unwrap()
                .fragmentation,
            0.0
        );
        assert!(address_fragmentation(&m, &[]).is_none());
    }

    #[test]
    fn largest_free_block_stands_in_for_a_missing_figure() {
        let s = AllocatorSample::default()
            .with_free_bytes(Some(1000))
            .with_largest_free_block(Some(250));
        assert_eq!(sample_fragmentation(&s), Some(0.75));
        let reported = s.with_fragmentation(Some(0.1));
        assert_eq!(sample_fragmentation(&reported), Some(0.1));
    }
}
