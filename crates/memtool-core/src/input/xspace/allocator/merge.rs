//! The merged walk: every `/host:CPU` line read at once through a cursor of
//! its own, merged by time, each event going straight to its allocator's
//! builder on a second thread.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc;

use super::build::{Collected, MemoryBuilder, SiteCache};
use super::decode::{Decoder, Interned, LineClock, PlaneKeys, RawEvent};
use super::{HOST_PLANE, SKIM_CHUNK};
use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::xspace::stream::{header_i64, FieldAt, Skim, Stream, MAX_EVENT_BYTES};
use crate::input::xspace::{Planes, StreamError, Window};
use crate::model::{Names, SiteId};
use memtool_proto::wire::reader::{Header, WireError};

/// How much of the input the lines' windows read at a time, all together.
const LINE_CHUNKS: usize = 4 << 20;
/// Lines merged at most (a cursor and a window each); a host plane with more
/// threads than this is read in file order and sorted.
const MAX_MERGED_LINES: usize = 4096;

/// Why the merged walk gave up: the walk in file order takes over.
#[derive(Debug)]
pub(super) struct Fallback;

impl From<StreamError> for Fallback {
    fn from(_: StreamError) -> Self {
        Fallback
    }
}

impl From<WireError> for Fallback {
    fn from(_: WireError) -> Self {
        Fallback
    }
}

impl From<std::io::Error> for Fallback {
    fn from(_: std::io::Error) -> Self {
        Fallback
    }
}

/// One line being read in the merged walk: its next allocator event is
/// `head`.
struct Cursor<'s> {
    plane: usize,
    /// The line's place in walk order (all host planes' lines counted).
    rank: u64,
    /// Events of the line read so far.
    index: u64,
    clock: LineClock,
    fields: Stream,
    window: Window<'s>,
    head: Option<RawEvent>,
    /// Whether events are decoded by [`Decoder::event_fast`].
    fast_events: bool,
}

