//! Runs: a line's events cut into pieces at guessed offsets (the merge
//! checks each guess against where the run before really ended), each decoded
//! on a thread of its own with its own decoder and names table, then
//! adopted into the merged walk's (strings and allocators renumbered). One
//! line holds most of a profile's events (78 % of them on the 660k-event
//! benchmark), so lines alone would keep one core busy; runs of a line keep
//! every core busy.

use super::decode::{coalesce_steps, Decoder, Fallback, Interned, LineClock, PlaneKeys, RawEvent};
use super::fast::push_in_order;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::input::source::ByteSource;
use crate::input::xspace::stream::{FieldAt, Stream, HEADER_BYTES, MAX_EVENT_BYTES};
use crate::input::xspace::Window;
use crate::model::{Names, StrId};
use memtool_proto::wire::reader::varint_at as varint;

/// How the merged walk shares out decoding: at most `jobs` threads (the
/// caller's among them), each decoding a run of about `run_bytes` of a
/// line's events at a time.
#[derive(Clone, Copy, Debug)]
pub(in crate::input::xspace) struct Split {
    pub(super) jobs: usize,
    pub(super) run_bytes: u64,
}

impl Split {
    /// `jobs` threads (0: every core) on runs of `run_bytes` (0: 256 KiB,
    /// about 2,000 events: enough work per run that starting it costs
    /// nothing (0.15% more instructions than runs of 1 MiB), and little
    /// memory per run in flight, about 256 KiB of decoded events and a
    /// window as long: each held vector and window is faulted in once, and
    /// runs of 1 MiB took ~1,700 page faults more on the 660k-event
    /// benchmark, ~15,600 in all).
    pub(in crate::input::xspace) fn new(jobs: usize, run_bytes: u64) -> Split {
        let jobs = crate::parallel::threads(jobs);
        Split {
            jobs,
            run_bytes: if run_bytes == 0 { 256 << 10 } else { run_bytes },
        }
    }
}

/// One run of a line's events: those that start in `[start, until)`. The
/// last of them may end past `until`; the next run starts where it ends.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    /// Where the run's first field starts, or (`speculative`) a guess at
    /// it: the run's decoder then starts at the first place at or after it
    /// that looks like an event ([`resync`]), which the merge
    /// checks against where the run before really ended.
    pub(super) start: u64,
    pub(super) until: u64,
    /// Where the line's events end.
    pub(super) line_end: u64,
    pub(super) speculative: bool,
}

/// Cuts a line's events `[start, end)` into runs of `run_bytes` at fixed
/// offsets, without reading them: every run but the first starts at a
/// guess. Skimming the line's fields for true boundaries first kept one
/// thread reading the whole input alone (about 60 ms of the 660k-event
/// benchmark) before any run was decoded.
pub(super) fn split(start: u64, end: u64, run_bytes: u64) -> Vec<Run> {
    let run_bytes = run_bytes.max(MIN_RUN_BYTES);
    let mut runs = Vec::new();
    let mut at = start;
    loop {
        let until = at.saturating_add(run_bytes).min(end);
        runs.push(Run {
            start: at,
            until: if end - until < run_bytes / 4 {
                end
            } else {
                until
            },
            line_end: end,
            speculative: at != start,
        });
        at = runs.last().map_or(end, |r| r.until);
        if at >= end {
            return runs;
        }
    }
}

/// The shortest run: under an allocator event's size, so that the tests'
/// tiny runs still cut events anywhere, but not one run a byte (cut at
/// guesses, a line of `n` bytes is `n / run_bytes` runs however few its
/// events).
const MIN_RUN_BYTES: u64 = 32;

/// How far past a guessed start [`resync`] looks for an event: far more
/// than an allocator event (a few hundred bytes). A run whose guess finds
/// none there is decoded again from where the run before ended.
const RESYNC_BYTES: usize = 16 << 10;
/// Fields after a candidate that must frame as events too.
const RESYNC_CHAIN: usize = 8;

/// The first offset at or after `from` (before `line_end`) where the bytes
/// look like a run of events: an `XEvent` field (`22 len`) whose payload
/// frames as an event's fields and holds one a stat cannot (an offset,
/// a stat, an occurrence count), then more such fields up to
/// [`RESYNC_CHAIN`] or the line's end. Protobuf cannot be resynchronized
/// with certainty: this is only a guess, which the caller checks.
pub(super) fn resync(
    window: &mut Window<'_>,
    from: u64,
    line_end: u64,
) -> Result<Option<u64>, Fallback> {
    let held = window.peek(from, line_end, RESYNC_BYTES)?;
    let left = usize::try_from(line_end - from).unwrap_or(usize::MAX);
    let scan = held.len().min(RESYNC_BYTES);
    Ok((0..scan)
        .find(|&i| held[i] == 0x22 && looks_like_events(&held[i..], left - i))
        .map(|i| from + i as u64))
}

