//! `frag`: how fragmented each allocator was, from independent sources.
//!
//! - The allocator's own figure, from its samples (`fragmentation`, or
//!   `1 − largest free block / free` when it reports those instead).
//! - Reserved but not in use, over time, where the allocator reports what
//!   it reserved (PyTorch `Total Reserved`, snapshot segment events):
//!   memory the allocator holds and the program does not.
//! - memtool's own figure from the addresses of the live allocations: the
//!   gaps between them inside the address ranges the allocator holds (a
//!   snapshot's segments at that point, a compiled program's memory space),
//!   `1 − largest gap / total gap`. Address space between those ranges is
//!   not the allocator's, so where the profile does not say what it holds
//!   there is no gap figure.
//!
//! All are read from the model only; any format that fills
//! `allocator_samples`, `held` or allocation addresses gets them.

use std::collections::HashMap;
use std::io::Write;

use serde::Serialize;

use crate::model::{AllocId, AllocatorSample, Memory, Profile};
use crate::report::{Cell, Report, Table};

use super::group::stack_or_op_shape;
use super::segments::{self, HeldRanges, ReservedUse};
use super::{display_id, point_label, replay, MemoryHeader, Options, PeakFacts, Provenance};

/// The JSON schema name and version of `frag`'s document.
pub const SCHEMA: &str = "memtool/frag/v2";

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
    /// Reserved but not in use over the profile, when the allocator reports
    /// what it reserved.
    pub unused_reserved: Option<UnusedReserved>,
    /// The peak, with memtool's address-gap figure there.
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
    /// The moment the segment layout shows (the end of the profile), as a
    /// person reads it; absent without a layout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segments_label: Option<String>,
    /// Whether any allocation has an address.
    #[serde(skip)]
    pub has_addresses: bool,
}

/// Memory the allocator reserved and the program was not using, over the
/// points from the allocator's first report of what it reserved.
#[derive(Debug, Serialize)]
pub struct UnusedReserved {
    /// Points with a reserved figure.
    pub points: usize,
    /// The most reserved memory not in use at one point.
    pub max_bytes: u64,
    /// Where that was, on the memory's axis.
    pub max_at: i64,
    /// The position as a person reads it.
    pub max_label: String,
    /// What was reserved there.
    pub max_reserved_bytes: u64,
    /// The mean over the points.
    pub mean_bytes: u64,
    /// At the last point.
    pub last_bytes: u64,
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
    /// What the allocator reserved there, when it reports it.
    pub reserved_bytes: Option<u64>,
    /// Reserved but not in use there.
    pub unused_reserved_bytes: Option<u64>,
    /// Free memory the allocator reports, when it does.
    pub free_bytes: Option<u64>,
    /// Allocations live at this point.
    pub live_allocations: u64,
    /// From addresses: gaps between live allocations inside the ranges the
    /// allocator holds; `None` when the profile does not say which it holds.
    pub address: Option<AddressFrag>,
    /// The largest groups live here (stack, else op and shape).
    pub top_groups: Vec<GroupBytes>,
}

/// Fragmentation worked out from the addresses of the live allocations
/// inside the ranges the allocator holds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AddressFrag {
    /// `1 − largest gap / total gap`, 0 when there is no gap.
    pub fragmentation: f64,
    /// Bytes the allocator holds there.
    pub held_bytes: u64,
    /// Free bytes inside them: not covered by a live allocation.
    pub gap_bytes: u64,
    /// The largest run of free bytes inside one held range.
    pub largest_gap_bytes: u64,
    /// How many such runs there are.
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

