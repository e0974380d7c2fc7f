//! The merged walk: every `/host:CPU` line cut into runs ([`super::runs`]),
//! runs decoded on every core, lines merged by time on this thread, each
//! event going straight to its allocator's builder, on this thread too.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use super::ahead::{Ahead, StopOnDrop};
use super::build::{Collected, MemoryBuilder, Room, SiteCache};
use super::decode::{Decoder, Fallback, LineClock, PlaneKeys, RawEvent};
use super::runs::{self, Adopted, Buffers, DecodedRun, LineAt, Run, Split, MIN_EVENT_BYTES};
use super::{HOST_PLANE, SKIM_CHUNK};
use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::xspace::stream::{header_i64, Skim};
use crate::input::xspace::{Planes, Window};
use crate::model::Names;
use memtool_proto::wire::reader::Header;

/// Lines merged at most (their decoded events are held until merged); a
/// host plane with more threads than this is read in file order and sorted.
const MAX_MERGED_LINES: usize = 4096;

/// One line in the merged walk: its runs, and its events decoded but not yet
/// merged (the next is its head).
struct LineEvents {
    at: LineAt,
    runs: Vec<Run>,
    next_run: usize,
    /// Runs' events, none empty, the head at `next` in the first: a run's
    /// vector is merged from where it was decoded into, not copied into
    /// one queue, and given back for another run once merged.
    pending: VecDeque<Vec<RawEvent>>,
    next: usize,
    /// The time of the last event decoded, which the next must not precede.
    last_at: Option<i64>,
    /// Where the runs taken so far end (a field boundary: where the next
    /// must start), and how many events they hold.
    boundary: u64,
    index: u64,
}

impl LineEvents {
    fn head(&self) -> Option<&RawEvent> {
        self.pending.front().and_then(|run| run.get(self.next))
    }

    /// Drops the head (read where it is by `head`: not copied out first).
    fn advance(&mut self, buffers: &Buffers<'_>) {
        let Some(run) = self.pending.front() else {
            return;
        };
        self.next += 1;
        if self.next >= run.len() {
            self.next = 0;
            if let Some(done) = self.pending.pop_front() {
                buffers.give_back_events(done);
            }
        }
    }
}

/// Takes the line's next runs, decoded ahead (or here, when no worker has
/// started them), until it has an event to merge or none is left.
fn refill(
    line: &mut LineEvents,
    ahead: &Ahead<'_, '_>,
    adopted: &mut Adopted,
    buffers: &Buffers<'_>,
    planes: &[PlaneKeys],
    fast_events: bool,
) -> Result<(), Fallback> {
    while line.pending.is_empty() {
        let Some(&run) = line.runs.get(line.next_run) else {
            break;
        };
        let decoded = ahead.take(line.at.rank as usize, line.next_run);
        line.next_run += 1;
        line.settle(run, decoded, adopted, buffers, planes, fast_events)?;
    }
    Ok(())
}

impl LineEvents {
    /// Takes the line's next run, `run` as decoded: if it started anywhere
    /// but where the run before ended (its guessed start found no event, or
    /// not the first at or after it), or failed, it is decoded again from
    /// there, and what that gives is taken: the runs' guesses change how
    /// the work is shared out, never what is read.
    fn settle(
        &mut self,
        run: Run,
        decoded: Result<DecodedRun, Fallback>,
        adopted: &mut Adopted,
        buffers: &Buffers<'_>,
        planes: &[PlaneKeys],
        fast_events: bool,
    ) -> Result<(), Fallback> {
        let decoded = match decoded {
            Ok(decoded) if decoded.extent().0 == self.boundary => decoded,
            missed => {
                if let Ok(missed) = missed {
                    buffers.give_back_events(missed.into_events());
                }
                let from_boundary = Run {
                    start: self.boundary,
                    speculative: false,
                    ..run
                };
                runs::decode(buffers, planes, self.at, from_boundary, fast_events)?
            }
        };
        let (_, end, count) = decoded.extent();
        self.boundary = end;
        let first_index = self.index;
        self.index += count;
        let events = adopted.adopt(decoded, first_index);
        if events.is_empty() {
            // A run of other events: its vector serves another run.
            buffers.give_back_events(events);
            return Ok(());
        }
        self.take(events)
    }

