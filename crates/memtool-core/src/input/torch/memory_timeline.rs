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
    // The coalesced form writes memory made before profiling (time -1) as
    // its first row and then gives that row the first time of the rest, so
    // a first time written twice marks it: that row's bytes.
    let mut made_before: Option<u64> = None;
    match timeline {
        Timeline::Coalesced((times, sizes)) => {
            let first_time_twice = times.len() >= 2 && times[0].int() == times[1].int();
            made_before = sizes.first().filter(|_| first_time_twice).map(|row| {
                row.iter()
                    .skip(1)
                    .filter_map(Loose::int)
                    .fold(0u64, |t, v| t.saturating_add(u64::try_from(v).unwrap_or(0)))
            });
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
                    events.push(Event::new(at, EventKind::Free, old));
                }
                if let Some(new) = new {
                    events.push(Event::new(at, EventKind::Alloc, new));
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
    let before_profiling: u64 = live_at_start
        .iter()
        .filter_map(|a| allocations.get(a.index()))
        .fold(0, |t, a| t.saturating_add(a.bytes));
    let named = device_in_name(path);
    let device = named.clone().unwrap_or_else(|| "cuda:0".to_string());
    let mut note = match named {
        Some(device) => format!("a PyTorch memory timeline of {device}, as its file name says"),
        None => "a PyTorch memory timeline, named cuda:0: the file records no device and \
                 cuda:0 is export_memory_timeline's default where CUDA was used (a file name \
                 with cpu or cuda:N in it names it)"
            .to_string(),
    };
    note.push_str(
        "; it records each category's total, not buffers, so its rows are categories \
         (parameter, activation, ...), counted where other files count buffers",
    );
    let made_before = made_before.unwrap_or(0).max(before_profiling);
    if made_before > 0 {
        note.push_str(&format!(
            "; it includes {} made before profiling, which the trace of the same run cannot see",
            crate::units::exact_bytes(made_before)
        ));
    }
    profile.note(path, note);
    let memory = profile.memory_mut(&device, MemoryKind::Device, Axis::TimeUs);
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    memory.category_totals = true;
    memory.made_before_profiling = Some(made_before);
    Ok(())
}

/// The device a timeline's file name names: `export_memory_timeline`
/// writes one device's timeline and records none, so a name like
/// `run.cuda1.memory_timeline.json` or `cpu_timeline.json` is all there is.
/// `cpu`, or `cuda:N` for `cuda` followed by an optional `:`, `_` or `-`
/// and a number (`cuda` alone is `cuda:0`); matched in the file name only.
fn device_in_name(path: &str) -> Option<String> {
    let name = path
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    if let Some(at) = name.find("cuda") {
        let rest = name[at + 4..].trim_start_matches([':', '_', '-']);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let n = digits.parse::<u32>().unwrap_or(0);
        return Some(format!("cuda:{n}"));
    }
    let is_token = |at: usize, len: usize| {
        let before = name[..at].chars().next_back();
        let after = name[at + len..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphabetic())
            && !after.is_some_and(|c| c.is_ascii_alphabetic())
    };
    name.match_indices("cpu")
        .any(|(at, _)| is_token(at, 3))
        .then(|| "cpu".to_string())
}

#[cfg(test)]
mod tests {
    use super::device_in_name;

    #[test]
    fn a_timeline_is_named_for_the_device_its_file_name_names() {
        let cases = [
            (
                "runs/torch_cpu_transformer.memory_timeline.json",
                Some("cpu"),
            ),
            ("x/cpu-timeline.raw.json.gz", Some("cpu")),
            ("step.cuda1.memory_timeline.json", Some("cuda:1")),
            ("step_cuda_3_timeline.json", Some("cuda:3")),
            ("cuda:2.json", Some("cuda:2")),
            ("CUDA.json", Some("cuda:0")),
            ("hta_memory_timeline.raw.json.gz", None),
            // `cpu` inside a word is not a device.
            ("cpuset/mycpus.json", None),
            ("cpus/timeline.json", None),
        ];
        for (path, want) in cases {
            assert_eq!(device_in_name(path).as_deref(), want, "{path}");
        }
    }
}
