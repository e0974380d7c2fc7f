//! `summary` of many files a file at a time. A series of PyTorch snapshots
//! (a snapshot per rank, per step) holds nothing in common from file to
//! file but its names: each file is read on its own ([`crate::load_each`],
//! [`crate::Reading::Part`]), reduced to a [`SummaryPart`] — its memories'
//! summaries and what the checks of the whole weigh of each — and its
//! events dropped before the next file is taken. [`merge`] then puts the
//! parts together into the report [`super::summary::summarize`] gives of
//! the files read as one profile, byte for byte: ids relabelled by the
//! series rule (`input::series_part_id`), the warnings of the
//! whole (sizes, series order, contradicting figures) worked out by the
//! same functions from the parts' facts, in the same order.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;

use super::oom::PostMortem;
use super::summary::{self, MemorySummary, SummaryReport};
use super::{group, Options, Provenance};
use crate::input::ClaimedSizes;
use crate::model::{Axis, InputInfo, MemoryKind, Profile, SeriesPart, StackId, Warning};

/// What one file contributes to a summary of many: its memories' summaries
/// and post-mortems, and the facts the checks of the whole weigh. A few KB
/// per memory, whatever the file's events.
#[derive(Debug)]
pub struct SummaryPart {
    inputs: Vec<InputInfo>,
    /// What its reader read around.
    warnings: Vec<Warning>,
    memories: Vec<PartMemory>,
}

/// One memory of a [`SummaryPart`].
#[derive(Debug)]
struct PartMemory {
    /// Its id as the file alone gives it.
    id: String,
    kind: MemoryKind,
    axis: Axis,
    series: Option<SeriesPart>,
    /// None for a memory without a peak, which `summary` leaves out.
    summary: Option<MemorySummary>,
    post_mortems: Vec<PostMortem>,
    sizes: ClaimedSizes,
    /// [`super::consistency::inconsistencies`].
    inconsistencies: Vec<String>,
    /// What is live at its end by stack ([`StackKey`]), for the series check.
    held_at_end: Vec<(StackKey, u64)>,
}

/// Whether `summary` of these inputs can read them a file at a time and
/// give the report of the whole: several files, each a PyTorch snapshot
/// (uncompressed: its format is told from its first bytes here), given
/// once each, and no `--memory` selection (which names the ids only the
/// whole gives). Other series need every file at once: a pprof series is
/// one memory whose instants are the files; hosts of a run are read by
/// their own pool.
pub fn reads_apart(sources: &[crate::input::Source], options: &Options) -> bool {
    let mut paths: Vec<&str> = sources.iter().map(|s| s.path.as_str()).collect();
    paths.sort_unstable();
    paths.dedup();
    sources.len() > 1
        && paths.len() == sources.len()
        && options.memories.is_empty()
        && sources.iter().all(crate::input::is_plain_snapshot)
}

/// One file's profile (read with [`crate::Reading::Part`]) reduced to its
/// part of the summary.
pub fn reduce(profile: &Profile, options: &Options) -> SummaryPart {
    let mut grouper = group::Grouper::new(&profile.names, &options.frames);
    let mut hashes = StackHashes::default();
    let memories = profile
        .memories
        .iter()
        .map(|memory| PartMemory {
            id: memory.id.clone(),
            kind: memory.kind,
            axis: memory.axis,
            series: memory.series.clone(),
            summary: summary::summarize_memory(profile, memory, &mut grouper, options),
            post_mortems: super::oom_report::memory_post_mortems(profile, memory, options),
            sizes: ClaimedSizes::of(memory),
            inconsistencies: super::consistency::inconsistencies(memory),
            held_at_end: match &memory.series {
                Some(_) if memory.instants.len() <= 1 => {
                    super::series_order::held_at_end(profile, memory)
                        .into_iter()
                        .map(|(stack, bytes)| (hashes.of(profile, stack), bytes))
                        .collect()
                }
                _ => Vec::new(),
            },
        })
        .collect();
    SummaryPart {
        inputs: profile.inputs.clone(),
        warnings: profile.warnings.clone(),
        memories,
    }
}