    /// Takes the events of the line's next run, which must not start before
    /// the last run ended.
    fn take(&mut self, events: Vec<RawEvent>) -> Result<(), Fallback> {
        if let (Some(first), Some(last)) = (events.first(), self.last_at) {
            if first.at < last {
                return Err(Fallback);
            }
        }
        match events.last() {
            Some(e) => self.last_at = Some(e.at),
            None => return Ok(()),
        }
        self.pending.push_back(events);
        Ok(())
    }
}

/// Reads the allocator events of every `/host:CPU` line at once, merging the
/// lines by time, straight into the memories: nothing is kept per event but
/// what the model keeps. Profilers write each line's events in time order
/// (TSL's `SortXSpace`); a line that is not, or any damage, ends this walk.
/// Events are decoded by [`Decoder::event_fast`] when `fast_events`, else by
/// [`Decoder::event`], on `split.jobs` threads.
pub(super) fn merged(
    names: &mut Names,
    source: &dyn ByteSource,
    start_ns: Option<i64>,
    fast_events: bool,
    split: Split,
) -> Result<Collected, Fallback> {
    let mut skim = Window::new(source, SKIM_CHUNK);
    let mut planes: Vec<PlaneKeys> = Vec::new();
    // (plane, timestamp, runs of its events)
    let mut lines: Vec<(usize, i64, Vec<Run>)> = Vec::new();
    let mut plane_iter = Planes::new(&skim);
    while let Some(plane) = plane_iter.next(&mut skim)? {
        if plane.name != HOST_PLANE {
            continue;
        }
        planes.push(PlaneKeys::read(&mut skim, &plane, planes.len())?);
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(&mut skim)? {
            let (3, Header::Len(len)) = (number, header) else {
                continue;
            };
            // The line's own fields come before its events on the wire.
            let mut line = Skim::new(at, at + len);
            let mut timestamp_ns = 0;
            let mut first_event = line.end;
            loop {
                let field_at = line.pos;
                let Some((number, header, _)) = line.next(&mut skim)? else {
                    break;
                };
                match (number, header) {
                    (3, h) => timestamp_ns = header_i64(h).unwrap_or(0),
                    (4, Header::Len(_)) => {
                        first_event = field_at;
                        break;
                    }
                    _ => {}
                }
            }
            let runs = runs::split(first_event, line.end, split.run_bytes);
            lines.push((planes.len() - 1, timestamp_ns, runs));
        }
    }
    drop(skim);
    if lines.len() > MAX_MERGED_LINES {
        return Err(Fallback);
    }

    let mut adopted = Adopted {
        decoder: Decoder::new(),
        decoded: Names::default(),
        steps_coalesced: 0,
    };
    let earliest = |plane: usize| match start_ns {
        Some(_) => None,
        None => lines.iter().filter(|l| l.0 == plane).map(|l| l.1).min(),
    };
    let buffers = Buffers::new(source, split.run_bytes);
    let mut merging: Vec<LineEvents> = Vec::with_capacity(lines.len());
    for (rank, (plane, timestamp_ns, runs)) in lines.iter().enumerate() {
        merging.push(LineEvents {
            at: LineAt {
                plane: *plane,
                rank: rank as u64,
                clock: LineClock::new(*timestamp_ns, start_ns, earliest(*plane)),
            },
            runs: runs.clone(),
            next_run: 0,
            pending: VecDeque::new(),
            next: 0,
            last_at: None,
            boundary: runs.first().map_or(0, |r| r.start),
            index: 0,
        });
    }
    drop(lines);
    let ahead = Ahead::new(
        merging.iter().map(|l| (l.at, l.runs.clone())).collect(),
        &buffers,
        &planes,
        fast_events,
        split.jobs,
    );
    let mut sites = SiteCache::default();
    let (buffers, planes, ahead) = (&buffers, &planes[..], &ahead);
    std::thread::scope(|scope| {
        // Workers stop however this ends, before the scope waits for them.
        let _stop = StopOnDrop(ahead);
        if split.jobs > 1 {
            // `jobs` threads in all, this one among them: it merges, builds
            // and decodes the runs no worker has started (see
            // [`Ahead::take`]). `jobs` workers beside it (and a building
            // thread) kept every thread waiting for a core about a third
            // of the time, this one, which the others wait for, among them
            // (Run AF-xspace-threads). A worker that cannot be started
            // leaves its runs to the others, or to the merge.
            for _ in 1..split.jobs {
                let _ = std::thread::Builder::new()
                    .name("xspace-runs".into())
                    .spawn_scoped(scope, || ahead.work());
            }
        }
        let mut merging = merging;
        // Every line's first run before any event is merged (the workers
        // start them first: a host plane has many short lines), for the
        // memories' room.
        for line in merging.iter_mut() {
            if let Some(&run) = line.runs.first() {
                let decoded = ahead.take(line.at.rank as usize, 0);
                line.next_run = 1;
                line.settle(run, decoded, &mut adopted, buffers, planes, fast_events)?;
            }
        }
        // The memories are built here, in the merge's order, each event
        // read where it was decoded: handed to a thread of their own, in
        // batches, each event was copied once more (~130 bytes), and that
        // thread was one more than the cores (Run AF-xspace-threads).
        let rooms = expected_rooms(&merging);
        let mut builders: Vec<MemoryBuilder> =
            rooms.into_iter().map(MemoryBuilder::with_room).collect();
        let mut any = false;
        let mut queue = BinaryHeap::with_capacity(merging.len());
        let mut merge = || -> Result<(), Fallback> {
            for (i, line) in merging.iter_mut().enumerate() {
                refill(line, ahead, &mut adopted, buffers, planes, fast_events)?;
                if let Some(head) = line.head() {
                    queue.push(Reverse((head.at, i)));
                }
            }
            // The earliest head is replaced in place by its line's next
            // (one sift down, not a pop and a push: ~50 instructions an
            // event less on this thread, the merge's).
            while let Some(mut top) = queue.peek_mut() {
                let Reverse((_, i)) = *top;
                let line = merging.get_mut(i).ok_or(Fallback)?;
                if let Some(event) = line.head() {
                    let site = sites.site(names, &adopted.decoded, event);
                    let index = event.allocator as usize;
                    if builders.len() <= index {
                        builders.resize_with(index + 1, MemoryBuilder::default);
                    }
                    builders[index].push(event, site);
                    any = true;
                    line.advance(buffers);
                }
                // Nearly always the line's run has more: no call.
                if line.pending.is_empty() {
                    refill(line, ahead, &mut adopted, buffers, planes, fast_events)?;
                }
                match line.head() {
                    Some(head) => *top = Reverse((head.at, i)),
                    None => {
                        PeekMut::pop(top);
                    }
                }
            }
            Ok(())
        };
        let merged = merge();
        drop(merging);
        merged?;
        let steps = adopted.decoder.take_steps();
        let Adopted {
            decoder, decoded, ..
        } = adopted;
        Ok(Collected {
            decoder,
            steps,
            decoded,
            builders,
            any,
        })
    })
}

