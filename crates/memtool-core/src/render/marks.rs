//! Where things happen on a memory's axis, as every drawing of the page
//! and the SVG labels them: times since the recording started (with step
//! and phase) and the training phases as bands. Shared by `html` and `svg`
//! so neither imports the other for them.

use crate::analysis::replay;
use crate::model::{Axis, Memory};
use crate::report::units;

use super::color;
use super::page::PhaseMark;

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
