//! The analyses behind each command. Each takes a [`Profile`] (or two) and
//! returns a report value that the exporters in [`crate::report`] can write.
//! Analyses see only the model: no format-specific code lives here.

pub mod annotation_group;
pub mod category;
pub(crate) mod consistency;
pub mod diff;
pub mod export;
pub mod failure_state;
pub mod frag;
pub mod frames;
pub mod gate;
pub mod group;
pub mod group_gate;
pub mod landmarks;
pub mod leaks;
pub mod moment;
pub mod oom;
pub mod oom_report;
pub mod peak;
pub mod peak_facts;
pub mod peak_walk;
pub mod program_match;
pub mod program_peak;
pub mod ranks;
pub mod replay;
pub mod segments;
pub mod series;
pub(crate) mod series_order;
mod setting_advice;
pub mod stages;
pub mod steps;
pub mod streams;
pub mod summary;
pub mod summary_parts;
pub mod xla_report;
pub mod xla_report_facts;

use serde::Serialize;

use crate::model::{Axis, InputInfo, Memory, MemoryKind, Profile, Warning};
pub use frames::FrameFilter;
pub use group::GroupBy;
pub use peak_facts::{PeakFacts, PeakFigures};

/// Choices shared by the analyses.
#[derive(Clone, Debug)]
pub struct Options {
    /// Which frames of a stack are shown and which is the user's.
    pub frames: FrameFilter,
    /// Rows per table in terminal and Markdown output (JSON and CSV keep all).
    pub top: usize,
    /// Only these memories (by id); empty for all.
    pub memories: Vec<String>,
    /// Which of several equal peaks to report.
    pub ties: replay::Ties,
    /// Groups of each breakdown kept in the report (`None`: all; JSON and
    /// CSV want all). Output that shows `top` rows sets it to `top`: the
    /// rest are counted, not labelled.
    pub keep_groups: Option<usize>,
    /// The device's capacity (`--capacity`): out-of-memory post-mortems
    /// weigh a failure against it, and compiled programs whose peak exceeds
    /// it get one. `None`: what the profile records, if anything.
    pub capacity: Option<u64>,
    /// Threads one analysis may use (`--jobs`; 0: every core): `summary`'s
    /// landmarks of a memory of many steps are found on several, and a
    /// memory's landmarks, per-step figures and the rest side by side. 1 by
    /// default: a command summarising many profiles at once (`ranks`) has
    /// its threads already.
    pub jobs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            frames: FrameFilter::default(),
            top: 10,
            memories: Vec::new(),
            ties: replay::Ties::First,
            keep_groups: None,
            capacity: None,
            jobs: 1,
        }
    }
}

impl Options {
    /// The memories of `profile` this analysis covers, in profile order. A
    /// name selects a memory by id, or every memory space of a compiled
    /// program by module, with or without its program id (`jit_step(10)`,
    /// `jit_step`).
    pub fn selected<'a>(&'a self, profile: &'a Profile) -> impl Iterator<Item = &'a Memory> + 'a {
        profile.memories.iter().filter(|m| {
            self.memories.is_empty() || self.memories.iter().any(|name| selects(m, name))
        })
    }
}

impl Options {
    /// The `--memory` / `--module` names that select no memory of `profile`.
    pub fn unmatched<'a>(&'a self, profile: &Profile) -> Vec<&'a str> {
        self.memories
            .iter()
            .filter(|name| !profile.memories.iter().any(|m| selects(m, name)))
            .map(String::as_str)
            .collect()
    }
}

fn selects(memory: &Memory, name: &str) -> bool {
    if memory.id == name {
        return true;
    }
    let Some(program) = &memory.program else {
        return false;
    };
    let module = program.module.as_str();
    let base = module
        .rsplit_once('(')
        .filter(|(_, id)| id.ends_with(')'))
        .map_or(module, |(base, _)| base);
    module == name || base == name
}

/// The fields that identify a memory in every JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryHeader {
    /// The memory's id (`cuda:0`, `GPU_0_bfc`, `jit_step(10)`).
    pub id: String,
    /// Device, allocator or program memory space.
    pub kind: MemoryKind,
    /// The host that recorded the memory, when the format names one
    /// (XSpace: the host name the profiler wrote, else the file name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What positions on the memory's timeline measure.
    pub axis: Axis,
    /// What the device or allocator can hold, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// For a compiled program's memory: the module (`jit_step(10)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// For a compiled program's memory: its memory space (0 = main memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_space: Option<i64>,
    /// Whether its allocations are categories' running totals (a PyTorch
    /// memory timeline), so its `buffers` count categories; absent when
    /// false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub category_totals: bool,
}

