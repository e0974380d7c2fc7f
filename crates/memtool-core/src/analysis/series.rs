//! Per-group live bytes at chosen points of a memory's timeline: the input of
//! leak detection, for snapshots and event streams alike.

use rustc_hash::FxHashMap;

use crate::model::{Memory, Names, SiteId};

use super::group::{self, FrameFilter, GroupBy, SiteTotals, Totals};
use super::replay::{self, WalkStep};

/// Points to sample: every instant, or `max_points` evenly spaced points of an
/// event stream (always including the start and the end).
pub fn sample_points(memory: &Memory, max_points: usize) -> Vec<usize> {
    if replay::uses_instants(memory) {
        return (0..memory.instants.len()).collect();
    }
    let last = memory.events.len();
    let n = max_points.max(2).min(last + 1);
    if n <= 1 {
        return vec![0];
    }
    let mut points: Vec<usize> = (0..n).map(|i| i * last / (n - 1)).collect();
    points.dedup();
    points
}

/// The point after the last event of each step, when the memory has steps
/// with events: comparing step ends measures what each step left behind.
pub fn step_end_points(memory: &Memory) -> Vec<(i64, usize)> {
    super::steps::per_step(memory)
        .iter()
        .map(|s| (s.step, s.end_point))
        .collect()
}

/// Live totals per site at each of `points` (ascending point indices).
pub fn site_totals_at(memory: &Memory, points: &[usize]) -> Vec<SiteTotals> {
    if replay::uses_instants(memory) {
        return points
            .iter()
            .map(|&p| match memory.instants.get(p) {
                Some(instant) => group::totals_by_site(memory, &instant.live),
                None => SiteTotals::default(),
            })
            .collect();
    }
    let mut out = Vec::with_capacity(points.len());
    // Changed one event at a time: a map, made site-ordered at each point.
    let mut current: FxHashMap<SiteId, Totals> = FxHashMap::default();
    replay::walk_to_points(memory, points, |step| match step {
        WalkStep::Live(id) => {
            let a = memory.allocation(id);
            current.entry(a.site).or_default().add(Totals {
                bytes: a.bytes,
                requested_bytes: a.requested,
                count: u64::from(a.count),
            });
        }
        WalkStep::Freed(id) => {
            let a = memory.allocation(id);
            let t = current.entry(a.site).or_default();
            t.bytes = t.bytes.saturating_sub(a.bytes);
            t.requested_bytes = t.requested_bytes.saturating_sub(a.requested);
            t.count = t.count.saturating_sub(u64::from(a.count));
        }
        WalkStep::Point(_) => out.push(
            current
                .iter()
                .map(|(&site, &totals)| (site, totals))
                .collect(),
        ),
    });
    out
}

/// Live bytes per group at each of `points` (ascending point indices), where
/// allocation `i` belongs to group `group_of_alloc[i]` (ids past `groups` are
/// left out). `visit(k, totals)` sees the totals at the k-th point. Unlike
/// [`site_totals_at`] it keeps one vector of `groups` totals, however many
/// points are asked for, so it scales to a point per pixel column.
pub fn group_bytes_at(
    memory: &Memory,
    points: &[usize],
    group_of_alloc: &[u32],
    groups: usize,
    mut visit: impl FnMut(usize, &[u64]),
) {
    let mut totals = vec![0u64; groups];
    let slot = |id: crate::model::AllocId| {
        group_of_alloc
            .get(id.index())
            .map(|&g| g as usize)
            .filter(|&g| g < groups)
    };
    if replay::uses_instants(memory) {
        for (k, &p) in points.iter().enumerate() {
            totals.iter_mut().for_each(|t| *t = 0);
            for &id in memory.instants.get(p).map_or(&[][..], |i| &i.live[..]) {
                if let Some(g) = slot(id) {
                    totals[g] = totals[g].saturating_add(memory.allocation(id).bytes);
                }
            }
            visit(k, &totals);
        }
        return;
    }
    replay::walk_to_points(memory, points, |step| match step {
        WalkStep::Live(id) => {
            if let Some(g) = slot(id) {
                totals[g] = totals[g].saturating_add(memory.allocation(id).bytes);
            }
        }
        WalkStep::Freed(id) => {
            if let Some(g) = slot(id) {
                totals[g] = totals[g].saturating_sub(memory.allocation(id).bytes);
            }
        }
        WalkStep::Point(k) => visit(k, &totals),
    });
}

