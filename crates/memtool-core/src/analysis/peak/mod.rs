//! `peak`: the point with the most live bytes, per memory and overall, and
//! what was live there, broken down several ways.

use std::io::Write;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::model::{AllocId, Axis, BeforeRecording, CategorySource, Memory, Names, Profile};
use crate::report::{units, Cell, Report, Table};

use super::gate::{GateResult, Limit as GateLimit};
use super::group::{self, Group, GroupBy, Grouper, DESCRIPTIVE_FIELDS};
use super::program_peak::{program_peak, sorted_by_size};
pub use super::program_peak::{BufferAtPeak, ProgramPeak, XPROF_SMALL_BUFFER_BYTES};
use super::{display_id, replay, MemoryHeader, Options, PeakFacts, PeakFigures, Provenance};

/// `peak`'s tables: the report as text, Markdown and CSV.
mod tables;

/// The JSON schema name and version of `peak`'s document.
pub const SCHEMA: &str = "memtool/peak/v1";

/// The `at_peak` row for bytes the allocator reports in use that no recorded
/// allocation accounts for.
pub const UNEXPLAINED_OP: &str = "<in use by the allocator's count, not in any recorded event>";

/// The op cell of live-at-peak rows whose allocations name no op.
pub const NO_OP: &str = "<no op>";

/// Breakdowns shown for every memory, in this order.
const BREAKDOWNS: [GroupBy; 9] = [
    GroupBy::Stack,
    GroupBy::UserFrame,
    GroupBy::Shape,
    GroupBy::Op,
    GroupBy::Dtype,
    GroupBy::Category,
    GroupBy::Phase,
    GroupBy::Stream,
    GroupBy::CompiledGraph,
];

/// What `peak` reports: per memory, the peak and what was live there.
#[derive(Debug, Serialize)]
pub struct PeakReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The inputs and warnings.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// For a series of snapshots: the snapshot with the largest total over all
    /// memories.
    pub overall: Option<OverallPeak>,
    /// One entry per memory.
    pub memories: Vec<MemoryPeak>,
    /// With `--budget`: the gate's result over every memory's peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateResult>,
    /// `--by`: the tables show the one breakdown asked for, not the rows by
    /// op, shape, dtype and region or a program's buffers.
    #[serde(skip)]
    pub only: Option<GroupBy>,
    /// With `--at`: the moment asked for, as given (`t+25ms`,
    /// `annotation:AdamW.step:end`); each memory's `peak_*` figures and
    /// breakdowns are then those of that moment, not of its peak, and
    /// memories without that moment are left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moment: Option<String>,
}

/// The peak of all memories together, for profiles of several devices.
#[derive(Debug, Serialize)]
pub struct OverallPeak {
    /// The position as a person reads it.
    pub label: String,
    /// Position on the memories' shared axis.
    pub at: i64,
    /// Live bytes of every memory there.
    pub bytes: u64,
}

/// The peak of one memory and what was live there.
#[derive(Debug, Serialize)]
pub struct MemoryPeak {
    /// Which memory.
    #[serde(flatten)]
    pub header: MemoryHeader,
    /// Where the peak is and how high.
    #[serde(flatten)]
    pub peak: PeakFigures,
    /// Picoseconds since the profile start, for memories on a ps time axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_time_ps: Option<i64>,
    /// The step the peak falls in, when the profile marks steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_step: Option<i64>,
    /// The allocator's fragmentation figure at the peak, in [0, 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragmentation_at_peak: Option<f64>,
    /// How long the memory had been recorded at the peak (axis units), the
    /// least age of what was live since before the recording.
    #[serde(skip)]
    pub recorded: Option<i64>,
    /// Everything live at the peak grouped by (op, shape, dtype, region,
    /// step), largest first; empty when allocations carry none of these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub at_peak: Vec<AtPeakRow>,
    /// Breakdowns of the live set at the peak, one per [`GroupBy`]; a
    /// breakdown the profile has no data for (shapes in pprof) is left out.
    pub breakdowns: Vec<Breakdown>,
    /// For a compiled program's memory: the heap timeline and each buffer
    /// live at the peak.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramPeak>,
    /// For a memory whose allocations name two CUDA streams or more: each
    /// stream's own peak and its bytes at the memory's peak (not with
    /// `--at`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<super::streams::StreamPeak>,
    /// With `--budget`: whether the peak fits, and what would have to shrink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetCheck>,
}

