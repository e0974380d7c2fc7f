//! Allocator events of an XSpace: TSL's BFC allocator and oneDNN's `mklcpu`
//! record every allocation and free as `MemoryAllocation` /
//! `MemoryDeallocation` events on the `/host:CPU` plane, each carrying the
//! allocator's totals after it.
//!
//! Mapping into the model (one [`Memory`](crate::model::Memory) per allocator,
//! [`Axis::TimePs`](crate::model::Axis::TimePs)):
//! - `at` = `line.timestamp_ns × 1000 + offset_ps`, minus the profile start
//!   (`Task Environment` / `profile_start_time`, else the earliest line) when
//!   the line timestamps are absolute; TensorFlow and JAX already write them
//!   relative to the start. Events
//!   are ordered by `at`, ties by (line, index) — not by line-relative offset
//!   as XProf does.
//! - A free is matched to the live allocation at its address. A free with no
//!   live allocation there freed something allocated before the profile
//!   started: it becomes an allocation live at start.
//!   Its site is named [`Freed`](crate::model::BeforeRecording::Freed).
//! - The heap the allocator already held at the first event, less those, is
//!   one allocation live at start, named
//!   [`StillLive`](crate::model::BeforeRecording::StillLive); stack reserved on
//!   the device (`bytes_reserved`, TPU) is another ([`STACK_OP`]). When an
//!   event reports a different reservation, the old one is freed and the new
//!   one allocated just before it (two events whose samples carry no
//!   figures), so the stack is live while reserved. Replaying the events
//!   then gives the allocator's own in-use figure (stack + heap).
//! - Each event's totals become one
//!   [`AllocatorSample`](crate::model::AllocatorSample) (in use = stack +
//!   heap, free = `bytes_available`, `fragmentation`).
//! - Steps are the spans of events carrying a `step_num` stat (TensorFlow
//!   `Trace('train', step_num=k)`, JAX `StepTraceAnnotation`).

mod ahead;
mod build;
mod decode;
mod fast;
mod keys;
mod merge;
mod runs;
mod sequential;

use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::xspace::{Planes, StreamError, Window};
use crate::model::Profile;
use decode::Fallback;
use merge::merged;
pub(super) use runs::Split;
use sequential::sequential;

/// The op label of stack reserved on the device (TPU), as XProf names it.
pub(super) const STACK_OP: &str = crate::model::STACK_RESERVATION;

const HOST_PLANE: &str = "/host:CPU";
const TASK_ENVIRONMENT: &str = "Task Environment";

/// How to capture allocator events, for profiles without any memory.
pub(super) const NO_EVENTS_HINT: &str =
    "no allocator events (MemoryAllocation/MemoryDeallocation) on \
    /host:CPU, so there is no allocator timeline; TensorFlow records them with \
    tf.profiler.experimental.start(logdir, options=tf.profiler.experimental.ProfilerOptions(\
    host_tracer_level=3)), JAX and PyTorch/XLA on GPU or TPU with jax.profiler.trace(logdir); \
    JAX on CPU records none";

/// Reads the allocator events of `source` into one memory per allocator: by
/// the merged walk, else (a line out of time order, damage) by the walk in
/// file order, which gives the same memories, or the error.
/// `force_general_path` takes the walk in file order (which decodes with
/// [`decode::Decoder::event`]) whatever the lines, for the check that both
/// walks give one profile. The merged walk decodes as `split` says. Adds a
/// memory per allocator; returns whether there were allocator events.
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    force_general_path: bool,
    host: &str,
    split: Split,
) -> Result<bool> {
    let mut window = Window::new(source, SKIM_CHUNK);
    let start_ns = profile_start_ns(&mut window).map_err(|e| e.into_error(path))?;
    // What the merged walk interns before it gives up must not stay: the
    // walk in file order interns from the same start.
    let names_before = profile.names.clone();
    let merged = if force_general_path {
        Err(Fallback)
    } else {
        let _span = crate::timings::span("xspace: allocator events");
        merged(&mut profile.names, source, start_ns, true, split)
    };
    let collected = match merged {
        Ok(collected) => collected,
        // A line out of time order, or damage: the walk in file order sorts
        // what it reads, and finds the first problem in that order.
        Err(Fallback) => {
            profile.names = names_before;
            let _span = crate::timings::span("xspace: allocator events, in file order");
            sequential(&mut profile.names, source, start_ns).map_err(|e| e.into_error(path))?
        }
    };
    Ok(collected.finish(profile, path, host))
}

