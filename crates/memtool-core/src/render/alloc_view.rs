//! The allocation view (PyTorch memory_viz's "Active Memory Timeline"): every
//! allocation its own band, stacked in allocation order, so that a free
//! lets the bands above it fall. Precomputed here as columns of runs, so
//! that a page of 10^6 allocations carries a few hundred thousand numbers,
//! not the allocations: each column is the stack at its highest point (no
//! peak is lost), the largest allocations kept as bands of their own (the
//! ones hover names), the rest between two kept bands merged into one run.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::analysis::frames::FrameFilter;
use crate::analysis::group::{self, GroupBy};
use crate::analysis::replay;
use crate::model::{EventKind, Memory, Names, SiteId};

use super::{color, escape};

/// Columns of the view (at most; fewer when there are fewer events).
pub(super) const COLUMNS: usize = 600;
/// Allocations kept as bands of their own: the largest.
pub(super) const KEPT: usize = 500;
/// Runs in all columns together; past it a column is one merged run.
const MAX_RUNS: usize = 120_000;
/// Height units of the tallest column: heights are sent in units of
/// `unit` bytes, exact to a 4,000th of the peak (a 360 px chart shows
/// a 360th): smaller runs merge into their neighbours.
const HEIGHT_UNITS: u64 = 4_000;
/// Characters of a group label kept (the tooltip's line, the colour's key).
const MAX_KEY_CHARS: usize = 160;

/// The groupings the user can colour the bands by, in `KeptAlloc::g` order;
/// [`groupings`] adds the CUDA stream and the compiled graph where the
/// memory records them.
pub(super) const GROUPINGS: [GroupBy; 4] = [
    GroupBy::UserFrame,
    GroupBy::Category,
    GroupBy::Phase,
    GroupBy::Op,
];

/// The groupings of a memory's picker: [`GROUPINGS`], then the stream when
/// its allocations name two or more, then the compiled graph when any names
/// one.
fn groupings(names: &Names, memory: &Memory) -> Vec<GroupBy> {
    let mut streams = memory
        .allocations
        .iter()
        .filter_map(|a| names.site_of(a.site).stream);
    let first = streams.next();
    let two_streams = first.is_some_and(|first| streams.any(|s| s != first));
    let compiled = memory
        .allocations
        .iter()
        .any(|a| names.site_of(a.site).compiled_graph.is_some());
    let mut out = GROUPINGS.to_vec();
    out.extend(two_streams.then_some(GroupBy::Stream));
    out.extend(compiled.then_some(GroupBy::CompiledGraph));
    out
}

#[derive(Debug, Serialize)]
pub(super) struct AllocView {
    /// Events in the memory: column `c` covers events
    /// `[c·events/columns, (c+1)·events/columns)`.
    pub events: usize,
    /// Position (relative to the timeline's x0) where each column starts,
    /// and where the last one ends: the time axis.
    pub t: Vec<i64>,
    /// Bytes per height unit.
    pub unit: u64,
    /// Per column: the number of runs, then each run as `band, height`
    /// (units), bottom first; band 0 is merged smaller allocations, band
    /// `k + 1` the kept allocation `k`.
    pub runs: Vec<u32>,
    /// The largest allocations, largest first.
    pub kept: Vec<KeptAlloc>,
    /// Group labels `KeptAlloc::g` points to, and each one's colour (the
    /// timeline's for the same label).
    pub keys: Vec<String>,
    pub colors: Vec<String>,
    /// The picker's groupings, as named there (`user frame`, `stream`).
    pub groupings: Vec<String>,
    /// Allocations in all.
    pub allocations: usize,
    /// The tallest column's live bytes (its highest point: the peak of
    /// the replay) by group under each of `groupings`, as `[key, bytes]`
    /// largest first — every live allocation, kept or merged, so they add
    /// up to `top`: the view's legend counts what its columns count.
    pub legend: Vec<Vec<[u64; 2]>>,
    pub top: u64,
    /// The grouping the bands are coloured by when the page opens (an
    /// index into [`GROUPINGS`]): the timeline's, where it is one of them.
    pub by: u32,
}