/// How a memory's peak compares with a budget.
#[derive(Debug, Serialize)]
pub struct BudgetCheck {
    /// The budget (`--budget`).
    pub budget_bytes: u64,
    /// Whether the peak fits in it.
    pub fits: bool,
    /// Bytes the peak must lose to fit (0 when it fits).
    pub excess_bytes: u64,
    /// Points of the timeline above the budget, and the first and last.
    pub points_over_budget: usize,
    /// The first point above the budget.
    pub first_over_at: Option<i64>,
    /// The first point above the budget as a person reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_over_label: Option<String>,
    /// The last point above the budget.
    pub last_over_at: Option<i64>,
    /// The last point above the budget as a person reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_over_label: Option<String>,
    /// The largest allocations live at the peak, largest first, until
    /// together they cover the excess: what must shrink (or be freed earlier)
    /// for the peak to fit.
    pub shrink: Vec<ShrinkCandidate>,
    /// For a compiled program over the budget: the out-of-memory post-mortem
    /// (`oom`'s, with the budget as the capacity), padding waste included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_mortem: Option<super::oom::PostMortem>,
}

/// One allocation live at the peak that would have to shrink to fit a budget.
#[derive(Debug, Serialize)]
pub struct ShrinkCandidate {
    /// The buffer's name when the profile names it, else its stack.
    pub key: String,
    /// Its bytes.
    pub bytes: u64,
    /// Bytes of this and every larger candidate together.
    pub cumulative_bytes: u64,
}

/// One group of allocations live at the peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AtPeakRow {
    /// The framework op that allocated them.
    pub op: Option<String>,
    /// Their shape.
    pub shape: Option<String>,
    /// Their element type.
    pub dtype: Option<String>,
    /// Their region or category.
    pub region: Option<String>,
    /// The step the allocations were made in (`None`: before the profile
    /// started, or outside every step).
    pub step: Option<i64>,
    /// Bytes the allocator handed out.
    pub bytes: u64,
    /// Bytes the program asked for.
    pub requested_bytes: u64,
    /// How many buffers.
    pub count: u64,
    /// How long the oldest of them had been live at the peak (axis units);
    /// `None` when it was live before the profile started.
    pub oldest_age: Option<i64>,
}

/// The live set at the peak grouped one way.
#[derive(Debug, Serialize)]
pub struct Breakdown {
    /// The grouping.
    pub by: GroupBy,
    /// The groups kept, largest first.
    pub groups: Vec<AgedGroup>,
    /// Groups left out of `groups` ([`Options::keep_groups`]).
    #[serde(skip)]
    pub omitted: usize,
}

/// A group live at the peak and how long its buffers had been live.
#[derive(Debug, Serialize)]
pub struct AgedGroup {
    /// The group and its totals.
    #[serde(flatten)]
    pub group: Group,
    /// How long its oldest buffer had been live at the peak (axis units);
    /// `None` when it was live before the recording started. Absent for
    /// snapshots, whose buffers have no recorded making.
    #[serde(skip_serializing_if = "Age::is_unknown")]
    pub oldest_age: Age,
    /// In a breakdown by category: who named the category (`profiler`: the
    /// file; `inferred`: memtool, by the rules of docs/categories.md;
    /// `user`: `--category`). Absent elsewhere and for `<none>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category_source: Option<CategorySource>,
}

