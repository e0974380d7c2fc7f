//! The walk in file order: reads every allocator event as laid out and sorts
//! them, for lines out of time order and to report the first damage in file
//! order.

use super::build::{Collected, MemoryBuilder, SiteCache};
use super::decode::{Decoder, Interned, LineClock, PlaneKeys, RawEvent};
use super::{HOST_PLANE, SKIM_CHUNK};
use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::xspace::stream::{header_i64, FieldAt, Skim, Stream, MAX_EVENT_BYTES};
use crate::input::xspace::{PlaneAt, Planes, StreamError, Window};
use crate::model::Names;
use memtool_proto::wire::reader::Header;

/// Reads the allocator events in file order, as they are laid out, and sorts
/// them: for lines out of time order, and to report the first damage in file
/// order.
pub(super) fn sequential(
    names: &mut Names,
    source: &dyn ByteSource,
    start_ns: Option<i64>,
) -> Result<Collected, StreamError> {
    let mut skim = Window::new(source, SKIM_CHUNK);
    let mut window = Window::new(source, 1 << 20);
    let mut decoder = Decoder::new();
    let mut decoded = Names::default();
    let mut interned = Interned::default();
    let mut events: Vec<RawEvent> = Vec::new();
    let mut planes: Vec<PlaneKeys> = Vec::new();
    let mut rank = 0u64;
    let mut plane_iter = Planes::new(&skim);
    while let Some(plane) = plane_iter.next(&mut skim)? {
        if plane.name != HOST_PLANE {
            continue;
        }
        planes.push(PlaneKeys::read(&mut skim, &plane, planes.len())?);
        let keys = planes.last().expect("just pushed");
        let earliest_ns = match start_ns {
            Some(_) => None,
            None => earliest_line_ns(&mut skim, &plane)?,
        };
        let mut fields = Skim::new(plane.start, plane.end);
        while let Some((number, header, at)) = fields.next(&mut skim)? {
            let (3, Header::Len(len)) = (number, header) else {
                continue;
            };
            let timestamp_ns = line_timestamp_ns(&mut skim, at, at + len)?;
            let clock = LineClock::new(timestamp_ns, start_ns, earliest_ns);
            rank += 1;
            let mut index = 0u64;
            let mut line = Stream::new(at, at + len);
            while let Some((number, field)) = line.next(&mut window)? {
                let (4, FieldAt::Bytes { at, len }) = (number, field) else {
                    continue;
                };
                index += 1;
                if len > MAX_EVENT_BYTES {
                    keys.oversized_event(&mut window, at, len)?;
                    continue;
                }
                let bytes = window.bytes(at, len)?;
                let seen = (rank, index);
                if let Some(raw) =
                    decoder.event(&mut decoded, &mut interned, keys, &clock, bytes, at, seen)?
                {
                    events.push(raw);
                }
            }
        }
    }
    // In time order, ties in walk order: the order the merged walk gives, so
    // sites are interned in its order too, and each allocator's events are
    // in time order.
    events.sort_by_key(|e| (e.at, e.seq_rank, e.seq));
    let mut builders: Vec<MemoryBuilder> = Vec::new();
    builders.resize_with(decoder.allocators.len(), MemoryBuilder::default);
    let mut sites = SiteCache::default();
    for event in &events {
        if let Some(builder) = builders.get_mut(event.allocator as usize) {
            builder.push(event, sites.site(names, &decoded, event));
        }
    }
    let steps = decoder.take_steps();
    Ok(Collected {
        decoder,
        steps,
        decoded,
        builders,
        any: !events.is_empty(),
    })
}

/// A line's `timestamp_ns`, its fields framed (as [`crate::input::xspace::Line`] does).
fn line_timestamp_ns(window: &mut Window<'_>, start: u64, end: u64) -> Result<i64, StreamError> {
    let mut timestamp_ns = 0;
    let mut fields = Skim::new(start, end);
    while let Some((number, header, _)) = fields.next(window)? {
        if number == 3 {
            timestamp_ns = header_i64(header).unwrap_or(0);
        }
    }
    Ok(timestamp_ns)
}

/// The earliest `timestamp_ns` of the plane's lines.
fn earliest_line_ns(window: &mut Window<'_>, plane: &PlaneAt) -> Result<Option<i64>, StreamError> {
    let mut earliest: Option<i64> = None;
    let mut fields = Skim::new(plane.start, plane.end);
    while let Some((number, header, at)) = fields.next(window)? {
        let (3, Header::Len(len)) = (number, header) else {
            continue;
        };
        let ts = line_timestamp_ns(window, at, at + len)?;
        earliest = Some(earliest.map_or(ts, |e| e.min(ts)));
    }
    Ok(earliest)
}
