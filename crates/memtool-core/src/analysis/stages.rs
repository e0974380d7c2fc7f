//! Annotation stages: for each range the program annotated
//! ([`Memory::annotations`]: `record_function`, an optimizer's step), the
//! live bytes at its START and END — memory allocated before the recording
//! included, as the replay counts it — the most live inside, and what made
//! the difference, by user frame and by category.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{EventKind, Memory, Names, SiteId};

use super::group::{self, GroupBy};
use crate::report::{Cell, Table};

use super::{display_id, point_label, replay, FrameFilter};

/// One annotated range of a memory, with its figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stage {
    /// The range's name (`Optimizer.step#AdamW.step`).
    pub name: String,
    /// Its START on the memory's axis.
    pub start: i64,
    /// The START as a person reads it (`t+24.82 ms`).
    pub start_label: String,
    /// Its END on the memory's axis.
    pub end: i64,
    /// The END as a person reads it.
    pub end_label: String,
    /// Bytes live at the START: after every event before it.
    pub start_bytes: u64,
    /// Bytes live at the END: after every event up to it.
    pub end_bytes: u64,
    /// `end_bytes - start_bytes`.
    pub growth_bytes: i64,
    /// The most bytes live at any point from START to END.
    pub peak_bytes: u64,
    /// Bytes allocated inside the range (whether freed or not).
    pub allocated_bytes: u64,
    /// Bytes freed inside the range.
    pub freed_bytes: u64,
    /// What made the growth, by user frame: per group, the bytes allocated
    /// inside and still live at the END less those live at the START and
    /// freed inside; groups that changed nothing are left out. Largest
    /// change first (ties by key). They add up to `growth_bytes`.
    pub growth_by_user_frame: Vec<GroupChange>,
    /// The same by category.
    pub growth_by_category: Vec<GroupChange>,
}

/// One group's part of a stage's growth.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupChange {
    /// The group's label.
    pub key: String,
    /// Bytes it added (negative: released) over the range.
    pub bytes: i64,
}

/// The point (as numbered by [`replay::for_each_point`]) at position `at`
/// of an event stream: after every event before `at` (`inclusive`: at or
/// before it).
pub fn point_at_position(memory: &Memory, at: i64, inclusive: bool) -> usize {
    if inclusive {
        memory.events.partition_point(|e| e.at <= at)
    } else {
        memory.events.partition_point(|e| e.at < at)
    }
}