impl MemoryHeader {
    /// The name of a table's column of buffer counts for these memories:
    /// `categories` when every one counts categories' totals (a memory
    /// timeline's), else `buffers` (`final_` and the like prefixed by the
    /// caller's choice of `names`: `[buffers, categories]`).
    pub fn count_column<'h>(
        headers: impl IntoIterator<Item = &'h MemoryHeader>,
        names: [&'static str; 2],
    ) -> &'static str {
        let mut any = false;
        for h in headers {
            if !h.category_totals {
                return names[0];
            }
            any = true;
        }
        if any {
            names[1]
        } else {
            names[0]
        }
    }
}

impl MemoryHeader {
    /// The header of `memory`, with the capacity its file declares.
    pub fn of(memory: &Memory) -> Self {
        MemoryHeader {
            id: memory.id.clone(),
            kind: memory.kind,
            host: memory.host.clone(),
            axis: memory.axis,
            capacity_bytes: memory.capacity,
            module: memory.program.as_ref().map(|p| p.module.clone()),
            memory_space: memory.program.as_ref().map(|p| p.memory_space),
            category_totals: memory.category_totals,
        }
    }
}

/// Totals of a memory that only an allocator reports, at one sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AllocatorState {
    /// In use + free, when free memory is reported.
    pub capacity_bytes: Option<u64>,
    /// The allocator's own fragmentation figure, in [0, 1].
    pub fragmentation: Option<f64>,
}

impl AllocatorState {
    /// The state the allocator reported in `sample` (none without one).
    pub fn at(memory: &Memory, sample: Option<usize>) -> Self {
        let Some(s) = sample.and_then(|i| memory.allocator_samples.get(i)) else {
            return AllocatorState::default();
        };
        AllocatorState {
            capacity_bytes: s
                .allocated_bytes()
                .zip(s.free_bytes())
                .map(|(a, f)| a.saturating_add(f)),
            fragmentation: s.fragmentation(),
        }
    }
}

/// The inputs and warnings every JSON document carries.
#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    /// The files read.
    pub inputs: Vec<InputInfo>,
    /// What the readers read around instead of failing.
    pub warnings: Vec<Warning>,
}

