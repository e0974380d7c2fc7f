//! One step's landmarks: the step, its phase spans, its spike, its cliffs
//! and its recomputation waves; and, for a profile of more steps than
//! [`super::bound::KEPT_STEPS`], the few figures of every step that choose
//! which steps get them ([`figures`]).

use rustc_hash::FxHashSet;

use crate::model::{AllocId, EventKind, Phase};
use crate::units;

use super::super::frames::FrameFilter;
use super::{allocations_text, listed, Landmark, LandmarkKind, StepRange, Timeline};

/// What a step's landmarks would be, in a few figures: what chooses the
/// steps whose landmarks are made, and counts those left out. Found as
/// [`step_landmarks`] finds them, without naming anything or listing
/// allocations (a landmark costs ~400 bytes and ~11,000 instructions; these
/// are 32 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct StepFigures {
    /// The most in use inside the step (its `step` landmark's bytes).
    pub(super) peak: u64,
    /// Its spike's bytes; 0 for none.
    pub(super) spike: u64,
    /// Its largest cliff's bytes; 0 for none.
    pub(super) cliff: u64,
    /// Its phase spans: bit `i` for `Phase::ALL[i]`.
    pub(super) phases: u8,
    /// Its cliffs (at most three).
    pub(super) cliffs: u8,
    /// Its recomputation waves.
    pub(super) waves: u32,
}

impl StepFigures {
    /// How many landmarks of `kind` the step has.
    pub(super) fn count(&self, kind: LandmarkKind) -> usize {
        match kind {
            LandmarkKind::Step => 1,
            LandmarkKind::Spike => usize::from(self.spike > 0),
            LandmarkKind::Cliff => usize::from(self.cliffs),
            LandmarkKind::Recompute => self.waves as usize,
            _ => Phase::ALL
                .iter()
                .enumerate()
                .filter(|&(i, &p)| self.phases & (1 << i) != 0 && LandmarkKind::of_phase(p) == kind)
                .count(),
        }
    }
}

/// A step's figures (see [`StepFigures`]).
pub(super) fn figures(t: &Timeline<'_>, step: &StepRange, floor: u64) -> StepFigures {
    let (peak_event, peak) = t.highest(step.first, step.last);
    let mut phases = 0u8;
    for (i, phase) in Phase::ALL.into_iter().enumerate() {
        if step.runs.iter().any(|r| r.phase == phase) {
            phases |= 1 << i;
        }
    }
    let (cliffs, cliff) = cliff_figures(t, step, peak, floor);
    StepFigures {
        peak,
        spike: find_spike(t, step, peak_event, peak).map_or(0, |s| s.bytes),
        cliff,
        phases,
        cliffs,
        waves: waves(t, step).len() as u32,
    }
}

/// A step, its phase spans, its spike, cliffs and recomputation waves.
pub(super) fn step_landmarks(
    t: &Timeline<'_>,
    step: &StepRange,
    floor: u64,
    frames: &FrameFilter,
    out: &mut Vec<Landmark>,
) {
    let (peak_event, peak) = t.highest(step.first, step.last);
    out.push(Landmark {
        kind: LandmarkKind::Step,
        step: Some(step.id),
        start: t.at(step.first),
        end: t.at(step.last),
        start_label: String::new(),
        bytes: peak,
        label: format!("step {}: peak {}", step.id, units::bytes(peak)),
        allocations: Vec::new(),
        allocation_count: 0,
    });
    for phase in Phase::ALL {
        let mut of_phase = step.runs.iter().filter(|r| r.phase == phase);
        let Some(first) = of_phase.next() else {
            continue;
        };
        let last = of_phase.next_back().unwrap_or(first);
        let (from, to) = (first.first, last.last);
        let (_, high) = t.highest(from, to);
        let before = t.before(from);
        let label = match phase {
            Phase::Forward => format!(
                "step {} forward: {} → {}",
                step.id,
                units::bytes(before),
                units::bytes(t.after(to))
            ),
            _ => format!(
                "step {} {}: up to {}",
                step.id,
                phase_words(phase),
                units::bytes(high)
            ),
        };
        out.push(Landmark {
            kind: LandmarkKind::of_phase(phase),
            step: Some(step.id),
            start: t.at(from),
            end: t.at(to),
            start_label: String::new(),
            bytes: high,
            label,
            allocations: Vec::new(),
            allocation_count: 0,
        });
    }
    out.extend(spike(t, step, Some(step.id), peak_event, peak, frames));
    out.extend(cliffs(t, step, Some(step.id), peak, floor, frames));
    out.extend(recompute(t, step, frames));
}

fn phase_words(phase: Phase) -> &'static str {
    match phase {
        Phase::Forward => "forward",
        Phase::Loss => "loss",
        Phase::Backward => "backward",
        Phase::Optimizer => "optimizer step",
        Phase::ZeroGrad => "zero_grad",
    }
}