/// The stages of `memory`, in order of their start; empty for a memory with
/// no annotations, or one of instants (no events to place them among).
pub fn stages(memory: &Memory, names: &Names, filter: &FrameFilter) -> Vec<Stage> {
    if memory.annotations.is_empty() || replay::uses_instants(memory) {
        return Vec::new();
    }
    // Live bytes at every point, and the event that made and freed each
    // allocation, from one walk. The bytes alone are counted (not the
    // requested bytes and buffers beside), and the events are kept in four
    // bytes each where they fit: two `Option<usize>` per allocation were
    // 16.6 MB of fresh pages for a 10^6-entry snapshot, most of its stages.
    let mut bytes_at = Vec::with_capacity(memory.events.len() + 1);
    let mut made = EventPerAllocation::none(memory);
    let mut freed = EventPerAllocation::none(memory);
    let mut set = replay::LiveBytes::at_start(memory);
    bytes_at.push(set.bytes);
    for (i, event) in memory.events.iter().enumerate() {
        if set.apply(event.kind(), event.alloc()) {
            let slot = match event.kind() {
                EventKind::Alloc => &mut made,
                EventKind::Free => &mut freed,
            };
            slot.set(event.alloc().index(), i);
        }
        bytes_at.push(set.bytes);
    }
    let mut labels: rustc_hash::FxHashMap<(SiteId, GroupBy), String> = Default::default();
    let mut label = |site: SiteId, by: GroupBy| {
        labels
            .entry((site, by))
            .or_insert_with(|| group::label(names, site, by, filter))
            .clone()
    };
    memory
        .annotations
        .iter()
        .map(|a| {
            let first = point_at_position(memory, a.start, false);
            let last = point_at_position(memory, a.end, true).max(first);
            let (mut allocated, mut freed_bytes) = (0u64, 0u64);
            let mut by_site: BTreeMap<SiteId, i64> = BTreeMap::new();
            for (i, event) in memory.events.iter().enumerate().take(last).skip(first) {
                let id = event.alloc().index();
                let (Some(allocation), Some(made_at), Some(freed_at)) =
                    (memory.allocations.get(id), made.get(id), freed.get(id))
                else {
                    continue;
                };
                let size = allocation.bytes;
                let signed = i64::try_from(size).unwrap_or(i64::MAX);
                let change = by_site.entry(allocation.site).or_default();
                match event.kind() {
                    EventKind::Alloc if made_at == Some(i) => {
                        allocated = allocated.saturating_add(size);
                        if freed_at.is_none_or(|f| f >= last) {
                            *change = change.saturating_add(signed);
                        }
                    }
                    EventKind::Free if freed_at == Some(i) => {
                        freed_bytes = freed_bytes.saturating_add(size);
                        if made_at.is_none_or(|m| m < first) {
                            *change = change.saturating_sub(signed);
                        }
                    }
                    _ => {}
                }
            }
            let mut change_by = |by: GroupBy| {
                let mut sums: BTreeMap<String, i64> = BTreeMap::new();
                for (&site, &bytes) in &by_site {
                    let sum = sums.entry(label(site, by)).or_default();
                    *sum = sum.saturating_add(bytes);
                }
                let mut rows: Vec<GroupChange> = sums
                    .into_iter()
                    .filter(|&(_, bytes)| bytes != 0)
                    .map(|(key, bytes)| GroupChange { key, bytes })
                    .collect();
                rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
                rows
            };
            let (start_bytes, end_bytes) = (bytes_at[first], bytes_at[last]);
            Stage {
                name: a.name.clone(),
                start: a.start,
                start_label: mark_label(memory, first, a.start),
                end: a.end,
                end_label: mark_label(memory, last, a.end),
                start_bytes,
                end_bytes,
                growth_bytes: signed_difference(end_bytes, start_bytes),
                peak_bytes: bytes_at[first..=last].iter().copied().max().unwrap_or(0),
                allocated_bytes: allocated,
                freed_bytes,
                growth_by_user_frame: change_by(GroupBy::UserFrame),
                growth_by_category: change_by(GroupBy::Category),
            }
        })
        .collect()
}

/// An event index per allocation, or none: a `u32` each where the
/// memory's events fit in one (any file that loads in memory), else an
/// `Option<usize>`.
enum EventPerAllocation {
    Narrow(Vec<u32>),
    Wide(Vec<Option<usize>>),
}

impl EventPerAllocation {
    /// `Narrow`'s none.
    const NONE: u32 = u32::MAX;

    /// None for every allocation of `memory`.
    fn none(memory: &Memory) -> EventPerAllocation {
        let n = memory.allocations.len();
        if memory.events.len() < Self::NONE as usize {
            EventPerAllocation::Narrow(vec![Self::NONE; n])
        } else {
            EventPerAllocation::Wide(vec![None; n])
        }
    }

    /// Allocation `id`'s event (`Some(None)`: none); `None` for an id out
    /// of range.
    fn get(&self, id: usize) -> Option<Option<usize>> {
        match self {
            EventPerAllocation::Narrow(v) => {
                v.get(id).map(|&e| (e != Self::NONE).then_some(e as usize))
            }
            EventPerAllocation::Wide(v) => v.get(id).copied(),
        }
    }

    fn set(&mut self, id: usize, event: usize) {
        match self {
            // `event` is below `NONE`: the events fit (see `none`).
            EventPerAllocation::Narrow(v) => {
                if let Some(slot) = v.get_mut(id) {
                    *slot = event as u32;
                }
            }
            EventPerAllocation::Wide(v) => {
                if let Some(slot) = v.get_mut(id) {
                    *slot = Some(event);
                }
            }
        }
    }
}

