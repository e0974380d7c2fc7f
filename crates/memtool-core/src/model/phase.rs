//! Training phases: where in a training step an allocation was made, and
//! the spans of a memory's axis each phase covers.
//!
//! Readers name the phase of each site from what their format offers (a
//! PyTorch stack's frames and the profiler's ranges, a JAX op name); the
//! spans are worked out here, from the allocations in event order, the
//! same way for every format.

use serde::Serialize;

use super::{EventKind, Memory, Names};

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
        for e in &self.events {
            if e.kind != EventKind::Alloc {
                continue;
            }
            let Some(phase) = self
                .allocations
                .get(e.alloc.index())
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
            m.events.push(Event { at, kind, alloc });
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

    #[test]
    fn names_round_trip() {
        for p in Phase::ALL {
            assert_eq!(Phase::of_name(p.name()), Some(p));
        }
        assert_eq!(Phase::of_name("update"), None);
    }
}
