//! The memory timeline, pre-aggregated for drawing: at most `width` columns,
//! each keeping the lowest and the highest total of the points it covers and
//! the per-group bytes at its highest point, so no peak can disappear however
//! many events the memory has.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::frames::FrameFilter;
use crate::analysis::group::{self, GroupBy};
use crate::analysis::{replay, series};
use crate::model::{Memory, Names, SiteId};

use super::color::{group_color, OTHER_COLOR};

/// Label of the group that sums every group past the top N.
pub(super) const OTHER_LABEL: &str = "other";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct Band {
    pub key: String,
    /// The key as shown in legends and tables (`step optimizer.py:78`),
    /// when shorter; the key itself is in the tooltip.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub short: String,
    /// Memory allocated before the recording: drawn at the bottom, and the
    /// page can hide it and start its axis at what it leaves.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pre: bool,
    pub color: String,
    /// Bytes at each column's highest point.
    pub v: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(super) struct Timeline {
    /// Position of each column's highest point, relative to `x0`.
    pub x: Vec<i64>,
    /// Lowest total in each column.
    pub lo: Vec<u64>,
    /// Highest total in each column (the sum of the bands there).
    pub hi: Vec<u64>,
    /// Position of the first column's highest point on the memory's axis.
    pub x0: i64,
    /// Bands, largest at the peak first; `other` (if any) last.
    pub bands: Vec<Band>,
    /// Points of the full-resolution timeline.
    pub points: usize,
    /// Index (as [`replay::for_each_point`] numbers them) of each column's
    /// highest point.
    #[serde(skip)]
    pub top_points: Vec<usize>,
}

/// One column being filled.
#[derive(Clone, Copy)]
struct Column {
    /// Point index and position of the highest (first highest) point.
    top_index: usize,
    top_at: i64,
    hi: u64,
    lo: u64,
}

/// Column index of each point: by position when positions grow and span at
/// least `width`, otherwise (positions all equal, or out of order) by point
/// index, which never merges everything into one column.
fn column_of(
    points: usize,
    first_at: i64,
    last_at: i64,
    monotonic: bool,
    width: usize,
) -> impl Fn(usize, i64) -> usize {
    let width = width.max(1);
    let span_at = (last_at as i128 - first_at as i128).max(0);
    let by_position = monotonic && span_at > 0;
    move |index, at| {
        if points <= width {
            index
        } else if by_position {
            let off = (at as i128 - first_at as i128).clamp(0, span_at);
            (off * (width as i128 - 1) / span_at) as usize
        } else {
            (index as u128 * width as u128 / points as u128) as usize
        }
    }
}

/// The columns of a memory's timeline, in order.
fn columns(memory: &Memory, width: usize) -> (Vec<Column>, usize) {
    let mut points = 0usize;
    let mut first_at = 0i64;
    let mut last_at = 0i64;
    let mut monotonic = true;
    replay::for_each_point(memory, |p| {
        if points == 0 {
            first_at = p.at;
        } else if p.at < last_at {
            monotonic = false;
        }
        last_at = p.at;
        points += 1;
    });
    let column = column_of(points, first_at, last_at, monotonic, width);
    let mut cols: Vec<(usize, Column)> = Vec::new();
    replay::for_each_point(memory, |p| {
        let c = column(p.index, p.at);
        match cols.last_mut() {
            Some((last, col)) if *last == c => {
                if p.bytes > col.hi {
                    col.hi = p.bytes;
                    col.top_index = p.index;
                    col.top_at = p.at;
                }
                col.lo = col.lo.min(p.bytes);
            }
            _ => cols.push((
                c,
                Column {
                    top_index: p.index,
                    top_at: p.at,
                    hi: p.bytes,
                    lo: p.bytes,
                },
            )),
        }
    });
    (cols.into_iter().map(|(_, c)| c).collect(), points)
}

/// How the chart groups a memory when the caller does not say: the most
/// telling key the profile has values for at the peak. A category with one
/// value (every buffer an `output`) says nothing; ops do, when the profile has
/// no call stacks. `peak_index` is the point of the peak the page reports.
pub(super) fn default_group_by(names: &Names, memory: &Memory, peak_index: usize) -> GroupBy {
    let by_site = group::totals_by_site(memory, &replay::live_at(memory, peak_index));
    let distinct = |by: GroupBy| {
        let labels: std::collections::BTreeSet<String> = by_site
            .keys()
            .filter(|&s| {
                let site = names.site_of(s);
                match by {
                    GroupBy::Category => site.category.is_some(),
                    GroupBy::Op => site.op.is_some(),
                    _ => site.stack.0 != 0,
                }
            })
            .map(|s| group::label(names, s, by, &FrameFilter::All))
            .collect();
        labels.len()
    };
    let stacks = group::has_values(names, &by_site, GroupBy::Stack);
    if distinct(GroupBy::Category) >= 2 {
        GroupBy::Category
    } else if stacks {
        GroupBy::UserFrame
    } else if distinct(GroupBy::Op) >= 1 {
        GroupBy::Op
    } else {
        GroupBy::UserFrame
    }
}

/// The timeline a rendering draws of `memory`: grouped as `options` say,
/// else by [`default_group_by`] at the reported peak (`peak_index`), with
/// the options' frames, columns and bands. Every format draws it this way.
pub(super) fn of_memory(
    names: &Names,
    memory: &Memory,
    peak_index: usize,
    options: &super::RenderOptions,
) -> (GroupBy, Timeline) {
    let by = options
        .group_by
        .unwrap_or_else(|| default_group_by(names, memory, peak_index));
    let tl = timeline(
        names,
        memory,
        by,
        &options.analysis.frames,
        options.width,
        options.bands,
    );
    (by, tl)
}

impl Timeline {
    /// At most `columns` columns: each run of neighbouring columns becomes
    /// the one of them with the highest total (its bands, so they still add
    /// up), drawn from where the run starts, with the run's lowest total;
    /// no peak is lost. For a static picture, where 1,000 columns of every
    /// band make a file three times as large for no visible difference.
    pub(super) fn coarsened(&self, columns: usize) -> Timeline {
        let n = self.x.len();
        let per = n.div_ceil(columns.max(1)).max(1);
        let runs: Vec<std::ops::Range<usize>> =
            (0..n).step_by(per).map(|s| s..(s + per).min(n)).collect();
        let top = |r: &std::ops::Range<usize>| {
            r.clone()
                .max_by(|&a, &b| self.hi[a].cmp(&self.hi[b]).then(b.cmp(&a)))
                .unwrap_or(r.start)
        };
        let tops: Vec<usize> = runs.iter().map(top).collect();
        Timeline {
            x: runs.iter().map(|r| self.x[r.start]).collect(),
            lo: runs
                .iter()
                .map(|r| self.lo[r.clone()].iter().copied().min().unwrap_or(0))
                .collect(),
            hi: tops.iter().map(|&c| self.hi[c]).collect(),
            x0: self.x0,
            bands: self
                .bands
                .iter()
                .map(|b| Band {
                    v: tops
                        .iter()
                        .map(|&c| b.v.get(c).copied().unwrap_or(0))
                        .collect(),
                    ..b.clone()
                })
                .collect(),
            points: self.points,
            top_points: tops
                .iter()
                .filter_map(|&c| self.top_points.get(c).copied())
                .collect(),
        }
    }
}

/// Builds the timeline of `memory` with at most `width` columns and `top`
/// bands plus `other`.
pub(super) fn timeline(
    names: &Names,
    memory: &Memory,
    by: GroupBy,
    filter: &FrameFilter,
    width: usize,
    top: usize,
) -> Timeline {
    let (cols, points) = columns(memory, width);
    let x0 = cols.first().map_or(0, |c| c.top_at);
    // Positions out of order can make the columns' top points out of order;
    // the series walk needs them ascending and once each.
    let mut wanted: Vec<usize> = cols.iter().map(|c| c.top_index).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let slot: HashMap<usize, usize> = wanted.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    // Each allocation's group, labelling each site once.
    let mut keys: Vec<String> = Vec::new();
    let mut key_index: HashMap<String, u32> = HashMap::new();
    let mut site_group: HashMap<SiteId, u32> = HashMap::new();
    let group_of_alloc: Vec<u32> = memory
        .allocations
        .iter()
        .map(|a| {
            *site_group.entry(a.site).or_insert_with(|| {
                let key = group::label(names, a.site, by, filter);
                *key_index.entry(key.clone()).or_insert_with(|| {
                    keys.push(key);
                    (keys.len() - 1) as u32
                })
            })
        })
        .collect();
    // Pass 1: each group's bytes at the peak column and its highest over the
    // columns, to rank the groups without keeping every group's series.
    let peak_col = cols
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.hi.cmp(&b.1.hi).then(b.0.cmp(&a.0)))
        .map_or(0, |(i, _)| i);
    let peak_slot = cols
        .get(peak_col)
        .and_then(|c| slot.get(&c.top_index))
        .copied();
    let mut at_peak = vec![0u64; keys.len()];
    let mut most = vec![0u64; keys.len()];
    series::group_bytes_at(memory, &wanted, &group_of_alloc, keys.len(), |k, totals| {
        for (m, &t) in most.iter_mut().zip(totals) {
            *m = (*m).max(t);
        }
        if Some(k) == peak_slot {
            at_peak.copy_from_slice(totals);
        }
    });
    let mut ranked: Vec<usize> = (0..keys.len()).filter(|&g| most[g] > 0).collect();
    ranked.sort_by(|&a, &b| {
        at_peak[b]
            .cmp(&at_peak[a])
            .then(most[b].cmp(&most[a]))
            .then_with(|| keys[a].cmp(&keys[b]))
    });
    let keep = if ranked.len() > top + 1 {
        top
    } else {
        ranked.len()
    };
    let others = ranked.len() - keep;
    // Pass 2: the kept groups' bytes, and the rest summed, at every column.
    let mut band_of_group = vec![u32::MAX; keys.len()];
    for (band, &g) in ranked.iter().enumerate() {
        band_of_group[g] = band.min(keep) as u32;
    }
    let bands_len = keep + usize::from(others > 0);
    let band_of_alloc: Vec<u32> = group_of_alloc
        .iter()
        .map(|&g| band_of_group.get(g as usize).copied().unwrap_or(u32::MAX))
        .collect();
    let mut per_slot: Vec<Vec<u64>> = Vec::with_capacity(wanted.len());
    series::group_bytes_at(memory, &wanted, &band_of_alloc, bands_len, |_, totals| {
        per_slot.push(totals.to_vec());
    });
    let value = |c: &Column, band: usize| {
        slot.get(&c.top_index)
            .and_then(|&i| per_slot.get(i))
            .map_or(0, |v| v[band])
    };
    let bands: Vec<Band> = (0..bands_len)
        .map(|band| {
            let (key, color) = match ranked.get(band) {
                Some(&g) if band < keep => (super::escape::label(&keys[g]), group_color(&keys[g])),
                _ => (
                    format!("{OTHER_LABEL} ({others} groups)"),
                    OTHER_COLOR.to_string(),
                ),
            };
            Band {
                key,
                short: String::new(),
                pre: false,
                color,
                v: cols.iter().map(|c| value(c, band)).collect(),
            }
        })
        .collect();
    let mut bands = bands;
    shorten_keys(&mut bands);
    Timeline {
        x: cols.iter().map(|c| c.top_at.wrapping_sub(x0)).collect(),
        lo: cols.iter().map(|c| c.lo).collect(),
        hi: cols.iter().map(|c| c.hi).collect(),
        x0,
        bands,
        points,
        top_points: cols.iter().map(|c| c.top_index).collect(),
    }
}

