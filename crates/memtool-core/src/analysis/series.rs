//! Per-group live bytes at chosen points of a memory's timeline: the input of
//! leak detection, for snapshots and event streams alike.

use std::collections::HashMap;

use crate::model::{Memory, Names, SiteId};

use super::group::{self, FrameFilter, GroupBy, Totals};
use super::replay::{self, LiveSet};

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
pub fn site_totals_at(memory: &Memory, points: &[usize]) -> Vec<HashMap<SiteId, Totals>> {
    if replay::uses_instants(memory) {
        return points
            .iter()
            .map(|&p| match memory.instants.get(p) {
                Some(instant) => group::totals_by_site(memory, &instant.live),
                None => HashMap::new(),
            })
            .collect();
    }
    let mut out = Vec::with_capacity(points.len());
    let mut set = LiveSet::at_start(memory);
    let mut current: HashMap<SiteId, Totals> = group::totals_by_site(memory, &set.ids());
    let mut applied = 0usize;
    for &p in points {
        while applied < p.min(memory.events.len()) {
            let event = memory.events[applied];
            if set.apply(event.kind, event.alloc) {
                let a = memory.allocation(event.alloc);
                let t = current.entry(a.site).or_default();
                match event.kind {
                    crate::model::EventKind::Alloc => t.add(Totals {
                        bytes: a.bytes,
                        requested_bytes: a.requested,
                        count: a.count,
                    }),
                    crate::model::EventKind::Free => {
                        t.bytes -= a.bytes;
                        t.requested_bytes -= a.requested;
                        t.count -= a.count;
                    }
                }
            }
            applied += 1;
        }
        out.push(current.clone());
    }
    out
}

/// One group's values over the sampled points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSeries {
    pub key: String,
    pub bytes: Vec<u64>,
    pub counts: Vec<u64>,
}

/// Labels and merges per-site totals into per-group series, sorted by label.
pub fn group_series(
    names: &Names,
    per_point: &[HashMap<SiteId, Totals>],
    by: GroupBy,
    filter: &FrameFilter,
) -> Vec<GroupSeries> {
    group_series_by(per_point, |site| group::label(names, site, by, filter))
}

/// Like [`group_series`], with the group of each site given by `key`.
pub fn group_series_by(
    per_point: &[HashMap<SiteId, Totals>],
    mut key: impl FnMut(SiteId) -> String,
) -> Vec<GroupSeries> {
    let n = per_point.len();
    let mut labels: HashMap<SiteId, String> = HashMap::new();
    let mut groups: HashMap<String, GroupSeries> = HashMap::new();
    for (i, sites) in per_point.iter().enumerate() {
        for (&site, totals) in sites {
            let key = labels.entry(site).or_insert_with(|| key(site)).clone();
            let g = groups.entry(key.clone()).or_insert_with(|| GroupSeries {
                key,
                bytes: vec![0; n],
                counts: vec![0; n],
            });
            g.bytes[i] += totals.bytes;
            g.counts[i] += totals.count;
        }
    }
    let mut out: Vec<GroupSeries> = groups.into_values().collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}