/// The summary of the files whose parts these are, in file order: the
/// report [`summary::summarize`] gives of them read as one profile. None
/// when the parts cannot be put together as that read would (a memory that
/// read would add to an earlier one of its id, no memory at all): the
/// caller reads the files whole then.
pub fn merge(parts: Vec<SummaryPart>) -> Option<SummaryReport> {
    // The memories' ids, worked out as the reader of one profile does:
    // hollow memories (no events) stand for the parts' own.
    let mut whole = Profile::default();
    let mut memories = Vec::new();
    for part in parts {
        let path = part.inputs.first().map(|i| i.path.clone())?;
        whole.inputs.extend(part.inputs);
        whole.warnings.extend(part.warnings);
        for memory in part.memories {
            let id = match &memory.series {
                Some(series) => crate::input::series_part_id(&mut whole, &series.device, &path),
                None => memory.id.clone(),
            };
            let count = whole.memories.len();
            let position = whole.memory_position(&id, memory.kind, memory.axis);
            if position < count {
                // The whole would have read the two into one memory.
                return None;
            }
            whole.memories[position].series = memory.series.clone();
            memories.push(memory);
        }
    }
    if memories.is_empty() {
        return None;
    }
    let ids: Vec<String> = whole.memories.iter().map(|m| m.id.clone()).collect();
    let mut warnings = crate::input::impossible_sizes(
        &whole.inputs,
        ids.iter()
            .map(String::as_str)
            .zip(memories.iter().map(|m| m.sizes)),
    );
    warnings.extend(super::series_order::series_warnings(&whole.inputs, || {
        memories
            .iter_mut()
            .filter_map(|m| {
                let held = std::mem::take(&mut m.held_at_end);
                m.series.as_ref().map(|s| (s.file.clone(), held))
            })
            .collect()
    }));
    let first = whole.inputs.first().map(|i| i.path.clone())?;
    for (id, memory) in ids.iter().zip(&memories) {
        warnings.extend(memory.inconsistencies.iter().map(|body| Warning {
            path: first.clone(),
            message: format!("{id}: {body}"),
            note: false,
        }));
    }
    whole.warnings.extend(warnings);
    let mut oom = Vec::new();
    let mut summaries = Vec::new();
    for (id, memory) in ids.into_iter().zip(memories) {
        for mut post_mortem in memory.post_mortems {
            post_mortem.header.id = id.clone();
            oom.push(post_mortem);
        }
        if let Some(mut summary) = memory.summary {
            summary.header.id = id;
            summaries.push(summary);
        }
    }
    Some(SummaryReport {
        schema: summary::SCHEMA,
        provenance: Provenance::of(&whole),
        oom,
        memories: summaries,
        stages_only: false,
    })
}

/// A call stack's identity across files: a 128-bit hash of its frames'
/// texts (function, file, line), leaf to root. Stacks of two files' tables
/// are equal where their frames are, so the series check of parts read
/// apart sees the stacks that one table would have shared.
type StackKey = u128;

/// [`StackKey`]s of one profile's stacks, each worked out once: a stack's
/// is its caller's and its leaf frame's texts hashed.
#[derive(Default)]
struct StackHashes(FxHashMap<StackId, StackKey>);

impl StackHashes {
    fn of(&mut self, profile: &Profile, stack: StackId) -> StackKey {
        // The stack and its callers not yet hashed, leaf first.
        let mut chain = Vec::new();
        let mut node = stack;
        let mut key = 0;
        while node.0 != 0 {
            if let Some(&k) = self.0.get(&node) {
                key = k;
                break;
            }
            chain.push(node);
            node = profile.names.caller(node);
        }
        for &node in chain.iter().rev() {
            if let Some(leaf) = profile.names.leaf(node) {
                let frame = profile.names.frame_of(leaf);
                let texts = (
                    key,
                    profile.names.str(frame.function),
                    profile.names.str(frame.file),
                    frame.line,
                );
                // Two 64-bit SipHashes of the same texts, told apart by a
                // leading byte.
                let half = |salt: u8| {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (salt, texts).hash(&mut h);
                    h.finish()
                };
                key = u128::from(half(0)) << 64 | u128::from(half(1));
            }
            self.0.insert(node, key);
        }
        key
    }
}

#[cfg(test)]
mod tests;
