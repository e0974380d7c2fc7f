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

impl SummaryReport {
    /// The memories biggest peak first (ties by id), as the tables of
    /// every memory list them, like the Memories table.
    /// Per memory, whether the memories table folds it into its `+N more`
    /// row (past the [`super::LISTED_MEMORIES`] largest).
    fn folded(&self) -> Vec<bool> {
        let mut folded = vec![false; self.memories.len()];
        for &i in self.order().listed().1 {
            folded[i] = true;
        }
        folded
    }

    /// The memories biggest peak first, past the [`super::LISTED_MEMORIES`]
    /// largest (trivial ones aside) left out: the per-memory tables list
    /// what the memories table lists.
    fn biggest_first(&self) -> Vec<&MemorySummary> {
        let mut all: Vec<&MemorySummary> = self
            .memories
            .iter()
            .zip(self.folded())
            .filter(|(_, f)| !f)
            .map(|(m, _)| m)
            .collect();
        all.sort_by(|a, b| {
            b.peak
                .peak_bytes
                .cmp(&a.peak.peak_bytes)
                .then_with(|| a.header.id.cmp(&b.header.id))
        });
        all
    }

    /// The memories biggest peak first, those trivial beside the largest
    /// apart ([`super::order_by_peak`]).
    fn order(&self) -> super::PeakOrder {
        let peaks: Vec<(&str, u64)> = self
            .memories
            .iter()
            .map(|m| (m.header.id.as_str(), m.peak.peak_bytes))
            .collect();
        super::order_by_peak(&peaks)
    }

    /// One row per memory, biggest peak first; with `fold`, the memories
    /// trivial beside the largest are one row (CSV keeps every row).
    fn memories_table(&self, fold: bool) -> Table {
        // A memory timeline's rows are categories; CSV keeps its columns'
        // names whatever the file.
        let headers = self.memories.iter().map(|m| &m.header);
        let (counted, final_counted) = if fold {
            (
                MemoryHeader::count_column(headers.clone(), ["buffers", "categories"]),
                MemoryHeader::count_column(headers, ["final_buffers", "final_categories"]),
            )
        } else {
            ("buffers", "final_buffers")
        };
        let mut t = Table::new(
            "Memories",
            vec![
                "memory",
                "kind",
                "peak_bytes",
                counted,
                "peak_at",
                "final_bytes",
                final_counted,
            ],
        );
        let order = self.order();
        let (listed, beyond) = if fold {
            order.listed()
        } else {
            (order.main.as_slice(), &[][..])
        };
        let fold_trivial = fold && order.trivial.len() > 1;
        let row = |m: &MemorySummary| -> Vec<Cell> {
            vec![
                display_id(&m.header.id).into(),
                m.header.kind.name().into(),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Count(m.peak.buffers),
                m.peak.moment(),
                Cell::Bytes(m.final_bytes),
                Cell::Count(m.final_buffers),
            ]
        };
        for &i in listed {
            t.rows.push(row(&self.memories[i]));
        }
        if !beyond.is_empty() {
            let sum = |f: fn(&MemorySummary) -> u64| {
                crate::analysis::beyond_total(&self.memories, beyond, f)
            };
            t.rows.push(vec![
                crate::analysis::beyond_label(beyond.len()).into(),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.peak.peak_bytes)),
                Cell::Count(sum(|m| m.peak.buffers)),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.final_bytes)),
                Cell::Count(sum(|m| m.final_buffers)),
            ]);
            t.notes.push(super::beyond_note(beyond.len()));
        }
        if fold_trivial {
            let sum = |f: fn(&MemorySummary) -> u64| {
                crate::analysis::beyond_total(&self.memories, &order.trivial, f)
            };
            t.rows.push(vec![
                crate::analysis::trivial_label(order.trivial.len()).into(),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.peak.peak_bytes)),
                Cell::Count(sum(|m| m.peak.buffers)),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.final_bytes)),
                Cell::Count(sum(|m| m.final_buffers)),
            ]);
        } else {
            for &i in &order.trivial {
                t.rows.push(row(&self.memories[i]));
            }
        }
        t
    }
}