/// The free runs inside `held` that no allocation of `live` covers:
/// allocations without an address are left out, overlapping ones merge.
pub fn address_fragmentation(memory: &Memory, live: &[AllocId], held: &HeldRanges) -> AddressFrag {
    let mut ranges: Vec<(u64, u64)> = live
        .iter()
        .filter_map(|&id| {
            let a = memory.allocation(id);
            let start = a.address()?;
            Some((start, start.saturating_add(a.bytes)))
        })
        .filter(|&(start, end)| end > start)
        .collect();
    ranges.sort_unstable();
    let mut used: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match used.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => used.push((start, end)),
        }
    }
    let (mut gap_bytes, mut largest, mut gaps) = (0u64, 0u64, 0u64);
    let mut gap = |from: u64, to: u64| {
        if to > from {
            gap_bytes = gap_bytes.saturating_add(to - from);
            largest = largest.max(to - from);
            gaps += 1;
        }
    };
    for (start, end) in held.ranges() {
        let mut free_from = start;
        let first = used.partition_point(|&(_, e)| e <= start);
        for &(s, e) in used[first..].iter().take_while(|&&(s, _)| s < end) {
            gap(free_from, s.min(end));
            free_from = free_from.max(e.min(end));
        }
        gap(free_from, end);
    }
    AddressFrag {
        fragmentation: if gap_bytes == 0 {
            0.0
        } else {
            1.0 - largest as f64 / gap_bytes as f64
        },
        held_bytes: held.bytes(),
        gap_bytes,
        largest_gap_bytes: largest,
        gaps,
    }
}

/// The worst point of each distinct episode of fragmentation: a run of
/// consecutive samples above the series' mean, so ten samples 80 µs apart
/// in one episode are one row, not ten. A series never above its mean (a
/// constant figure) is one episode.
fn worst_episodes(figures: &[(usize, f64)]) -> Vec<(usize, f64)> {
    if figures.is_empty() {
        return Vec::new();
    }
    let mean = figures.iter().map(|&(_, f)| f).sum::<f64>() / figures.len() as f64;
    let mut out: Vec<(usize, f64)> = Vec::new();
    let mut run: Option<(usize, f64)> = None;
    for &(i, f) in figures {
        if f > mean {
            run = Some(match run {
                Some(best) if best.1 >= f => best,
                _ => (i, f),
            });
        } else if let Some(best) = run.take() {
            out.push(best);
        }
    }
    out.extend(run);
    if out.is_empty() {
        out.extend(figures.first().copied());
    }
    out
}

/// Fragmentation per memory of `profile`: the allocator's figure over time, its worst points with what was live there, reserved memory not in use, and address gaps.
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
            .filter_map(|(i, s)| sample_fragmentation(&s).map(|f| (i, f)))
            .collect();
        let allocator = series_stats(&figures);
        let mut worst = worst_episodes(&figures);
        // Worst first; the earlier point first among equals.
        worst.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        worst.truncate(options.top);
        let end_index = if replay::uses_instants(memory) {
            memory.instants.len().saturating_sub(1)
        } else {
            memory.events.len()
        };
        let worst_points: Vec<(usize, usize)> = worst
            .iter()
            .map(|&(s, _)| (replay::point_of_sample(memory, s), s))
            .collect();
        let mut wanted: Vec<usize> = vec![peak.point.index, end_index];
        wanted.extend(worst_points.iter().map(|&(p, _)| p));
        let (unused_reserved, reserved_at) = unused_reserved(memory, &wanted);
        let point = |index: usize, sample: Option<usize>| {
            let reserved = reserved_at.get(&index).copied();
            point_frag(profile, memory, options, index, sample, reserved)
        };
        let end_sample = memory.allocator_samples.len().checked_sub(1);
        let layout = segments::layout(&profile.names, memory);
        let mut worst: Vec<PointFrag> = worst_points
            .iter()
            .filter_map(|&(p, s)| point(p, Some(s)))
            .collect();
        if !replay::uses_instants(memory) {
            let ats: Vec<i64> = worst.iter().map(|w| w.at).collect();
            if let Some(labels) = super::distinct_moment_labels(memory, &ats) {
                for (w, label) in worst.iter_mut().zip(labels) {
                    w.label = label;
                }
            }
        }
        memories.push(MemoryFrag {
            header: facts.header,
            samples_with_fragmentation: figures.len(),
            allocator,
            unused_reserved,
            at_peak: point(peak.point.index, peak.sample),
            at_end: point(end_index, end_sample),
            worst,
            // A memory with no events has no moment to name.
            segments_label: layout
                .as_ref()
                .filter(|_| !memory.events.is_empty())
                .and_then(|_| replay::point_at(memory, end_index))
                .map(|p| point_label(memory, p.index, p.at)),
            layout,
            has_addresses: memory.allocations.iter().any(|a| a.address.is_some()),
        });
    }
    FragReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        memories,
    }
}