/// Whether `bytes` (of which `left` remain in the line) start with events,
/// as [`resync`] tells.
fn looks_like_events(bytes: &[u8], left: usize) -> bool {
    let mut pos = 0usize;
    for n in 0..RESYNC_CHAIN {
        if pos == left {
            return true;
        }
        if bytes.get(pos) != Some(&0x22) {
            return false;
        }
        let mut at = pos + 1;
        let Some(len) = varint(bytes, &mut at).and_then(|l| usize::try_from(l).ok()) else {
            // Past what is held: as far as can be told.
            return n > 0 && bytes.len() - pos < HEADER_BYTES;
        };
        let Some(end) = at.checked_add(len).filter(|&e| e <= left) else {
            return false;
        };
        match bytes.get(at..end) {
            Some(event) if event_fields(event, n == 0) => pos = end,
            Some(_) => return false,
            None => return n > 0,
        }
    }
    true
}

/// Whether `event` frames as an `XEvent`'s fields (metadata id 1, offset 2,
/// duration 3, stats 4, occurrences 5); `telling`: and holds one that an
/// `XStat` (which shares fields 1 and 3) cannot.
fn event_fields(event: &[u8], telling: bool) -> bool {
    let mut pos = 0;
    let mut told = !telling;
    while pos < event.len() {
        let Some(key) = varint(event, &mut pos) else {
            return false;
        };
        let ok = match key {
            0x08 | 0x10 | 0x18 | 0x28 => varint(event, &mut pos).is_some(),
            0x22 => varint(event, &mut pos)
                .and_then(|l| usize::try_from(l).ok())
                .and_then(|l| pos.checked_add(l))
                .filter(|&e| e <= event.len())
                .map(|e| pos = e)
                .is_some(),
            _ => false,
        };
        if !ok {
            return false;
        }
        told |= key != 0x08 && key != 0x18;
    }
    told
}

/// What one line's reader needs to decode any of its runs.
#[derive(Clone, Copy)]
pub(super) struct LineAt {
    pub(super) plane: usize,
    /// The line's place in walk order (all host planes' lines counted).
    pub(super) rank: u64,
    pub(super) clock: LineClock,
}

/// A run's allocator events, in time order, with what its decoder found
/// besides; strings and allocators are numbered in `names` and
/// `decoder.allocators`, the run's own, until [`Adopted::adopt`].
pub(super) struct DecodedRun {
    events: Vec<RawEvent>,
    decoder: Decoder,
    names: Names,
    /// Where its first field starts, and where its last ends.
    start: u64,
    end: u64,
    /// Its events (fields 4, of any kind), which number its events from 1
    /// until [`Adopted::adopt`] numbers them in the line.
    count: u64,
}

impl DecodedRun {
    /// Where its first field starts and its last ends, and how many events
    /// it holds.
    pub(super) fn extent(&self) -> (u64, u64, u64) {
        (self.start, self.end, self.count)
    }

    /// Its event vector, for another run (a run decoded from a wrong guess).
    pub(super) fn into_events(self) -> Vec<RawEvent> {
        self.events
    }
}

/// What runs are read through and decoded into, kept for the next runs:
/// windows (a window's buffer, about a run's bytes, is zeroed when it
/// grows, so a window per run would clear every byte of the file once
/// more) and event vectors (a run's, about as long as its bytes, given back
/// once merged: a fresh one per run made the kernel fault in and zero
/// ~20,000 pages on the 660k-event profile, a quarter of its system time).
pub(super) struct Buffers<'s> {
    source: &'s dyn ByteSource,
    chunk: usize,
    spare: Mutex<Vec<Window<'s>>>,
    spare_events: Mutex<Vec<Vec<RawEvent>>>,
    /// The capacity an event vector is given: a run's expected events, or
    /// the most any run held so far (a vector grown by doubling from empty
    /// is copied and faulted in about twice over).
    events_room: AtomicUsize,
}

/// Bytes an allocator event is expected to take on the wire, for a run's
/// first guess at its events (~120 on the 660k-event benchmark; a vector
/// given more room than it fills is only reserved, not faulted in).
const EXPECTED_EVENT_BYTES: u64 = 96;
/// Bytes an allocator event takes at least on the wire (a field header,
/// metadata id, offset and a few stats): what bounds the room given to a
/// run's events here and to a memory's in the merge.
pub(super) const MIN_EVENT_BYTES: u64 = 16;

/// Event vectors kept for reuse at most: a few per job cover the runs in
/// flight; more would only hold memory.
const SPARE_EVENT_VECS: usize = 16;

