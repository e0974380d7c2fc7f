//! The analyses behind each command. Each takes a [`Profile`] (or two) and
//! returns a report value that the exporters in [`crate::report`] can write.
//! Analyses see only the model: no format-specific code lives here.

pub mod diff;
pub mod export;
pub mod frag;
pub mod frames;
pub mod gate;
pub mod group;
pub mod leaks;
pub mod oom;
pub mod peak;
pub mod peak_facts;
pub mod replay;
pub mod segments;
pub mod series;
pub mod steps;
pub mod summary;

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

/// The warnings as the lines written to standard error.
pub fn warning_notes(warnings: &[Warning]) -> Vec<String> {
    warnings
        .iter()
        .map(|w| format!("warning: {}: {}", w.path, w.message))
        .collect()
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
/// position, with the program step that caused it when the memory names one.
pub fn point_label(memory: &Memory, index: usize, at: i64) -> String {
    match memory.instants.get(index) {
        Some(instant) => instant.label.clone(),
        None => match memory.axis {
            Axis::TimePs => format!("{:.6} s", at as f64 / 1e12),
            Axis::TimeUs => format!("{at} us"),
            _ => match point_step(memory, index) {
                Some(step) => format!("#{at} ({step})"),
                None => format!("#{at}"),
            },
        },
    }
}

/// The program step (instruction) whose event led to point `index`, if the
/// memory names its steps. Point 0 is before any event.
pub fn point_step(memory: &Memory, index: usize) -> Option<&str> {
    let program = memory.program.as_ref()?;
    program.step(index.checked_sub(1)?)
}
