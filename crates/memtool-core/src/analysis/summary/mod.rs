//! `summary`: per memory, the peak, the end state, and the top stacks at peak.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde::Serialize;

use crate::model::{Memory, PhaseSpan, Profile};
use crate::report::{Cell, Report, Table};

use super::group::{self, Group, GroupBy};
use super::landmarks::{self, Landmark, LandmarkKind};
use super::stages::{self, Stage};
use super::steps::{self, StepStats};
use super::{
    display_id, point_label, replay, MemoryHeader, Options, PeakFacts, PeakFigures, Provenance,
};

/// The JSON schema name and version of `summary`'s document.
pub const SCHEMA: &str = "memtool/summary/v1";

/// What `summary` reports: per memory, the peak, the end state and the top stacks at the peak.
#[derive(Debug, Serialize)]
pub struct SummaryReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The inputs and warnings.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// Out-of-memory post-mortems (see `oom`), first because an OOM is why
    /// such a profile is read; absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oom: Vec<super::oom::PostMortem>,
    /// One entry per memory.
    pub memories: Vec<MemorySummary>,
    /// `--stages`: the tables and CSV are the annotation stages only (the
    /// JSON is the whole summary either way).
    #[serde(skip)]
    pub stages_only: bool,
}

/// The summary of one memory.
#[derive(Debug, Serialize)]
pub struct MemorySummary {
    /// Which memory.
    #[serde(flatten)]
    pub header: MemoryHeader,
    /// Where the peak is and how high.
    #[serde(flatten)]
    pub peak: PeakFigures,
    /// Live bytes at the end of the profile.
    pub final_bytes: u64,
    /// Live buffers at the end of the profile.
    pub final_buffers: u64,
    /// Allocation events of an event stream; allocations of snapshots.
    pub allocations: usize,
    /// Events of the memory's stream (0 for snapshots).
    pub events: usize,
    /// Picoseconds since the profile start, for memories on a ps time axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_time_ps: Option<i64>,
    /// The most ever in use, including the allocator's own high-water mark
    /// (which can be higher than any point the profile saw).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_peak_bytes: Option<u64>,
    /// The allocator's fragmentation figure at the peak, in [0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragmentation_at_peak: Option<f64>,
    /// Free events of an event stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deallocations: Option<usize>,
    /// Bytes in use after the last event of an event stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_bytes_at_end: Option<u64>,
    /// Allocations live after the last event of an event stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_allocations_at_end: Option<u64>,
    /// One row per step, for memories whose profile marks steps.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStats>,
    /// One row per range the program annotated (`record_function`, an
    /// optimizer's step): live bytes at its START and END, and what made
    /// the difference; absent when the profile records none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotation_stages: Vec<Stage>,
    /// For a memory whose allocations name two CUDA streams or more: each
    /// stream's own peak and its bytes at the memory's peak.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<super::streams::StreamPeak>,
    /// Whether the steps are the forward → backward cycles the phases show,
    /// the file marking none (`ProfilerStep#N`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub steps_from_phases: bool,
    /// The training phases on the memory's axis, in order (each run of
    /// allocations made in one phase), for memories whose allocations name
    /// them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseSpan>,
    /// What the timeline shows, named: steps and their phases, the largest
    /// allocations, spikes, cliffs, recomputation waves, the optimizer
    /// state's creation and the constant floor ([`super::landmarks`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub landmarks: Vec<Landmark>,
    /// Per kind, the landmarks of steps left out of `landmarks` (a memory
    /// of more than [`landmarks::KEPT_STEPS`] steps has those of that many
    /// steps); absent when none are.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub landmarks_omitted: BTreeMap<LandmarkKind, usize>,
    /// Events per kind as the file records them (PyTorch trace actions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub events_by_action: BTreeMap<String, u64>,
    /// Memory the allocator held from the device at the end, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// Memory handed out at the end as the allocator reports it (PyTorch:
    /// live blocks' requested sizes), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// One row per snapshot, for memories made of snapshots.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotRow>,
    /// Live bytes at the peak by call stack, largest first.
    pub top_stacks: Vec<Group>,
    /// Stack groups left out of `top_stacks` ([`Options::keep_groups`]).
    #[serde(skip)]
    pub omitted_stacks: usize,
    /// For a compiled program's memory: what its compiler allocated.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramSizes>,
}

