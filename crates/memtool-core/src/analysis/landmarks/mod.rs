//! The landmarks of a memory's timeline, named: the training steps and their
//! forward, loss, backward and optimizer spans, the largest allocations,
//! the spike on each step's peak, the cliffs where much is freed at once,
//! activation checkpointing's recomputation waves, the optimizer state made
//! in the first step, and the constant floor beneath it all — the shapes a
//! reader of PyTorch's memory_viz learns to see, found from the events and
//! the sites' phases, the same way for every format.
//!
//! Steps are the profile's own when it marks them; otherwise a step is a
//! cycle of phases: it begins at a forward pass that follows a backward
//! pass, an optimizer step or `zero_grad` (a compiled program's memory is
//! one step: one run of the program).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::model::{AllocId, EventKind, FrameId, Memory, Names, Phase};
use crate::units;

use super::frames::FrameFilter;
use super::replay;

mod bound;
mod in_use;
mod per_step;

pub use bound::{KEPT_STEPS, SPREAD_STEPS};
use in_use::{InUse, InUseBuilder};
use per_step::StepFigures;

/// What a landmark is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LandmarkKind {
    /// A training step, from its first event to the next step's.
    Step,
    /// A step's forward pass: the ramp of activations.
    Forward,
    /// A step's loss.
    Loss,
    /// A step's backward pass.
    Backward,
    /// A step's optimizer step.
    Optimizer,
    /// A step's `zero_grad`, where it allocates.
    ZeroGrad,
    /// One of the largest allocations (the largest of its site).
    LargestAllocation,
    /// Short-lived allocations on top of a step's peak.
    Spike,
    /// Much freed at once: a run of frees with no allocation between.
    Cliff,
    /// Activation checkpointing: frames of the forward pass allocating
    /// again inside the backward pass.
    Recompute,
    /// The optimizer's state, made in the first step and kept.
    OptimizerState,
    /// Memory live from the second step (the first, if there is one) to the
    /// end: parameters, optimizer state, memory from before the recording.
    Floor,
}

impl LandmarkKind {
    /// The name used in every output (as in JSON).
    pub const fn name(self) -> &'static str {
        match self {
            LandmarkKind::Step => "step",
            LandmarkKind::Forward => "forward",
            LandmarkKind::Loss => "loss",
            LandmarkKind::Backward => "backward",
            LandmarkKind::Optimizer => "optimizer",
            LandmarkKind::ZeroGrad => "zero_grad",
            LandmarkKind::LargestAllocation => "largest_allocation",
            LandmarkKind::Spike => "spike",
            LandmarkKind::Cliff => "cliff",
            LandmarkKind::Recompute => "recompute",
            LandmarkKind::OptimizerState => "optimizer_state",
            LandmarkKind::Floor => "floor",
        }
    }

    /// Whether it is one of a step's phase spans.
    pub const fn is_phase(self) -> bool {
        matches!(
            self,
            LandmarkKind::Forward
                | LandmarkKind::Loss
                | LandmarkKind::Backward
                | LandmarkKind::Optimizer
                | LandmarkKind::ZeroGrad
        )
    }

    fn of_phase(phase: Phase) -> LandmarkKind {
        match phase {
            Phase::Forward => LandmarkKind::Forward,
            Phase::Loss => LandmarkKind::Loss,
            Phase::Backward => LandmarkKind::Backward,
            Phase::Optimizer => LandmarkKind::Optimizer,
            Phase::ZeroGrad => LandmarkKind::ZeroGrad,
        }
    }
}

/// The most characters of an allocation's name in a label.
const WHAT_CHARS: usize = 100;

/// Allocations listed per landmark; the rest are counted.
pub const LISTED_ALLOCATIONS: usize = 32;