/// The allocations live at a step's peak that were made shortly before it
/// and freed shortly after (within a hundredth of the step's events, at
/// least two): temporaries on top of the peak, such as a softmax's.
pub(super) fn spike(
    t: &Timeline<'_>,
    step: &StepRange,
    id: Option<i64>,
    peak_event: usize,
    peak: u64,
    frames: &FrameFilter,
) -> Option<Landmark> {
    let Spike {
        mut ids,
        from,
        to,
        bytes,
    } = find_spike(t, step, peak_event, peak)?;
    ids.sort_by_key(|&i| (std::cmp::Reverse(t.bytes(i)), i.0));
    let what = t.what(ids[0], frames);
    let (allocations, allocation_count) = listed(&ids);
    Some(Landmark {
        kind: LandmarkKind::Spike,
        step: id,
        start: t.at(from),
        end: t.at(to),
        start_label: String::new(),
        bytes,
        label: format!(
            "spike{}: +{} on the peak for {} ({what})",
            id.map(|s| format!(" in step {s}")).unwrap_or_default(),
            units::bytes(bytes),
            match to - from {
                1 => "1 event".to_string(),
                n => format!("{n} events"),
            }
        ),
        allocations,
        allocation_count,
    })
}

/// A spike before it is named: its allocations (as found), the events it
/// spans and its bytes.
struct Spike {
    ids: Vec<AllocId>,
    from: usize,
    to: usize,
    bytes: u64,
}

/// A step's spike, if its bytes reach a hundredth of the peak.
fn find_spike(t: &Timeline<'_>, step: &StepRange, peak_event: usize, peak: u64) -> Option<Spike> {
    let near = ((step.last - step.first) / 100).max(2);
    let mut ids: Vec<AllocId> = Vec::new();
    let (mut from, mut to) = (peak_event, peak_event);
    for made in peak_event.saturating_sub(near)..=peak_event {
        let e = &t.memory.events[made];
        if e.kind() != EventKind::Alloc || t.made.get(e.alloc()) != Some(made) {
            continue;
        }
        let Some(freed) = t.freed.get(e.alloc()) else {
            continue;
        };
        if freed > peak_event && freed <= peak_event + near {
            ids.push(e.alloc());
            from = from.min(made);
            to = to.max(freed);
        }
    }
    let bytes: u64 = ids.iter().map(|&i| t.bytes(i)).sum();
    if bytes == 0 || bytes.saturating_mul(100) < peak {
        return None;
    }
    Some(Spike {
        ids,
        from,
        to,
        bytes,
    })
}

/// Cliffs: the three largest runs of frees with no allocation between them
/// inside a step, each at least a tenth of what the step holds above the
/// floor (at least two allocations or the largest run).
pub(super) fn cliffs(
    t: &Timeline<'_>,
    step: &StepRange,
    id: Option<i64>,
    peak: u64,
    floor: u64,
    frames: &FrameFilter,
) -> Vec<Landmark> {
    let runs = cliff_runs(t, step, id, peak, floor);
    let loss_end = step
        .runs
        .iter()
        .filter(|r| r.phase == Phase::Loss)
        .map(|r| r.last)
        .max();
    let optimizer_end = step
        .runs
        .iter()
        .filter(|r| r.phase == Phase::Optimizer)
        .map(|r| r.last)
        .max();
    let mut named_after_loss = false;
    runs.iter()
        .map(|&(first, last, bytes)| {
            let mut ids: Vec<AllocId> = (first..=last)
                .map(|i| t.memory.events[i].alloc())
                .filter(|&a| t.freed.get(a).is_some_and(|f| f >= first && f <= last))
                .collect();
            ids.sort_by_key(|&i| (std::cmp::Reverse(t.bytes(i)), i.0));
            ids.dedup();
            let when = if loss_end.is_some_and(|l| first > l)
                && optimizer_end.is_none_or(|o| first < o)
                && !named_after_loss
            {
                named_after_loss = true;
                " after the loss".to_string()
            } else if optimizer_end.is_some_and(|o| first > o) {
                " after the optimizer step".to_string()
            } else {
                t.memory
                    .phase_at(t.at(first))
                    .map(|p| format!(" in {}", phase_words(p)))
                    .unwrap_or_default()
            };
            let what = ids
                .first()
                .map(|&i| format!(", largest {}", t.what(i, frames)))
                .unwrap_or_default();
            let (allocations, allocation_count) = listed(&ids);
            Landmark {
                kind: LandmarkKind::Cliff,
                step: id,
                start: t.at(first),
                end: t.at(last),
                start_label: String::new(),
                bytes,
                label: format!(
                    "cliff{when}: {} freed at once ({}{what})",
                    units::bytes(bytes),
                    allocations_text(allocation_count)
                ),
                allocations,
                allocation_count,
            }
        })
        .collect()
}