/// The buffer allocations of a compiled program's memory space, by kind.
#[derive(Debug, Serialize)]
pub struct ProgramSizes {
    /// Allocations holding the program's parameters.
    pub parameter_bytes: u64,
    /// May be live after the program ends; can overlap parameters.
    pub output_bytes: u64,
    /// Allocations reused within the program (the simulated heap).
    pub temporary_bytes: u64,
    /// Allocations holding constants.
    pub constant_bytes: u64,
    /// Per-thread scratch of kernels (not device memory, not in the total).
    pub thread_local_bytes: u64,
    /// All allocations of the space together, but thread-local ones.
    pub total_allocation_bytes: u64,
}

/// One snapshot of a memory made of snapshots.
#[derive(Debug, Serialize)]
pub struct SnapshotRow {
    /// The snapshot's name (its file name).
    pub label: String,
    /// Its position (the snapshot number).
    pub at: i64,
    /// Live bytes in it.
    pub bytes: u64,
    /// Live buffers in it.
    pub buffers: u64,
}

/// The summary of each memory of `profile`.
pub fn summarize(profile: &Profile, options: &Options) -> SummaryReport {
    let selected: Vec<&Memory> = options.selected(profile).collect();
    let jobs = crate::parallel::threads(options.jobs);
    let memories = if jobs > 1 && selected.len() > 1 {
        // The memories' summaries are independent (a pprof profile's
        // devices): a run of neighbouring memories on each of `jobs`
        // threads, each with a grouper of its own — its labels are the
        // profile's names', the same text whichever thread makes them —
        // joined in memory order. Each memory's landmarks then stay on its
        // thread.
        let one_thread = Options {
            jobs: 1,
            ..options.clone()
        };
        let runs: Vec<&[&Memory]> = selected.chunks(selected.len().div_ceil(jobs)).collect();
        crate::parallel::map_bounded(runs, jobs, |run| {
            let mut grouper = group::Grouper::new(&profile.names, &options.frames);
            run.iter()
                .filter_map(|memory| summarize_memory(profile, memory, &mut grouper, &one_thread))
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect()
    } else {
        let mut grouper = group::Grouper::new(&profile.names, &options.frames);
        selected
            .into_iter()
            .filter_map(|memory| summarize_memory(profile, memory, &mut grouper, options))
            .collect()
    };
    SummaryReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        oom: super::oom_report::post_mortems(profile, options),
        memories,
        stages_only: false,
    }
}

/// The summary of `memory` of `profile`, none for a memory without a peak
/// (nothing recorded).
///
/// With `options.jobs` above 1 its four independent parts (see [`Part`])
/// are taken in turn by a pool of up to `jobs` threads: they read the same
/// memory and nothing of each other. Which is longest depends on the input
/// (the landmarks of an XSpace; a snapshot's stages and per-step figures),
/// so a fixed pairing left a core idle for a third of a snapshot's
/// analysis. What they hold is then held at once: +16 MB of peak RSS at
/// 10^6 snapshot entries, none with one job. A memory without events stays
/// on one thread. (Several memories are summarised on threads with `jobs`
/// 1 each.)
pub(crate) fn summarize_memory(
    profile: &Profile,
    memory: &Memory,
    grouper: &mut group::Grouper,
    options: &Options,
) -> Option<MemorySummary> {
    let find_landmarks = || {
        crate::timings::time("landmarks", || {
            landmarks::find_on(&profile.names, memory, &options.frames, options.jobs)
        })
    };
    let per_step = || crate::timings::time("per-step figures", || steps::per_step(memory));
    let find_stages = || {
        crate::timings::time("annotation stages", || {
            stages::stages(memory, &profile.names, &options.frames)
        })
    };
    let threads = crate::parallel::threads(options.jobs);
    let (found, steps, figures, stages) = if threads > 1
        && !memory.events.is_empty()
        && !replay::uses_instants(memory)
    {
        let grouper = std::sync::Mutex::new(grouper);
        let depth = crate::timings::depth();
        let (mut found, mut steps, mut figures, mut stages) = (None, None, None, None);
        let parts = [Part::Landmarks, Part::Figures, Part::PerStep, Part::Stages];
        let done = crate::parallel::map_bounded(parts.to_vec(), threads, |part| {
            crate::timings::nested_at(depth, || match part {
                Part::Landmarks => Done::Landmarks(find_landmarks()),
                Part::Figures => {
                    let mut grouper = grouper.lock().unwrap_or_else(|e| e.into_inner());
                    Done::Figures(Figures::of(profile, memory, &mut grouper, options).map(Box::new))
                }
                Part::PerStep => Done::PerStep(per_step()),
                Part::Stages => Done::Stages(find_stages()),
            })
        });
        for d in done {
            match d {
                Done::Landmarks(f) => found = Some(f),
                Done::Figures(f) => figures = Some(f),
                Done::PerStep(s) => steps = Some(s),
                Done::Stages(s) => stages = Some(s),
            }
        }
        (
            found.unwrap_or_default(),
            steps.unwrap_or_default(),
            *figures.flatten()?,
            stages.unwrap_or_default(),
        )
    } else {
        let figures = Figures::of(profile, memory, grouper, options)?;
        (find_landmarks(), per_step(), figures, find_stages())
    };
    let Figures {
        facts,
        last,
        counts,
        end_in_use,
        lifetime_peak,
        reserved_bytes,
        snapshots,
        stacks,
        layout,
        streams,
    } = figures;
    Some(MemorySummary {
        peak: facts.figures(),
        final_bytes: last.bytes,
        final_buffers: last.buffers,
        allocations: counts.map_or(memory.allocations.len(), |c| c.0),
        events: memory.events.len(),
        peak_time_ps: facts.time_ps,
        lifetime_peak_bytes: lifetime_peak,
        fragmentation_at_peak: facts.state.fragmentation,
        deallocations: counts.map(|c| c.1),
        live_bytes_at_end: counts.map(|_| end_in_use),
        live_allocations_at_end: counts.map(|_| last.buffers),
        steps,
        annotation_stages: stages,
        streams,
        steps_from_phases: memory.steps_from_phases,
        phases: memory.phases.clone(),
        landmarks: found.landmarks,
        landmarks_omitted: found.omitted,
        events_by_action: memory.recorded_events.clone(),
        reserved_bytes: layout.as_ref().map(|l| l.reserved_bytes).or(reserved_bytes),
        allocated_bytes: layout.as_ref().map(|l| l.allocated_bytes).or_else(|| {
            (0..memory.allocator_samples.len())
                .rev()
                .find_map(|i| memory.allocator_samples.allocated_bytes(i))
        }),
        snapshots,
        top_stacks: stacks.groups,
        omitted_stacks: stacks.omitted,
        header: facts.header,
        program: memory.program.as_ref().map(|p| ProgramSizes {
            parameter_bytes: p.parameter_bytes,
            output_bytes: p.output_bytes,
            temporary_bytes: p.temporary_bytes,
            constant_bytes: p.constant_bytes,
            thread_local_bytes: p.thread_local_bytes,
            total_allocation_bytes: p.total_allocation_bytes,
        }),
    })
}

/// The parts of a memory's summary that [`summarize_memory`] finds apart,
/// in the order its threads take them: the landmarks, the rest of the
/// figures (the peak, the live set, the stacks), the per-step figures and
/// the annotation stages; the longest first where that is known.
#[derive(Clone, Copy)]
enum Part {
    Landmarks,
    Figures,
    PerStep,
    Stages,
}

/// A [`Part`], found.
enum Done {
    Landmarks(landmarks::Found),
    /// Boxed: the figures are a few hundred bytes, the others a vector.
    Figures(Option<Box<Figures>>),
    PerStep(Vec<StepStats>),
    Stages(Vec<Stage>),
}

/// A memory's summary but its landmarks, per-step figures and annotation
/// stages (found apart with `jobs` above 1, see [`summarize_memory`]).
struct Figures {
    facts: PeakFacts,
    last: replay::Point,
    counts: Option<(usize, usize)>,
    end_in_use: u64,
    lifetime_peak: Option<u64>,
    /// The allocator's last reserved figure (where the segments give none).
    reserved_bytes: Option<u64>,
    snapshots: Vec<SnapshotRow>,
    stacks: group::TopGroups,
    layout: Option<super::segments::SegmentLayout>,
    streams: Vec<super::streams::StreamPeak>,
}

impl Figures {
    fn of(
        profile: &Profile,
        memory: &Memory,
        grouper: &mut group::Grouper,
        options: &Options,
    ) -> Option<Figures> {
        let replayed = crate::timings::span("replay: peak and live set");
        // The peak, its moments and the last reserved figure in one walk
        // over the samples (`PeakFacts::of` less the reserved figure).
        let walked = super::peak_walk::walk(memory, options.ties)?;
        let facts = PeakFacts::placed(memory, walked.peak, walked.moments);
        let peak = facts.point();
        let (live, last) = replay::live_at_and_last(memory, peak.index);
        drop(replayed);
        let last = last.unwrap_or(peak);
        let ends = crate::timings::span("event counts and end state");
        let counts = replay::event_counts(memory);
        let reports_totals = !memory.allocator_samples.is_empty();
        let end_in_use = memory
            .allocator_samples
            .last()
            .filter(|_| replay::samples_every_event(memory))
            .and_then(|s| s.allocated_bytes())
            .unwrap_or(last.bytes);
        let lifetime_peak = (reports_totals || memory.allocator_peak_bytes.is_some()).then(|| {
            memory
                .allocator_peak_bytes
                .unwrap_or(0)
                .max(facts.peak.bytes)
        });
        let mut snapshots = Vec::new();
        if replay::uses_instants(memory) {
            replay::for_each_point(memory, |p| {
                snapshots.push(SnapshotRow {
                    label: point_label(memory, p.index, p.at),
                    at: p.at,
                    bytes: p.bytes,
                    buffers: p.buffers,
                })
            });
        }
        // The allocator's last reserved figure, where the segments give
        // none: found by the walk above where it walked the samples (a scan
        // from the end of samples that have none, as XSpace's, decoded
        // them all again).
        let layout = super::segments::layout(&profile.names, memory);
        let reserved_bytes = if layout.is_some() {
            None
        } else {
            walked.last_reserved.unwrap_or_else(|| {
                (0..memory.allocator_samples.len())
                    .rev()
                    .find_map(|i| memory.allocator_samples.reserved_bytes(i))
            })
        };
        drop(ends);
        let by_site =
            crate::timings::time("totals by site", || group::totals_by_site(memory, &live));
        let stacks = grouper.top_groups(&by_site, GroupBy::Stack, options.keep_groups);
        let streams = crate::timings::time("stream peaks", || {
            super::streams::stream_peaks(&profile.names, memory, facts.peak.point.index)
        });
        Some(Figures {
            facts,
            last,
            counts,
            end_in_use,
            lifetime_peak,
            reserved_bytes,
            snapshots,
            stacks,
            layout,
            streams,
        })
    }
}

mod tables;

#[cfg(test)]
mod tests;
