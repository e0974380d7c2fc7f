//! Where things happen on a memory's axis, as every drawing of the page
//! and the SVG labels them: times since the recording started (with step
//! and phase) and the training phases as bands. Shared by `html` and `svg`
//! so neither imports the other for them.

use crate::analysis::landmarks::{self, LandmarkKind};
use crate::analysis::{replay, FrameFilter};
use crate::model::{Axis, Memory, Names};
use crate::report::units;

use super::color;
use super::page::{LandmarkMark, PhaseMark};

/// Memories of a profile drawn in sections of their own, biggest peak
/// first; the others are rows of a compact table. A section weighs up to a
/// few hundred KB (timeline, call tree, address grid, blocks), so this
/// bounds the page (and the SVG, which draws the same memories).
pub(super) const SECTIONS: usize = 16;

/// The training phases of one memory, drawn as bands along the top of its
/// timeline. At most about two per pixel column are kept: past that, spans
/// narrower than half a column are left out (they would not show), so the
/// page stays small whatever the number of steps.
pub(super) fn phase_marks(memory: &Memory, x0: i64, width: usize) -> Vec<PhaseMark> {
    let cap = width.max(1).saturating_mul(2);
    let span = |s: &crate::model::PhaseSpan| s.end.saturating_sub(s.start);
    let narrowest = match (memory.phases.first(), memory.phases.last()) {
        (Some(first), Some(last)) if memory.phases.len() > cap => {
            last.end.saturating_sub(first.start) / cap as i64
        }
        _ => 0,
    };
    memory
        .phases
        .iter()
        .filter(|s| span(s) >= narrowest)
        .map(|s| PhaseMark {
            start: s.start.wrapping_sub(x0),
            end: s.end.wrapping_sub(x0),
            phase: s.phase.name(),
            color: color::group_color(s.phase.name()),
        })
        .collect()
}

/// Where the page counts `memory`'s time from: the core's start of the
/// recording (the one every output uses), none for a memory read at
/// instants (snapshots, a series), whose labels are their names.
pub(super) fn recording_start(memory: &Memory) -> Option<i64> {
    if replay::uses_instants(memory) {
        return None;
    }
    memory.recording_start()
}

/// `at` on `memory`'s time axis as every output shows it (`t+175.0 ms
/// (step 2, backward)`), with the step given; `None` on other axes.
pub(super) fn relative_label(memory: &Memory, at: i64, step: Option<i64>) -> Option<String> {
    recording_start(memory)?;
    let since = memory.since_start_ps(at)?;
    let phase = memory.phase_at(at).map(crate::model::Phase::name);
    Some(units::moment(since, step, phase))
}

/// `at` as a person reads it on a time axis: how long after `start`
/// (`t+25.43 ms`); `None` on other axes, whose labels (`#45 (fusion.2)`, a
/// snapshot's name) already read well.
pub(super) fn relative_time(axis: Axis, at: i64, start: Option<i64>) -> Option<String> {
    let since = at.saturating_sub(start?);
    let ps = match axis {
        Axis::TimePs => since,
        Axis::TimeUs => since.saturating_mul(1_000_000),
        _ => return None,
    };
    Some(units::moment(ps, None, None))
}

/// About how many steps the pictures name: those the landmarks of a memory
/// of many steps keep spread over it.
const MARKED_STEPS: usize = landmarks::SPREAD_STEPS;

