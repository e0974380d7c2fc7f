//! Runs: a line's events cut into pieces at field boundaries, each decoded
//! on a thread of its own with its own decoder and names table, then
//! adopted into the merged walk's (strings and allocators renumbered). One
//! line holds most of a profile's events (78 % of them on the 660k-event
//! benchmark), so lines alone would keep one core busy; runs of a line keep
//! every core busy.

use super::decode::{Decoder, Fallback, Interned, LineClock, PlaneKeys, RawEvent};
use std::sync::Mutex;

use crate::input::source::ByteSource;
use crate::input::xspace::stream::{FieldAt, Skim, Stream, HEADER_BYTES, MAX_EVENT_BYTES};
use crate::input::xspace::Window;
use crate::model::{Names, StrId};
use memtool_proto::wire::reader::Header;

/// How the merged walk shares out decoding: at most `jobs` threads (the
/// caller's among them), each decoding a run of about `run_bytes` of a
/// line's events at a time.
#[derive(Clone, Copy, Debug)]
pub(in crate::input::xspace) struct Split {
    pub(super) jobs: usize,
    pub(super) run_bytes: u64,
}

impl Split {
    /// `jobs` threads (0: every core) on runs of `run_bytes` (0: 1 MiB,
    /// about 8,000 events: enough work per run that starting it costs
    /// nothing, and little memory per run in flight, about 1 MiB of decoded
    /// events).
    pub(in crate::input::xspace) fn new(jobs: usize, run_bytes: u64) -> Split {
        let jobs = crate::parallel::threads(jobs);
        Split {
            jobs,
            run_bytes: if run_bytes == 0 { 1 << 20 } else { run_bytes },
        }
    }
}

/// One run: the events in `[start, end)` of a line, the first of them the
/// line's event number `first_index + 1`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) first_index: u64,
}

/// Cuts a line's events `[start, end)` into runs of about `run_bytes`, at
/// field boundaries, by one skim of their headers (a line no longer than
/// one run is not skimmed).
pub(super) fn split(
    window: &mut Window<'_>,
    start: u64,
    end: u64,
    run_bytes: u64,
) -> Result<Vec<Run>, Fallback> {
    let run_bytes = run_bytes.max(1);
    if end.saturating_sub(start) <= run_bytes {
        return Ok(vec![Run {
            start,
            end,
            first_index: 0,
        }]);
    }
    let mut runs = Vec::new();
    let mut run = Run {
        start,
        end,
        first_index: 0,
    };
    let mut index = 0u64;
    let mut pos = start;
    while pos < end {
        // Nearly every field is an event with a one- or two-byte length:
        // its header is read here, straight from the window, ~10
        // instructions an event in place of a general skim step's ~160
        // (the skim runs on one thread before any run is decoded).
        let held = window.span(pos, end, HEADER_BYTES)?;
        let mut i = 0usize;
        while let Some(&[tag, b1, b2]) = held.get(i..).and_then(|h| h.first_chunk::<3>()) {
            let (len, header) = match (tag, b1, b2) {
                (0x22, 0..=0x7f, _) => (u64::from(b1), 2),
                (0x22, 0x80.., 0..=0x7f) => (u64::from(b1 & 0x7f) | (u64::from(b2) << 7), 3),
                _ => break,
            };
            let at = pos + i as u64;
            cut(&mut runs, &mut run, at, index, run_bytes);
            if at + header + len > end {
                return Err(Fallback);
            }
            index += 1;
            // At most 2^14 + 3: no overflow.
            i += (header + len) as usize;
        }
        pos += i as u64;
        if pos >= end {
            break;
        }
        // A field of another form, or a header the window does not hold
        // whole: one general step (which moves the window).
        cut(&mut runs, &mut run, pos, index, run_bytes);
        let mut fields = Skim::new(pos, end);
        let Some((number, header, _)) = fields.next(window)? else {
            break;
        };
        if let (4, Header::Len(_)) = (number, header) {
            index += 1;
        }
        pos = fields.pos;
    }
    if pos >= end {
        cut(&mut runs, &mut run, end, index, run_bytes);
    }
    if run.start < end || runs.is_empty() {
        runs.push(run);
    }
    Ok(runs)
}

/// Ends `run` at `at`, a field boundary, and starts the next there, once
/// `run` holds `run_bytes`; `index` events come before `at`.
#[inline(always)]
fn cut(runs: &mut Vec<Run>, run: &mut Run, at: u64, index: u64, run_bytes: u64) {
    if at - run.start >= run_bytes {
        runs.push(Run { end: at, ..*run });
        *run = Run {
            start: at,
            end: run.end,
            first_index: index,
        };
    }
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
}

/// What runs are read through and decoded into, kept for the next runs:
/// windows (a window's buffer, up to 1 MiB, is zeroed when it grows, so a
/// window per run would clear every byte of the file once more) and event
/// vectors (a run's, about 1 MiB, given back once merged: a fresh one per
/// run made the kernel fault in and zero ~20,000 pages on the 660k-event
/// profile, a quarter of its system time).
pub(super) struct Buffers<'s> {
    source: &'s dyn ByteSource,
    spare: Mutex<Vec<Window<'s>>>,
    spare_events: Mutex<Vec<Vec<RawEvent>>>,
}

/// Event vectors kept for reuse at most: a few per job cover the runs in
/// flight; more would only hold memory.
const SPARE_EVENT_VECS: usize = 16;