/// Reserved memory not in use over `memory`'s timeline, and the reserved
/// figures at the `wanted` points, from one walk.
fn unused_reserved(
    memory: &Memory,
    wanted: &[usize],
) -> (Option<UnusedReserved>, HashMap<usize, ReservedUse>) {
    let mut at: HashMap<usize, ReservedUse> = HashMap::new();
    let (mut points, mut sum, mut max, mut last): (usize, u128, Option<ReservedUse>, u64) =
        (0, 0, None, 0);
    segments::for_each_reserved_point(memory, |r| {
        let unused = r.unused_bytes();
        points += 1;
        sum += u128::from(unused);
        last = unused;
        if max.is_none_or(|m| unused > m.unused_bytes()) {
            max = Some(r);
        }
        if wanted.contains(&r.point.index) {
            at.insert(r.point.index, r);
        }
    });
    let stats = max.map(|m| UnusedReserved {
        points,
        max_bytes: m.unused_bytes(),
        max_at: m.point.at,
        max_label: point_label(memory, m.point.index, m.point.at),
        max_reserved_bytes: m.reserved_bytes,
        mean_bytes: u64::try_from(sum / points.max(1) as u128).unwrap_or(u64::MAX),
        last_bytes: last,
    });
    (stats, at)
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
    reserved: Option<ReservedUse>,
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
        g.1 = g.1.saturating_add(u64::from(a.count));
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
        allocator_fragmentation: s.as_ref().and_then(sample_fragmentation),
        in_use_bytes: s.and_then(|s| s.allocated_bytes()).unwrap_or(p.bytes),
        reserved_bytes: reserved.map(|r| r.reserved_bytes),
        unused_reserved_bytes: reserved.map(|r| r.unused_bytes()),
        free_bytes: s.and_then(|s| s.free_bytes()),
        live_allocations: p.buffers,
        // Without addresses the held ranges would read as all free.
        address: segments::held_at(memory, index)
            .filter(|_| memory.allocations.iter().any(|a| a.address.is_some()))
            .map(|held| address_fragmentation(memory, &live, &held)),
        top_groups,
    })
}

/// Whether the allocator's figure reads 0.0% at every point it gives one.
fn never_fragmented(m: &MemoryFrag) -> bool {
    m.allocator.as_ref().is_some_and(|a| a.max < 0.0005)
}

fn percent(f: Option<f64>) -> Cell {
    Cell::Fraction(f)
}

impl FragReport {
    /// The memories biggest peak first (ties by id), as the Memories table
    /// of `summary` and `peak` list them.
    fn biggest_first(&self) -> Vec<&MemoryFrag> {
        let mut all: Vec<&MemoryFrag> = self.memories.iter().collect();
        let peak = |m: &MemoryFrag| m.at_peak.as_ref().map_or(0, |p| p.in_use_bytes);
        all.sort_by(|a, b| {
            peak(b)
                .cmp(&peak(a))
                .then_with(|| a.header.id.cmp(&b.header.id))
        });
        all
    }