/// The landmarks the pictures label ([`landmarks::find`]), positions
/// relative to `x0`: each step, the largest allocation, the highest spike,
/// the first step's cliffs and recompute waves, the optimizer state and the
/// floor — the spans are the phase strip's. `text` is the short label
/// drawn, `title` the whole one (hover).
pub(super) fn landmark_marks(
    names: &Names,
    memory: &Memory,
    frames: &FrameFilter,
    x0: i64,
) -> Vec<LandmarkMark> {
    let found = landmarks::find_on(names, memory, frames, 1);
    let all = &found.landmarks;
    let first_step = all
        .iter()
        .find(|l| l.kind == LandmarkKind::Step)
        .and_then(|l| l.step);
    let spike = all
        .iter()
        .filter(|l| l.kind == LandmarkKind::Spike)
        .max_by_key(|l| (l.bytes, std::cmp::Reverse(l.start)));
    // Steps named at most about MARKED_STEPS times, evenly: the page stays
    // small whatever the number of steps (the labels would not fit anyway).
    // Counted over all the memory's steps: of a memory of many, the
    // landmarks keep these (`SPREAD_STEPS`) among a few others.
    let every = found.steps.div_ceil(MARKED_STEPS).max(1);
    let mut step_index = 0;
    let mut waves = 0;
    let mut marks = Vec::new();
    for l in all {
        let text = match l.kind {
            LandmarkKind::Step => {
                let position = found.step_positions.get(step_index).copied();
                step_index += 1;
                if position.is_none_or(|p| p % every != 0) {
                    continue;
                }
                format!("step {}", l.step.unwrap_or_default())
            }
            LandmarkKind::LargestAllocation
                if all
                    .iter()
                    .find(|f| f.kind == LandmarkKind::LargestAllocation)
                    .is_some_and(|f| std::ptr::eq(f, l)) =>
            {
                format!("largest: {}", crate::report::shorten(&l.label, 48))
            }
            LandmarkKind::Spike if spike.is_some_and(|s| std::ptr::eq(s, l)) => {
                format!("spike +{}", units::bytes(l.bytes))
            }
            LandmarkKind::Cliff if l.step == first_step => match l.label.split_once(':') {
                Some((name, _)) => format!("{name} −{}", units::bytes(l.bytes)),
                None => format!("cliff −{}", units::bytes(l.bytes)),
            },
            LandmarkKind::Recompute if l.step == first_step => {
                waves += 1;
                format!("recompute {waves}")
            }
            LandmarkKind::OptimizerState => format!("optimizer state +{}", units::bytes(l.bytes)),
            LandmarkKind::Floor => format!("floor {}", units::bytes(l.bytes)),
            _ => continue,
        };
        marks.push(LandmarkMark {
            at: l.start.wrapping_sub(x0),
            kind: l.kind.name(),
            text,
            title: l.label.clone(),
            bytes: l.bytes,
        });
    }
    // In order of importance: the labels laid out first get the room.
    let rank = |kind: &str| match kind {
        "step" => 0,
        "cliff" => 1,
        "largest_allocation" => 2,
        "spike" => 3,
        "optimizer_state" => 4,
        "recompute" => 5,
        _ => 6,
    };
    marks.sort_by_key(|m| (rank(m.kind), m.at));
    marks
}

/// Places labels along an axis so that none overlaps another: each label
/// (its mark's `x` and its estimated `width`, in pixels, in order of
/// importance) goes to the first of `rows` rows where it clears every label
/// already there by `gap`, starting at its mark, else ending there; `None`
/// where no row has room (the label is left out; its mark keeps its title).
/// Returns each label's row and left edge, kept within `[lo, hi]`. The
/// page's script lays its labels out the same way.
pub(super) fn label_rows(
    labels: &[(f64, f64)],
    rows: usize,
    gap: f64,
    (lo, hi): (f64, f64),
) -> Vec<Option<(usize, f64)>> {
    let mut taken: Vec<Vec<(f64, f64)>> = vec![Vec::new(); rows];
    labels
        .iter()
        .map(|&(x, w)| {
            let fit = |left: f64| left.min(hi - w).max(lo);
            for (row, placed) in taken.iter_mut().enumerate() {
                for left in [fit(x), fit(x - w)] {
                    if placed
                        .iter()
                        .all(|&(a, b)| left + w + gap <= a || b + gap <= left)
                    {
                        placed.push((left, left + w));
                        return Some((row, left));
                    }
                }
            }
            None
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{label_rows, landmark_marks};
    use crate::analysis::frames::FrameFilter;
    use crate::model::{Allocation, Axis, Event, EventKind, Memory, MemoryKind, Names, Site, Step};

    /// A memory of 3,000 steps, more than the landmarks keep whole: the
    /// pictures name the steps they named when every step had its
    /// landmarks — every 75th, 40 in all — which the landmarks keep.
    #[test]
    fn many_steps_are_named_every_so_many_as_before_the_bound() {
        let mut names = Names::default();
        let site = names.site(Site::default());
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        for s in 0..3_000i64 {
            let bytes = 100 + (s % 5) as u64;
            let a = m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site,
            });
            for (at, kind) in [(2 * s, EventKind::Alloc), (2 * s + 1, EventKind::Free)] {
                m.events.push(Event::new(at, kind, a));
            }
            m.steps.push(Step {
                id: s,
                start: 2 * s,
                end: 2 * s + 1,
            });
        }
        let marks = landmark_marks(&names, &m, &FrameFilter::All, 0);
        let steps: Vec<&str> = marks
            .iter()
            .filter(|l| l.kind == "step")
            .map(|l| l.text.as_str())
            .collect();
        let expected: Vec<String> = (0..40).map(|i| format!("step {}", i * 75)).collect();
        assert_eq!(steps, expected);
    }

    #[test]
    fn labels_go_to_the_first_row_they_clear_and_are_left_out_without_one() {
        let rows = label_rows(
            &[
                (0.0, 50.0),
                (40.0, 50.0),
                (60.0, 10.0),
                (45.0, 30.0),
                (200.0, 5.0),
                (300.0, 40.0),
            ],
            2,
            4.0,
            (0.0, 320.0),
        );
        assert_eq!(
            rows,
            vec![
                Some((0, 0.0)),
                Some((1, 40.0)),
                Some((0, 60.0)),
                None,
                Some((0, 200.0)),
                // Kept inside the axis: ends at its right edge.
                Some((0, 280.0)),
            ]
        );
    }
}
