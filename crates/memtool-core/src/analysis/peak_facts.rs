//! The facts of a memory's peak that every output states — `summary`,
//! `peak`, `frag` and the rendered page — worked out once.

use serde::Serialize;

use super::{point_label, replay, AllocatorState, MemoryHeader};
use crate::model::{Axis, Memory, Phase};

/// Where a memory's peak is and how high, as every output states it.
#[derive(Clone, Debug)]
pub struct PeakFacts {
    /// The peak as [`replay::reported_peak`] gives it: the replayed point
    /// (whose live set is what outputs break down) and the bytes in use
    /// there, the allocator's own figure where it reports one.
    pub peak: replay::Peak,
    /// The allocator's state at the peak, when it reports one.
    pub state: AllocatorState,
    /// The memory's identity, with the capacity the allocator reports at
    /// the peak where it gives one.
    pub header: MemoryHeader,
    /// The peak's position as a person reads it (`t+25.43 ms (step 3)`,
    /// `#42 (fusion.3)`, a snapshot's file name).
    pub label: String,
    /// Picoseconds since the profile start, for memories on a ps time axis.
    pub time_ps: Option<i64>,
    /// The step the peak falls in, when the profile marks steps.
    pub step: Option<i64>,
    /// The training phase the peak falls in, when the profile tells.
    pub phase: Option<Phase>,
    /// How many separate moments reach the peak (1 unless it is tied).
    pub moments: usize,
}

/// The figures every report's JSON gives for a memory's peak, in this order
/// (`#[serde(flatten)]` into each report's memory).
#[derive(Clone, Debug, Serialize)]
pub struct PeakFigures {
    /// Bytes in use at the peak (the allocator's figure where it reports one).
    pub peak_bytes: u64,
    /// Bytes the program asked for at the replayed peak.
    pub peak_requested_bytes: u64,
    /// Buffers live at the peak.
    pub buffers: u64,
    /// Position of the peak on the memory's axis.
    pub peak_at: i64,
    /// The position as a person reads it.
    pub peak_label: String,
    /// The training phase the peak falls in (`forward`, `backward`,
    /// `optimizer`...), when the profile tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase: Option<Phase>,
    /// How many separate moments reach `peak_bytes`, when more than one
    /// (a tied peak: `peak_at` is the first, or the last with
    /// `--xprof-compat`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_moments: Option<usize>,
}

impl PeakFigures {
    /// The peak's position as a table cell: its label for a person, the
    /// position itself in CSV (as `peak_at` in JSON).
    pub fn moment(&self) -> crate::report::Cell {
        crate::report::Cell::Figure {
            value: Some(self.peak_at),
            label: self.peak_label.clone(),
        }
    }
}

impl PeakFacts {
    /// The facts of `memory`'s peak (`ties` picks among equal peaks); `None`
    /// for a memory with no points at all.
    pub fn of(memory: &Memory, ties: replay::Ties) -> Option<PeakFacts> {
        let walked = super::peak_walk::walk(memory, ties)?;
        Some(PeakFacts::placed(memory, walked.peak, walked.moments))
    }

    /// The same facts of another point of `memory` (`peak --at`): the
    /// replayed totals at point `index`, as if it were the peak, placed at
    /// `at` (the moment asked for, which may fall after the point's event).
    pub fn at_point(memory: &Memory, index: usize, at: i64) -> Option<PeakFacts> {
        let mut point = replay::point_at(memory, index)?;
        point.at = at;
        let peak = replay::Peak {
            point,
            bytes: point.bytes,
            sample: None,
        };
        Some(PeakFacts::placed(memory, peak, 1))
    }

    /// The facts of `peak` (reached at `moments` separate moments): the
    /// allocator's state there, the memory's header, and where it is — its
    /// label, time, step and phase. One place for both [`PeakFacts::of`]
    /// and [`PeakFacts::at_point`].
    pub(crate) fn placed(memory: &Memory, peak: replay::Peak, moments: usize) -> PeakFacts {
        let point = peak.point;
        let state = AllocatorState::at(memory, peak.sample);
        let mut header = MemoryHeader::of(memory);
        header.capacity_bytes = state.capacity_bytes.or(header.capacity_bytes);
        PeakFacts {
            moments,
            peak,
            state,
            header,
            label: point_label(memory, point.index, point.at),
            time_ps: (memory.axis == Axis::TimePs).then_some(point.at),
            step: memory.step_at(point.at).map(|s| s.id),
            // Point 0 is before the first event: no phase yet.
            phase: (point.index > 0)
                .then(|| memory.phase_at(point.at))
                .flatten(),
        }
    }

    /// The replayed point at the peak.
    pub fn point(&self) -> replay::Point {
        self.peak.point
    }

    /// The figures a report's JSON gives for the peak.
    pub fn figures(&self) -> PeakFigures {
        PeakFigures {
            peak_bytes: self.peak.bytes,
            peak_requested_bytes: self.peak.point.requested,
            buffers: self.peak.point.buffers,
            peak_at: self.peak.point.at,
            peak_label: self.label.clone(),
            peak_phase: self.phase,
            peak_moments: (self.moments > 1).then_some(self.moments),
        }
    }
}