/// The warnings as the lines written to standard error: a `warning:` line
/// each (repeats left out), then each note once however many inputs it
/// concerns (`note: message (3 inputs)`; with its path when it concerns one).
pub fn warning_notes(warnings: &[Warning]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for w in warnings.iter().filter(|w| !w.note) {
        let line = format!("warning: {}: {}", w.path, w.message);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    let mut notes: Vec<(&str, Vec<&str>)> = Vec::new();
    for w in warnings.iter().filter(|w| w.note) {
        match notes.iter_mut().find(|(message, _)| *message == w.message) {
            Some((_, paths)) if paths.contains(&w.path.as_str()) => {}
            Some((_, paths)) => paths.push(&w.path),
            None => notes.push((&w.message, vec![&w.path])),
        }
    }
    for (message, paths) in notes {
        lines.push(match paths[..] {
            [path] => format!("note: {path}: {message}"),
            _ => format!("note: {message} ({} inputs)", paths.len()),
        });
    }
    lines
}

impl Provenance {
    /// The inputs and warnings of `profile`.
    pub fn of(profile: &Profile) -> Self {
        Provenance {
            inputs: profile.inputs.clone(),
            warnings: profile.warnings.clone(),
        }
    }
}

/// How a memory's id is shown in tables (pprof devices may have no name).
pub fn display_id(id: &str) -> String {
    if id.is_empty() {
        "<unnamed>".to_string()
    } else {
        id.to_string()
    }
}

/// The label of a point: the instant's label (snapshot file), else its
/// time since the recording started with its step
/// ([`crate::report::units::moment`]), else its position with the program
/// step that caused it when the memory names one.
pub fn point_label(memory: &Memory, index: usize, at: i64) -> String {
    if let Some(instant) = memory.instants.get(index) {
        return instant.label.clone();
    }
    match moment_label(memory, at) {
        Some(moment) => moment,
        None => match point_step(memory, index) {
            Some(step) => format!("#{at} ({step})"),
            None => format!("#{at}"),
        },
    }
}

/// A position on a time axis as every output shows it to a person
/// (`t+25.43 ms (step 3)`); `None` for a memory not on a time axis.
pub fn moment_label(memory: &Memory, at: i64) -> Option<String> {
    moment_label_with_digits(memory, at, 0)
}

fn moment_label_with_digits(memory: &Memory, at: i64, more: usize) -> Option<String> {
    let since = memory.since_start_ps(at)?;
    let step = memory.step_at(at).map(|s| s.id);
    let phase = memory.phase_at(at).map(crate::model::Phase::name);
    Some(crate::report::units::moment_with_digits(
        since, step, phase, more,
    ))
}

/// [`moment_label`]s of positions listed together (the worst moments of
/// `frag`), with as many more digits as tell different positions apart:
/// four figures make `t+82.57 ms` of two moments 3 us apart. `None` for a
/// memory not on a time axis.
pub fn distinct_moment_labels(memory: &Memory, ats: &[i64]) -> Option<Vec<String>> {
    // The same digits for all, so that a column of them reads evenly.
    let mut labels = Vec::new();
    for more in 0..=9 {
        labels = ats
            .iter()
            .map(|&at| moment_label_with_digits(memory, at, more))
            .collect::<Option<Vec<String>>>()?;
        let alike = (0..ats.len())
            .any(|i| (0..ats.len()).any(|j| ats[i] != ats[j] && labels[i] == labels[j]));
        if !alike {
            break;
        }
    }
    Some(labels)
}

/// The program step (instruction) whose event led to point `index`, if the
/// memory names its steps. Point 0 is before any event.
pub fn point_step(memory: &Memory, index: usize) -> Option<&str> {
    let program = memory.program.as_ref()?;
    program.step(index.checked_sub(1)?)
}

/// A memory whose peak is under this share of the largest peak of its
/// profile, and under [`TRIVIAL_BYTES`], is trivial beside it (an 8 B
/// `jit_stage` next to a 44 MiB training step, an 8 B CPU allocator next to
/// a 6 GiB GPU).
pub const TRIVIAL_SHARE: f64 = 0.01;
/// See [`TRIVIAL_SHARE`]: a memory of a mebibyte or more is never trivial.
pub const TRIVIAL_BYTES: u64 = 1 << 20;

/// The order in which memories are listed: biggest peak first, those that
/// matter (`main`) before the trivial ones, which listings fold into one
/// line. Indices into the slice given to [`order_by_peak`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeakOrder {
    /// Memories worth a section of their own, biggest peak first.
    pub main: Vec<usize>,
    /// Memories trivial beside the largest ([`TRIVIAL_SHARE`],
    /// [`TRIVIAL_BYTES`]), biggest peak first.
    pub trivial: Vec<usize>,
}

/// Memories a text table lists a row each (biggest peak first): past
/// these, the others that matter are one row with their count and totals,
/// so a profile of 10^5 devices prints a table, not a book (JSON and CSV
/// keep every memory).
pub const LISTED_MEMORIES: usize = 50;

impl PeakOrder {
    /// Every index, `main` then `trivial`.
    pub fn all(&self) -> impl Iterator<Item = usize> + '_ {
        self.main.iter().chain(&self.trivial).copied()
    }

    /// `main` split into the memories a table lists ([`LISTED_MEMORIES`])
    /// and those it folds into one row.
    pub fn listed(&self) -> (&[usize], &[usize]) {
        self.main.split_at(self.main.len().min(LISTED_MEMORIES))
    }
}

/// Orders memories given as `(id, peak bytes)` biggest peak first (ties by
/// id, then position, so the order is the same on every run) and sets apart
/// those trivial beside the largest. The one ordering of memories that the
/// page and the text listings share.
pub fn order_by_peak(peaks: &[(&str, u64)]) -> PeakOrder {
    let mut order: Vec<usize> = (0..peaks.len()).collect();
    order.sort_by(|&a, &b| {
        peaks[b]
            .1
            .cmp(&peaks[a].1)
            .then_with(|| peaks[a].0.cmp(peaks[b].0))
            .then(a.cmp(&b))
    });
    let largest = order.first().map_or(0, |&i| peaks[i].1);
    let trivial =
        |bytes: u64| bytes < TRIVIAL_BYTES && (bytes as f64) < largest as f64 * TRIVIAL_SHARE;
    let (trivial, main): (Vec<usize>, Vec<usize>) =
        order.into_iter().partition(|&i| trivial(peaks[i].1));
    PeakOrder { main, trivial }
}