/// The room each allocator's memory is expected to need (by allocator
/// index): its events in each line's first run, decoded before any is
/// merged, scaled by the line's bytes over the run's (lines differ: a host
/// plane has lines of allocator events and lines of other events). At
/// 660,000 events the memory's vectors grown by doubling were a third of
/// the page faults and most of the copying. A little more than the estimate
/// (1/16), since a vector short by one event is copied whole; never more
/// events than `MIN_EVENT_BYTES` would fit in the lines, whatever the first
/// runs held.
fn expected_rooms(merging: &[LineEvents]) -> Vec<Room> {
    let mut total = 0u64;
    // (events, allocations) by allocator, scaled.
    let mut expected: Vec<(u128, u128)> = Vec::new();
    let mut in_line: Vec<(u128, u128)> = Vec::new();
    for line in merging {
        let Some(first) = line.runs.first() else {
            continue;
        };
        let bytes = first.line_end.saturating_sub(first.start);
        let decoded = line.boundary.saturating_sub(first.start);
        total = total.saturating_add(bytes);
        if decoded == 0 {
            continue;
        }
        in_line.clear();
        for e in line.pending.iter().flatten() {
            let index = e.allocator as usize;
            if in_line.len() <= index {
                in_line.resize(index + 1, (0, 0));
            }
            in_line[index].0 += 1;
            in_line[index].1 += u128::from(!e.free);
        }
        if expected.len() < in_line.len() {
            expected.resize(in_line.len(), (0, 0));
        }
        let scale = |n: u128| n * u128::from(bytes) / u128::from(decoded);
        for (sum, &(events, allocations)) in expected.iter_mut().zip(&in_line) {
            sum.0 += scale(events);
            sum.1 += scale(allocations);
        }
    }
    let most = total / MIN_EVENT_BYTES;
    let room = |n: u128| {
        let n = (n + n / 16).min(u128::from(most));
        usize::try_from(n).unwrap_or(usize::MAX)
    };
    expected
        .iter()
        .map(|&(events, allocations)| Room {
            events: room(events),
            allocations: room(allocations),
        })
        .collect()
}
