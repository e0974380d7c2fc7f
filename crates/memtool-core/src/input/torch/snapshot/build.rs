//! A device's memory from what the visitor kept of its trace and segments:
//! allocations and events, memory from before the recording, segments and
//! held ranges, steps and out-of-memory entries.

use super::*;

pub(super) fn build_memory(
    profile: &mut Profile,
    path: &str,
    id: &str,
    trace: Trace,
    segments: Vec<RawSegment>,
) {
    let Trace {
        counts,
        entries,
        timed,
        first_time,
        last,
        mut allocations,
        site_keys,
        mut events,
        event_entries,
        mut live_at_start,
        live,
        reserved_changes,
        reserved,
        held_changes,
        freed_before_window,
        realloc_without_free,
        ooms,
        ..
    } = trace;
    let axis = if timed {
        Axis::TimeUs
    } else {
        Axis::EventIndex
    };
    let at = |index: u64, time_us: Option<i64>| {
        if timed {
            time_us.unwrap_or(0)
        } else {
            index as i64
        }
    };
    // Interned in order of first use, as the trace met them.
    let mut phases = StackPhases::default();
    let mut streams = StreamNames::default();
    let sites: Vec<SiteId> = site_keys
        .iter()
        .map(|key| {
            let stream = streams.name(&mut profile.names, key.stream);
            if key.freed_before_window {
                let site = profile.names.before_recording_site(
                    BeforeRecording::Freed,
                    key.stack,
                    None,
                    None,
                    key.category,
                );
                streams.on(&mut profile.names, site, stream)
            } else {
                let phase = phases.phase(&profile.names, key.stack);
                profile.names.site(Site {
                    stack: key.stack,
                    category: key.category,
                    phase,
                    stream,
                    compiled_graph: key.compiled_graph,
                    ..Site::default()
                })
            }
        })
        .collect();
    for a in &mut allocations {
        a.site = sites[a.site.index()];
    }
    if !timed {
        for (e, index) in events.iter_mut().zip(event_entries.iter()) {
            e.at = index as i64;
        }
    }
    drop(event_entries);
    let relative: Vec<(i64, i128)> = reserved_changes
        .iter()
        .map(|&(index, time_us, r)| (at(index, time_us), r))
        .collect();
    let last_at = last.map_or(0, |(index, time_us)| at(index, time_us));
    let out_of_memory: Vec<OutOfMemory> = ooms
        .iter()
        .map(|oom| OutOfMemory {
            at: at(oom.index, oom.time_us),
            requested_bytes: oom.requested,
            device_free_bytes: oom.device_free,
            stream: oom.stream,
            site: profile.names.site(Site {
                stack: oom.stack,
                ..Site::default()
            }),
            events_before: oom.events_before,
        })
        .collect();
    let new_alloc = |allocations: &mut Vec<Allocation>, a: Allocation| {
        let id = AllocId(allocations.len() as u32);
        allocations.push(a);
        id
    };

    // The end state: blocks the trace did not allocate were allocated before it.
    let mut end_reserved: u64 = 0;
    let mut largest_free: u64 = 0;
    let mut blocks_before_window = 0u64;
    let mut blocks_without_address = 0u64;
    let mut still_held: BTreeSet<u64> = BTreeSet::new();
    let mut model_segments = Vec::with_capacity(segments.len());
    for raw in segments {
        end_reserved = end_reserved.saturating_add(raw.segment.bytes);
        for (block, &stack) in raw.segment.blocks.iter().zip(&raw.block_stacks) {
            match block.state {
                BlockState::Free => largest_free = largest_free.max(block.bytes),
                BlockState::PendingFree => {
                    if let Some(a) = block.address {
                        still_held.insert(a);
                    }
                }
                BlockState::Allocated => {
                    let Some(address) = block.address else {
                        blocks_without_address += 1;
                        continue;
                    };
                    still_held.insert(address);
                    if live.contains_key(&address) {
                        continue;
                    }
                    blocks_before_window += 1;
                    // Named by the block's own stack where the file kept it.
                    let site = profile.names.before_recording_site(
                        BeforeRecording::StillLive,
                        stack,
                        None,
                        None,
                        None,
                    );
                    // A block serves its segment's stream.
                    let stream = streams.name(&mut profile.names, raw.segment.stream);
                    let site = streams.on(&mut profile.names, site, stream);
                    let alloc = new_alloc(
                        &mut allocations,
                        Allocation {
                            bytes: block.requested,
                            requested: block.requested,
                            count: 1,
                            address: crate::model::Address::new(address),
                            site,
                        },
                    );
                    live_at_start.push(alloc);
                }
            }
        }
        model_segments.push(raw.segment);
    }
    let has_segments = !model_segments.is_empty();
    let not_in_segments = if has_segments && blocks_without_address == 0 {
        live.keys().filter(|a| !still_held.contains(a)).count()
    } else {
        0
    };

    let mut samples: Vec<AllocatorSample> = Vec::new();
    if has_segments || !relative.is_empty() {
        // Anchor the running reserved total so that it ends at the segments' total.
        let offset = i128::from(end_reserved) - reserved;
        let clamp = |r: i128| u64::try_from(r.max(0)).unwrap_or(u64::MAX);
        let first_at = if timed { first_time.unwrap_or(0) } else { 0 };
        samples.push(AllocatorSample::new(first_at).with_reserved_bytes(Some(clamp(offset))));
        samples.extend(
            relative.iter().map(|&(at, r)| {
                AllocatorSample::new(at).with_reserved_bytes(Some(clamp(r + offset)))
            }),
        );
        if has_segments {
            // No `allocated_bytes`: the trace is complete within the window, so
            // the replay is the in-use figure; torch's end-state "allocated"
            // (requested sizes) is in `segments`.
            samples.push(
                AllocatorSample::new(last_at)
                    .with_reserved_bytes(Some(end_reserved))
                    .with_largest_free_block(Some(largest_free)),
            );
        }
    }

    if entries == 0 && blocks_before_window > 0 {
        profile.warn(
            path,
            format!(
                "{id}: no allocation history was recorded (record it with \
                 torch.cuda.memory._record_memory_history()); only the {blocks_before_window} \
                 blocks live at the end are known"
            ),
        );
    } else if freed_before_window > 0 {
        // Frees of allocations the trace never saw: it starts after the
        // program did — the recording began mid-run, or its ring buffer
        // (`max_entries`) dropped the oldest entries; the file cannot tell
        // which.
        profile.warn(
            path,
            format!(
                "{id}: the trace starts after the program did (recording began mid-run, or its \
                 ring buffer dropped the oldest entries): {} and {} belong to allocations made \
                 before it; they are counted as live at the start",
                crate::units::count(freed_before_window, "free", "frees"),
                crate::units::count(blocks_before_window, "live block", "live blocks"),
            ),
        );
    } else if blocks_before_window > 0 {
        // Every free has its allocation: nothing was lost, the blocks were
        // simply live when recording began.
        profile.warn(
            path,
            format!(
                "{id}: {} live at the end {} allocated before recording began (every free in \
                 the trace has its allocation, so no entry was lost); counted as live at the \
                 start",
                crate::units::count(blocks_before_window, "block", "blocks"),
                if blocks_before_window == 1 {
                    "was"
                } else {
                    "were"
                }
            ),
        );
    }
    if realloc_without_free > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {realloc_without_free} allocations reuse an address whose free is not \
                 in the trace; the earlier allocation is taken as freed there"
            ),
        );
    }
    if not_in_segments > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {not_in_segments} allocations the trace leaves live are not in the \
                 segments (a trimmed or inconsistent snapshot); they stay live at the end"
            ),
        );
    }
    if blocks_without_address > 0 {
        profile.warn(
            path,
            format!(
                "{id}: {blocks_without_address} live blocks have no address, so the end state \
                 cannot be matched with the trace (a profiler-made snapshot)"
            ),
        );
    }
    if !out_of_memory.is_empty() {
        let shown: Vec<String> = out_of_memory
            .iter()
            .take(3)
            .map(|oom| {
                // The time as every output shows it: from the first entry.
                let at = match (timed, first_time) {
                    (true, Some(start)) => crate::units::moment(
                        oom.at.saturating_sub(start).saturating_mul(1_000_000),
                        None,
                        None,
                    ),
                    _ => format!("#{}", oom.at),
                };
                format!(
                    "{} requested with {} free on the device at {at}",
                    crate::units::bytes(oom.requested_bytes),
                    crate::units::bytes(oom.device_free_bytes.unwrap_or(0)),
                )
            })
            .collect();
        profile.warn(
            path,
            format!(
                "{id}: {} in the trace: {}{}",
                crate::units::count(
                    out_of_memory.len() as u64,
                    "out-of-memory event",
                    "out-of-memory events"
                ),
                shown.join("; "),
                if out_of_memory.len() > shown.len() {
                    "; ..."
                } else {
                    ""
                }
            ),
        );
    }

    let device_id = id.to_string();
    let id = crate::input::series_part_id(profile, id, path);
    let memory = profile.memory_mut(&id, MemoryKind::Allocator, axis);
    memory.recorded_events = counts.into_map();
    memory.allocations = allocations;
    memory.events = events;
    memory.live_at_start = live_at_start;
    memory.allocator_samples = samples.into();
    // The segments are what the allocator holds; their ranges are known
    // only when every segment has its address.
    if model_segments.iter().all(|s| s.address.is_some()) {
        memory.held = model_segments
            .iter()
            .filter_map(|s| {
                Some(AddressRange {
                    start: s.address?,
                    bytes: s.bytes,
                })
            })
            .collect();
        memory.held_changes = held_changes
            .into_iter()
            .map(
                |(events_before, index, time_us, range, reserved)| HeldChange {
                    events_before,
                    at: at(index, time_us),
                    range,
                    reserved,
                },
            )
            .collect();
    }
    memory.segments = model_segments;
    memory.series = Some(SeriesPart {
        device: device_id,
        file: crate::input::file_name(path),
    });
    memory.out_of_memory = out_of_memory;
}

/// Stream numbers as the text of the sites' `stream` (`0`, `7`), each
/// interned once.
#[derive(Default)]
struct StreamNames(FxHashMap<i64, StrId>);

impl StreamNames {
    fn name(&mut self, names: &mut crate::model::Names, stream: Option<i64>) -> Option<StrId> {
        let stream = stream?;
        Some(
            *self
                .0
                .entry(stream)
                .or_insert_with(|| names.string(&stream.to_string())),
        )
    }

    /// `site` made for `stream`.
    fn on(
        &mut self,
        names: &mut crate::model::Names,
        site: SiteId,
        stream: Option<StrId>,
    ) -> SiteId {
        if stream.is_none() {
            return site;
        }
        let site = Site {
            stream,
            ..*names.site_of(site)
        };
        names.site(site)
    }
}
