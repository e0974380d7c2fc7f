//! PyTorch memory timelines (`export_memory_timeline`, `.json` or
//! `.raw.json.gz`): bytes per category over time, read whole.

use serde::Deserialize;

use super::{corrupt, Loose, CATEGORIES};
use crate::error::Result;
use crate::input::source::{self, ByteSource};
use crate::model::{
    AllocId, Allocation, Axis, Event, EventKind, Format, InputInfo, MemoryKind, Profile, Site,
    SiteId,
};

/// Reads a memory timeline from `data` (read whole: timelines are small).
pub(crate) fn read(profile: &mut Profile, path: &str, data: &dyn ByteSource) -> Result<()> {
    let bytes = {
        let _span = crate::timings::span("read input");
        source::read_all(data).map_err(|e| crate::input::read_error(path, &e))?
    };
    read_timeline(profile, path, &bytes)
}

/// The two timeline forms: `[times, sizes]` with one row of per-category
/// bytes per time (column 0 unused, then [`CATEGORIES`]), or raw rows
/// `[t_ns, action, bytes, category]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Timeline {
    Coalesced((Vec<Loose>, Vec<Vec<Loose>>)),
    Raw(Vec<Vec<Loose>>),
}

/// A memory timeline has no allocation identities, only bytes per category
/// over time. Each category is modelled as one allocation whose size is the
/// category's total; when the total changes, that allocation is freed and a
/// new one of the new size made at the same time (free first, so no point
/// counts both).
fn read_timeline(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let timeline: Timeline = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, "PyTorch memory timeline JSON", e))?;
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::TorchMemoryTimeline,
        executables: None,
    });
    // (time in µs, category index, new total)
    let mut changes: Vec<(Option<i64>, usize, i128)> = Vec::new();
    let mut totals = [0i128; CATEGORIES.len()];
    let mut bad_rows = 0u64;
    match timeline {
        Timeline::Coalesced((times, sizes)) => {
            for (t, row) in times.iter().zip(&sizes) {
                let at = t.int();
                for (c, total) in totals.iter_mut().enumerate() {
                    let Some(v) = row.get(c + 1).and_then(Loose::int) else {
                        continue;
                    };
                    if i128::from(v) != *total {
                        *total = i128::from(v);
                        changes.push((at, c, *total));
                    }
                }
            }
        }
        Timeline::Raw(rows) => {
            for row in rows {
                let (Some(t), Some(delta), Some(c)) = (
                    row.first().and_then(Loose::int),
                    row.get(2).and_then(Loose::int),
                    row.get(3)
                        .and_then(Loose::int)
                        .and_then(|c| usize::try_from(c).ok()),
                ) else {
                    bad_rows += 1;
                    continue;
                };
                let Some(total) = totals.get_mut(c) else {
                    bad_rows += 1;
                    continue;
                };
                *total += i128::from(delta);
                // Raw times are ns, -1 for tensors that existed before profiling.
                let at = (t >= 0).then_some(t / 1000);
                changes.push((at, c, *total));
            }
        }
    }
    if bad_rows > 0 {
        profile.warn(
            path,
            format!("{bad_rows} timeline rows are malformed; skipped"),
        );
    }
    let category_sites: Vec<SiteId> = CATEGORIES
        .iter()
        .map(|c| {
            let category = profile.names.string(c);
            profile.names.site(Site {
                category: Some(category),
                ..Site::default()
            })
        })
        .collect();
    let mut allocations: Vec<Allocation> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut live_at_start: Vec<AllocId> = Vec::new();
    let mut current: [Option<AllocId>; CATEGORIES.len()] = [None; CATEGORIES.len()];
    let mut negative = 0u64;
    for (at, c, total) in changes {
        let (Some(slot), Some(&site)) = (current.get_mut(c), category_sites.get(c)) else {
            continue;
        };
        let bytes = u64::try_from(total).unwrap_or_else(|_| {
            negative += 1;
            0
        });
        let new = (bytes > 0).then(|| {
            let id = AllocId(allocations.len() as u32);
            allocations.push(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site,
            });
            id
        });
        match at {
            // Before profiling: the start state, no events.
            None => {
                if let Some(old) = slot.take() {
                    live_at_start.retain(|&a| a != old);
                }
                live_at_start.extend(new);
            }
            Some(at) => {
                if let Some(old) = slot.take() {
                    events.push(Event {
                        at,
                        kind: EventKind::Free,
                        alloc: old,
                    });
                }
                if let Some(new) = new {
                    events.push(Event {
                        at,
                        kind: EventKind::Alloc,
                        alloc: new,
                    });
                }
            }
        }
        *slot = new;
    }
    if negative > 0 {
        profile.warn(
            path,
            format!("{negative} category totals go below zero; read as 0"),
        );
    }
    let memory = profile.memory_mut("timeline", MemoryKind::Device, Axis::TimeUs);
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    Ok(())
}
