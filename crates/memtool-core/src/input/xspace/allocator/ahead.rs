//! Decoding the merged walk's runs ahead of the merge: workers started once
//! for the whole walk (`jobs - 1` of them: the merge's thread is the other),
//! each taking the next run as soon as it is done with one, in the order the
//! merge is expected to need them, and handing it back by (line, run); the
//! merge decodes the next run waiting itself rather than wait for a worker.
//! Threads started for each wave of `jobs` runs (about 40 on the 660k-event
//! benchmark), each wave waiting for its slowest run, cost a thousand
//! context switches a run of the tool and fresh thread arenas whose buffers
//! were faulted in anew.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::decode::{Fallback, PlaneKeys};
use super::runs::{self, Buffers, DecodedRun, LineAt, Run};

/// Runs decoded and not yet taken by the merge, or being decoded, at most,
/// per job: enough that no worker waits while the merge catches up on a
/// line, little memory (a run's events take about as many bytes as the
/// run, each vector in flight faulted in once: 2 a job in place of 4 was
/// ~1,000 page faults fewer on the 660k-event benchmark, 17,000 in all).
const RUNS_HELD_PER_JOB: usize = 2;

/// What [`Ahead::claim`] found.
enum Claim {
    /// This run (line, run), now marked as being decoded.
    Run(usize, usize),
    /// As many runs held as allowed: none started.
    Full,
    /// Every run started.
    NoneLeft,
}

/// Where one run stands.
enum Slot {
    /// Not started: whoever needs it first (a worker, or the merge, which
    /// never waits for a run nobody decodes) decodes it.
    Waiting,
    Decoding,
    /// Boxed: a slot a run, most of them small.
    Done(Box<Result<DecodedRun, Fallback>>),
    Taken,
}

struct State {
    /// By line, by run.
    slots: Vec<Vec<Slot>>,
    /// Where in [`Ahead::order`] the next run may be waiting: those before
    /// are all started.
    next: usize,
    /// Runs being decoded by workers, or decoded and not yet taken.
    held: usize,
    /// The merge is done (or gave up): workers start nothing more.
    stop: bool,
}

/// Every line's runs, decoded by workers (or by the merge when none has
/// started the run it needs) and taken by the merge in each line's order.
pub(super) struct Ahead<'b, 's> {
    lines: Vec<(LineAt, Vec<Run>)>,
    /// (line, run) in the order workers start them.
    order: Vec<(usize, usize)>,
    most_held: usize,
    state: Mutex<State>,
    /// Signalled when a run is decoded (the merge waits for one).
    decoded: Condvar,
    /// Signalled when a run is taken, or on stop (workers wait for room).
    room: Condvar,
    buffers: &'b Buffers<'s>,
    planes: &'b [PlaneKeys],
    fast_events: bool,
}