/// How much of the input a skim over headers reads at a time.
const SKIM_CHUNK: usize = 64 << 10;

/// `profile_start_time` of the `Task Environment` plane, in ns since the epoch.
fn profile_start_ns(window: &mut Window<'_>) -> Result<Option<i64>, StreamError> {
    let mut planes = Planes::new(window);
    while let Some(at) = planes.next(window)? {
        if at.name != TASK_ENVIRONMENT {
            continue;
        }
        let bytes = at.load(window)?;
        let plane = at.parse(&bytes)?;
        let meta = plane.metadata()?;
        for stat in plane.stats() {
            let stat = stat?;
            if meta.stat_name(stat.metadata_id) == Some("profile_start_time") {
                return Ok(stat.value.as_i64());
            }
        }
    }
    Ok(None)
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, Names};

    use crate::input::xspace::tests::{field, int};

    fn metadata_entry(out: &mut Vec<u8>, map: u32, id: u64, name: &str) {
        let mut meta = Vec::new();
        int(&mut meta, 1, id);
        field(&mut meta, 2, name.as_bytes());
        let mut entry = Vec::new();
        int(&mut entry, 1, id);
        field(&mut entry, 2, &meta);
        field(out, map, &entry);
    }

    /// (offset ps, free, allocator, address, heap bytes after)
    type Ev = (u64, bool, &'static str, u64, u64);

    fn line(timestamp_ns: u64, events: &[Ev], timestamp_last: bool) -> Vec<u8> {
        let mut line = Vec::new();
        if !timestamp_last {
            int(&mut line, 3, timestamp_ns);
        }
        for &(offset, free, allocator, address, heap) in events {
            let mut event = Vec::new();
            int(&mut event, 1, if free { 2 } else { 1 });
            int(&mut event, 2, offset);
            let mut stat = Vec::new();
            int(&mut stat, 1, 10);
            field(&mut stat, 5, allocator.as_bytes());
            field(&mut event, 4, &stat);
            for (id, v) in [(11, address), (12, heap), (13, 256)] {
                let mut stat = Vec::new();
                int(&mut stat, 1, id);
                int(&mut stat, 3, v);
                field(&mut event, 4, &stat);
            }
            field(&mut line, 4, &event);
        }
        if timestamp_last {
            int(&mut line, 3, timestamp_ns);
        }
        line
    }

    fn xspace(lines: &[Vec<u8>]) -> Vec<u8> {
        let mut plane = Vec::new();
        field(&mut plane, 2, HOST_PLANE.as_bytes());
        for l in lines {
            field(&mut plane, 3, l);
        }
        metadata_entry(&mut plane, 4, 1, "MemoryAllocation");
        metadata_entry(&mut plane, 4, 2, "MemoryDeallocation");
        for (id, name) in [
            (10, "allocator_name"),
            (11, "addr"),
            (12, "bytes_allocated"),
            (13, "allocation_bytes"),
        ] {
            metadata_entry(&mut plane, 5, id, name);
        }
        let mut space = Vec::new();
        field(&mut space, 1, &plane);
        space
    }

    /// Line A (first in the file) holds allocator `x`; line B starts earlier
    /// in time with allocator `y`, and interleaves with A.
    const A: [Ev; 3] = [
        (10, false, "x", 1, 256),
        (30, false, "x", 2, 512),
        (50, true, "x", 1, 256),
    ];
    const B: [Ev; 3] = [
        (5, false, "y", 7, 256),
        (20, false, "x", 3, 768),
        (40, true, "y", 7, 0),
    ];

    fn memories(profile: &Profile) -> Vec<String> {
        profile
            .memories
            .iter()
            .map(|m| {
                let events: Vec<(i64, bool, u64)> = m
                    .events
                    .iter()
                    .map(|e| {
                        let a = m.allocation(e.alloc());
                        (e.at, e.kind() == EventKind::Free, a.address().unwrap_or(0))
                    })
                    .collect();
                format!(
                    "{} {:?} live at start {:?} samples {:?}",
                    m.id, events, m.live_at_start, m.allocator_samples
                )
            })
            .collect()
    }

    fn read_bytes(bytes: Vec<u8>) -> Profile {
        let mut profile = Profile::default();
        read(
            &mut profile,
            "t.xplane.pb",
            &bytes,
            false,
            "t",
            Split::new(0, 0),
        )
        .unwrap();
        profile
    }

    /// Marks of one step, in a row or apart, make one step spanning them
    /// all; steps come out by id.
    #[test]
    fn step_marks_make_one_step_per_id() {
        let mut decoder = decode::Decoder::new();
        decoder.mark_step(7, 100, 10);
        decoder.mark_step(7, 90, 5);
        decoder.mark_step(3, 50, 20);
        decoder.mark_step(7, 200, 0);
        assert_eq!(decoder.steps.len(), 3);
        let mut steps = std::mem::take(&mut decoder.steps);
        decode::coalesce_steps(&mut steps);
        let spans: Vec<(i64, i64, i64)> = steps.iter().map(|s| (s.id, s.start, s.end)).collect();
        assert_eq!(spans, vec![(3, 50, 70), (7, 90, 200)]);
    }

    #[test]
    fn lines_merge_by_time_and_memories_keep_walk_order() {
        let bytes = xspace(&[line(0, &A, false), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true, Split::new(2, 0)).is_ok());
        let profile = read_bytes(bytes.clone());
        let got = memories(&profile);
        assert_eq!(got.len(), 2);
        // `x` first: its first event comes first in the file, though `y`'s
        // comes first in time.
        assert!(
            got[0].starts_with("x [(10, false, 1), (20, false, 3), (30, false, 2), (50, true, 1)]"),
            "{}",
            got[0]
        );
        assert!(
            got[1].starts_with("y [(5, false, 7), (40, true, 7)]"),
            "{}",
            got[1]
        );
        // The walk in file order builds the same memories.
        let mut sequential_profile = Profile::default();
        sequential(&mut sequential_profile.names, &bytes, None)
            .unwrap()
            .finish(&mut sequential_profile, "t.xplane.pb", "t");
        assert_eq!(memories(&sequential_profile), got);
    }

    #[test]
    fn a_line_out_of_time_order_is_sorted() {
        let in_order = read_bytes(xspace(&[line(0, &A, false), line(0, &B, false)]));
        let mut reversed = A;
        reversed.reverse();
        let bytes = xspace(&[line(0, &reversed, false), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true, Split::new(2, 0)).is_err());
        assert_eq!(memories(&read_bytes(bytes)), memories(&in_order));
    }

    #[test]
    fn a_timestamp_after_the_events_times_them_all() {
        let first = read_bytes(xspace(&[line(7, &A, false), line(0, &B, false)]));
        let bytes = xspace(&[line(7, &A, true), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true, Split::new(2, 0)).is_err());
        let last = read_bytes(bytes);
        assert_eq!(memories(&last), memories(&first));
        assert!(memories(&last)[0].contains("(7010, false, 1)"));
    }

    /// A source that is not in memory and counts the bytes read from it.
    struct Counted(Vec<u8>, std::sync::atomic::AtomicU64);

    impl ByteSource for Counted {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.1
                .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
            self.0.read_exact_at(offset, buf)
        }
    }

    /// A line of the events `A` and one event of 8 MiB (a stat of that
    /// size) of metadata `id`, between them.
    fn with_huge_event(id: u64) -> Vec<u8> {
        let small = line(0, &A, false);
        let mut huge = Vec::new();
        int(&mut huge, 1, id);
        int(&mut huge, 2, 20);
        let mut stat = Vec::new();
        int(&mut stat, 1, 10);
        field(&mut stat, 5, &vec![b'x'; 8 << 20]);
        field(&mut huge, 4, &stat);
        xspace(&[small, line_with(&huge)])
    }

    fn line_with(event: &[u8]) -> Vec<u8> {
        let mut line = Vec::new();
        int(&mut line, 3, 0);
        field(&mut line, 4, event);
        line
    }

    #[test]
    fn an_allocator_event_of_megabytes_is_refused_unread() {
        for force_general_path in [false, true] {
            let source = Counted(with_huge_event(1), Default::default());
            let mut profile = Profile::default();
            let err = read(
                &mut profile,
                "t.xplane.pb",
                &source,
                force_general_path,
                "t",
                Split::new(0, 0),
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.starts_with(
                    "t.xplane.pb: invalid XSpace: an allocator event claims 8388624 bytes; \
                     allocator events are a few hundred bytes, and memtool reads none over \
                     1048576 (at byte "
                ),
                "{err}"
            );
            let read_bytes = source.1.load(std::sync::atomic::Ordering::Relaxed);
            // The walks read the file a few times in windows: far less
            // than the event once.
            assert!(read_bytes < 4 << 20, "{read_bytes} bytes read");
        }
    }

    #[test]
    fn another_event_of_megabytes_is_stepped_over_unread() {
        let plain = read_bytes(xspace(&[line(0, &A, false)]));
        for force_general_path in [false, true] {
            let source = Counted(with_huge_event(77), Default::default());
            let mut profile = Profile::default();
            read(
                &mut profile,
                "t.xplane.pb",
                &source,
                force_general_path,
                "t",
                Split::new(0, 0),
            )
            .unwrap();
            assert_eq!(memories(&profile), memories(&plain));
            let read_bytes = source.1.load(std::sync::atomic::Ordering::Relaxed);
            // The walks read the file a few times in windows: far less
            // than the event once.
            assert!(read_bytes < 4 << 20, "{read_bytes} bytes read");
        }
    }

    /// A generated profile: three lines of `per_line` events each,
    /// interleaved in time, over three allocators, with frees of live and
    /// of never-seen addresses.
    fn generated(per_line: u64) -> Vec<u8> {
        let allocators = ["x", "y", "z"];
        let lines: Vec<Vec<u8>> = (0..3u64)
            .map(|l| {
                let events: Vec<Ev> = (0..per_line)
                    .map(|i| {
                        let free = i % 3 == 2;
                        let address = if free { i - 1 + l * 7 } else { i + l * 7 };
                        (
                            i * 10 + l * 3,
                            free,
                            allocators[((i / 5 + l) % 3) as usize],
                            address,
                            (i % 97) * 256,
                        )
                    })
                    .collect();
                line(l * 2, &events, false)
            })
            .collect();
        xspace(&lines)
    }

    fn dump(profile: &Profile) -> String {
        format!(
            "{:?}\n{:?}\n{:#?}",
            profile.warnings, profile.names, profile.memories
        )
    }

    #[test]
    fn decoding_in_runs_on_many_threads_gives_the_one_thread_profile() {
        let bytes = generated(5_000);
        let read_split = |split: Split, force_general_path: bool| {
            let mut profile = Profile::default();
            read(
                &mut profile,
                "t.xplane.pb",
                &bytes,
                force_general_path,
                "t",
                split,
            )
            .unwrap();
            profile
        };
        let one_thread = read_split(Split::new(1, u64::MAX), false);
        assert_eq!(one_thread.memories.len(), 3);
        let events: usize = one_thread.memories.iter().map(|m| m.events.len()).sum();
        assert_eq!(events, 15_000);
        let want = dump(&one_thread);
        for (jobs, run_bytes) in [(4, 1), (4, 200), (2, 4096), (3, 100_000)] {
            let split = Split::new(jobs, run_bytes);
            // The merged walk reads it, not the walk in file order.
            let mut names = Names::default();
            assert!(merged(&mut names, &bytes, None, true, split).is_ok());
            assert_eq!(
                dump(&read_split(split, false)),
                want,
                "{jobs} jobs, runs of {run_bytes} bytes"
            );
        }
        assert_eq!(dump(&read_split(Split::new(1, 0), true)), want);
        // A line out of time order across runs, decoded ahead on threads of
        // their own: the merged walk gives up.
        let mut reversed = A;
        reversed.reverse();
        let bytes = xspace(&[line(0, &reversed, false), line(0, &B, false)]);
        let mut names = Names::default();
        assert!(merged(&mut names, &bytes, None, true, Split::new(2, 1)).is_err());
    }

    /// Each allocator's memory is given room for about its events before
    /// they come, from the lines' first runs: three lines of runs of 4 KiB
    /// (~100 events each) foretell 15,000 events over three allocators.
    #[test]
    fn memories_are_given_room_for_their_events_from_the_first_runs() {
        let bytes = generated(5_000);
        let mut names = Names::default();
        let Ok(collected) = merged(&mut names, &bytes, None, true, Split::new(2, 4096)) else {
            panic!("the merged walk reads it");
        };
        let rooms: Vec<(usize, usize)> =
            collected.builders.iter().map(|b| b.events_room()).collect();
        assert_eq!(rooms.len(), 3);
        for (events, room) in rooms {
            assert!(
                room >= events && room <= events + events / 4,
                "{events} {room}"
            );
        }
    }

    /// The offsets where the line `bytes`' events (fields 4) start.
    fn event_starts(bytes: &[u8]) -> Vec<u64> {
        let source = bytes.to_vec();
        let mut window = Window::new(&source, SKIM_CHUNK);
        let mut fields = crate::input::xspace::stream::Skim::new(0, bytes.len() as u64);
        let mut starts = Vec::new();
        loop {
            let at = fields.pos;
            let Some((number, _, _)) = fields.next(&mut window).unwrap() else {
                return starts;
            };
            if number == 4 {
                starts.push(at);
            }
        }
    }

    #[test]
    fn runs_are_cut_at_guesses_and_their_decoders_find_the_next_event() {
        let cuts = |start, end, run_bytes| {
            runs::split(start, end, run_bytes)
                .iter()
                .map(|r| (r.start, r.until, r.line_end, r.speculative))
                .collect::<Vec<_>>()
        };
        // The first run starts at the line's first event; a last run under
        // a quarter of a run's bytes joins the one before.
        assert_eq!(
            cuts(10, 110, 40),
            [
                (10, 50, 110, false),
                (50, 90, 110, true),
                (90, 110, 110, true)
            ]
        );
        assert_eq!(cuts(10, 95, 40), [(10, 50, 95, false), (50, 95, 95, true)]);
        // Runs of a byte are runs of `MIN_RUN_BYTES`.
        assert_eq!(cuts(0, 64, 1), [(0, 32, 64, false), (32, 64, 64, true)]);
        assert_eq!(cuts(0, 50, 100), [(0, 50, 50, false)]);
        assert_eq!(cuts(7, 7, 100), [(7, 7, 7, false)]);
        // From any guess, the next event: not a stat inside the event the
        // guess falls in (stats are fields 4 too), nor anything past the
        // last event.
        let events: Vec<Ev> = (0..40).map(|i| (i * 10, i % 2 == 1, "x", i, 256)).collect();
        let bytes = line(0, &events, false);
        let starts = event_starts(&bytes);
        assert_eq!(starts.len(), 40);
        let end = bytes.len() as u64;
        let mut window = Window::new(&bytes, SKIM_CHUNK);
        for guess in 0..end {
            let want = starts.iter().copied().find(|&s| s >= guess);
            assert_eq!(
                runs::resync(&mut window, guess, end).unwrap(),
                want,
                "{guess}"
            );
        }
    }

    /// A line of allocator events with, between them, an event of another
    /// kind whose string stat holds bytes that frame as events: a guess
    /// before it finds those, not the next event.
    fn line_with_decoy() -> (Vec<u8>, u64) {
        let events: Vec<Ev> = (0..30)
            .map(|i| (i * 10, i % 3 == 2, "x", i / 3, 256))
            .collect();
        let fake = line(0, &events[..12], false);
        let mut decoy = Vec::new();
        int(&mut decoy, 1, 77);
        int(&mut decoy, 2, 150);
        let mut stat = Vec::new();
        int(&mut stat, 1, 10);
        // The fake events without the line's timestamp field (2 bytes).
        field(&mut stat, 5, &fake[2..]);
        field(&mut decoy, 4, &stat);
        let (before, after) = (line(0, &events[..15], false), line(0, &events[15..], false));
        let mut bytes = before.clone();
        let decoy_at = bytes.len() as u64;
        field(&mut bytes, 4, &decoy);
        bytes.extend_from_slice(&after[2..]);
        (bytes, decoy_at)
    }

    #[test]
    fn a_run_whose_guess_finds_no_true_event_is_decoded_again_from_the_last_end() {
        let (line_bytes, decoy_at) = line_with_decoy();
        // A guess just inside the decoy finds its fake events.
        let end = line_bytes.len() as u64;
        let mut window = Window::new(&line_bytes, SKIM_CHUNK);
        let found = runs::resync(&mut window, decoy_at + 1, end)
            .unwrap()
            .unwrap();
        assert!(!event_starts(&line_bytes).contains(&found), "{found}");
        let bytes = xspace(&[line_bytes, line(5, &B, false)]);
        let read_split = |split: Split| {
            let mut profile = Profile::default();
            read(&mut profile, "t.xplane.pb", &bytes, false, "t", split).unwrap();
            profile
        };
        let want = dump(&read_split(Split::new(1, u64::MAX)));
        assert!(want.contains("live_at_start"), "{want}");
        for run_bytes in (30..=80).chain([150, 400, 1000]) {
            for jobs in [1, 2, 3] {
                let split = Split::new(jobs, run_bytes);
                let mut names = Names::default();
                assert!(merged(&mut names, &bytes, None, true, split).is_ok());
                assert_eq!(
                    dump(&read_split(split)),
                    want,
                    "{jobs} jobs, runs of {run_bytes} bytes"
                );
            }
        }
    }

    #[test]
    fn runs_of_any_size_give_the_one_run_profile_with_other_fields_between_events() {
        // Allocator events, some with a long stat (a two-byte length), an
        // empty event, other fields between them, and one after the last.
        let mut line_bytes = Vec::new();
        int(&mut line_bytes, 3, 5);
        for i in 0..200u64 {
            let free = i % 4 == 3;
            let mut event = line(0, &[(i * 10, free, "x", i / 4, 256 * i)], false);
            let mut event = event.split_off(2);
            if i % 7 == 3 {
                let mut stat = Vec::new();
                int(&mut stat, 1, 99);
                field(&mut stat, 5, &vec![b'y'; 150 + i as usize]);
                // Inside the event's own field 4: replace its header.
                let mut inner = event.split_off(2);
                field(&mut inner, 4, &stat);
                event = Vec::new();
                field(&mut event, 4, &inner);
            }
            if i % 50 == 9 {
                field(&mut line_bytes, 4, &[]);
            }
            line_bytes.extend_from_slice(&event);
            if i % 37 == 5 {
                field(&mut line_bytes, 11, b"name");
            }
        }
        field(&mut line_bytes, 11, b"display");
        let bytes = xspace(&[line_bytes]);
        let read_split = |split: Split| {
            let mut profile = Profile::default();
            read(&mut profile, "t.xplane.pb", &bytes, false, "t", split).unwrap();
            profile
        };
        let want = dump(&read_split(Split::new(1, u64::MAX)));
        assert_eq!(
            read_split(Split::new(1, u64::MAX)).memories[0].events.len(),
            200
        );
        for run_bytes in [1, 33, 37, 50, 100, 1000, 4096] {
            let split = Split::new(2, run_bytes);
            let mut names = Names::default();
            assert!(merged(&mut names, &bytes, None, true, split).is_ok());
            assert_eq!(dump(&read_split(split)), want, "runs of {run_bytes} bytes");
        }
    }
}