impl SummaryReport {
    /// Compiled programs, one row per module and memory space, biggest peak
    /// first.
    fn programs_table(&self) -> Option<Table> {
        let mut programs: Vec<(&MemorySummary, &ProgramSizes)> = self
            .memories
            .iter()
            .filter_map(|m| m.program.as_ref().map(|p| (m, p)))
            .collect();
        if programs.is_empty() {
            return None;
        }
        programs.sort_by(|a, b| {
            b.0.peak
                .peak_bytes
                .cmp(&a.0.peak.peak_bytes)
                .then_with(|| a.0.header.id.cmp(&b.0.header.id))
        });
        let mut t = Table::new(
            "Compiled programs (biggest peak first)",
            vec![
                "module",
                "memory_space",
                "peak_bytes",
                "parameter_bytes",
                "output_bytes",
                "temporary_bytes",
                "total_allocation_bytes",
            ],
        );
        for (m, p) in programs {
            t.rows.push(vec![
                m.header.module.clone().unwrap_or_default().into(),
                Cell::Int(m.header.memory_space.unwrap_or(0)),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Bytes(p.parameter_bytes),
                Cell::Bytes(p.output_bytes),
                Cell::Bytes(p.temporary_bytes),
                Cell::Bytes(p.total_allocation_bytes),
            ]);
        }
        Some(t)
    }
}

impl Report for SummaryReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        self.tables_shown(None)
    }

    /// The steps tables hold the rows `top` shows (at least one, so a table
    /// shown empty stays a table of rows left out), the others counted in
    /// `omitted`: 660,000 XSpace events have 30,000 steps, whose rows were
    /// made, and freed, for the ten a terminal shows.
    fn tables_shown(&self, top: Option<usize>) -> Vec<Table> {
        if self.stages_only {
            return self
                .biggest_first()
                .into_iter()
                .filter(|m| !m.annotation_stages.is_empty())
                .flat_map(|m| stages::tables(&m.header.id, &m.annotation_stages))
                .collect();
        }
        let mut tables: Vec<Table> = self
            .oom
            .iter()
            .flat_map(super::oom::PostMortem::tables)
            .collect();
        tables.push(self.memories_table(true));
        if let Some(t) = self.programs_table() {
            tables.push(t);
        }
        let series = self.memories.iter().any(|m| m.snapshots.len() > 1);
        if series {
            let mut t = Table::new("Snapshots", vec!["snapshot", "memory", "bytes", "buffers"]);
            for (m, _) in self.memories.iter().zip(self.folded()).filter(|(_, f)| !f) {
                for s in &m.snapshots {
                    t.rows.push(vec![
                        s.label.clone().into(),
                        display_id(&m.header.id).into(),
                        Cell::Bytes(s.bytes),
                        Cell::Count(s.buffers),
                    ]);
                }
            }
            tables.push(t);
        }
        if self
            .memories
            .iter()
            .any(|m| m.reserved_bytes.is_some() || !m.events_by_action.is_empty())
        {
            let mut t = Table::new(
                "Allocator (as the profile records it)",
                vec!["memory", "reserved", "allocated", "events by kind"],
            );
            for m in self.biggest_first() {
                let events: Vec<String> = m
                    .events_by_action
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let bytes = |b: Option<u64>| b.map_or(Cell::Empty, Cell::Bytes);
                t.rows.push(vec![
                    display_id(&m.header.id).into(),
                    bytes(m.reserved_bytes),
                    bytes(m.allocated_bytes),
                    Cell::Text(events.join(", ")),
                ]);
            }
            tables.push(t);
        }
        let allocators: Vec<&MemorySummary> = self
            .biggest_first()
            .into_iter()
            // A compiled program's memory space has events (its heap
            // simulator trace) but no allocator: its figures are in the
            // programs table.
            .filter(|m| m.program.is_none())
            .filter(|m| m.lifetime_peak_bytes.is_some() || m.deallocations.is_some())
            .collect();
        if !allocators.is_empty() {
            let mut t = Table::new(
                "Allocators",
                vec![
                    "memory",
                    "peak_bytes",
                    "lifetime_peak",
                    "capacity",
                    "fragmentation_at_peak",
                    "allocations",
                    "frees",
                    "live_at_end",
                ],
            );
            for m in allocators {
                t.rows.push(vec![
                    display_id(&m.header.id).into(),
                    Cell::Bytes(m.peak.peak_bytes),
                    m.lifetime_peak_bytes
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                    m.header
                        .capacity_bytes
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                    Cell::Fraction(m.fragmentation_at_peak),
                    Cell::Count(m.allocations as u64),
                    Cell::Count(m.deallocations.unwrap_or(0) as u64),
                    m.live_bytes_at_end
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                ]);
            }
            tables.push(t);
        }
        for m in self
            .biggest_first()
            .into_iter()
            .filter(|m| !m.steps.is_empty())
        {
            let mut t = Table::ranked(
                if m.steps_from_phases {
                    format!(
                        "Steps — {} (the file marks none: each is a forward → backward cycle of the phases)",
                        display_id(&m.header.id)
                    )
                } else {
                    format!("Steps — {}", display_id(&m.header.id))
                },
                vec![
                    "step",
                    "peak_bytes",
                    "allocations",
                    "frees",
                    "allocated",
                    "freed",
                    "in_use_at_end",
                ],
            );
            let made = top.map_or(m.steps.len(), |top| top.max(1).min(m.steps.len()));
            t.omitted = m.steps.len() - made;
            for s in &m.steps[..made] {
                t.rows.push(vec![
                    Cell::Int(s.step),
                    Cell::Bytes(s.peak_bytes),
                    Cell::Count(s.allocations),
                    Cell::Count(s.deallocations),
                    Cell::Bytes(s.allocated_bytes),
                    Cell::Bytes(s.freed_bytes),
                    Cell::Bytes(s.end_bytes),
                ]);
            }
            tables.push(t);
        }
        for m in self
            .biggest_first()
            .into_iter()
            .filter(|m| !m.annotation_stages.is_empty())
        {
            tables.extend(stages::tables(&m.header.id, &m.annotation_stages));
        }
        for m in self.biggest_first() {
            tables.extend(super::streams::streams_table(&m.header.id, &m.streams));
        }
        // As every per-memory table: the memories the Memories table lists.
        for m in self.order().listed().0.iter().map(|&i| &self.memories[i]) {
            if let Some(t) = timeline_table(m) {
                tables.push(t);
            }
        }
        let exes: Vec<_> = self
            .provenance
            .inputs
            .iter()
            .filter_map(|i| i.executables.map(|e| (i, e)))
            .collect();
        if !exes.is_empty() {
            let mut t = Table::new(
                "Executables (compiled programs, not counted in buffers)",
                vec!["input", "count", "bytes"],
            );
            for (input, e) in exes {
                t.rows.push(vec![
                    input.path.clone().into(),
                    Cell::Count(e.count),
                    Cell::Int(e.bytes),
                ]);
            }
            tables.push(t);
        }
        // Biggest peak first; a trivial memory's stacks say nothing.
        for m in self.order().listed().0.iter().map(|&i| &self.memories[i]) {
            if m.omitted_stacks == 0
                && super::group::says_nothing(m.top_stacks.iter().map(|g| &*g.key))
            {
                continue;
            }
            let mut t = Table::ranked(
                format!(
                    "Top stacks at peak — {} ({})",
                    display_id(&m.header.id),
                    m.peak.peak_label
                ),
                vec!["stack", "bytes", "buffers"],
            );
            for g in m.top_stacks.iter() {
                t.rows.push(vec![
                    (&*g.key).into(),
                    Cell::Bytes(g.totals.bytes),
                    Cell::Count(g.totals.count),
                ]);
            }
            t.omitted = m.omitted_stacks;
            tables.push(t);
        }
        tables
    }

    fn csv_table(&self) -> Table {
        if self.stages_only {
            return stages::csv_table(
                self.memories
                    .iter()
                    .map(|m| (m.header.id.as_str(), m.annotation_stages.as_slice())),
            );
        }
        self.memories_table(false)
    }

    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.provenance.warnings)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.oom.iter().map(super::oom::PostMortem::note).collect();
        let trivial: Vec<&str> = self
            .order()
            .trivial
            .iter()
            .map(|&i| self.memories[i].header.id.as_str())
            .collect();
        notes.extend(super::trivial_note(&trivial));
        if let Some(biggest) = self.memories.iter().max_by_key(|m| m.peak.peak_bytes) {
            if self.memories.len() > 1 {
                notes.push(format!(
                    "largest peak: {} with {} at {}",
                    display_id(&biggest.header.id),
                    crate::report::units::bytes(biggest.peak.peak_bytes),
                    biggest.peak.peak_label
                ));
            }
        }
        notes
    }
}