/// One named feature of a memory's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Landmark {
    /// What it is.
    pub kind: LandmarkKind,
    /// The step it lies in (the profile's number, else counted from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// Where it starts on the memory's axis (as `peak_at`).
    pub start: i64,
    /// Where it ends.
    pub end: i64,
    /// Where it starts as a person reads it: the time since the recording
    /// began on a time axis (`t+25.43 ms (step 3)`), else the position
    /// (`#262`).
    pub start_label: String,
    /// How many bytes it stands for; what they are depends on the kind (see
    /// docs/json/summary.md): a step's or span's highest point in use, an
    /// allocation's size, the bytes of a spike, a cliff, a wave, the
    /// optimizer state or the floor.
    pub bytes: u64,
    /// What a person reads on the picture.
    pub label: String,
    /// The allocations it stands for (indices into the memory's
    /// allocations, as `export` numbers them), at most
    /// [`LISTED_ALLOCATIONS`]; none for steps and spans.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<u32>,
    /// How many allocations it stands for in all.
    #[serde(skip_serializing_if = "is_zero")]
    pub allocation_count: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A run of allocations made in one phase, by event index (the runs of
/// [`Memory::find_phases`], which keeps positions).
#[derive(Clone, Copy, Debug)]
struct Run {
    phase: Phase,
    first: usize,
    last: usize,
}

/// A step by event index.
#[derive(Clone, Debug)]
struct StepRange {
    id: i64,
    first: usize,
    last: usize,
    runs: Vec<Run>,
}

/// What the walk over a memory's events knows.
struct Timeline<'m> {
    memory: &'m Memory,
    names: &'m Names,
    /// Bytes in use after each event.
    in_use: InUse,
    /// Per allocation, the event that made it and the one that freed it.
    made: EventOf,
    freed: EventOf,
    /// Each site's [`Timeline::frames_key`] as a number (equal keys, equal
    /// numbers), made at the first use: a step's recomputation waves ask
    /// for it at each of its allocations, and finding the frames each time
    /// was a fifth of the landmarks of a 10^6-entry snapshot.
    frames_keys: std::sync::OnceLock<Vec<u32>>,
}

/// An event index per allocation, or none: four bytes each, where an
/// `Option<usize>` is sixteen (two of them were a third of a 10^6-entry
/// snapshot's peak memory). [`find`] leaves out memories with more events
/// than a `u32` numbers (over 60 GB of events).
struct EventOf(Vec<u32>);

const NO_EVENT: u32 = u32::MAX;

/// A site without an allocation, in [`largest`].
const NO_ALLOCATION: u32 = u32::MAX;

/// A site without [`Timeline::frames_key`].
const NO_FRAMES_KEY: u32 = u32::MAX;

impl EventOf {
    fn none(allocations: usize) -> EventOf {
        EventOf(vec![NO_EVENT; allocations])
    }

    fn get(&self, id: AllocId) -> Option<usize> {
        match self.0[id.index()] {
            NO_EVENT => None,
            event => Some(event as usize),
        }
    }

    fn set(&mut self, id: AllocId, event: Option<usize>) {
        if let Some(slot) = self.0.get_mut(id.index()) {
            *slot = event
                .and_then(|e| u32::try_from(e).ok())
                .unwrap_or(NO_EVENT);
        }
    }
}