impl<'s> Buffers<'s> {
    pub(super) fn new(source: &'s dyn ByteSource, run_bytes: u64) -> Buffers<'s> {
        // A run's bytes and the end of its last event in one read.
        let run = usize::try_from(run_bytes.min(WINDOW_CHUNK)).unwrap_or(1 << 20);
        Buffers {
            source,
            chunk: run + RESYNC_BYTES,
            spare: Mutex::new(Vec::new()),
            spare_events: Mutex::new(Vec::new()),
            events_room: AtomicUsize::new(
                usize::try_from(run_bytes.min(WINDOW_CHUNK) / EXPECTED_EVENT_BYTES).unwrap_or(0),
            ),
        }
    }

    fn take(&self) -> Window<'s> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.unwrap_or_else(|| Window::new(self.source, self.chunk))
    }

    fn give_back(&self, window: Window<'s>) {
        self.spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(window);
    }

    /// An empty event vector, with room for the events of a run of `bytes`:
    /// an earlier run's, or a new one (never one grown from a spare too
    /// short, which would copy it). A short run (a short line's) is given
    /// no more room than its bytes can hold.
    fn take_events(&self, bytes: u64) -> Vec<RawEvent> {
        let most = usize::try_from(bytes / MIN_EVENT_BYTES).unwrap_or(usize::MAX);
        let room = self.events_room.load(Ordering::Relaxed).min(most);
        let spare = self
            .spare_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        spare
            .filter(|v| v.capacity() >= room)
            .unwrap_or_else(|| Vec::with_capacity(room))
    }

    /// A run's event vector, once its events are merged.
    pub(super) fn give_back_events(&self, mut events: Vec<RawEvent>) {
        self.events_room.fetch_max(events.len(), Ordering::Relaxed);
        events.clear();
        let mut spare = self.spare_events.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_EVENT_VECS {
            spare.push(events);
        }
    }
}

/// How much of a run its window reads at a time, at most (and the run's
/// length beyond what the slack [`RESYNC_BYTES`] holds).
const WINDOW_CHUNK: u64 = 1 << 20;

/// Decodes one run of `line` on the calling thread. A line out of time
/// order within the run, a timestamp after events, damage, or (a
/// speculative run) no event found near its guessed start: `Fallback`.
pub(super) fn decode(
    buffers: &Buffers<'_>,
    planes: &[PlaneKeys],
    line: LineAt,
    run: Run,
    fast_events: bool,
) -> Result<DecodedRun, Fallback> {
    let mut window = buffers.take();
    let events = buffers.take_events(run.until.saturating_sub(run.start));
    let decoded = decode_in(&mut window, events, planes, line, run, fast_events);
    buffers.give_back(window);
    decoded
}

fn decode_in(
    window: &mut Window<'_>,
    events: Vec<RawEvent>,
    planes: &[PlaneKeys],
    line: LineAt,
    run: Run,
    fast_events: bool,
) -> Result<DecodedRun, Fallback> {
    let plane = planes.get(line.plane).ok_or(Fallback)?;
    let start = match run.speculative {
        true => resync(window, run.start, run.line_end)?.ok_or(Fallback)?,
        false => run.start,
    };
    let mut into = RunEvents {
        decoder: Decoder::new(),
        names: Names::default(),
        interned: Interned::default(),
        events,
        plane,
        line,
        fast_events,
    };
    let mut index = 0;
    let mut pos = start;
    while pos < run.until {
        // Nearly every field is an event with a one- or two-byte length,
        // held whole by the window: framed here and decoded in place, ~30
        // instructions an event in place of a general stream step's ~400.
        let held = window.span(pos, run.line_end, HEADER_BYTES)?;
        // Events that start before `until` are the run's.
        let before = usize::try_from(run.until - pos).unwrap_or(usize::MAX);
        let mut i = 0usize;
        while let Some(&[tag, b1, b2]) = held
            .get(i..)
            .filter(|_| i < before)
            .and_then(|h| h.first_chunk::<3>())
        {
            let (len, header) = match (tag, b1, b2) {
                (0x22, 0..=0x7f, _) => (usize::from(b1), 2),
                (0x22, 0x80.., 0..=0x7f) => (usize::from(b1 & 0x7f) | (usize::from(b2) << 7), 3),
                _ => break,
            };
            // An event the window does not hold whole: the general step
            // moves it.
            let Some(event) = held.get(i + header..).filter(|e| e.len() >= len) else {
                break;
            };
            index += 1;
            into.event(event, len, pos + (i + header) as u64, index)?;
            i += header + len;
        }
        pos += i as u64;
        if pos >= run.until {
            break;
        }
        // Any other field, or an event not held whole: one general step.
        let mut fields = Stream::new(pos, run.line_end);
        let Some((number, field)) = fields.next(window)? else {
            break;
        };
        pos = fields.pos;
        match (number, field) {
            // A timestamp after the events: they were timed too early.
            (3, _) => return Err(Fallback),
            (4, FieldAt::Bytes { at, len }) => {
                index += 1;
                if len > MAX_EVENT_BYTES {
                    plane.oversized_event(window, at, len)?;
                    continue;
                }
                let bytes = window.bytes(at, len)?;
                into.event_out_of_line(bytes, at, index)?;
            }
            _ => {}
        }
    }
    let RunEvents {
        decoder,
        names,
        events,
        ..
    } = into;
    Ok(DecodedRun {
        events,
        decoder,
        names,
        start,
        end: pos.max(start),
        count: index,
    })
}