impl<'s> Buffers<'s> {
    pub(super) fn new(source: &'s dyn ByteSource) -> Buffers<'s> {
        Buffers {
            source,
            spare: Mutex::new(Vec::new()),
            spare_events: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Window<'s> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.unwrap_or_else(|| Window::new(self.source, WINDOW_CHUNK))
    }

    fn give_back(&self, window: Window<'s>) {
        self.spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(window);
    }

    /// An empty event vector, with the capacity of an earlier run's.
    fn take_events(&self) -> Vec<RawEvent> {
        let spare = self
            .spare_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        spare.unwrap_or_default()
    }

    /// A run's event vector, once its events are merged.
    pub(super) fn give_back_events(&self, mut events: Vec<RawEvent>) {
        events.clear();
        let mut spare = self.spare_events.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_EVENT_VECS {
            spare.push(events);
        }
    }
}

/// How much of a run its window reads at a time.
const WINDOW_CHUNK: usize = 1 << 20;

/// Decodes one run of `line` on the calling thread. A line out of time
/// order within the run, a timestamp after events, or damage: `Fallback`.
pub(super) fn decode(
    buffers: &Buffers<'_>,
    planes: &[PlaneKeys],
    line: LineAt,
    run: Run,
    fast_events: bool,
) -> Result<DecodedRun, Fallback> {
    let mut window = buffers.take();
    let events = buffers.take_events();
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
    let mut into = RunEvents {
        decoder: Decoder::new(),
        names: Names::default(),
        interned: Interned::default(),
        events,
        plane,
        line,
        fast_events,
    };
    let mut index = run.first_index;
    let mut pos = run.start;
    while pos < run.end {
        // Nearly every field is an event with a one- or two-byte length,
        // held whole by the window: framed here and decoded in place, ~30
        // instructions an event in place of a general stream step's ~400.
        let held = window.span(pos, run.end, HEADER_BYTES)?;
        let mut i = 0usize;
        while let Some(&[tag, b1, b2]) = held.get(i..).and_then(|h| h.first_chunk::<3>()) {
            let (len, header) = match (tag, b1, b2) {
                (0x22, 0..=0x7f, _) => (usize::from(b1), 2),
                (0x22, 0x80.., 0..=0x7f) => (usize::from(b1 & 0x7f) | (usize::from(b2) << 7), 3),
                _ => break,
            };
            // An event the window does not hold whole: the general step
            // moves it.
            let Some(bytes) = held.get(i + header..i + header + len) else {
                break;
            };
            index += 1;
            into.event(bytes, pos + (i + header) as u64, index)?;
            i += header + len;
        }
        pos += i as u64;
        if pos >= run.end {
            break;
        }
        // Any other field, or an event not held whole: one general step.
        let mut fields = Stream::new(pos, run.end);
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
    /// The line's event number `index`, its bytes at `at` in the input:
    /// decoded and kept if it is an allocator event. Inlined into the
    /// run's loop (a call costs ~160 instructions an event, BENCHMARKS.md
    /// Run O-xspace-model).
    #[inline(always)]
    fn event(&mut self, bytes: &[u8], at: u64, index: u64) -> Result<(), Fallback> {
        let seen = (self.line.rank, index);
        let (names, interned, plane) = (&mut self.names, &mut self.interned, self.plane);
        let clock = &self.line.clock;
        let raw = if self.fast_events {
            self.decoder
                .event_fast(names, interned, plane, clock, bytes, at, seen)?
        } else {
            self.decoder
                .event(names, interned, plane, clock, bytes, at, seen)?
        };
        if let Some(raw) = raw {
            if self.events.last().is_some_and(|last| raw.at < last.at) {
                return Err(Fallback);
            }
            self.events.push(raw);
        }
        Ok(())
    }

    /// [`RunEvents::event`] for the few events read by the general step
    /// (one a window, ~1 MiB): not inlined twice.
    #[inline(never)]
    fn event_out_of_line(&mut self, bytes: &[u8], at: u64, index: u64) -> Result<(), Fallback> {
        self.event(bytes, at, index)
    }
}

/// The merged walk's decoder state and names table, into which decoded runs
/// are adopted: one numbering of strings and allocators, whatever thread
/// decoded what.
pub(super) struct Adopted {
    pub(super) decoder: Decoder,
    pub(super) decoded: Names,
}

impl Adopted {
    /// The run's events, renumbered into this table and decoder; its steps
    /// and skipped events are added.
    pub(super) fn adopt(&mut self, run: DecodedRun) -> Vec<RawEvent> {
        let DecodedRun {
            mut events,
            decoder,
            names,
        } = run;
        let strings: Vec<StrId> = (0..names.string_count())
            .map(|i| self.decoded.string(names.str(StrId(i as u32))))
            .collect();
        let renumber = |id: StrId| strings.get(id.index()).copied().unwrap_or(StrId(0));
        let allocators: Vec<u32> = decoder
            .allocators
            .iter()
            .map(|a| self.decoder.allocator_index(a.name.map(renumber), a.first))
            .collect();
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
        for (id, step) in decoder.steps {
            self.decoder
                .steps
                .entry(id)
                .and_modify(|s| {
                    s.start = s.start.min(step.start);
                    s.end = s.end.max(step.end);
                })
                .or_insert(step);
        }
        self.decoder.bad_times += decoder.bad_times;
        events
    }
}