/// A START or END as its table shows it: the time since the recording
/// started alone (`t+45.34 ms`), the stage's name saying what it was doing;
/// on other axes the point's label.
fn mark_label(memory: &Memory, index: usize, at: i64) -> String {
    match memory.since_start_ps(at) {
        Some(ps) => crate::report::units::moment(ps, None, None),
        None => point_label(memory, index, at),
    }
}

/// `a - b` as a signed figure, capped.
fn signed_difference(a: u64, b: u64) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

/// The tables of one memory's stages (`summary`'s, the page's): the stages,
/// then what each added, when any added anything.
pub fn tables(id: &str, stages: &[Stage]) -> Vec<Table> {
    let mut out = vec![stages_table(id, stages)];
    let growth = growth_table(id, stages);
    if !growth.rows.is_empty() {
        out.push(growth);
    }
    out
}

/// The annotation stages of one memory: live bytes at each START and END
/// and what made the difference (JSON has every change, by user frame and
/// by category, and the bytes allocated and freed inside).
fn stages_table(id: &str, stages: &[Stage]) -> Table {
    // Ranked: the text exporters show the first `--top` (a trace may
    // annotate thousands of collectives).
    let mut t = Table::ranked(
        format!("Annotation stages — {}", display_id(id)),
        vec![
            "stage",
            "start",
            "end",
            "live_at_start",
            "live_at_end",
            "growth",
            "peak_inside",
        ],
    );
    for s in stages {
        t.rows.push(vec![
            s.name.clone().into(),
            Cell::Figure {
                value: Some(s.start),
                label: s.start_label.clone(),
            },
            Cell::Figure {
                value: Some(s.end),
                label: s.end_label.clone(),
            },
            Cell::Bytes(s.start_bytes),
            Cell::Bytes(s.end_bytes),
            Cell::DeltaBytes(s.growth_bytes),
            Cell::Bytes(s.peak_bytes),
        ]);
    }
    t
}

/// What made each stage's growth: its user frames' changes, then its
/// categories', largest first, the stages in order.
fn growth_table(id: &str, stages: &[Stage]) -> Table {
    let mut t = Table::ranked(
        format!("What each stage added — {}", display_id(id)),
        vec!["stage", "start", "by", "group", "bytes"],
    );
    for s in stages {
        for (by, changes) in [
            (GroupBy::UserFrame, &s.growth_by_user_frame),
            (GroupBy::Category, &s.growth_by_category),
        ] {
            for c in changes {
                t.rows.push(vec![
                    s.name.clone().into(),
                    Cell::Figure {
                        value: Some(s.start),
                        label: s.start_label.clone(),
                    },
                    by.name().into(),
                    c.key.clone().into(),
                    Cell::DeltaBytes(c.bytes),
                ]);
            }
        }
    }
    t
}

/// Every memory's stages as one table, a row per stage with its memory and
/// every figure (`summary --stages --format csv`).
pub fn csv_table<'a>(memories: impl IntoIterator<Item = (&'a str, &'a [Stage])>) -> Table {
    let mut t = Table::new(
        "Annotation stages",
        vec![
            "memory",
            "stage",
            "start",
            "end",
            "live_at_start",
            "live_at_end",
            "growth",
            "peak_inside",
            "allocated",
            "freed",
        ],
    );
    for (id, stages) in memories {
        for s in stages {
            t.rows.push(vec![
                id.into(),
                s.name.clone().into(),
                Cell::Int(s.start),
                Cell::Int(s.end),
                Cell::Bytes(s.start_bytes),
                Cell::Bytes(s.end_bytes),
                Cell::DeltaBytes(s.growth_bytes),
                Cell::Bytes(s.peak_bytes),
                Cell::Bytes(s.allocated_bytes),
                Cell::Bytes(s.freed_bytes),
            ]);
        }
    }
    t
}