/// "What the timeline shows": a few lines of a memory's landmarks — its
/// steps with their spans, the largest allocation, the highest spike, the
/// first step's cliffs, recomputation waves, the optimizer state and the
/// floor. JSON has them all (of a memory of many
/// steps, those of the steps `landmarks` chose, and counts of the rest).
fn timeline_table(m: &MemorySummary) -> Option<Table> {
    if m.landmarks.is_empty() {
        return None;
    }
    let mut t = Table::new(
        format!("What the timeline shows — {}", display_id(&m.header.id)),
        vec!["landmark", "at", "bytes", "what"],
    );
    let of = |kind: LandmarkKind| m.landmarks.iter().filter(move |l| l.kind == kind);
    let first_step = of(LandmarkKind::Step).next().and_then(|l| l.step);
    let steps: Vec<&Landmark> = of(LandmarkKind::Step).collect();
    let mut rows: Vec<&Landmark> = Vec::new();
    rows.extend(steps.iter().take(LISTED_STEPS));
    rows.extend(of(LandmarkKind::LargestAllocation).take(1));
    rows.extend(of(LandmarkKind::Spike).max_by_key(|l| (l.bytes, std::cmp::Reverse(l.start))));
    rows.extend(of(LandmarkKind::Cliff).filter(|l| l.step == first_step));
    let waves: Vec<&Landmark> = of(LandmarkKind::Recompute)
        .filter(|l| l.step == first_step)
        .collect();
    rows.extend(of(LandmarkKind::OptimizerState));
    rows.extend(of(LandmarkKind::Floor));
    // Each step's spans, gathered in one pass: a profile of 30,000 steps
    // must not scan every landmark once per step.
    let mut spans_of: HashMap<Option<i64>, Vec<&Landmark>> = HashMap::new();
    if !steps.is_empty() {
        for l in m.landmarks.iter().filter(|l| l.kind.is_phase()) {
            spans_of.entry(l.step).or_default().push(l);
        }
    }
    let listed_steps = steps.len().min(LISTED_STEPS);
    // Steps whose landmarks were left out (a memory of many steps) are
    // among the rest; their landmarks kept the first steps after the
    // listed ones, the last and the highest, which the row names.
    let omitted_steps = m
        .landmarks_omitted
        .get(&LandmarkKind::Step)
        .copied()
        .unwrap_or(0);
    for (i, l) in rows.into_iter().enumerate() {
        if i == listed_steps && steps.len() > LISTED_STEPS {
            t.rows
                .push(more_steps_row(&steps[LISTED_STEPS..], omitted_steps));
        }
        // The label's name before its first colon is the row's name, the
        // rest what it says (the `what` column has the room).
        let (name, what) = match l.kind {
            LandmarkKind::Step => (
                format!("step {}", l.step.unwrap_or_default()),
                step_phases(spans_of.get(&l.step).map(Vec::as_slice).unwrap_or_default()),
            ),
            LandmarkKind::LargestAllocation => ("largest allocation".into(), l.label.clone()),
            _ => match l.label.split_once(": ") {
                Some((name, what)) => (name.to_string(), what.to_string()),
                None => (l.kind.name().replace('_', " "), l.label.clone()),
            },
        };
        t.rows.push(landmark_row(l, name, what));
    }
    if let (Some(first), Some(step)) = (waves.first(), first_step) {
        let bytes: u64 = waves.iter().map(|w| w.bytes).sum();
        t.rows.push(landmark_row(
            first,
            format!("recompute in step {step}"),
            format!(
                "{} waves in the backward pass (activation checkpointing)",
                waves.len()
            ),
        ));
        if let Some(row) = t.rows.last_mut() {
            row[2] = Cell::Bytes(bytes);
        }
    }
    Some(t)
}