/// How long something had been live at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Age {
    /// For this long (axis units), or since before the recording (`None`).
    Known(Option<i64>),
    /// The memory records no making (a snapshot's live set).
    #[serde(skip)]
    Unknown,
}

impl Age {
    fn is_unknown(&self) -> bool {
        *self == Age::Unknown
    }
}

/// An age as a table cell: readable in the memory's units (`1.930 ms`,
/// `12 events`) in tables, the number in CSV. Live since before the
/// recording (`None`) it is older than the recording up to the point,
/// `recorded` (`> 25.38 ms`).
pub fn age_cell(axis: Axis, age: Option<i64>, recorded: Option<i64>) -> Cell {
    let label = match age {
        None => match recorded {
            Some(recorded) => format!("> {}", age_cell(axis, Some(recorded), None).human()),
            None => "before start".to_string(),
        },
        Some(age) => match axis {
            Axis::TimePs => units::duration(age),
            Axis::TimeUs => units::duration(age.saturating_mul(1_000_000)),
            Axis::EventIndex | Axis::ProgramOrder => format!("{age} events"),
            Axis::Snapshot => format!("{age} snapshots"),
        },
    };
    Cell::Figure { value: age, label }
}

/// Each memory's peak in `profile` and what was live there (no budget, XProf's order off).
pub fn peak(profile: &Profile, options: &Options) -> PeakReport {
    peak_with(profile, options, &PeakSettings::default())
}

/// Choices of the `peak` command beyond [`Options`].
#[derive(Clone, Debug, Default)]
pub struct PeakSettings {
    /// Check each memory's peak against this many bytes.
    pub budget: Option<u64>,
    /// List a program's buffers at the peak the way XProf's Memory Viewer
    /// does: in allocation order, buffers under 16 KiB summed into one row.
    pub xprof_compat: bool,
    /// Only this breakdown of the live set (`--by`); `None`: every one the
    /// profile has data for.
    pub by: Option<GroupBy>,
    /// The live set at this moment rather than at the peak (`--at`), with
    /// its text as given.
    pub at: Option<(super::moment::Moment, String)>,
}

