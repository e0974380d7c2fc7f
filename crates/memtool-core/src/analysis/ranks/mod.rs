//! `ranks`: a job's ranks side by side. Each rank's file is loaded, reduced
//! to a [`RankSummary`] (a few figures and its live bytes at the peak by
//! user frame and by op) and dropped before the next file is taken, so a
//! thousand ranks cost the summaries, not the events; [`fleet`] then weighs
//! the summaries against each other (`fleet.rs`).

mod fleet;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::group::{GroupBy, Totals};
use super::oom::Verdict;
use super::program_match;
use super::{diff, frag, order_by_peak, replay, segments, summary, Options, PeakFacts};
use crate::model::{Axis, Memory, MemoryKind, Phase, Profile, ProgramInfo, Warning};

pub use fleet::{
    fleet, versus_median, FailedFile, HighestVsMedian, OomRank, RanksReport, StageGroup,
    CLUSTER_GAP, OUTLIER_ABOVE_MEDIAN, OUTLIER_SHARE,
};

/// The JSON schema name and version of `ranks`'s document.
pub const SCHEMA: &str = "memtool/ranks/v1";

/// Columns of a rank's strip ([`RankSummary::strip`]): what the page draws
/// per rank, whatever the rank's number of events.
pub const STRIP_COLUMNS: usize = 100;

/// What one rank's profile is reduced to: the figures of its row and what
/// the fleet comparison needs (its live set at the peak by user frame and
/// by op), nothing per event.
#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    /// The rank as shown: the number in the file name (`rank3`, `rank_3`,
    /// `snapshot-3.pickle`), else the file name without its extensions
    /// (else the file, where two files would be shown alike); with the memory's id after
    /// a `/` when the file holds several devices.
    pub rank: String,
    /// The number in the file name, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_number: Option<u64>,
    /// The file the rank was read from, as given.
    pub file: String,
    /// The memory (device or allocator) of the rank.
    pub memory: String,
    /// The host that recorded it, when the format names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Bytes in use at the rank's peak, as `summary` gives it.
    pub peak_bytes: u64,
    /// Position of the peak on the memory's axis.
    pub peak_at: i64,
    /// The position as a person reads it.
    pub peak_label: String,
    /// The step the peak falls in, when the profile marks steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_step: Option<i64>,
    /// The training phase the peak falls in, when the profile tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase: Option<Phase>,
    /// What the allocator held from the device at the end (as `summary`'s
    /// `reserved_bytes`), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// The device's capacity: `--capacity`, else what the profile records;
    /// `null` when neither says.
    pub capacity_bytes: Option<u64>,
    /// Live bytes at the end of the profile.
    pub final_bytes: u64,
    /// Fragmentation at the peak, in [0, 1]: the allocator's own figure
    /// where it reports one, else `1 − largest gap / total gap` of the free
    /// bytes inside the ranges the allocator held (`frag`'s address
    /// figure); `null` when neither is known.
    pub fragmentation_at_peak: Option<f64>,
    /// The rank's out-of-memory failure, when its profile records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom: Option<RankFailure>,
    /// The rank's profile's warnings (the report shows each message once).
    #[serde(skip)]
    pub warnings: Vec<Warning>,
    /// Live bytes at the peak by user frame.
    #[serde(skip)]
    pub by_user_frame: BTreeMap<String, Totals>,
    /// Live bytes at the peak by op.
    #[serde(skip)]
    pub by_op: BTreeMap<String, Totals>,
    /// The axis of the memory, to tell whether failure times compare.
    #[serde(skip)]
    pub axis: Axis,
    /// The rank's live bytes over its recording in at most
    /// [`STRIP_COLUMNS`] columns, each the highest total of the points it
    /// covers (so the peak is one of them): what the page's strip draws.
    #[serde(skip)]
    pub strip: Vec<u64>,
    /// What the memory is, for pairing it with the other ranks' (a
    /// compiled program's module, memory space and signature); `None` for
    /// a memory that is no program.
    #[serde(skip)]
    pub program: Option<ProgramIdentity>,
}

/// A compiled program as [`super::program_match`] pairs it across runs.
#[derive(Clone, Debug, Default)]
pub struct ProgramIdentity {
    /// The module with its compile counter, `jit_train_step(26)`.
    pub module: String,
    /// The memory space.
    pub memory_space: i64,
    /// The entry computation's parameter and result shapes.
    pub signature: Option<String>,
}

