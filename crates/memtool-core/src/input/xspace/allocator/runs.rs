//! Runs: a line's events cut into pieces at field boundaries, each decoded
//! on a thread of its own with its own decoder and names table, then
//! adopted into the merged walk's (strings and allocators renumbered). One
//! line holds most of a profile's events (78 % of them on the 660k-event
//! benchmark), so lines alone would keep one core busy; runs of a line keep
//! every core busy.

use super::decode::{Decoder, Fallback, Interned, LineClock, PlaneKeys, RawEvent};
use std::sync::Mutex;

use crate::input::source::ByteSource;
use crate::input::xspace::stream::{FieldAt, Skim, Stream, MAX_EVENT_BYTES};
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
    let mut fields = Skim::new(start, end);
    loop {
        let field_at = fields.pos;
        if field_at - run.start >= run_bytes {
            runs.push(Run {
                end: field_at,
                ..run
            });
            run = Run {
                start: field_at,
                end,
                first_index: index,
            };
        }
        let Some((number, header, _)) = fields.next(window)? else {
            break;
        };
        if let (4, Header::Len(_)) = (number, header) {
            index += 1;
        }
    }
    if run.start < end || runs.is_empty() {
        runs.push(run);
    }
    Ok(runs)
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

/// The windows runs are read through, kept for the next runs: a window's
/// buffer (up to 1 MiB, as long as the runs it read) is zeroed when it
/// grows, so a window per run would clear every byte of the file once more.
pub(super) struct Windows<'s> {
    source: &'s dyn ByteSource,
    spare: Mutex<Vec<Window<'s>>>,
}

impl<'s> Windows<'s> {
    pub(super) fn new(source: &'s dyn ByteSource) -> Windows<'s> {
        Windows {
            source,
            spare: Mutex::new(Vec::new()),
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
}

/// How much of a run its window reads at a time.
const WINDOW_CHUNK: usize = 1 << 20;

/// Decodes one run of `line` on the calling thread. A line out of time
/// order within the run, a timestamp after events, or damage: `Fallback`.
pub(super) fn decode(
    windows: &Windows<'_>,
    planes: &[PlaneKeys],
    line: LineAt,
    run: Run,
    fast_events: bool,
) -> Result<DecodedRun, Fallback> {
    let mut window = windows.take();
    let decoded = decode_in(&mut window, planes, line, run, fast_events);
    windows.give_back(window);
    decoded
}

fn decode_in(
    window: &mut Window<'_>,
    planes: &[PlaneKeys],
    line: LineAt,
    run: Run,
    fast_events: bool,
) -> Result<DecodedRun, Fallback> {
    let plane = planes.get(line.plane).ok_or(Fallback)?;
    let mut decoder = Decoder::new();
    let mut names = Names::default();
    let mut interned = Interned::default();
    let mut events: Vec<RawEvent> = Vec::new();
    let mut index = run.first_index;
    let mut fields = Stream::new(run.start, run.end);
    while let Some((number, field)) = fields.next(window)? {
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
                let seen = (line.rank, index);
                let clock = &line.clock;
                let raw = if fast_events {
                    decoder.event_fast(&mut names, &mut interned, plane, clock, bytes, at, seen)?
                } else {
                    decoder.event(&mut names, &mut interned, plane, clock, bytes, at, seen)?
                };
                if let Some(raw) = raw {
                    if events.last().is_some_and(|last| raw.at < last.at) {
                        return Err(Fallback);
                    }
                    events.push(raw);
                }
            }
            _ => {}
        }
    }
    Ok(DecodedRun {
        events,
        decoder,
        names,
    })
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
