//! Training phases: where in a training step an allocation was made, and
//! the spans of a memory's axis each phase covers.
//!
//! Readers name the phase of each site from what their format offers (a
//! PyTorch stack's frames and the profiler's ranges, a JAX op name); the
//! spans are worked out here, from the allocations in event order, the
//! same way for every format.

use serde::Serialize;

use super::{Axis, EventKind, Memory, Names, Step};

/// A phase of a training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The forward pass: activations kept for the backward pass.
    Forward,
    /// The loss, computed from the forward pass's output.
    Loss,
    /// The backward pass: gradients made as activations are freed.
    Backward,
    /// The optimizer's step (JAX: the update after the backward pass):
    /// its state and the update's temporaries.
    Optimizer,
    /// Clearing the gradients before (or after) a step.
    ZeroGrad,
}

impl Phase {
    /// Every phase, in the order of a step.
    pub const ALL: [Phase; 5] = [
        Phase::Forward,
        Phase::Loss,
        Phase::Backward,
        Phase::Optimizer,
        Phase::ZeroGrad,
    ];

    /// The name used in every output (as in JSON).
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Loss => "loss",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
            Phase::ZeroGrad => "zero_grad",
        }
    }

    /// The phase a name written by [`Phase::name`] stands for.
    pub fn of_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A stretch of a memory's axis in one phase: from the first to the last
/// allocation of a run of allocations made in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseSpan {
    /// The phase.
    pub phase: Phase,
    /// Position of the run's first allocation.
    pub start: i64,
    /// Position of the run's last allocation.
    pub end: i64,
}

impl Memory {
    /// Works out [`Memory::phases`] from its allocations' sites: each run of
    /// allocations of one phase, in event order, is a span; allocations of
    /// no phase inside a run belong to it, those between runs of two phases
    /// to neither (nothing tells where one phase ended and the next began),
    /// and frees say nothing (a backward pass frees the forward's memory).
    pub fn find_phases(&mut self, names: &Names) {
        let mut spans: Vec<PhaseSpan> = Vec::new();
        // No site of a phase, no span: the sites are looked at, not every
        // event (an XSpace names none).
        if !names.any_site_has_phase() {
            self.phases = spans;
            return;
        }
        for e in &self.events {
            if e.kind() != EventKind::Alloc {
                continue;
            }
            let Some(phase) = self
                .allocations
                .get(e.alloc().index())
                .and_then(|a| names.site_of(a.site).phase)
            else {
                continue;
            };
            match spans.last_mut() {
                Some(last) if last.phase == phase => last.end = last.end.max(e.at),
                _ => spans.push(PhaseSpan {
                    phase,
                    start: e.at,
                    end: e.at,
                }),
            }
        }
        self.phases = spans;
    }

    /// Where the file marks no steps (`ProfilerStep#N`), makes the training
    /// cycles the phases show its steps: each forward pass that follows a
    /// backward pass (or is the first) starts one, which runs to just
    /// before the next one starts (the last, to the end of the recording),
    /// so a step is forward → loss → backward → optimizer → `zero_grad`,
    /// whatever the loop does between. Only when there are two such cycles
    /// or more: one pass, or forward passes alone (inference), are no
    /// repetitions of a training step; a last forward pass with no backward
    /// pass after it (the recording ended in it) is left out.
    /// A compiled program's memory space is one run of the program, whose
    /// ops' phases may alternate (a JAX `jit(train_step)` interleaves
    /// forward and backward ops): never steps.
    pub fn steps_from_phase_cycles(&mut self) {
        if !self.steps.is_empty() || self.program.is_some() || self.axis == Axis::ProgramOrder {
            return;
        }
        let mut starts: Vec<i64> = Vec::new();
        let mut backward_since_start = true;
        for span in &self.phases {
            match span.phase {
                Phase::Forward if backward_since_start => {
                    starts.push(span.start);
                    backward_since_start = false;
                }
                Phase::Backward => backward_since_start = true,
                _ => {}
            }
        }
        // A last cycle cut short before its backward pass (the recording
        // ended in a forward pass) is no step: the one before ends where it
        // starts.
        let mut last = self
            .events
            .last()
            .map(|e| e.at)
            .into_iter()
            .chain(self.phases.last().map(|s| s.end))
            .max()
            .unwrap_or(i64::MIN);
        if !backward_since_start {
            if let Some(cut) = starts.pop() {
                last = cut - 1;
            }
        }
        if starts.len() < 2 {
            return;
        }
        self.steps = starts
            .iter()
            .enumerate()
            .map(|(i, &start)| Step {
                id: i as i64,
                start,
                end: starts.get(i + 1).map_or(last, |next| next - 1).max(start),
            })
            .collect();
        self.steps_from_phases = true;
    }