/// The memories of the ranks' files shown alike when they are the same
/// program: each file's programs paired with the first file's by
/// [`program_match::pair`], as `diff` pairs two runs (name, then
/// signature, then order; never the compile counter, which differs between
/// processes), and labelled by the pair's key (`3/jit_train_step`, not
/// `3/jit_train_step(26)`). Files of one memory keep their label.
pub(crate) fn label_programs(ranks: &mut [RankSummary]) {
    // The ranks' indices by file, files in first-seen order, in one pass:
    // linear in the ranks whatever the number of files.
    let mut by_file: Vec<Vec<usize>> = Vec::new();
    let mut file_slot: HashMap<&str, usize> = HashMap::new();
    for (i, r) in ranks.iter().enumerate() {
        if !r.rank.contains('/') {
            continue;
        }
        let slot = *file_slot.entry(r.file.as_str()).or_insert_with(|| {
            by_file.push(Vec::new());
            by_file.len() - 1
        });
        by_file[slot].push(i);
    }
    let stand_in = |r: &RankSummary| {
        let mut m = Memory::new(&r.memory, MemoryKind::ProgramSpace, r.axis);
        m.program = r.program.as_ref().map(|p| {
            Box::new(ProgramInfo {
                module: p.module.clone(),
                memory_space: p.memory_space,
                signature: p.signature.clone(),
                ..ProgramInfo::default()
            })
        });
        m
    };
    let Some(first) = by_file.first() else { return };
    let reference: Vec<Memory> = first.iter().map(|&i| stand_in(&ranks[i])).collect();
    let reference: Vec<&Memory> = reference.iter().collect();
    for these in &by_file {
        if these.iter().all(|&i| ranks[i].program.is_none()) {
            continue;
        }
        let memories: Vec<Memory> = these.iter().map(|&i| stand_in(&ranks[i])).collect();
        let memories: Vec<&Memory> = memories.iter().collect();
        let keys: HashMap<String, String> = program_match::pair(&reference, &memories)
            .into_iter()
            .filter_map(|p| Some((p.new?.id.clone(), p.key)))
            .collect();
        for &i in these {
            let r = &mut ranks[i];
            if let Some(key) = keys.get(&r.memory) {
                let base = r.rank.split_once('/').map_or("", |(b, _)| b).to_string();
                r.rank = format!("{base}/{key}");
            }
        }
    }
}

/// A rank's out-of-memory failure, as `oom` explains it.
#[derive(Clone, Debug, Serialize)]
pub struct RankFailure {
    /// Why the memory ran out.
    pub verdict: Verdict,
    /// The request that failed.
    pub request_bytes: u64,
    /// What the request lacked.
    pub shortfall_bytes: u64,
    /// The capacity the failure was weighed against.
    pub capacity_bytes: u64,
    /// Where the allocator failed on the memory's axis (µs since the epoch
    /// for a PyTorch snapshot), for an allocator's failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// The position as a person reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_label: Option<String>,
}

/// A file's name without its extensions (`host0` of `host0.xplane.pb`):
/// how a rank without a number is shown.
pub(crate) fn file_stem(file: &str) -> String {
    let name = crate::input::file_name(file);
    match name.get(1..).and_then(|rest| rest.find('.')) {
        Some(dot) => name[..dot + 1].to_string(),
        None => name,
    }
}

/// The rank number a file name gives: the digits after `rank` (`rank3`,
/// `rank_3`, `rank-3`, any case), else the last run of digits between a `-`
/// or `_` and a `.` (`snapshot-3.pickle`, `worker_12.pt.trace.json`).
pub fn rank_number(file: &str) -> Option<u64> {
    let name = crate::input::file_name(file).to_ascii_lowercase();
    let digits = |s: &str| -> Option<u64> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    let mut from_rank = None;
    for (i, _) in name.match_indices("rank") {
        let rest = &name[i + 4..];
        let rest = rest.strip_prefix(['_', '-']).unwrap_or(rest);
        if let Some(n) = digits(rest) {
            from_rank = Some(n);
        }
    }
    from_rank.or_else(|| {
        let bytes = name.as_bytes();
        let mut found = None;
        for (i, &b) in bytes.iter().enumerate() {
            if (b == b'-' || b == b'_') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
                let run = &name[i + 1..];
                let end = run.find(|c: char| !c.is_ascii_digit()).unwrap_or(run.len());
                if run[end..].starts_with('.') {
                    found = run[..end].parse().ok();
                }
            }
        }
        found
    })
}