/// The band a site falls into: its index in `bands`, `other` for the rest.
/// Sets each band's `short` label (where it is shorter than its key) as the
/// text tables shorten labels, no two bands shown alike.
pub(super) fn shorten_keys(bands: &mut [Band]) {
    let keys: Vec<&str> = bands.iter().map(|b| b.key.as_str()).collect();
    let shorts = crate::report::fit_column(&keys, super::flame::LABEL_CHARS);
    for (band, short) in bands.iter_mut().zip(shorts) {
        band.short = if short == band.key {
            String::new()
        } else {
            short
        };
    }
}

pub(super) fn band_of_site(
    names: &Names,
    site: SiteId,
    by: GroupBy,
    filter: &FrameFilter,
    bands: &[Band],
) -> usize {
    let key = group::label(names, site, by, filter);
    bands
        .iter()
        .position(|b| b.key == key)
        .unwrap_or(bands.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, EventKind, MemoryKind, Site, StrId};

    /// A memory whose live bytes go up and down many times, with one narrow
    /// spike: a 1-event-wide peak among 100,000 events.
    fn spiky(names: &mut Names) -> Memory {
        let mut m = Memory::new("gpu", MemoryKind::Allocator, Axis::TimePs);
        let sites: Vec<SiteId> = (0..20)
            .map(|i| {
                let op = names.string(&format!("op{i}"));
                names.site(Site {
                    op: Some(op),
                    ..Site::default()
                })
            })
            .collect();
        let mut at = 0i64;
        for i in 0..50_000u64 {
            let bytes = if i == 31_337 { 1 << 30 } else { 1000 + i % 7 };
            let id = m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site: sites[(i % 20) as usize],
            });
            at += 10;
            m.events.push(Event::new(at, EventKind::Alloc, id));
            at += 10;
            m.events
                .push(Event::new(at, EventKind::Free, AllocId(id.0)));
        }
        m
    }

    #[test]
    fn no_peak_is_lost_and_columns_are_bounded() {
        let mut names = Names::default();
        let m = spiky(&mut names);
        let t = timeline(&names, &m, GroupBy::Op, &FrameFilter::All, 800, 5);
        assert_eq!(t.points, 100_001);
        assert!(t.x.len() <= 800 && t.x.len() > 700, "{} columns", t.x.len());
        let peak = replay::peak(&m).unwrap();
        assert_eq!(t.hi.iter().max().copied(), Some(peak.bytes));
        assert_eq!(peak.bytes, 1 << 30);
        // The column of the spike shows it, and its dips to 0 are kept as `lo`.
        let col = t.hi.iter().position(|&h| h == peak.bytes).unwrap();
        assert_eq!(t.x[col] + t.x0, peak.at);
        assert_eq!(t.lo[col], 0);
        // Bands add up to the column's highest total everywhere.
        for c in 0..t.x.len() {
            let sum: u64 = t.bands.iter().map(|b| b.v[c]).sum();
            assert_eq!(sum, t.hi[c]);
        }
        // Top 5 plus other; the spike's op ranks first.
        assert_eq!(t.bands.len(), 6);
        assert_eq!(t.bands[0].key, format!("op{}", 31_337 % 20));
        assert_eq!(t.bands[5].key, "other (15 groups)");
    }

    #[test]
    fn many_groups_fold_into_other() {
        // 50,000 distinct ops (a trace with a unique stack per allocation):
        // the timeline keeps 12 bands and sums the rest.
        let mut names = Names::default();
        let mut m = Memory::new("gpu", MemoryKind::Allocator, Axis::EventIndex);
        for i in 0..50_000u32 {
            let op = names.string(&format!("op{i}"));
            let site = names.site(Site {
                op: Some(op),
                ..Site::default()
            });
            let id = m.push_allocation(Allocation {
                bytes: 100 + u64::from(i % 1000),
                requested: 1,
                count: 1,
                address: None,
                site,
            });
            m.events
                .push(Event::new(i64::from(i), EventKind::Alloc, id));
        }
        let t = timeline(&names, &m, GroupBy::Op, &FrameFilter::All, 1000, 12);
        assert_eq!(t.bands.len(), 13);
        assert_eq!(t.bands[12].key, "other (49988 groups)");
        // The largest ops at the peak (the end) come first: 1099 bytes each.
        assert_eq!(t.bands[0].v.last(), Some(&1099));
        let last = t.x.len() - 1;
        let sum: u64 = t.bands.iter().map(|b| b.v[last]).sum();
        assert_eq!(sum, t.hi[last]);
    }

    #[test]
    fn the_default_grouping_is_the_most_telling_key() {
        let mut names = Names::default();
        let output = names.string("output");
        let temp = names.string("temp");
        let (add, mul) = (names.string("AddV2"), names.string("MatMul"));
        let memory_of = |names: &mut Names, sites: &[(Option<StrId>, Option<StrId>)]| {
            let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
            for &(category, op) in sites {
                let site = names.site(Site {
                    op,
                    category,
                    ..Site::default()
                });
                m.push_allocation(Allocation {
                    bytes: 8,
                    requested: 8,
                    count: 1,
                    address: None,
                    site,
                });
            }
            m.live_at_start = (0..sites.len() as u32).map(AllocId).collect();
            m
        };
        let one_category = memory_of(
            &mut names,
            &[(Some(output), Some(add)), (Some(output), Some(mul))],
        );
        assert_eq!(default_group_by(&names, &one_category, 0), GroupBy::Op);
        let two = memory_of(
            &mut names,
            &[(Some(output), Some(add)), (Some(temp), Some(mul))],
        );
        assert_eq!(default_group_by(&names, &two, 0), GroupBy::Category);
        let nothing = memory_of(&mut names, &[(None, None)]);
        assert_eq!(default_group_by(&names, &nothing, 0), GroupBy::UserFrame);
    }

    #[test]
    fn snapshots_keep_every_point() {
        let mut names = Names::default();
        let site = names.site(Site::default());
        let mut m = Memory::new("cpu", MemoryKind::Device, Axis::Snapshot);
        for i in 1..=3u64 {
            let id = m.push_allocation(Allocation {
                bytes: i * 100,
                requested: i * 100,
                count: 1,
                address: None,
                site,
            });
            m.instants.push(crate::model::Instant {
                label: format!("memory{i}.prof"),
                at: i as i64,
                live: vec![id],
            });
        }
        let t = timeline(&names, &m, GroupBy::Stack, &FrameFilter::All, 800, 5);
        assert_eq!(t.x, vec![0, 1, 2]);
        assert_eq!(t.x0, 1);
        assert_eq!(t.hi, vec![100, 200, 300]);
        assert_eq!(t.bands.len(), 1);
        assert_eq!(t.bands[0].key, group::NO_STACK_LABEL);
    }
}