/// [`peak`] with the command's settings.
pub fn peak_with(profile: &Profile, options: &Options, settings: &PeakSettings) -> PeakReport {
    let budget = settings.budget;
    let mut memories = Vec::new();
    let mut grouper = group::Grouper::new(&profile.names, &options.frames);
    for memory in options.selected(profile) {
        let facts = match &settings.at {
            Some((moment, _)) => moment
                .point(memory)
                .and_then(|(index, at)| PeakFacts::at_point(memory, index, at)),
            None => PeakFacts::of(memory, options.ties),
        };
        let Some(facts) = facts else {
            continue;
        };
        let (reported, p) = (facts.peak, facts.point());
        let live = replay::live_at(memory, p.index);
        // The rows add up to the allocator's own figure, so a memory that
        // has one gets them even when its allocations are not described.
        let counted = reported.sample.is_some();
        // XProf's steps where asked for and the memory has them: the peak's
        // step is its event's, and the allocations of that step at the
        // peak are XProf's active ones (the rest are memtool's live set).
        let xprof_step = settings
            .xprof_compat
            .then(|| memory.xprof_step_of_event(p.index.saturating_sub(1)))
            .flatten();
        let rows_of = match xprof_step {
            Some(step) => {
                let made_by = replay::allocation_events(memory, memory.events.len());
                let in_step = |id: &AllocId| {
                    made_by[id.index()].and_then(|e| memory.xprof_step_of_event(e)) == Some(step)
                };
                // XProf lists the stack reservation at its peak as a
                // `stack` row whatever step reserved it; its active
                // allocations are found by address, which the stack has not.
                let is_stack = |id: &AllocId| {
                    profile
                        .names
                        .is_stack_reservation(memory.allocation(*id).site)
                };
                let mut ids: Vec<AllocId> = live
                    .iter()
                    .copied()
                    .filter(|id| !in_step(id) || is_stack(id))
                    .collect();
                ids.extend(
                    replay::xprof_active(memory, p.at, step)
                        .into_iter()
                        .filter(|id| !is_stack(id)),
                );
                ids
            }
            None => live.clone(),
        };
        let mut at_peak = at_peak_rows(
            &mut grouper,
            &profile.names,
            memory,
            &rows_of,
            (p.index, p.at),
            counted,
            xprof_step.is_some(),
        );
        // The allocator counted more than the recorded events explain (events
        // lost, or allocations it made for itself): say so, so the rows add
        // up to the peak.
        let unexplained = match xprof_step {
            Some(_) => reported.bytes.saturating_sub(
                at_peak
                    .iter()
                    .fold(0u64, |sum, r| sum.saturating_add(r.bytes)),
            ),
            None => reported.bytes.saturating_sub(p.bytes),
        };
        if unexplained > 0 && !at_peak.is_empty() {
            at_peak.push(AtPeakRow {
                op: Some(UNEXPLAINED_OP.to_string()),
                shape: None,
                dtype: None,
                region: None,
                step: None,
                bytes: unexplained,
                requested_bytes: unexplained,
                count: 0,
                oldest_age: None,
            });
            at_peak.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        }
        let by_site = group::totals_by_site(memory, &live);
        // Snapshots record what is live, not when it was made.
        let made_at = memory
            .instants
            .is_empty()
            .then(|| replay::allocated_at(memory, p.index));
        let chosen: &[GroupBy] = match &settings.by {
            Some(by) => std::slice::from_ref(by),
            None => &BREAKDOWNS,
        };
        let breakdowns = chosen
            .iter()
            .filter(|&&by| {
                settings.by.is_some()
                    || group::has_values(&profile.names, &by_site, by)
                    || by == GroupBy::Stack
            })
            .map(|&by| {
                let top = grouper.top_groups(&by_site, by, options.keep_groups);
                let oldest = made_at.as_ref().map(|made_at| {
                    let made = live.iter().map(|&id| {
                        let at = made_at.get(id.index()).copied().flatten();
                        (memory.allocation(id).site, at)
                    });
                    grouper.oldest_by_label(made, by)
                });
                let mut groups: Vec<AgedGroup> = top
                    .groups
                    .into_iter()
                    .map(|group| AgedGroup {
                        category_source: (by == GroupBy::Category)
                            .then(|| memory.category_source(&group.key))
                            .flatten(),
                        oldest_age: match &oldest {
                            Some(oldest) => Age::Known(
                                oldest
                                    .get(&group.key)
                                    .copied()
                                    .flatten()
                                    .map(|at| p.at.saturating_sub(at)),
                            ),
                            None => Age::Unknown,
                        },
                        group,
                    })
                    .collect();
                // After every group with bytes: none left out by `--top`.
                if by == GroupBy::Phase && top.omitted == 0 {
                    groups.extend(phases_without_bytes(memory, &groups));
                }
                Breakdown {
                    by,
                    groups,
                    omitted: top.omitted,
                }
            })
            .collect();
        memories.push(MemoryPeak {
            peak: facts.figures(),
            peak_time_ps: facts.time_ps,
            // The peak is the state after its event, the one before `index`.
            peak_step: xprof_step.or(facts.step),
            fragmentation_at_peak: facts.state.fragmentation,
            recorded: memory.recorded_before(p.at),
            at_peak,
            breakdowns,
            program: program_peak(profile, memory, p, &live, settings.xprof_compat),
            streams: match settings.at {
                Some(_) => Vec::new(),
                None => super::streams::stream_peaks(&profile.names, memory, p.index),
            },
            budget: budget
                .map(|b| budget_check(profile, memory, &live, b, reported.bytes, options)),
            header: facts.header,
        });
    }
    PeakReport {
        schema: SCHEMA,
        provenance: Provenance::of(profile),
        overall: overall(profile, options),
        gate: budget.map(|b| budget_gate(&memories, b)),
        only: settings.by,
        moment: settings.at.as_ref().map(|(_, text)| text.clone()),
        memories,
    }
}