    /// The phase at a position: the span that holds it (the last one, where
    /// two meet at one position), else none.
    pub fn phase_at(&self, at: i64) -> Option<Phase> {
        let after = self.phases.partition_point(|s| s.start <= at);
        let span = self.phases.get(after.checked_sub(1)?)?;
        (at <= span.end).then_some(span.phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, Event, MemoryKind, Site};

    #[test]
    fn runs_of_one_phase_are_spans_and_frees_and_unnamed_allocations_between_them_are_not() {
        let mut names = Names::default();
        let site = |names: &mut Names, phase| {
            names.site(Site {
                phase,
                ..Site::default()
            })
        };
        let forward = site(&mut names, Some(Phase::Forward));
        let backward = site(&mut names, Some(Phase::Backward));
        let none = site(&mut names, None);
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimeUs);
        let plan = [
            (10, EventKind::Alloc, forward),
            (20, EventKind::Alloc, none),
            (30, EventKind::Alloc, forward),
            (40, EventKind::Alloc, none),
            (50, EventKind::Free, forward),
            (60, EventKind::Alloc, backward),
            (70, EventKind::Alloc, backward),
        ];
        for (at, kind, site) in plan {
            let alloc = m.push_allocation(Allocation {
                bytes: 1,
                requested: 1,
                count: 1,
                address: None,
                site,
            });
            m.events.push(Event::new(at, kind, alloc));
        }
        m.find_phases(&names);
        assert_eq!(
            m.phases,
            vec![
                PhaseSpan {
                    phase: Phase::Forward,
                    start: 10,
                    end: 30
                },
                PhaseSpan {
                    phase: Phase::Backward,
                    start: 60,
                    end: 70
                },
            ]
        );
        assert_eq!(m.phase_at(20), Some(Phase::Forward));
        assert_eq!(m.phase_at(45), None);
        assert_eq!(m.phase_at(70), Some(Phase::Backward));
        assert_eq!(m.phase_at(5), None);
        assert_eq!(m.phase_at(71), None);
    }

    /// Spans of phases at positions 10, 20, ...; then the steps made of them.
    fn steps_of(phases: &[Phase]) -> Vec<(i64, i64, i64)> {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        m.phases = phases
            .iter()
            .enumerate()
            .map(|(i, &phase)| PhaseSpan {
                phase,
                start: 10 * i as i64 + 10,
                end: 10 * i as i64 + 15,
            })
            .collect();
        m.steps_from_phase_cycles();
        assert_eq!(m.steps_from_phases, !m.steps.is_empty());
        m.steps.iter().map(|s| (s.id, s.start, s.end)).collect()
    }

    #[test]
    fn forward_backward_cycles_are_steps_when_nothing_marks_them() {
        use Phase::{Backward as B, Forward as F, Loss as L, Optimizer as O, ZeroGrad as Z};
        assert_eq!(
            steps_of(&[F, L, B, O, Z, F, L, B, O]),
            [(0, 10, 59), (1, 60, 95)]
        );
        // Gradient accumulation: each forward → backward is a step.
        assert_eq!(steps_of(&[F, B, F, B, O]), [(0, 10, 29), (1, 30, 55)]);
        // A last cycle cut short is left out.
        assert_eq!(steps_of(&[F, B, O, F, B, O, F]), [(0, 10, 39), (1, 40, 69)]);
        // One cycle or forward passes alone: none.
        assert!(steps_of(&[F, L, B, O]).is_empty());
        assert!(steps_of(&[F]).is_empty());
        assert!(steps_of(&[F, B, O, F]).is_empty());
        // A compiled program's ops alternate inside one run: never steps.
        let mut program = Memory::new("p", MemoryKind::ProgramSpace, Axis::ProgramOrder);
        program.phases = [F, B, F, B]
            .iter()
            .enumerate()
            .map(|(i, &phase)| PhaseSpan {
                phase,
                start: i as i64,
                end: i as i64,
            })
            .collect();
        program.steps_from_phase_cycles();
        assert!(program.steps.is_empty() && !program.steps_from_phases);
    }

    #[test]
    fn names_round_trip() {
        for p in Phase::ALL {
            assert_eq!(Phase::of_name(p.name()), Some(p));
        }
        assert_eq!(Phase::of_name("update"), None);
    }
}