impl Timeline<'_> {
    /// Fills `in_use`, `made` and `freed` from one replay of the events
    /// (the bytes of `replay::for_each_point` and the last lifespan of each
    /// allocation from `replay::for_each_lifespan` were two walks).
    fn walk(&mut self) {
        let mut live = replay::LiveBytes::at_start(self.memory);
        let mut in_use = InUseBuilder::with_capacity(self.memory.events.len());
        for (i, event) in self.memory.events.iter().enumerate() {
            if live.apply(event.kind(), event.alloc()) {
                // The event starts or ends a lifespan: an allocation's
                // last one is what `made` and `freed` keep.
                match event.kind() {
                    EventKind::Alloc => self.made.set(event.alloc(), Some(i)),
                    EventKind::Free => self.freed.set(event.alloc(), Some(i)),
                }
            }
            in_use.push(live.bytes);
        }
        self.in_use = in_use.finish();
        // Still live after the last event: its last lifespan has no free
        // (an earlier one's is overwritten).
        for id in live.ids() {
            self.freed.set(id, None);
        }
    }

    fn at(&self, event: usize) -> i64 {
        self.memory.events.get(event).map_or(0, |e| e.at)
    }

    fn bytes(&self, id: AllocId) -> u64 {
        self.memory.allocation(id).bytes
    }

    fn phase(&self, id: AllocId) -> Option<Phase> {
        self.names.site_of(self.memory.allocation(id).site).phase
    }

    /// The first event of `first..=last` where most is in use, and that much.
    fn highest(&self, first: usize, last: usize) -> (usize, u64) {
        self.in_use.highest(first, last)
    }

    /// In use after event `i`.
    #[inline]
    fn after(&self, i: usize) -> u64 {
        self.in_use.get(i)
    }

    /// In use before event `i`.
    #[inline]
    fn before(&self, i: usize) -> u64 {
        match i.checked_sub(1) {
            Some(j) => self.in_use.get(j),
            None => self.in_use_at_start(),
        }
    }

    fn in_use_at_start(&self) -> u64 {
        self.memory
            .live_at_start
            .iter()
            .map(|&id| self.bytes(id))
            .sum()
    }

    /// Whether the allocation is live after event `last` having been live
    /// (or made) at or before it.
    fn live_after(&self, id: AllocId, last: usize) -> bool {
        self.freed.get(id).is_none_or(|f| f > last)
    }

    /// What a person calls an allocation: its op, else its innermost
    /// frame's function and the user's frame it was called from (`linear in
    /// step train.py:87`), else the phase it was made in.
    fn what(&self, id: AllocId, frames: &FrameFilter) -> String {
        // A name a file gives may be any length: labels stay short.
        crate::report::shorten(&self.what_whole(id, frames), WHAT_CHARS)
    }

    fn what_whole(&self, id: AllocId, frames: &FrameFilter) -> String {
        let site = self.names.site_of(self.memory.allocation(id).site);
        if let Some(op) = site.op {
            return self.names.str(op).to_string();
        }
        let user = frames.user_frame(self.names, site.stack);
        let leaf = self.names.leaf(site.stack);
        match (leaf, user) {
            (Some(leaf), Some(user)) if leaf != user => format!(
                "{} in {}",
                callee_name(self.names.str(self.names.frame_of(leaf).function)),
                frames.frame_text(self.names, user)
            ),
            (_, Some(user)) => frames.frame_text(self.names, user),
            _ if site.category.is_some() => site
                .category
                .map(|c| self.names.str(c).to_string())
                .unwrap_or_default(),
            _ => match site.phase {
                Some(phase) => format!("<no stack, {}>", phase.name()),
                None => "<no stack>".to_string(),
            },
        }
    }

    /// The shape with its element type, when the file says.
    fn shape(&self, id: AllocId) -> Option<String> {
        let site = self.names.site_of(self.memory.allocation(id).site);
        let shape = self.names.str(site.shape?);
        let shape = crate::report::shorten(shape, WHAT_CHARS);
        Some(match site.dtype {
            Some(dtype) if !shape.starts_with(self.names.str(dtype)) => {
                format!("{}{shape}", self.names.str(dtype))
            }
            _ => shape.to_string(),
        })
    }

    /// The innermost two Python frames of an allocation's stack (files
    /// ending in `.py`): what a recomputation repeats. Native frames are
    /// left out: an unwinder's own frames lead every stack that has them.
    /// As a number, one per distinct pair of frames; `None` without a
    /// Python frame.
    fn frames_key(&self, id: AllocId) -> Option<u32> {
        let keys = self.frames_keys.get_or_init(|| self.number_frames_keys());
        let site = self.memory.allocation(id).site.index();
        keys.get(site).copied().filter(|&k| k != NO_FRAMES_KEY)
    }

    /// [`Timeline::frames_key`] of every site of the memory's allocations,
    /// by site; [`NO_FRAMES_KEY`] for the others and those without one.
    fn number_frames_keys(&self) -> Vec<u32> {
        let mut keys = vec![NO_FRAMES_KEY; self.names.sites().len()];
        let mut done = vec![false; keys.len()];
        let mut numbered: FxHashMap<(FrameId, Option<FrameId>), u32> = FxHashMap::default();
        for a in &self.memory.allocations {
            let site = a.site.index();
            if done.get(site).copied().unwrap_or(true) {
                continue;
            }
            done[site] = true;
            let stack = self.names.site_of(a.site).stack;
            let mut python = self
                .names
                .frames_of(stack)
                .filter(|&f| self.names.str(self.names.frame_of(f).file).ends_with(".py"));
            if let Some(first) = python.next() {
                let next = numbered.len() as u32;
                keys[site] = *numbered.entry((first, python.next())).or_insert(next);
            }
        }
        keys
    }
}