#[derive(Debug, Serialize)]
pub(super) struct KeptAlloc {
    pub b: u64,
    /// Index of the event that made it (-1: live at the start) and that
    /// freed it (-1: live to the end).
    pub made: i64,
    pub freed: i64,
    /// Its group under each of `AllocView::groupings`, as indices into `keys`.
    pub g: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Its site in the drill-down's blocks (`blocks.sites`), whose stack a
    /// click shows; -1 when that stack was not kept.
    pub site: i64,
}

/// Sums of live bytes by allocation rank (a Fenwick tree).
struct Sums(Vec<u64>);

impl Sums {
    fn add(&mut self, rank: usize, bytes: u64, add: bool) {
        let mut i = rank + 1;
        while i < self.0.len() {
            self.0[i] = if add {
                self.0[i].wrapping_add(bytes)
            } else {
                self.0[i].wrapping_sub(bytes)
            };
            i += i & i.wrapping_neg();
        }
    }
    /// Live bytes of ranks below `rank`.
    fn below(&self, rank: usize) -> u64 {
        let (mut i, mut sum) = (rank.min(self.0.len() - 1), 0u64);
        while i > 0 {
            sum = sum.wrapping_add(self.0[i]);
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// The view of an event stream, `None` for a memory of snapshots or one
/// without events.
pub(super) fn alloc_view(
    names: &Names,
    memory: &Memory,
    x0: i64,
    filter: &FrameFilter,
    site_of: Option<&HashMap<SiteId, i64>>,
) -> Option<AllocView> {
    let n = memory.events.len();
    if replay::uses_instants(memory) || n == 0 || memory.allocations.is_empty() {
        return None;
    }
    let columns = COLUMNS.min(n);
    let first_event = |c: usize| c * n / columns;
    // Allocation order: live at the start first, then as made.
    let mut rank = vec![usize::MAX; memory.allocations.len()];
    let mut next = 0usize;
    let ids = memory.live_at_start.iter().copied().chain(
        memory
            .events
            .iter()
            .filter(|e| e.kind() == EventKind::Alloc)
            .map(|e| e.alloc()),
    );
    for id in ids {
        if let Some(r) = rank.get_mut(id.index()).filter(|r| **r == usize::MAX) {
            *r = next;
            next += 1;
        }
    }
    // Each column drawn at its highest point (point i + 1 follows event i;
    // every column holds at least one event).
    let mut best: Vec<(usize, u64)> = vec![(0, 0); columns];
    let mut column = 0usize;
    replay::for_each_point(memory, |p| {
        let Some(event) = p.index.checked_sub(1) else {
            return;
        };
        while column + 1 < columns && first_event(column + 1) <= event {
            column += 1;
        }
        if best[column].0 == 0 || p.bytes > best[column].1 {
            best[column] = (p.index, p.bytes);
        }
    });
    let top = best.iter().map(|b| b.1).max().unwrap_or(0);
    let unit = top.div_ceil(HEIGHT_UNITS).max(1);

    // The kept allocations: the largest, and their lifespans.
    let mut by_size: Vec<usize> = (0..memory.allocations.len())
        .filter(|&i| rank[i] != usize::MAX)
        .collect();
    by_size.sort_by(|&a, &b| {
        memory.allocations[b]
            .bytes
            .cmp(&memory.allocations[a].bytes)
            .then(a.cmp(&b))
    });
    by_size.truncate(KEPT);
    let kept_of: HashMap<usize, u32> = by_size
        .iter()
        .enumerate()
        .map(|(k, &i)| (i, k as u32))
        .collect();
    let mut spans: Vec<(i64, i64)> = vec![(-1, -1); by_size.len()];
    replay::for_each_lifespan(memory, |s| {
        if let Some(&k) = kept_of.get(&s.alloc.index()) {
            let span = &mut spans[k as usize];
            // The first lifespan's start, the last one's end.
            if span.0 < 0 {
                span.0 = s.made.map_or(-1, |m| m as i64);
            }
            span.1 = s.freed.map_or(-1, |f| f as i64);
        }
    });

    // Replay, emitting each column's stack at its drawn point.
    let mut sums = Sums(vec![0; next + 1]);
    let mut live = vec![false; memory.allocations.len()];
    let mut kept_live: BTreeMap<usize, u32> = BTreeMap::new();
    let mut runs: Vec<u32> = Vec::new();
    let mut total_runs = 0usize;
    let mut apply =
        |id: usize, add: bool, sums: &mut Sums, kept_live: &mut BTreeMap<usize, u32>| {
            let (Some(l), Some(&r)) = (live.get_mut(id), rank.get(id)) else {
                return;
            };
            if *l == add || r == usize::MAX {
                return;
            }
            *l = add;
            sums.add(r, memory.allocations[id].bytes, add);
            if let Some(&k) = kept_of.get(&id) {
                if add {
                    kept_live.insert(r, k);
                } else {
                    kept_live.remove(&r);
                }
            }
        };
    for id in &memory.live_at_start {
        apply(id.index(), true, &mut sums, &mut kept_live);
    }
    let mut emit = |sums: &Sums, kept_live: &BTreeMap<usize, u32>, runs: &mut Vec<u32>| {
        let at = runs.len();
        runs.push(0);
        let mut count = 0u32;
        let mut drawn = 0u64;
        let mut push = |band: u32, upto: u64, runs: &mut Vec<u32>, drawn: &mut u64| {
            let units = upto / unit;
            if units > *drawn {
                runs.push(band);
                runs.push((units - *drawn) as u32);
                *drawn = units;
                count += 1;
            }
        };
        if total_runs < MAX_RUNS {
            for (&r, &k) in kept_live.iter() {
                let start = sums.below(r);
                push(0, start, runs, &mut drawn);
                let end = start.saturating_add(memory.allocations[by_size[k as usize]].bytes);
                push(k + 1, end, runs, &mut drawn);
            }
        }
        push(0, sums.below(usize::MAX), runs, &mut drawn);
        runs[at] = count;
        total_runs += count as usize;
    };
    let mut column = 0usize;
    for (i, e) in memory.events.iter().enumerate() {
        apply(
            e.alloc().index(),
            e.kind() == EventKind::Alloc,
            &mut sums,
            &mut kept_live,
        );
        while column < columns && best[column].0 == i + 1 {
            emit(&sums, &kept_live, &mut runs);
            column += 1;
        }
    }
    while column < columns {
        // A column whose point was never reached (cannot happen for
        // well-formed points): drawn empty.
        runs.push(0);
        column += 1;
    }

    // The kept allocations' labels.
    let picked = groupings(names, memory);
    let mut keys = Keys::default();
    let kept = by_size
        .iter()
        .zip(&spans)
        .map(|(&i, &(made, freed))| {
            let a = &memory.allocations[i];
            let mut g = vec![0u32; picked.len()];
            for (slot, &by) in g.iter_mut().zip(&picked) {
                *slot = keys.of(names, a.site, by, filter);
            }
            KeptAlloc {
                b: a.bytes,
                made,
                freed,
                g,
                shape: names
                    .site_of(a.site)
                    .shape
                    .map(|s| escape::label(names.str(s))),
                site: site_of.and_then(|m| m.get(&a.site).copied()).unwrap_or(-1),
            }
        })
        .collect();
    // The legend: the live set at the tallest column's point by group.
    let tallest = best
        .iter()
        .enumerate()
        .max_by_key(|&(c, b)| (b.1, std::cmp::Reverse(c)))
        .map_or(0, |(c, _)| c);
    let mut by_site: HashMap<SiteId, u64> = HashMap::new();
    for id in replay::live_at(memory, best[tallest].0) {
        let a = &memory.allocations[id.index()];
        // Saturating: sizes past 64 bits are capped, never a panic.
        let sum = by_site.entry(a.site).or_default();
        *sum = sum.saturating_add(a.bytes);
    }
    let mut by_site: Vec<(SiteId, u64)> = by_site.into_iter().collect();
    by_site.sort_by_key(|&(site, bytes)| (std::cmp::Reverse(bytes), site.0));
    let legend: Vec<Vec<[u64; 2]>> = picked
        .iter()
        .map(|&by| {
            let mut sums: HashMap<u32, u64> = HashMap::new();
            for &(site, bytes) in &by_site {
                let sum = sums.entry(keys.of(names, site, by, filter)).or_default();
                *sum = sum.saturating_add(bytes);
            }
            let mut rows: Vec<[u64; 2]> = sums.into_iter().map(|(k, b)| [k as u64, b]).collect();
            rows.sort_by_key(|r| (std::cmp::Reverse(r[1]), r[0]));
            rows
        })
        .collect();
    let mut t: Vec<i64> = (0..columns)
        .map(|c| memory.events[first_event(c)].at.wrapping_sub(x0))
        .collect();
    t.push(memory.events.last().map_or(0, |e| e.at.wrapping_sub(x0)));
    Some(AllocView {
        events: n,
        t,
        unit,
        runs,
        kept,
        keys: keys.keys,
        colors: keys.colors,
        groupings: picked
            .iter()
            .map(|by| by.name().replace('_', " "))
            .collect(),
        allocations: memory.allocations.len(),
        legend,
        top,
        by: 0,
    })
}

/// Group labels as the page shows them, each with its colour, numbered in
/// the order first met.
#[derive(Default)]
struct Keys {
    keys: Vec<String>,
    colors: Vec<String>,
    index: HashMap<String, u32>,
}

impl Keys {
    fn of(&mut self, names: &Names, site: SiteId, by: GroupBy, filter: &FrameFilter) -> u32 {
        let full = group::label(names, site, by, filter);
        let key = match full.char_indices().nth(MAX_KEY_CHARS) {
            Some((cut, _)) => format!("{}…", &full[..cut]),
            None => full,
        };
        let key = escape::label(&key);
        let next = self.keys.len() as u32;
        *self.index.entry(key.clone()).or_insert_with(|| {
            self.colors.push(color::group_color(&key));
            self.keys.push(key);
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, MemoryKind, Profile};

    /// Three allocations: when the first is freed the one above it falls to
    /// the bottom, as in memory_viz; one column per event, the largest
    /// allocation kept first.
    #[test]
    fn a_free_lets_the_bands_above_fall() {
        let mut profile = Profile::default();
        let site = profile.names.site(crate::model::Site::default());
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        for bytes in [100, 50, 70] {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site,
            });
        }
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        m.live_at_start = vec![AllocId(0)];
        m.events = vec![
            ev(1, EventKind::Alloc, 1),
            ev(2, EventKind::Free, 0),
            ev(3, EventKind::Alloc, 2),
            ev(4, EventKind::Free, 1),
        ];
        let view = alloc_view(&profile.names, &m, 0, &FrameFilter::default(), None).unwrap();
        assert_eq!(view.unit, 1);
        assert_eq!(view.t, vec![1, 2, 3, 4, 4]);
        // Kept largest first: 100 B (band 1), 70 B (band 2), 50 B (band 3).
        let sizes: Vec<u64> = view.kept.iter().map(|k| k.b).collect();
        assert_eq!(sizes, vec![100, 70, 50]);
        #[rustfmt::skip]
        assert_eq!(view.runs, vec![
            2, 1, 100, 3, 50, // 100 B live from the start, 50 B on top
            1, 3, 50,         // the 100 B freed: the 50 B falls
            2, 3, 50, 2, 70,  // 70 B made above it
            1, 2, 70,         // the 50 B freed
        ]);
        let spans: Vec<(i64, i64)> = view.kept.iter().map(|k| (k.made, k.freed)).collect();
        assert_eq!(spans, vec![(-1, 1), (2, -1), (0, 3)]);
        // The legend counts the tallest column (100 B + 50 B, after the
        // first event), one group under each grouping: the one site.
        assert_eq!(view.top, 150);
        for (i, rows) in view.legend.iter().enumerate() {
            assert_eq!(rows, &vec![[u64::from(view.kept[0].g[i]), 150]]);
        }
    }
}