/// Reduces one rank's profile (`file` as the user gave it) to a summary per
/// device: every memory `summary` lists with a row of its own (not those
/// trivial beside the largest), so a file of one device is one rank and a
/// JAX process's pprof of eight devices is eight.
pub fn reduce(profile: &Profile, file: &str, options: &Options) -> Vec<RankSummary> {
    let options = Options {
        keep_groups: Some(0),
        ..options.clone()
    };
    let report = summary::summarize(profile, &options);
    let peaks: Vec<(&str, u64)> = report
        .memories
        .iter()
        .map(|m| (m.header.id.as_str(), m.peak.peak_bytes))
        .collect();
    let order = order_by_peak(&peaks);
    let by_id: HashMap<&str, &crate::model::Memory> = profile
        .memories
        .iter()
        .map(|m| (m.id.as_str(), m))
        .collect();
    let number = rank_number(file);
    let several = order.main.len() > 1;
    let mut out = Vec::new();
    let (mut user_frame_labels, mut op_labels) =
        (diff::SiteLabels::default(), diff::SiteLabels::default());
    for &i in &order.main {
        let m = &report.memories[i];
        let Some(memory) = by_id.get(m.header.id.as_str()).copied() else {
            continue;
        };
        let Some(facts) = PeakFacts::of(memory, options.ties) else {
            continue;
        };
        let fragmentation = m.fragmentation_at_peak.or_else(|| {
            let index = facts.point().index;
            let held = segments::held_at(memory, index)?;
            let live = replay::live_at(memory, index);
            Some(frag::address_fragmentation(memory, &live, &held).fragmentation)
        });
        let mut by_user_frame = BTreeMap::new();
        let mut by_op = BTreeMap::new();
        diff::memory_peak_groups(
            profile,
            memory,
            &options,
            GroupBy::UserFrame,
            &mut user_frame_labels,
            &mut by_user_frame,
        );
        diff::memory_peak_groups(
            profile,
            memory,
            &options,
            GroupBy::Op,
            &mut op_labels,
            &mut by_op,
        );
        let oom = report
            .oom
            .iter()
            .find(|pm| pm.header.id == m.header.id)
            .map(|pm| RankFailure {
                verdict: pm.verdict,
                request_bytes: pm.request_bytes,
                shortfall_bytes: pm.shortfall_bytes,
                capacity_bytes: pm.capacity_bytes,
                at: pm.allocator.as_ref().map(|a| a.at),
                at_label: pm.allocator.as_ref().map(|a| a.at_label.clone()),
            });
        let base = match number {
            Some(n) => n.to_string(),
            None => file_stem(file),
        };
        out.push(RankSummary {
            rank: if several {
                format!("{base}/{}", super::display_id(&m.header.id))
            } else {
                base
            },
            rank_number: number,
            file: file.to_string(),
            memory: m.header.id.clone(),
            host: m.header.host.clone(),
            peak_bytes: m.peak.peak_bytes,
            peak_at: m.peak.peak_at,
            peak_label: m.peak.peak_label.clone(),
            peak_step: facts.step,
            peak_phase: m.peak.peak_phase,
            reserved_bytes: m.reserved_bytes,
            capacity_bytes: options.capacity.or(m.header.capacity_bytes),
            final_bytes: m.final_bytes,
            fragmentation_at_peak: fragmentation,
            oom,
            warnings: profile.warnings.clone(),
            by_user_frame,
            by_op,
            axis: memory.axis,
            strip: strip(memory),
            program: memory.program.as_ref().map(|p| ProgramIdentity {
                module: p.module.clone(),
                memory_space: p.memory_space,
                signature: p.signature.clone(),
            }),
        });
    }
    out
}

/// A memory's live bytes in at most [`STRIP_COLUMNS`] columns of equal
/// numbers of points (events, or instants), each the highest total among
/// its points. Columns by point rather than by time: ranks' clocks differ
/// and a strip is read for its shape, and a column never stays empty.
fn strip(memory: &crate::model::Memory) -> Vec<u64> {
    let mut points = 0usize;
    replay::for_each_point(memory, |_| points += 1);
    let columns = points.min(STRIP_COLUMNS);
    let mut out = vec![0u64; columns];
    if columns == 0 {
        return out;
    }
    replay::for_each_point(memory, |p| {
        let column = (p.index as u128 * columns as u128 / points as u128) as usize;
        let cell = &mut out[column.min(columns - 1)];
        *cell = (*cell).max(p.bytes);
    });
    out
}