fn allocations_text(n: usize) -> String {
    match n {
        1 => "1 allocation".to_string(),
        n => format!("{n} allocations"),
    }
}

fn listed(ids: &[AllocId]) -> (Vec<u32>, usize) {
    (
        ids.iter().take(LISTED_ALLOCATIONS).map(|id| id.0).collect(),
        ids.len(),
    )
}

/// The landmarks of a memory of events, in order of kind, then position;
/// none for memories of snapshots (no events to find them in). Of a memory
/// of more than [`KEPT_STEPS`] steps, those of the steps `bound` chooses
/// (see [`find_on`]).
pub fn find(names: &Names, memory: &Memory, frames: &FrameFilter) -> Vec<Landmark> {
    find_on(names, memory, frames, 1).landmarks
}

/// Steps a thread of [`find_on`] takes at least: below that, starting a
/// thread costs more than it saves.
const STEPS_PER_THREAD: usize = 2048;

/// Allocations [`largest`] looks through at least to take a thread of its
/// own: below that, starting the thread costs more than it saves.
const ALLOCATIONS_PER_THREAD: usize = 1 << 16;

/// A memory's landmarks and what was left out of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    /// In order of kind, then position.
    pub landmarks: Vec<Landmark>,
    /// Per kind, the landmarks of the steps whose landmarks were not made
    /// (a memory of more than [`KEPT_STEPS`] steps); only kinds with some.
    pub omitted: BTreeMap<LandmarkKind, usize>,
    /// The memory's steps, all of them.
    pub steps: usize,
    /// Where each `step` landmark's step is among them (from 0), in the
    /// landmarks' order: `0..steps` when none is left out.
    pub step_positions: Vec<usize>,
}