/// One run's decoder and what it decodes into.
struct RunEvents<'p> {
    decoder: Decoder,
    names: Names,
    interned: Interned,
    events: Vec<RawEvent>,
    plane: &'p PlaneKeys,
    line: LineAt,
    fast_events: bool,
}

impl RunEvents<'_> {
    /// The line's event number `index`, its `len` bytes at `at` in the
    /// input, the start of `held` (which may hold more after them):
    /// decoded and kept if it is an allocator event. Inlined into the
    /// run's loop (a call costs ~160 instructions an event, BENCHMARKS.md
    /// Run O-xspace-model).
    #[inline(always)]
    fn event(&mut self, held: &[u8], len: usize, at: u64, index: u64) -> Result<(), Fallback> {
        let seen = (self.line.rank, index);
        let (names, interned, plane) = (&mut self.names, &mut self.interned, self.plane);
        let clock = &self.line.clock;
        if self.fast_events {
            return self.decoder.event_fast(
                names,
                interned,
                plane,
                clock,
                held,
                len,
                at,
                seen,
                &mut self.events,
            );
        }
        let bytes = held.get(..len).ok_or(Fallback)?;
        let raw = self
            .decoder
            .event(names, interned, plane, clock, bytes, at, seen)?;
        push_in_order(&mut self.events, raw)
    }

    /// [`RunEvents::event`] for the few events read by the general step
    /// (one a window, ~1 MiB): not inlined twice.
    #[inline(never)]
    fn event_out_of_line(&mut self, bytes: &[u8], at: u64, index: u64) -> Result<(), Fallback> {
        self.event(bytes, bytes.len(), at, index)
    }
}

/// The merged walk's decoder state and names table, into which decoded runs
/// are adopted: one numbering of strings and allocators, whatever thread
/// decoded what.
pub(super) struct Adopted {
    pub(super) decoder: Decoder,
    pub(super) decoded: Names,
    /// How many of `decoder.steps` there were when last made one per id.
    pub(super) steps_coalesced: usize,
}

/// Steps adopted before the list is first made one per id.
const COALESCE_STEPS_FROM: usize = 4096;

impl Adopted {
    /// The run's events, renumbered into this table and decoder (the
    /// allocators' first events numbered in their line after its
    /// `first_index` events before the run); its steps and skipped events
    /// are added.
    pub(super) fn adopt(&mut self, run: DecodedRun, first_index: u64) -> Vec<RawEvent> {
        let DecodedRun {
            mut events,
            decoder,
            names,
            ..
        } = run;
        let strings: Vec<StrId> = (0..names.string_count())
            .map(|i| self.decoded.string(names.str(StrId(i as u32))))
            .collect();
        let renumber = |id: StrId| strings.get(id.index()).copied().unwrap_or(StrId(0));
        let allocators: Vec<u32> = decoder
            .allocators
            .iter()
            .map(|a| {
                let (rank, index) = a.first;
                let first = (rank, index + first_index);
                self.decoder.allocator_index(a.name.map(renumber), first)
            })
            .collect();
        // `seq` is left as the run numbered it: nothing after this reads
        // it (the merge orders ties by line, a line's events by place).
        for e in &mut events {
            for s in &mut e.strings {
                *s = renumber(*s);
            }
            e.allocator = allocators
                .get(e.allocator as usize)
                .copied()
                // Never: every event names an allocator its decoder saw.
                .unwrap_or(0);
        }
        // Each run's steps as its decoder found them (one per id but where
        // marks interleave), made one per id when the list has doubled:
        // memory for the steps, not for their marks.
        self.decoder.steps.extend(decoder.steps);
        if self.decoder.steps.len() > 2 * self.steps_coalesced + COALESCE_STEPS_FROM {
            coalesce_steps(&mut self.decoder.steps);
            self.steps_coalesced = self.decoder.steps.len();
        }
        self.decoder.bad_times += decoder.bad_times;
        events
    }
}