    /// One row per memory, biggest in use at its peak first; with `fold`,
    /// those past the [`super::LISTED_MEMORIES`] largest are one row (CSV
    /// keeps every row).
    fn fragmentation_table(&self, fold: bool) -> Table {
        let mut t = Table::new(
            "Fragmentation",
            vec![
                "memory",
                "allocator_max",
                "allocator_mean",
                "allocator_at_peak",
                "reserved_at_peak",
                "unused_at_peak",
                "unused_max",
                "address_at_peak",
                "address_at_end",
                "largest_gap_at_peak",
            ],
        );
        let bytes = |b: Option<u64>| b.map_or(Cell::Text("n/a".into()), Cell::Bytes);
        let all = self.biggest_first();
        let listed = if fold {
            all.len().min(super::LISTED_MEMORIES)
        } else {
            all.len()
        };
        for m in &all[..listed] {
            let peak = m.at_peak.as_ref();
            t.rows.push(vec![
                display_id(&m.header.id).into(),
                percent(m.allocator.as_ref().map(|a| a.max)),
                percent(m.allocator.as_ref().map(|a| a.mean)),
                percent(peak.and_then(|p| p.allocator_fragmentation)),
                bytes(peak.and_then(|p| p.reserved_bytes)),
                bytes(peak.and_then(|p| p.unused_reserved_bytes)),
                bytes(m.unused_reserved.as_ref().map(|u| u.max_bytes)),
                percent(peak.and_then(|p| p.address.map(|a| a.fragmentation))),
                percent(
                    m.at_end
                        .as_ref()
                        .and_then(|p| p.address.map(|a| a.fragmentation)),
                ),
                bytes(peak.and_then(|p| p.address).map(|a| a.largest_gap_bytes)),
            ]);
        }
        if listed < all.len() {
            let more = all.len() - listed;
            let mut row = vec![Cell::Empty; t.columns.len()];
            row[0] = format!("+{more} more").into();
            t.rows.push(row);
            t.notes.push(super::beyond_note(more));
        }
        t
    }
}