/// [`find`], and what it left out. A memory of up to [`KEPT_STEPS`] steps
/// has every step's landmarks; one of more, those of [`KEPT_STEPS`] steps
/// chosen from a few figures of every step (`bound::chosen`: the first,
/// the last, the highest, the largest spikes and cliffs, and steps spread
/// over the recording), and counts of the others' by kind: a profile of
/// 30,000 steps had 150,000 landmarks, ~400 bytes and ~11,000 instructions
/// each. The figures are found on up to `jobs` threads (0: every core),
/// each taking a stretch of steps: the same result on any number.
pub fn find_on(names: &Names, memory: &Memory, frames: &FrameFilter, jobs: usize) -> Found {
    if replay::uses_instants(memory)
        || memory.events.is_empty()
        || memory.events.len() >= NO_EVENT as usize
    {
        return Found::default();
    }
    let n = memory.allocations.len();
    let mut t = Timeline {
        memory,
        names,
        in_use: InUse::default(),
        made: EventOf::none(n),
        freed: EventOf::none(n),
        frames_keys: std::sync::OnceLock::new(),
    };
    t.walk();
    let t = &t;
    let steps = steps(t);
    let last_event = memory.events.len() - 1;
    // The floor's level is a scan of the bytes in use; its landmark (a
    // replay to that point and the live allocations' categories, ~10% of
    // the landmarks of 660,000 XSpace events) is made beside the steps'.
    let floor_level = floor_level(t, &steps);
    let floor_bytes = floor_level.map_or(0, |(_, low)| low);
    // The largest allocations and the floor ask the timeline alone: found
    // on a thread of their own (a pass over every allocation, a replay)
    // while the steps' landmarks are found, where more than one thread is
    // allowed and there are enough allocations to pay for it.
    let biggest = || (largest(t, frames), floor_level.map(|l| floor(t, l)));
    let of_steps = || {
        let mut omitted: BTreeMap<LandmarkKind, usize> = BTreeMap::new();
        let keep = if steps.len() <= KEPT_STEPS {
            vec![true; steps.len()]
        } else {
            let threads = threads_for(jobs, steps.len());
            let figures: Vec<StepFigures> = crate::parallel::map_in_order(
                steps.chunks(steps.len().div_ceil(threads).max(1)).collect(),
                |stretch: &[StepRange]| {
                    stretch
                        .iter()
                        .map(|step| per_step::figures(t, step, floor_bytes))
                        .collect::<Vec<StepFigures>>()
                },
            )
            .concat();
            let keep = bound::chosen(&figures);
            // Counted in place, then put in the map: a map entry per kind
            // and step was 270,000 searches of the tree for 30,000 steps.
            let mut counts = [0; PER_STEP_KINDS.len()];
            for (f, _) in figures.iter().zip(&keep).filter(|(_, &k)| !k) {
                for (count, kind) in counts.iter_mut().zip(PER_STEP_KINDS) {
                    *count += f.count(kind);
                }
            }
            for (count, kind) in counts.into_iter().zip(PER_STEP_KINDS) {
                if count > 0 {
                    omitted.insert(kind, count);
                }
            }
            keep
        };
        let mut out: Vec<Landmark> = Vec::new();
        // Each kept step's position, in the order of its landmark (steps are
        // in order of start; equal starts go by end, as `in_order` puts them).
        let mut step_positions: Vec<(i64, i64, usize)> = Vec::new();
        for (position, step) in steps.iter().enumerate().filter(|&(i, _)| keep[i]) {
            per_step::step_landmarks(t, step, floor_bytes, frames, &mut out);
            step_positions.push((t.at(step.first), t.at(step.last), position));
        }
        step_positions.sort_unstable();
        if let Some(first) = steps.first() {
            out.extend(optimizer_state(t, first));
        }
        if steps.is_empty() {
            // Without steps, the whole recording is the one stretch its spike
            // and cliffs are looked for in.
            let whole = StepRange {
                id: 0,
                first: 0,
                last: last_event,
                runs: Vec::new(),
            };
            let (peak_event, peak) = t.highest(0, last_event);
            out.extend(per_step::spike(t, &whole, None, peak_event, peak, frames));
            out.extend(per_step::cliffs(t, &whole, None, peak, 0, frames));
        }
        (out, steps.len(), step_positions, omitted)
    };
    let ((biggest, floor), (mut out, steps, step_positions, omitted)) =
        if crate::parallel::threads(jobs) > 1 && memory.allocations.len() >= ALLOCATIONS_PER_THREAD
        {
            crate::parallel::join(biggest, of_steps)
        } else {
            (biggest(), of_steps())
        };
    out.extend(biggest);
    out.extend(floor);
    let mut out = in_order(out);
    // A few hundred at most (the steps are bounded): labelled on one thread.
    for l in &mut out {
        l.start_label =
            super::moment_label(memory, l.start).unwrap_or_else(|| format!("#{}", l.start));
    }
    Found {
        landmarks: out,
        omitted,
        steps,
        // All kept: each step landmark's place is its position.
        step_positions: if steps <= KEPT_STEPS {
            (0..steps).collect()
        } else {
            step_positions.into_iter().map(|(.., p)| p).collect()
        },
    }
}

/// The kinds a step has one or more of.
const PER_STEP_KINDS: [LandmarkKind; 9] = [
    LandmarkKind::Step,
    LandmarkKind::Forward,
    LandmarkKind::Loss,
    LandmarkKind::Backward,
    LandmarkKind::Optimizer,
    LandmarkKind::ZeroGrad,
    LandmarkKind::Spike,
    LandmarkKind::Cliff,
    LandmarkKind::Recompute,
];

/// Threads for `steps` steps' worth of work with `jobs` allowed (0: every
/// core): one per [`STEPS_PER_THREAD`], at least one.
fn threads_for(jobs: usize, steps: usize) -> usize {
    crate::parallel::threads(jobs)
        .min(steps / STEPS_PER_THREAD)
        .max(1)
}