/// `--budget` over every memory: fails when some peak exceeds the budget.
fn budget_gate(memories: &[MemoryPeak], budget: u64) -> GateResult {
    let over: Vec<&MemoryPeak> = memories
        .iter()
        .filter(|m| m.budget.as_ref().is_some_and(|b| !b.fits))
        .collect();
    let highest = memories.iter().max_by(|a, b| {
        a.peak
            .peak_bytes
            .cmp(&b.peak.peak_bytes)
            .then(b.header.id.cmp(&a.header.id))
    });
    let limit = GateLimit::Bytes(budget);
    let message = if over.is_empty() {
        match highest {
            Some(m) => format!(
                "budget gate passed: the highest peak, {} at {}, is within the budget {}",
                display_id(&m.header.id),
                units::exact_bytes(m.peak.peak_bytes),
                limit.describe()
            ),
            None => format!(
                "budget gate passed: no memory has a peak to check against the budget {}",
                limit.describe()
            ),
        }
    } else {
        let each: Vec<String> = over
            .iter()
            .map(|m| {
                format!(
                    "{} peaks at {}, {} over",
                    display_id(&m.header.id),
                    units::exact_bytes(m.peak.peak_bytes),
                    units::exact_bytes(m.peak.peak_bytes.saturating_sub(budget))
                )
            })
            .collect();
        format!(
            "budget gate FAILED: {} the budget {}",
            each.join("; "),
            limit.describe()
        )
    };
    GateResult {
        gate: "budget",
        passed: over.is_empty(),
        limit,
        measured_bytes: highest.map_or(0, |m| i64::try_from(m.peak.peak_bytes).unwrap_or(i64::MAX)),
        measured_percent: None,
        failed_memories: over.iter().map(|m| m.header.id.clone()).collect(),
        group: None,
        message,
    }
}

/// Groups the live allocations by (op, shape, dtype, region, step), the
/// fields keyed by `group` (equal keys are equal texts), largest first, ties
/// by those fields in that order (a missing one first).
fn at_peak_rows(
    grouper: &mut Grouper<'_>,
    names: &Names,
    memory: &Memory,
    live: &[AllocId],
    (index, peak_at): (usize, i64),
    always: bool,
    xprof_steps: bool,
) -> Vec<AtPeakRow> {
    let described = always
        || live.iter().any(|&id| {
            let site = names.site_of(memory.allocation(id).site);
            site.op.is_some()
                || site.shape.is_some()
                || site.dtype.is_some()
                || site.category.is_some()
        });
    if !described {
        return Vec::new();
    }
    // XProf's rows include allocations made at the peak's time after it.
    let made_by = replay::allocation_events(
        memory,
        if xprof_steps {
            memory.events.len()
        } else {
            index
        },
    );
    let mut row_of: FxHashMap<([u32; 4], Option<i64>), usize> = FxHashMap::default();
    let mut rows: Vec<AtPeakRow> = Vec::new();
    for &id in live {
        let a = memory.allocation(id);
        let made = made_by.get(id.index()).copied().flatten();
        let at = made.map(|e| memory.events[e].at);
        let step = match (made, xprof_steps) {
            (Some(e), true) => memory.xprof_step_of_event(e),
            _ => at.and_then(|at| memory.step_at(at)).map(|s| s.id),
        };
        let keys = grouper.descriptive_keys(a.site);
        let row = *row_of.entry((keys, step)).or_insert_with(|| {
            let [op, shape, dtype, region] = std::array::from_fn(|i| {
                grouper
                    .field_label(keys[i], DESCRIPTIVE_FIELDS[i])
                    .map(|label| label.to_string())
            });
            rows.push(AtPeakRow {
                op,
                shape,
                dtype,
                region,
                step,
                bytes: 0,
                requested_bytes: 0,
                count: 0,
                oldest_age: at.map(|at| peak_at.saturating_sub(at)),
            });
            rows.len() - 1
        });
        let row = &mut rows[row];
        row.bytes = row.bytes.saturating_add(a.bytes);
        row.requested_bytes = row.requested_bytes.saturating_add(a.requested);
        row.count = row.count.saturating_add(u64::from(a.count));
        row.oldest_age = match (row.oldest_age, at) {
            (Some(age), Some(at)) => Some(age.max(peak_at.saturating_sub(at))),
            _ => None,
        };
    }
    let fields = |r: &AtPeakRow| {
        (
            r.op.clone(),
            r.shape.clone(),
            r.dtype.clone(),
            r.region.clone(),
            r.step,
        )
    };
    rows.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| fields(a).cmp(&fields(b)))
    });
    rows
}