fn landmark_row(l: &Landmark, name: String, what: String) -> Vec<Cell> {
    vec![
        name.into(),
        Cell::Figure {
            value: Some(l.start),
            label: l.start_label.clone(),
        },
        Cell::Bytes(l.bytes),
        Cell::Text(what),
    ]
}

/// A step's spans in order, each with where it starts: the position
/// without the step and phase its label adds in parentheses (`t+21.11 ms`,
/// not `t+21.11 ms (step 0, loss)`): the row is the step, the word before
/// it the phase.
fn step_phases(spans: &[&Landmark]) -> String {
    let mut spans = spans.to_vec();
    spans.sort_by_key(|l| l.start);
    let parts: Vec<String> = spans
        .iter()
        .map(|l| {
            let at = l.start_label.split(" (").next().unwrap_or_default();
            format!("{} {at}", l.kind.name())
        })
        .collect();
    parts.join(", ")
}

/// Steps listed one per row in "What the timeline shows"; the rest are one
/// row (the table is a few lines; JSON's `landmarks[]` lists every step of
/// up to [`landmarks::KEPT_STEPS`]).
const LISTED_STEPS: usize = 5;

/// The row standing for the steps past [`LISTED_STEPS`]: the highest of
/// them (where it starts, its bytes) and the range they cover. `rest` are
/// those with landmarks, `omitted` how many more there are without (the
/// landmarks keep the first of the rest, the last and the highest).
fn more_steps_row(rest: &[&Landmark], omitted: usize) -> Vec<Cell> {
    let (first, last) = (rest[0], rest[rest.len() - 1]);
    let highest = rest
        .iter()
        .copied()
        .max_by_key(|l| (l.bytes, std::cmp::Reverse(l.start)))
        .unwrap_or(first);
    let row = landmark_row(
        highest,
        format!("+{} more steps", rest.len() + omitted),
        format!(
            "steps {}–{}, the highest shown",
            first.step.unwrap_or_default(),
            last.step.unwrap_or_default(),
        ),
    );
    row
}

#[cfg(test)]
mod tests;