/// In order of kind, then position; the largest allocations largest first
/// (their order is their rank); equal keys as found. The keys are sorted,
/// not the landmarks: moving 150,000 landmarks (30,000 steps, before they
/// were bounded) about in a sort cost more than finding them. The
/// landmarks are then put in place by following the permutation's cycles:
/// no second vector of them.
fn in_order(mut found: Vec<Landmark>) -> Vec<Landmark> {
    let rank = |l: &Landmark| match l.kind {
        LandmarkKind::LargestAllocation => std::cmp::Reverse(l.bytes),
        _ => std::cmp::Reverse(0),
    };
    let mut keys: Vec<_> = found
        .iter()
        .enumerate()
        .map(|(i, l)| (l.kind, rank(l), l.start, l.end, i))
        .collect();
    // The index last: keys are distinct, so the unstable sort keeps the
    // order in which equal landmarks were found.
    keys.sort_unstable();
    // `from[i]`: where the landmark that goes to `i` is; `usize::MAX` once
    // it is there.
    let mut from: Vec<usize> = keys.into_iter().map(|(.., i)| i).collect();
    for start in 0..from.len() {
        let mut i = start;
        while from[i] != usize::MAX {
            let source = from[i];
            from[i] = usize::MAX;
            if source == start {
                // Position `i` holds what was at `start`, its landmark.
                break;
            }
            found.swap(i, source);
            i = source;
        }
    }
    found
}

/// The runs of one phase, in event order.
fn runs(t: &Timeline<'_>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    // No site of a phase, no run: the sites are looked at, not every event
    // (an XSpace names none).
    if !t.names.any_site_has_phase() {
        return runs;
    }
    for (i, e) in t.memory.events.iter().enumerate() {
        if e.kind() != EventKind::Alloc {
            continue;
        }
        let Some(phase) = t.phase(e.alloc()) else {
            continue;
        };
        match runs.last_mut() {
            Some(last) if last.phase == phase => last.last = i,
            _ => runs.push(Run {
                phase,
                first: i,
                last: i,
            }),
        }
    }
    runs
}

/// The steps: the profile's own where it marks them, else cycles of phases.
fn steps(t: &Timeline<'_>) -> Vec<StepRange> {
    let runs = runs(t);
    let last_event = t.memory.events.len() - 1;
    let mut steps: Vec<StepRange> = Vec::new();
    if !t.memory.steps.is_empty() {
        let events = &t.memory.events;
        // Where the last step's events started, and its start: the next
        // step's, where it starts no earlier, start no earlier either.
        let mut last_start = (0, i64::MIN);
        for s in &t.memory.steps {
            let from = if s.start >= last_start.1 {
                last_start.0
            } else {
                0
            };
            let first = partition_from(events, from, |e| e.at < s.start);
            last_start = (first, s.start);
            let from = if s.end >= s.start { first } else { 0 };
            let end = partition_from(events, from, |e| e.at <= s.end);
            if end == 0 || first >= end {
                continue;
            }
            // Runs are in event order: a step's are one stretch of them,
            // found by two binary searches (not a scan of every run per
            // step, quadratic with 30,000 steps).
            let from = runs.partition_point(|r| r.first < first);
            let to = runs.partition_point(|r| r.first < end);
            steps.push(StepRange {
                id: s.id,
                first,
                last: end - 1,
                runs: runs[from..to.max(from)].to_vec(),
            });
        }
        return steps;
    }
    let mut closed = true;
    let runs = extend_backward(t, runs);
    for run in runs {
        let starts = run.phase == Phase::Forward && closed;
        if starts {
            if let Some(last) = steps.last_mut() {
                last.last = run.first - 1;
            }
            steps.push(StepRange {
                id: steps.len() as i64,
                first: run.first,
                last: last_event,
                runs: Vec::new(),
            });
            closed = false;
        }
        if let Some(step) = steps.last_mut() {
            step.runs.push(run);
            // A compiled program's memory is one run of the program: one
            // step, whatever its op names say (a transpose named backward
            // between two forward ops ends nothing).
            closed |= t.memory.program.is_none()
                && matches!(
                    run.phase,
                    Phase::Backward | Phase::Optimizer | Phase::ZeroGrad
                );
        }
    }
    steps
}