impl Cursor<'_> {
    fn advance(
        &mut self,
        decoder: &mut Decoder,
        names: &mut Names,
        interned: &mut Interned,
        planes: &mut [PlaneKeys],
    ) -> Result<(), Fallback> {
        let last_at = self.head.take().map(|e| e.at);
        let plane = planes.get_mut(self.plane).ok_or(Fallback)?;
        while let Some((number, field)) = self.fields.next(&mut self.window)? {
            match (number, field) {
                // A timestamp after the events: they were timed too early.
                (3, _) => return Err(Fallback),
                (4, FieldAt::Bytes { at, len }) => {
                    self.index += 1;
                    if len > MAX_EVENT_BYTES {
                        plane.oversized_event(&mut self.window, at, len)?;
                        continue;
                    }
                    let bytes = self.window.bytes(at, len)?;
                    let seen = (self.rank, self.index);
                    let clock = &self.clock;
                    let raw = if self.fast_events {
                        decoder.event_fast(names, interned, plane, clock, bytes, at, seen)?
                    } else {
                        decoder.event(names, plane, clock, bytes, at, seen)?
                    };
                    if let Some(raw) = raw {
                        if last_at.is_some_and(|last| raw.at < last) {
                            return Err(Fallback);
                        }
                        self.head = Some(raw);
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Reads the allocator events of every `/host:CPU` line at once, merging the
/// lines by time, straight into the memories: nothing is kept per event but
/// what the model keeps. Profilers write each line's events in time order
/// (TSL's `SortXSpace`); a line that is not, or any damage, ends this walk.
/// Events are decoded by [`Decoder::event_fast`] when `fast_events`, else by
/// [`Decoder::event`].
pub(super) fn merged(
    names: &mut Names,
    source: &dyn ByteSource,
    start_ns: Option<i64>,
    fast_events: bool,
) -> Result<Collected, Fallback> {
    let mut skim = Window::new(source, SKIM_CHUNK);
    let mut planes: Vec<PlaneKeys> = Vec::new();
    // (plane, timestamp, where the first event is, line end)
    let mut lines: Vec<(usize, i64, u64, u64)> = Vec::new();
    let mut plane_iter = Planes::new(&skim);
    while let Some(plane) = plane_iter.next(&mut skim)? {
        if plane.name != HOST_PLANE {
            continue;
        }
        planes.push(PlaneKeys::read(&mut skim, &plane)?);
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
            lines.push((planes.len() - 1, timestamp_ns, first_event, line.end));
        }
    }
    drop(skim);
    if lines.len() > MAX_MERGED_LINES {
        return Err(Fallback);
    }

    let mut decoder = Decoder::new();
    let mut decoded = Names::default();
    let mut interned = Interned::default();
    let chunk = (LINE_CHUNKS / lines.len().max(1)).clamp(16 << 10, 1 << 20);
    let mut cursors: Vec<Cursor<'_>> = Vec::with_capacity(lines.len());
    let mut queue = BinaryHeap::with_capacity(lines.len());
    for (rank, &(plane, timestamp_ns, first_event, end)) in lines.iter().enumerate() {
        let earliest_ns = match start_ns {
            Some(_) => None,
            None => lines.iter().filter(|l| l.0 == plane).map(|l| l.1).min(),
        };
        let mut cursor = Cursor {
            plane,
            rank: rank as u64,
            index: 0,
            clock: LineClock::new(timestamp_ns, start_ns, earliest_ns),
            fields: Stream::new(first_event, end),
            window: Window::new(source, chunk.min((end - first_event) as usize)),
            head: None,
            fast_events,
        };
        cursor.advance(&mut decoder, &mut decoded, &mut interned, &mut planes)?;
        if let Some(head) = &cursor.head {
            queue.push(Reverse((head.at, cursors.len())));
        }
        cursors.push(cursor);
    }

    // Decoding and the merge stay on this thread; a second one builds the
    // memories, batch by batch, in the order the merge gives.
    let mut sites = SiteCache::default();
    let (sender, receiver) = mpsc::sync_channel::<Vec<(RawEvent, SiteId)>>(BATCHES_IN_FLIGHT);
    std::thread::scope(|scope| {
        let builder = std::thread::Builder::new()
            .name("xspace-builder".into())
            .spawn_scoped(scope, move || {
                let mut builders: Vec<MemoryBuilder> = Vec::new();
                let mut any = false;
                for batch in receiver {
                    for (event, site) in &batch {
                        let index = event.allocator as usize;
                        if builders.len() <= index {
                            builders.resize_with(index + 1, MemoryBuilder::default);
                        }
                        builders[index].push(event, *site);
                        any = true;
                    }
                }
                (builders, any)
            })?;
        let mut merge = || -> Result<(), Fallback> {
            let mut batch = Vec::with_capacity(BATCH);
            while let Some(Reverse((_, i))) = queue.pop() {
                let cursor = &mut cursors[i];
                if let Some(event) = cursor.head {
                    batch.push((event, sites.site(names, &decoded, &event)));
                    if batch.len() == BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        sender.send(full).map_err(|_| Fallback)?;
                    }
                }
                cursor.advance(&mut decoder, &mut decoded, &mut interned, &mut planes)?;
                if let Some(head) = &cursor.head {
                    queue.push(Reverse((head.at, i)));
                }
            }
            sender.send(batch).map_err(|_| Fallback)
        };
        let merged = merge();
        drop(sender);
        let (builders, any) = builder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        merged?;
        Ok(Collected {
            decoder,
            decoded,
            builders,
            any,
        })
    })
}

/// Events per batch handed to the building thread, and batches in flight:
/// enough to keep both threads busy, little memory (about 100 KiB a batch).
const BATCH: usize = 1024;
const BATCHES_IN_FLIGHT: usize = 8;