/// The note under a table that lists the [`LISTED_MEMORIES`] largest
/// memories and folds the `n` others into one row.
pub fn beyond_note(n: usize) -> String {
    format!(
        "+{n} more: memories past the {LISTED_MEMORIES} largest peaks, one row with their \
         count and totals (JSON and CSV list every memory)"
    )
}

/// The label of the row that stands for the memories past the listed ones.
pub fn beyond_label(n: usize) -> String {
    format!("+{n} more (totals)")
}

/// The label of the row that stands for the memories trivial beside the
/// largest: like [`beyond_label`]'s row, its figures are their totals.
pub fn trivial_label(n: usize) -> String {
    format!("+{n} small (totals)")
}

/// The total of one figure over the memories `beyond` (indices into
/// `memories`), saturating: the figures of the `+N more (totals)` and
/// `+N small (totals)` rows.
pub fn beyond_total<T>(memories: &[T], beyond: &[usize], figure: impl Fn(&T) -> u64) -> u64 {
    beyond
        .iter()
        .fold(0u64, |s, &i| s.saturating_add(figure(&memories[i])))
}

/// Notes about one memory each, `(display id, text)`, as lines `id: text`.
/// Past [`LISTED_MEMORIES`] of them, those of one text are one line naming
/// the first few memories and counting the others, in the order the texts
/// first come: 10^5 devices without a fragmentation figure are one line,
/// not 10^5.
pub fn memory_notes(notes: Vec<(String, String)>) -> Vec<String> {
    if notes.len() <= LISTED_MEMORIES {
        return notes
            .into_iter()
            .map(|(id, text)| format!("{id}: {text}"))
            .collect();
    }
    const NAMED: usize = 5;
    let mut order: Vec<String> = Vec::new();
    let mut ids: std::collections::HashMap<String, (Vec<String>, usize)> =
        std::collections::HashMap::new();
    for (id, text) in notes {
        let entry = ids.entry(text.clone()).or_insert_with(|| {
            order.push(text);
            (Vec::new(), 0)
        });
        if entry.0.len() < NAMED {
            entry.0.push(id);
        } else {
            entry.1 += 1;
        }
    }
    order
        .into_iter()
        .map(|text| {
            let (named, more) = &ids[&text];
            match more {
                0 => format!("{}: {text}", named.join(", ")),
                n => format!("{} and {n} more memories: {text}", named.join(", ")),
            }
        })
        .collect()
}

/// The note under a listing that folds the memories trivial beside the
/// largest into one row (`+3 small`): which they are (the first
/// [`LISTED_MEMORIES`] named). `None` for fewer than two (a single one keeps
/// its own row).
pub fn trivial_note(ids: &[&str]) -> Option<String> {
    (ids.len() > 1).then(|| {
        let names: Vec<String> = ids
            .iter()
            .take(LISTED_MEMORIES)
            .map(|id| display_id(id))
            .collect();
        let more = match ids.len().saturating_sub(LISTED_MEMORIES) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "+{} small: memories whose peak is under 1% of the largest and under 1 MiB, one row with \
             their count and totals: {}{more}",
            ids.len(),
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod order_tests {
    use super::*;

    #[test]
    fn memories_are_ordered_biggest_peak_first_and_tiny_ones_set_apart() {
        let gib = 1u64 << 30;
        let order = order_by_peak(&[
            ("cpu", 8),
            ("cuda:0", 6 * gib),
            ("cuda:1", 6 * gib),
            ("host", 2 << 20),
            ("pinned", 512 << 10),
        ]);
        // 2 MiB is under 1% of 6 GiB but not under 1 MiB: it stays.
        assert_eq!(order.main, vec![1, 2, 3]);
        assert_eq!(order.trivial, vec![4, 0]);
        assert_eq!(order.all().collect::<Vec<_>>(), vec![1, 2, 3, 4, 0]);
    }

    #[test]
    fn small_memories_of_a_small_profile_are_not_trivial() {
        // 8 B beside 12 B is not 1% of it: nothing is folded.
        let order = order_by_peak(&[("jit_stage(0)", 8), ("jit_seed(2)", 12)]);
        assert_eq!(order.main, vec![1, 0]);
        assert!(order.trivial.is_empty());
        assert_eq!(order_by_peak(&[]), PeakOrder::default());
    }
}