/// `items.partition_point(pred)` for items where `pred` holds of every item
/// before `from` (the events, in time order, before a step that starts no
/// earlier than the one whose first event is `from`), found by galloping
/// from `from`: the search costs the log of how far the point is from
/// `from`, a few cache lines, not the log of all the items. Two binary
/// searches over 660,000 events for each of 30,000 steps, a cache miss at
/// nearly every probe, were a third of the landmarks of an XSpace.
fn partition_from<T>(items: &[T], from: usize, pred: impl Fn(&T) -> bool) -> usize {
    // `pred` holds before `low`; it fails at `high` (or `high` is the end).
    let (mut low, mut high, mut stride) = (from.min(items.len()), from.min(items.len()), 1);
    while high < items.len() && pred(&items[high]) {
        low = high + 1;
        high = high.saturating_add(stride).min(items.len());
        stride = stride.saturating_mul(2);
    }
    low + items[low..high].partition_point(pred)
}

/// A backward run followed by allocations of no phase up to the next run:
/// the autograd engine's own thread, which has no Python stack, allocates
/// them, so they are the backward pass's.
fn extend_backward(t: &Timeline<'_>, mut runs: Vec<Run>) -> Vec<Run> {
    let ends: Vec<usize> = runs
        .iter()
        .skip(1)
        .map(|r| r.first)
        .chain([t.memory.events.len()])
        .collect();
    for (run, end) in runs.iter_mut().zip(ends) {
        if run.phase != Phase::Backward {
            continue;
        }
        for i in run.last + 1..end {
            let e = &t.memory.events[i];
            if e.kind() == EventKind::Alloc && t.phase(e.alloc()).is_none() {
                run.last = i;
            }
        }
    }
    runs
}

/// The optimizer's state: allocations the first step's optimizer step
/// makes that outlive the step, where that step raises what is in use by at
/// least half as much.
fn optimizer_state(t: &Timeline<'_>, step: &StepRange) -> Option<Landmark> {
    let mut ids: Vec<AllocId> = Vec::new();
    for run in step.runs.iter().filter(|r| r.phase == Phase::Optimizer) {
        for i in run.first..=run.last {
            let e = &t.memory.events[i];
            if e.kind() == EventKind::Alloc
                && t.phase(e.alloc()) == Some(Phase::Optimizer)
                && t.made.get(e.alloc()) == Some(i)
                && t.live_after(e.alloc(), step.last)
            {
                ids.push(e.alloc());
            }
        }
    }
    let bytes: u64 = ids.iter().map(|&i| t.bytes(i)).sum();
    // Made, not remade: a profile that records in-place updates as new
    // allocations shows state made before the recording being replaced;
    // only state that raises what is in use across the optimizer step is
    // made there.
    let mut spans = step.runs.iter().filter(|r| r.phase == Phase::Optimizer);
    let grew = match (spans.clone().next(), spans.next_back()) {
        (Some(first), Some(last)) => t.after(last.last).saturating_sub(t.before(first.first)),
        _ => 0,
    };
    if bytes == 0 || grew.saturating_mul(2) < bytes {
        return None;
    }
    let first = t.made.get(ids[0]).unwrap_or(step.first);
    let last = t.made.get(ids[ids.len() - 1]).unwrap_or(step.last);
    let (allocations, allocation_count) = listed(&ids);
    Some(Landmark {
        kind: LandmarkKind::OptimizerState,
        step: Some(step.id),
        start: t.at(first),
        end: t.at(last),
        start_label: String::new(),
        bytes,
        label: format!(
            "optimizer state made in step {}: {} in {}",
            step.id,
            units::bytes(bytes),
            allocations_text(allocation_count)
        ),
        allocations,
        allocation_count,
    })
}