impl Report for FragReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = vec![self.fragmentation_table(true)];
        for m in self
            .biggest_first()
            .into_iter()
            .take(super::LISTED_MEMORIES)
        {
            let Some(layout) = &m.layout else { continue };
            let mut t = Table::ranked(
                format!(
                    "Segments at the end of the profile{} — {}: {} reserved, {} allocated",
                    m.segments_label
                        .as_ref()
                        .map_or(String::new(), |l| format!(" ({l})")),
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
        for m in self.biggest_first() {
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
            // An allocator that never reports fragmentation has no worst
            // moment: ten rows of 0.0% say nothing (a note says it).
            if never_fragmented(m) {
                continue;
            }
            for w in m.worst.iter() {
                t.rows.push(vec![
                    Cell::Figure {
                        value: Some(w.at),
                        label: w.label.clone(),
                    },
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
        self.fragmentation_table(false)
    }
    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.provenance.warnings)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let with_gaps = |p: &Option<PointFrag>| p.as_ref().is_some_and(|p| p.address.is_some());
        if self.memories.iter().any(|m| with_gaps(&m.at_peak)) {
            notes.push(
                "address: 1 − largest gap / all gaps; a gap is free memory between live \
                 allocations inside the address ranges the allocator holds (its segments, a \
                 program's memory space); address space between those ranges is not counted"
                    .to_string(),
            );
        }
        if self.memories.iter().any(|m| m.unused_reserved.is_some()) {
            notes.push(
                "unused: memory the allocator reserved that the program was not using \
                 (reserved − in use); max is over the whole profile"
                    .to_string(),
            );
        }
        let mut about: Vec<(String, String)> = Vec::new();
        for m in &self.memories {
            let id = display_id(&m.header.id);
            if let Some(u) = m.unused_reserved.as_ref().filter(|u| u.max_bytes > 0) {
                about.push((
                    id.clone(),
                    format!(
                        "most reserved memory unused: {} of {} reserved, at {}",
                        crate::report::units::bytes(u.max_bytes),
                        crate::report::units::bytes(u.max_reserved_bytes),
                        u.max_label
                    ),
                ));
            }
            if never_fragmented(m) {
                about.push((
                    id.clone(),
                    format!(
                        "the allocator's fragmentation stays under 0.05% at all its {} \
                         points: no worst moment to list",
                        m.samples_with_fragmentation
                    ),
                ));
            }
            let addressed = m.has_addresses;
            if m.allocator.is_none() && m.unused_reserved.is_none() && !with_gaps(&m.at_peak) {
                about.push((
                    id,
                    "no fragmentation figure: the allocator reports none, and the profile \
                     does not say which address ranges it holds"
                        .to_string(),
                ));
            } else if !with_gaps(&m.at_peak) && addressed {
                about.push((
                    id,
                    "address gaps n/a: the profile does not say which address ranges the \
                     allocator holds"
                        .to_string(),
                ));
            }
        }
        notes.extend(super::memory_notes(about));
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, MemoryKind, SiteId};

    use crate::model::{AddressRange, Event, EventKind, HeldChange};

    fn memory_with(allocations: &[(u64, u64)], held: &[(u64, u64)]) -> Memory {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        for &(address, bytes) in allocations {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: crate::model::Address::new(address),
                site: SiteId(0),
            });
        }
        m.held = held
            .iter()
            .map(|&(start, bytes)| AddressRange { start, bytes })
            .collect();
        m
    }

    #[test]
    fn gaps_are_free_memory_inside_the_held_ranges_only() {
        // Held: [0,400) and, far away, [1000,1100). Live: [0,100) [150,200)
        // [350,400), one inside the first, and [1000,1050).
        let m = memory_with(
            &[(0, 100), (150, 50), (350, 50), (10, 20), (1000, 50)],
            &[(0, 400), (1000, 100)],
        );
        let held = segments::held_at(&m, 0).unwrap();
        let live: Vec<AllocId> = (0..5).map(AllocId).collect();
        let f = address_fragmentation(&m, &live, &held);
        // Gaps 50, 150 and the 50 after [1000,1050); the 600 bytes between
        // the two ranges are not the allocator's.
        assert_eq!(
            (f.held_bytes, f.gap_bytes, f.largest_gap_bytes, f.gaps),
            (500, 250, 150, 3)
        );
        assert!((f.fragmentation - 0.4).abs() < 1e-12);
        // Nothing live: every held range is one gap.
        let empty = address_fragmentation(&m, &[], &held);
        assert_eq!(
            (empty.gap_bytes, empty.largest_gap_bytes, empty.gaps),
            (500, 400, 2)
        );
        // A profile that does not say what the allocator holds has no figure.
        let unknown = memory_with(&[(0, 100)], &[]);
        assert!(segments::held_at(&unknown, 0).is_none());
    }

    #[test]
    fn held_ranges_at_a_point_undo_the_later_segment_events() {
        // Events: alloc a (in segment A), alloc b (in segment B), free b;
        // segment B reserved before alloc b, given back after free b; C
        // reserved after the last event.
        let mut m = memory_with(&[(0, 10), (100, 10)], &[(0, 50), (200, 30)]);
        for (i, (kind, alloc)) in [
            (EventKind::Alloc, 0),
            (EventKind::Alloc, 1),
            (EventKind::Free, 1),
        ]
        .into_iter()
        .enumerate()
        {
            m.events.push(Event::new(i as i64, kind, AllocId(alloc)));
        }
        let change = |events_before, start, bytes, reserved| HeldChange {
            events_before,
            at: events_before as i64,
            range: AddressRange { start, bytes },
            reserved,
        };
        m.held_changes = vec![
            change(1, 100, 40, true),
            change(3, 100, 40, false),
            change(3, 200, 30, true),
        ];
        // An allocator that reports no reserved figure (a program's space,
        // held whole) has no unused figure, held ranges or not.
        let mut reports = 0;
        segments::for_each_reserved_point(&m, |_| reports += 1);
        assert_eq!(reports, 0);
        // The held ranges, not the report, time each change.
        m.allocator_samples
            .push(AllocatorSample::new(0).with_reserved_bytes(Some(80)));
        let bytes = |index| segments::held_at(&m, index).unwrap().bytes();
        // B counts from the point after the allocation it was reserved for,
        // and until the point after the next event following its release;
        // the last point is the end state.
        assert_eq!(
            [bytes(0), bytes(1), bytes(2), bytes(3)],
            [50, 50, 90, 50 + 30]
        );
        let mut walked = Vec::new();
        segments::for_each_reserved_point(&m, |r| {
            walked.push((r.point.index, r.reserved_bytes, r.unused_bytes()))
        });
        assert_eq!(walked, [(0, 50, 50), (1, 50, 40), (2, 90, 70), (3, 80, 70)]);
        let at_peak = address_fragmentation(
            &m,
            &[AllocId(0), AllocId(1)],
            &segments::held_at(&m, 2).unwrap(),
        );
        assert_eq!(
            (
                at_peak.held_bytes,
                at_peak.gap_bytes,
                at_peak.largest_gap_bytes
            ),
            (90, 70, 40)
        );
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