/// Zero rows for the phases the recording has that hold nothing at the
/// peak (in step order): "optimizer 0 B" says the optimizer ran and held
/// nothing then, where a missing row would leave it unsaid.
fn phases_without_bytes(memory: &Memory, groups: &[AgedGroup]) -> Vec<AgedGroup> {
    crate::model::Phase::ALL
        .into_iter()
        .filter(|&phase| memory.phases.iter().any(|span| span.phase == phase))
        .filter(|phase| !groups.iter().any(|g| &*g.group.key == phase.name()))
        .map(|phase| AgedGroup {
            group: Group {
                key: phase.name().into(),
                totals: group::Totals::default(),
            },
            oldest_age: Age::Unknown,
            category_source: None,
        })
        .collect()
}

fn budget_check(
    profile: &Profile,
    memory: &Memory,
    live: &[AllocId],
    budget: u64,
    peak: u64,
    options: &Options,
) -> BudgetCheck {
    let (mut over, mut first, mut last) = (0usize, None, None);
    replay::for_each_point(memory, |point| {
        if point.bytes > budget {
            over += 1;
            first = first.or(Some((point.index, point.at)));
            last = Some((point.index, point.at));
        }
    });
    let label =
        |p: Option<(usize, i64)>| p.map(|(index, at)| super::point_label(memory, index, at));
    let excess_bytes = peak.saturating_sub(budget);
    let mut shrink = Vec::new();
    let mut cumulative_bytes = 0u64;
    for id in sorted_by_size(memory, live) {
        if cumulative_bytes >= excess_bytes {
            break;
        }
        let a = memory.allocation(id);
        cumulative_bytes = cumulative_bytes.saturating_add(a.bytes);
        let named = memory
            .program
            .as_ref()
            .and_then(|p| p.buffer(id))
            .map(|b| profile.names.str(b.name).to_string());
        let key = named
            .unwrap_or_else(|| group::stack_or_op_shape(&profile.names, a.site, &options.frames));
        shrink.push(ShrinkCandidate {
            key,
            bytes: a.bytes,
            cumulative_bytes,
        });
    }
    BudgetCheck {
        budget_bytes: budget,
        fits: excess_bytes == 0,
        excess_bytes,
        points_over_budget: over,
        first_over_at: first.map(|p| p.1),
        first_over_label: label(first),
        last_over_at: last.map(|p| p.1),
        last_over_label: label(last),
        shrink,
        post_mortem: super::oom::program_post_mortem(
            profile,
            memory,
            options,
            budget,
            super::oom::CapacitySource::Given,
        ),
    }
}

/// Sums snapshot memories instant by instant; the largest total wins.
fn overall(profile: &Profile, options: &Options) -> Option<OverallPeak> {
    let snapshots: Vec<_> = options
        .selected(profile)
        .filter(|m| m.axis == Axis::Snapshot)
        .collect();
    let first = snapshots.first()?;
    let mut totals = vec![0u64; first.instants.len()];
    for m in &snapshots {
        replay::for_each_point(m, |p| {
            if let Some(t) = totals.get_mut(p.index) {
                *t = t.saturating_add(p.bytes);
            }
        });
    }
    let (index, &bytes) = totals
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?;
    Some(OverallPeak {
        label: first.instants[index].label.clone(),
        at: first.instants[index].at,
        bytes,
    })
}