/// One group's values over the sampled points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSeries {
    /// The group.
    pub key: String,
    /// Its live bytes at each point.
    pub bytes: Vec<u64>,
    /// Its live buffers at each point.
    pub counts: Vec<u64>,
}

/// Labels and merges per-site totals into per-group series, sorted by label.
pub fn group_series(
    names: &Names,
    per_point: &[SiteTotals],
    by: GroupBy,
    filter: &FrameFilter,
) -> Vec<GroupSeries> {
    group_series_by(per_point, |site| group::label(names, site, by, filter))
}

/// Like [`group_series`], with the group of each site given by `key`.
pub fn group_series_by(
    per_point: &[SiteTotals],
    mut key: impl FnMut(SiteId) -> String,
) -> Vec<GroupSeries> {
    let n = per_point.len();
    // Each site is labelled once and each label looked up once: the series
    // are then summed by index.
    let mut group_of: FxHashMap<SiteId, usize> = FxHashMap::default();
    let mut by_key: FxHashMap<String, usize> = FxHashMap::default();
    let mut out: Vec<GroupSeries> = Vec::new();
    for (i, sites) in per_point.iter().enumerate() {
        for (site, totals) in sites.iter() {
            let g = *group_of.entry(site).or_insert_with(|| {
                let key = key(site);
                *by_key.entry(key).or_insert_with_key(|key| {
                    out.push(GroupSeries {
                        key: key.clone(),
                        bytes: vec![0; n],
                        counts: vec![0; n],
                    });
                    out.len() - 1
                })
            });
            if let Some(g) = out.get_mut(g) {
                g.bytes[i] = g.bytes[i].saturating_add(totals.bytes);
                g.counts[i] = g.counts[i].saturating_add(totals.count);
            }
        }
    }
    // Keys are unique: any sort gives the one order.
    out.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, EventKind, MemoryKind, Site};

    #[test]
    fn group_bytes_agree_with_site_totals() {
        let mut names = Names::default();
        let sites: Vec<SiteId> = (0..5)
            .map(|i| {
                let op = names.string(&format!("op{}", i % 3));
                names.site(Site {
                    op: Some(op),
                    ..Site::default()
                })
            })
            .collect();
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        for i in 0..40u64 {
            let id = m.push_allocation(Allocation {
                bytes: 10 + i,
                requested: 10 + i,
                count: 1,
                address: None,
                site: sites[(i % 5) as usize],
            });
            m.events
                .push(Event::new(2 * i as i64, EventKind::Alloc, id));
            if i % 3 == 0 {
                m.events.push(Event::new(
                    2 * i as i64 + 1,
                    EventKind::Free,
                    AllocId(id.0 / 2),
                ));
            }
        }
        let points = sample_points(&m, 9);
        let filter = FrameFilter::All;
        let expected = group_series(&names, &site_totals_at(&m, &points), GroupBy::Op, &filter);
        // Groups in label order: op0, op1, op2.
        let group_of: Vec<u32> = m
            .allocations
            .iter()
            .map(|a| {
                let label = group::label(&names, a.site, GroupBy::Op, &filter);
                expected.iter().position(|g| g.key == label).unwrap() as u32
            })
            .collect();
        let mut got = vec![Vec::new(); expected.len()];
        group_bytes_at(&m, &points, &group_of, expected.len(), |_, totals| {
            for (g, &t) in got.iter_mut().zip(totals) {
                g.push(t);
            }
        });
        for (g, want) in got.iter().zip(&expected) {
            assert_eq!(g, &want.bytes, "{}", want.key);
        }
    }
}