/// The three largest allocations of distinct sites, with their shape and op
/// where the file records them.
fn largest(t: &Timeline<'_>, frames: &FrameFilter) -> Vec<Landmark> {
    // Per site (by its place in the table, not a hash of it for each of
    // 330,000 allocations), its largest allocation made in the recording.
    let mut by_site: Vec<u32> = vec![NO_ALLOCATION; t.names.sites().len()];
    for (index, allocation) in t.memory.allocations.iter().enumerate() {
        let id = AllocId(index as u32);
        if t.made.get(id).is_none() {
            continue;
        }
        let Some(slot) = by_site.get_mut(allocation.site.0 as usize) else {
            continue;
        };
        if *slot == NO_ALLOCATION || allocation.bytes > t.bytes(AllocId(*slot)) {
            *slot = id.0;
        }
    }
    let mut ids: Vec<AllocId> = by_site
        .into_iter()
        .filter(|&i| i != NO_ALLOCATION)
        .map(AllocId)
        .collect();
    ids.sort_by_key(|&i| (std::cmp::Reverse(t.bytes(i)), t.made.get(i), i.0));
    ids.truncate(3);
    let last = t.memory.events.len() - 1;
    ids.iter()
        .map(|&id| {
            let made = t.made.get(id).unwrap_or(0);
            let freed = t.freed.get(id).unwrap_or(last);
            let mut parts = vec![t.what(id, frames)];
            parts.extend(t.shape(id));
            parts.push(units::bytes(t.bytes(id)));
            Landmark {
                kind: LandmarkKind::LargestAllocation,
                step: None,
                start: t.at(made),
                end: t.at(freed),
                start_label: String::new(),
                bytes: t.bytes(id),
                label: parts.join(", "),
                allocations: vec![id.0],
                allocation_count: 1,
            }
        })
        .collect()
}

/// [`floor`]'s level: the first event from the start of the second step
/// (the first, with one; the recording, with none) to the end where the
/// least is in use, and that much; none where that is nothing.
fn floor_level(t: &Timeline<'_>, steps: &[StepRange]) -> Option<(usize, u64)> {
    let from = steps.get(1).or(steps.first()).map_or(0, |s| s.first);
    let last = t.memory.events.len() - 1;
    let (low_event, low) = t.in_use.lowest(from, last);
    (low != 0 && low != u64::MAX).then_some((low_event, low))
}

/// The constant floor at its level ([`floor_level`]), and what is live
/// there, by category. A level, not a set of allocations kept throughout:
/// a profile may record an in-place update (an optimizer's) as a free and
/// a new allocation.
fn floor(t: &Timeline<'_>, (low_event, low): (usize, u64)) -> Landmark {
    let last = t.memory.events.len() - 1;
    let mut ids = replay::live_at(t.memory, low_event + 1);
    let mut by_category: FxHashMap<&str, u64> = FxHashMap::default();
    for &id in &ids {
        let site = t.names.site_of(t.memory.allocation(id).site);
        let name = match site.category {
            Some(c) => t.names.str(c),
            None if t.names.before_recording_op(site.op).is_some() => "before recording",
            None => "unnamed",
        };
        *by_category.entry(name).or_default() += t.bytes(id);
    }
    let mut parts: Vec<(&str, u64)> = by_category.into_iter().collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let more = parts.len().saturating_sub(4);
    let mut parts: Vec<String> = parts
        .iter()
        .take(4)
        .map(|(name, b)| format!("{} {}", crate::report::shorten(name, 40), units::bytes(*b)))
        .collect();
    if more > 0 {
        parts.push(format!("{more} more"));
    }
    ids.sort_by_key(|&i| (std::cmp::Reverse(t.bytes(i)), i.0));
    let (allocations, allocation_count) = listed(&ids);
    Landmark {
        kind: LandmarkKind::Floor,
        step: None,
        start: t.at(low_event),
        end: t.at(last),
        start_label: String::new(),
        bytes: low,
        label: format!(
            "constant floor: {} ({})",
            units::bytes(low),
            parts.join(", ")
        ),
        allocations,
        allocation_count,
    }
}

/// A function's short name: `linear` for the profiler's `<built-in function
/// linear>` and `zeros_like` for `<built-in method zeros_like of type object
/// at 0x…>`, anything else as written.
fn callee_name(function: &str) -> &str {
    function
        .strip_prefix("<built-in function ")
        .or_else(|| function.strip_prefix("<built-in method "))
        .map(|rest| {
            rest.split([' ', '>'])
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(function)
        })
        .unwrap_or(function)
}

#[cfg(test)]
mod tests;