impl PeakReport {
    /// Where the live set was taken, as table titles say it: `at peak`, or
    /// with `--at`, `at t+25ms`.
    fn at_words(&self) -> String {
        match &self.moment {
            Some(moment) => format!("at {moment}"),
            None => "at peak".to_string(),
        }
    }

    /// Whether `--budget` was given and some peak exceeds it.
    pub fn over_budget(&self) -> bool {
        self.memories
            .iter()
            .any(|m| m.budget.as_ref().is_some_and(|b| !b.fits))
    }

    /// With `--budget`, what the output opens with: the verdict per
    /// memory, then for each memory over it what must shrink.
    fn budget_tables(&self) -> Vec<Table> {
        let Some(gate) = &self.gate else {
            return Vec::new();
        };
        let checked = self.memories.iter().filter(|m| m.budget.is_some()).count();
        let over = self
            .memories
            .iter()
            .filter(|m| m.budget.as_ref().is_some_and(|b| !b.fits))
            .count();
        let mut verdict = Table::new(
            format!(
                "Budget {}: {}",
                gate.limit.describe(),
                match over {
                    0 => "every peak fits".to_string(),
                    _ if checked == 1 => "the peak is over it".to_string(),
                    _ => format!("{over} of {checked} peaks are over it"),
                }
            ),
            vec!["memory", "peak_bytes", "over_by", "first_over", "last_over"],
        );
        let mut tables = Vec::new();
        for m in &self.memories {
            let Some(budget) = &m.budget else { continue };
            let moment = |at: Option<i64>, label: &Option<String>| match (at, label) {
                (Some(at), Some(label)) => Cell::Figure {
                    value: Some(at),
                    label: label.clone(),
                },
                _ => Cell::Text("n/a".into()),
            };
            verdict.rows.push(vec![
                display_id(&m.header.id).into(),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Bytes(budget.excess_bytes),
                moment(budget.first_over_at, &budget.first_over_label),
                moment(budget.last_over_at, &budget.last_over_label),
            ]);
            if budget.fits {
                continue;
            }
            let mut t = Table::new(
                format!(
                    "Over budget by {} — {}: shrink or free earlier",
                    units::bytes(budget.excess_bytes),
                    display_id(&m.header.id)
                ),
                vec!["buffer", "bytes", "cumulative_bytes"],
            );
            for c in &budget.shrink {
                t.rows.push(vec![
                    c.key.clone().into(),
                    Cell::Bytes(c.bytes),
                    Cell::Bytes(c.cumulative_bytes),
                ]);
            }
            tables.push(t);
            if let Some(pm) = &budget.post_mortem {
                tables.extend(pm.tables());
            }
        }
        tables.insert(0, verdict);
        tables
    }

    fn buffers_table(&self, m: &MemoryPeak, program: &ProgramPeak) -> Table {
        let mut t = Table::ranked(
            format!(
                "Buffers {} — {} ({})",
                self.at_words(),
                display_id(&m.header.id),
                m.peak.peak_label
            ),
            vec![
                "instruction",
                "shape",
                "bytes",
                "unpadded_bytes",
                "category",
                "phase",
                "op_name",
                "source",
            ],
        );
        let text = |s: &Option<String>| Cell::Text(s.clone().unwrap_or_default());
        for b in program.buffers_at_peak.iter() {
            t.rows.push(vec![
                b.instruction.clone().into(),
                text(&b.shape),
                Cell::Bytes(b.bytes),
                Cell::Bytes(b.unpadded_bytes),
                text(&b.category),
                text(&b.phase),
                text(&b.op_name),
                text(&b.source),
            ]);
        }
        t
    }
}