impl<'b, 's> Ahead<'b, 's> {
    /// The runs of `lines` (by rank), to be decoded by the caller's workers
    /// ([`Ahead::work`]; `jobs - 1` of them) and the merge, holding up to
    /// [`RUNS_HELD_PER_JOB`] runs a job.
    pub(super) fn new(
        lines: Vec<(LineAt, Vec<Run>)>,
        buffers: &'b Buffers<'s>,
        planes: &'b [PlaneKeys],
        fast_events: bool,
        jobs: usize,
    ) -> Ahead<'b, 's> {
        let slots = lines
            .iter()
            .map(|(_, runs)| runs.iter().map(|_| Slot::Waiting).collect())
            .collect();
        Ahead {
            order: need_order(&lines),
            lines,
            most_held: jobs.max(1) * RUNS_HELD_PER_JOB,
            state: Mutex::new(State {
                slots,
                next: 0,
                held: 0,
                stop: false,
            }),
            decoded: Condvar::new(),
            room: Condvar::new(),
            buffers,
            planes,
            fast_events,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decode(&self, line: usize, run: usize) -> Result<DecodedRun, Fallback> {
        let (at, runs) = self.lines.get(line).ok_or(Fallback)?;
        let run = *runs.get(run).ok_or(Fallback)?;
        runs::decode(self.buffers, self.planes, *at, run, self.fast_events)
    }

    /// A worker: decodes runs waiting, in order, while fewer than
    /// `most_held` are held, until none is left or [`Ahead::stop`].
    pub(super) fn work(&self) {
        loop {
            let (line, run) = {
                let mut state = self.lock();
                loop {
                    if state.stop {
                        return;
                    }
                    match self.claim(&mut state) {
                        Claim::Run(line, run) => break (line, run),
                        Claim::Full => {}
                        Claim::NoneLeft => return,
                    }
                    state = self.room.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            self.decode_ahead(line, run);
        }
    }

    /// The next run waiting, in order, marked as being decoded, if fewer
    /// than `most_held` are held.
    fn claim(&self, state: &mut State) -> Claim {
        let State { slots, next, .. } = state;
        while self
            .order
            .get(*next)
            .is_some_and(|&(l, r)| !matches!(slots[l][r], Slot::Waiting))
        {
            *next += 1;
        }
        let Some(&(line, run)) = self.order.get(*next) else {
            return Claim::NoneLeft;
        };
        if state.held >= self.most_held {
            return Claim::Full;
        }
        state.slots[line][run] = Slot::Decoding;
        state.held += 1;
        state.next += 1;
        Claim::Run(line, run)
    }

    /// Decodes a claimed run and hands it to the merge. A run that panics is
    /// handed back failed: the merge decodes it again on its own thread,
    /// where the panic is the caller's, rather than waiting for it forever.
    fn decode_ahead(&self, line: usize, run: usize) {
        let decoded =
            catch_unwind(AssertUnwindSafe(|| self.decode(line, run))).unwrap_or(Err(Fallback));
        self.lock().slots[line][run] = Slot::Done(Box::new(decoded));
        // Only the merge waits for decoded runs.
        self.decoded.notify_one();
    }

    /// Run `run` of line `line` decoded, for the merge (each once, in each
    /// line's order): decoded here if none has started it; while a worker
    /// decodes it, the next run waiting is decoded here, or (none, or as
    /// many held as allowed) the worker is waited for.
    pub(super) fn take(&self, line: usize, run: usize) -> Result<DecodedRun, Fallback> {
        let mut state = self.lock();
        loop {
            let slot = state
                .slots
                .get_mut(line)
                .and_then(|l| l.get_mut(run))
                .ok_or(Fallback)?;
            match std::mem::replace(slot, Slot::Taken) {
                Slot::Waiting => {
                    drop(state);
                    return self.decode(line, run);
                }
                Slot::Done(decoded) => {
                    state.held -= 1;
                    drop(state);
                    self.room.notify_one();
                    return *decoded;
                }
                Slot::Decoding => {
                    *slot = Slot::Decoding;
                    // Decoding a later run while waiting for this one: the
                    // merge is this thread's work only while there is work
                    // for it, and the jobs are as many as the cores.
                    state = match self.claim(&mut state) {
                        Claim::Run(l, r) => {
                            drop(state);
                            self.decode_ahead(l, r);
                            self.lock()
                        }
                        Claim::Full | Claim::NoneLeft => {
                            self.decoded.wait(state).unwrap_or_else(|e| e.into_inner())
                        }
                    };
                }
                // Never: the merge takes each run once.
                Slot::Taken => return Err(Fallback),
            }
        }
    }

    /// Workers start no more runs (those decoding finish theirs).
    pub(super) fn stop(&self) {
        self.lock().stop = true;
        self.room.notify_all();
    }
}

/// Stops the workers when dropped, however the merge ends: a merge that
/// gave up (or panicked) must not leave them waiting for room.
pub(super) struct StopOnDrop<'a, 'b, 's>(pub(super) &'a Ahead<'b, 's>);

impl Drop for StopOnDrop<'_, '_, '_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The order the merge is expected to need runs in: every line's first
/// (all taken before any event is merged), by rank; then the others by how
/// far into their line they start (lines of a profile span about the same
/// time), ties by rank. Only the work's order depends on this guess.
fn need_order(lines: &[(LineAt, Vec<Run>)]) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = (0..lines.len())
        .filter(|&l| !lines[l].1.is_empty())
        .map(|l| (l, 0))
        .collect();
    let mut rest: Vec<(u64, u64, usize, usize)> = Vec::new();
    for (l, (_, runs)) in lines.iter().enumerate() {
        let Some(first) = runs.first() else {
            continue;
        };
        let length = first.line_end.saturating_sub(first.start).max(1);
        for (r, run) in runs.iter().enumerate().skip(1) {
            rest.push((run.start.saturating_sub(first.start), length, l, r));
        }
    }
    // a/b before c/d when a*d < c*b (no rounding).
    rest.sort_by(|x, y| {
        let (a, b, c, d) = (x.0 as u128, x.1 as u128, y.0 as u128, y.1 as u128);
        (a * d).cmp(&(c * b)).then((x.2, x.3).cmp(&(y.2, y.3)))
    });
    order.extend(rest.into_iter().map(|(_, _, l, r)| (l, r)));
    order
}

#[cfg(test)]
mod tests {
    use super::super::decode::LineClock;
    use super::super::runs::split;
    use super::*;

    #[test]
    fn runs_are_started_first_runs_first_then_by_how_far_into_their_line() {
        let at = |rank| LineAt {
            plane: 0,
            rank,
            clock: LineClock::new(0, None, None),
        };
        // A line of 4 runs (at 0, 1/4, 1/2, 3/4 of it), one of 2 (0, 1/2),
        // one of none.
        let lines = vec![
            (at(0), split(0, 4000, 1000)),
            (at(1), split(10_000, 12_000, 1000)),
            (at(2), Vec::new()),
        ];
        assert_eq!(
            need_order(&lines),
            vec![(0, 0), (1, 0), (0, 1), (0, 2), (1, 1), (0, 3)]
        );
    }
}