/// A step's cliffs before they are named: the three largest runs of frees
/// over the threshold, in event order, each its first and last event and
/// the bytes it frees.
pub(super) fn cliff_runs(
    t: &Timeline<'_>,
    step: &StepRange,
    id: Option<i64>,
    peak: u64,
    floor: u64,
) -> Vec<(usize, usize, u64)> {
    let mut runs: Vec<(usize, usize, u64)> = Vec::new();
    let mut open: Option<(usize, usize, u64)> = None;
    // The bytes after each event are the next one's before: read once.
    let mut after = t.before(step.first);
    for i in step.first..=step.last {
        let e = &t.memory.events[i];
        let before = after;
        after = t.after(i);
        // A free of something not live changes nothing and breaks nothing.
        let changed = i == 0 || after != before;
        match e.kind() {
            EventKind::Free if changed => {
                let freed = before - after.min(before);
                let run = open.get_or_insert((i, i, 0));
                run.1 = i;
                run.2 += freed;
            }
            EventKind::Free => {}
            EventKind::Alloc => runs.extend(open.take()),
        }
    }
    runs.extend(open.take());
    // Without steps there is no floor to stand on: a tenth of the peak.
    let threshold = match id {
        Some(_) => peak.saturating_sub(floor) / 20,
        None => peak / 10,
    }
    .max(1);
    runs.retain(|r| r.2 >= threshold);
    runs.sort_by_key(|r| (std::cmp::Reverse(r.2), r.0));
    runs.truncate(3);
    runs.sort_by_key(|r| r.0);
    runs
}

/// What [`cliff_runs`] finds in a step, counted: how many cliffs (at most
/// three) and the largest one's bytes. The same runs of frees against the
/// same threshold, without making them: a vector and a sort per step were
/// most of the figures of 30,000 steps.
fn cliff_figures(t: &Timeline<'_>, step: &StepRange, peak: u64, floor: u64) -> (u8, u64) {
    // `cliff_runs`' threshold for a step.
    let threshold = (peak.saturating_sub(floor) / 20).max(1);
    let (mut cliffs, mut largest) = (0u8, 0u64);
    let mut close = |run: Option<u64>| {
        if let Some(bytes) = run.filter(|&b| b >= threshold) {
            cliffs = cliffs.saturating_add(1).min(3);
            largest = largest.max(bytes);
        }
    };
    let mut open: Option<u64> = None;
    let mut after = t.before(step.first);
    for i in step.first..=step.last {
        let e = &t.memory.events[i];
        let before = after;
        after = t.after(i);
        let changed = i == 0 || after != before;
        match e.kind() {
            EventKind::Free if changed => {
                *open.get_or_insert(0) += before - after.min(before);
            }
            EventKind::Free => {}
            EventKind::Alloc => close(open.take()),
        }
    }
    close(open.take());
    (cliffs, largest)
}

/// Recomputation waves: runs of at least four allocations inside a step's
/// backward pass whose innermost two Python frames are those of an allocation of
/// the step's forward pass (activation checkpointing runs the forward
/// again, under the autograd engine).
pub(super) fn recompute(t: &Timeline<'_>, step: &StepRange, frames: &FrameFilter) -> Vec<Landmark> {
    waves(t, step)
        .iter()
        .enumerate()
        .map(|(n, wave)| {
            let ids: Vec<AllocId> = wave.iter().map(|&i| t.memory.events[i].alloc()).collect();
            let bytes: u64 = ids.iter().map(|&i| t.bytes(i)).sum();
            let (first, last) = (wave[0], wave[wave.len() - 1]);
            let (allocations, allocation_count) = listed(&ids);
            Landmark {
                kind: LandmarkKind::Recompute,
                step: Some(step.id),
                start: t.at(first),
                end: t.at(last),
                start_label: String::new(),
                bytes,
                label: format!(
                    "recompute wave {} of step {}: {} in {} ({})",
                    n + 1,
                    step.id,
                    units::bytes(bytes),
                    allocations_text(allocation_count),
                    t.what(ids[0], frames)
                ),
                allocations,
                allocation_count,
            }
        })
        .collect()
}

/// A step's recomputation waves before they are named: each the events of
/// its allocations.
fn waves(t: &Timeline<'_>, step: &StepRange) -> Vec<Vec<usize>> {
    // A compiled program's backward ops keep their forward op's source
    // line (JAX's transposes): its frames tell no recomputation.
    if t.memory.program.is_some() {
        return Vec::new();
    }
    let mut forward: FxHashSet<u32> = FxHashSet::default();
    let mut backward: Vec<usize> = Vec::new();
    for run in &step.runs {
        for i in run.first..=run.last {
            let e = &t.memory.events[i];
            if e.kind() != EventKind::Alloc || t.phase(e.alloc()) != Some(run.phase) {
                continue;
            }
            match run.phase {
                Phase::Forward => forward.extend(t.frames_key(e.alloc())),
                Phase::Backward => backward.push(i),
                _ => {}
            }
        }
    }
    let mut waves: Vec<Vec<usize>> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for &i in &backward {
        let again = t
            .frames_key(t.memory.events[i].alloc())
            .is_some_and(|k| forward.contains(&k));
        if again {
            open.push(i);
        } else if !open.is_empty() {
            waves.push(std::mem::take(&mut open));
        }
    }
    if !open.is_empty() {
        waves.push(open);
    }
    waves.retain(|w| w.len() >= 4);
    waves
}
