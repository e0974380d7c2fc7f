//! What each byte is: the category of every allocation (parameter,
//! gradient, optimizer state, activation, ...), from the user's rules, the
//! file's own categories, or inferred from what the file records — each
//! allocation's training phase and its lifetime against the phases.
//!
//! The rules are stated in docs/categories.md; this module is the one place
//! that applies them. Assigning rewrites each allocation's site to one that
//! carries the category, so every command, grouping and output sees it, and
//! records in [`Memory::category_sources`] who named each category.

use rustc_hash::FxHashMap;

use crate::model::{
    AllocId, BeforeRecording, CategorySource, CategorySources, EventKind, Memory, Names, Phase,
    Profile, Site, SiteId, StrId,
};

use super::replay;

/// The categories memtool infers, spelt as PyTorch's memory profiler spells
/// its own (`torch.profiler._memory_profiler.Category`, lower case), so a
/// profiler-made file and an inferred one group alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inferred {
    /// Weights: made before the first forward pass and live throughout.
    Parameter,
    /// Made by the backward pass and kept past it (freed by `zero_grad`, by
    /// the optimizer, or still live).
    Gradient,
    /// First made inside the optimizer's step and live past it.
    OptimizerState,
    /// Made in the forward pass (or the loss) and kept past the op that
    /// made it.
    Activation,
    /// Made by the backward pass and freed inside it: gradients of
    /// activations on their way to the parameters.
    AutogradDetail,
    /// Made outside every phase and live across a forward pass, then freed:
    /// a batch of data.
    Input,
    /// Freed before an allocation of another site (inside the op that made
    /// it), or made and freed inside one optimizer or `zero_grad` phase.
    Temporary,
    /// None of the above: never guessed.
    Unknown,
}

impl Inferred {
    /// The name used in every output.
    pub const fn name(self) -> &'static str {
        match self {
            Inferred::Parameter => "parameter",
            Inferred::Gradient => "gradient",
            Inferred::OptimizerState => "optimizer_state",
            Inferred::Activation => "activation",
            Inferred::AutogradDetail => "autograd_detail",
            Inferred::Input => "input",
            Inferred::Temporary => "temporary",
            Inferred::Unknown => "unknown",
        }
    }
}

/// A user's category: allocations whose stack frames (function or file),
/// or op, match `pattern`.
#[derive(Clone, Debug)]
pub struct CategoryRule {
    /// The category's name.
    pub name: String,
    /// What a frame's function or file, or the op, must match.
    pub pattern: regex::Regex,
}

impl CategoryRule {
    /// Parses `NAME=REGEX` (`--category`).
    pub fn parse(text: &str) -> Result<CategoryRule, String> {
        let Some((name, pattern)) = text.split_once('=') else {
            return Err(format!(
                "`{text}` is not NAME=REGEX (example: --category nccl='nccl|ProcessGroup')"
            ));
        };
        CategoryRule::new(name.trim(), pattern)
    }

    /// A rule from its name and regular expression.
    pub fn new(name: &str, pattern: &str) -> Result<CategoryRule, String> {
        if name.is_empty() {
            return Err(format!("the category for `{pattern}` has no name"));
        }
        let pattern = regex::Regex::new(pattern).map_err(|e| {
            // The parser's message draws a caret under the pattern over
            // several lines; its last line says what is wrong.
            let text = e.to_string();
            let why = text.lines().last().unwrap_or_default();
            let why = why.trim().trim_start_matches("error: ");
            format!("category `{name}`: `{pattern}` is not a regular expression ({why})")
        })?;
        Ok(CategoryRule {
            name: name.to_string(),
            pattern,
        })
    }

    /// Reads a rules file (`--categories`): one `name = "regex"` per line,
    /// in order (the first match wins), under an optional `[categories]`
    /// header; `#` starts a comment. It is TOML: basic strings (`"..."`, with
    /// `\\` and `\"` escapes) or literal strings (`'...'`, taken as written,
    /// the easy way to write a regex). `path` only names the file in errors.
    pub fn parse_file(path: &str, text: &str) -> Result<Vec<CategoryRule>, String> {
        let mut rules = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            let at = |what: String| format!("{path}:{}: {what}", n + 1);
            if line.is_empty() || line.starts_with('#') || line == "[categories]" {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(at(format!(
                    "`{line}` is not `name = \"regex\"` (see docs/categories.md)"
                )));
            };
            let name = name.trim().trim_matches('"');
            let pattern = toml_string(value.trim()).ok_or_else(|| {
                at(format!(
                    "the value of `{name}` is not a quoted string (\"...\" or '...')"
                ))
            })?;
            rules.push(CategoryRule::new(name, &pattern).map_err(at)?);
        }
        Ok(rules)
    }

    fn matches(&self, names: &Names, site: &Site) -> bool {
        if site
            .op
            .is_some_and(|op| self.pattern.is_match(names.str(op)))
        {
            return true;
        }
        names.frames_of(site.stack).any(|f| {
            let frame = names.frame_of(f);
            self.pattern.is_match(names.str(frame.function))
                || (frame.file != StrId(0) && self.pattern.is_match(names.str(frame.file)))
        })
    }
}

/// A TOML string value (basic or literal) with an optional comment after
/// it; `None` when it is not one.
fn toml_string(value: &str) -> Option<String> {
    let mut chars = value.chars();
    let quote = chars.next().filter(|&q| q == '"' || q == '\'')?;
    let mut out = String::new();
    loop {
        match chars.next()? {
            c if c == quote => break,
            '\\' if quote == '"' => match chars.next()? {
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                _ => return None,
            },
            c => out.push(c),
        }
    }
    let rest = chars.as_str().trim();
    (rest.is_empty() || rest.starts_with('#')).then_some(out)
}

/// Which allocations get an inferred category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inference {
    /// Those of memories whose file names no category (a plain
    /// `_dump_snapshot`, a trace): what every command does.
    WhereMissing,
    /// Every allocation of an event stream, replacing the file's own: to
    /// measure the rules against a profiler's categories.
    IgnoringFile,
}

/// Gives every allocation its category: the first of `rules` that matches
/// its site, else the file's, else (for memories with phases and events to
/// infer from) the inferred one; and records who named each category.
pub fn assign(profile: &mut Profile, rules: &[CategoryRule], inference: Inference) {
    assign_on(profile, rules, inference, 1);
}

/// [`assign`] with up to `jobs` threads (0: every core) inferring each
/// memory's categories: the result is the one thread's.
pub fn assign_on(profile: &mut Profile, rules: &[CategoryRule], inference: Inference, jobs: usize) {
    let _timed = crate::timings::span("categories");
    let Profile {
        names, memories, ..
    } = profile;
    let mut sites = Recategorized::default();
    let mut user: FxHashMap<SiteId, Option<usize>> = FxHashMap::default();
    for memory in memories.iter_mut() {
        let file_has_categories = memory
            .allocations
            .iter()
            .any(|a| names.site_of(a.site).category.is_some());
        let infer = !memory.phases.is_empty()
            && !memory.events.is_empty()
            && !replay::uses_instants(memory)
            && (inference == Inference::IgnoringFile || !file_has_categories);
        let inferred = if infer {
            infer_memory_on(names, memory, jobs)
        } else {
            Vec::new()
        };
        let mut sources = std::mem::take(&mut memory.category_sources);
        // What each site and choice came to, worked out at its first
        // allocation: the rest of a million allocations cost a lookup, not
        // the category's name hashed and interned again (the name's source
        // is recorded at its first allocation either way).
        let mut chosen: FxHashMap<(SiteId, Choice), SiteId> = FxHashMap::default();
        // Per site and inferred category, the site made for them.
        let mut by_site: Vec<u32> = match inferred.is_empty() {
            true => Vec::new(),
            false => vec![NOT_MADE; names.sites().len() * INFERRED_KINDS],
        };
        // The file's categories whose source is recorded: a few, compared
        // by id, where looking each allocation's name up in `sources` (a
        // string search of a tree) was most of `assign` on an XSpace.
        let mut recorded: Vec<StrId> = Vec::new();
        for (i, allocation) in memory.allocations.iter_mut().enumerate() {
            let site = allocation.site;
            // Without rules, no lookup per allocation (a site map as large
            // as a pprof's 10^6 stacks).
            let rule = if rules.is_empty() {
                None
            } else {
                *user.entry(site).or_insert_with(|| {
                    let s = names.site_of(site);
                    rules.iter().position(|r| r.matches(names, s))
                })
            };
            let choice = match (rule, inferred.get(i)) {
                (Some(r), _) => Choice::Rule(r),
                (None, Some(&c)) => Choice::Inferred(c),
                // The file's own category, or none: the site stays. No
                // lookup in `chosen` (a profile of 10^6 distinct stacks,
                // as a large pprof, would fill it for nothing).
                (None, None) => {
                    if let Some(c) = names.site_of(site).category {
                        if !recorded.contains(&c) {
                            add_source(&mut sources, names.str(c), CategorySource::Profiler);
                            if recorded.len() < 16 {
                                recorded.push(c);
                            }
                        }
                    }
                    continue;
                }
            };
            let mut make = |sources: &mut CategorySources| {
                let (name, source) = match choice {
                    Choice::Rule(r) => (rules[r].name.as_str(), CategorySource::User),
                    Choice::Inferred(c) => (c.name(), CategorySource::Inferred),
                };
                add_source(sources, name, source);
                sites.with_category(names, site, name)
            };
            allocation.site = match choice {
                // By the site's place in a table: a hash lookup for each of
                // 10^6 allocations was a fifth of `assign` on a snapshot of
                // 10^6 entries.
                Choice::Inferred(c) => {
                    let slot = site.index() * INFERRED_KINDS + c as usize;
                    if by_site.len() <= slot {
                        by_site.resize(slot + INFERRED_KINDS, NOT_MADE);
                    }
                    match by_site[slot] {
                        NOT_MADE => {
                            let made = make(&mut sources);
                            by_site[slot] = made.0;
                            made
                        }
                        made => SiteId(made),
                    }
                }
                Choice::Rule(_) => *chosen
                    .entry((site, choice))
                    .or_insert_with(|| make(&mut sources)),
            };
        }
        memory.category_sources = sources;
    }
}

/// An event's op run and the free events before it, for [`infer_memory`].
struct RunAndFrees {
    run: u32,
    frees_before: u32,
}

/// Events below which [`infer_memory_on`] stays on one thread: a thread
/// costs more to start than walking a few thousand events.
const PARALLEL_EVENTS: usize = 1 << 16;

/// How many [`Inferred`] categories there are.
const INFERRED_KINDS: usize = Inferred::Unknown as usize + 1;

/// A site not made yet, in `assign`'s table.
const NOT_MADE: u32 = u32::MAX;

/// Where an allocation's new category comes from: the user's rule (its
/// index) or the inference (the profiler's own keeps the site).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Choice {
    Rule(usize),
    Inferred(Inferred),
}

/// Records where `name` came from, unless it is recorded already: a
/// lookup per allocation, with no `String` made for names met before.
fn add_source(sources: &mut CategorySources, name: &str, source: CategorySource) {
    if !sources.contains_key(name) {
        sources.insert(name.to_string(), source);
    }
}

/// Sites with a category in place of their own, each made once.
#[derive(Default)]
struct Recategorized {
    made: FxHashMap<(SiteId, StrId), SiteId>,
    /// The category names met so far, interned: a handful, looked up by
    /// comparing them, where interning each allocation's name again
    /// (hashing it, ~120 instructions) was an eighth of `assign` on a
    /// 10^5-entry snapshot.
    names: Vec<(String, StrId)>,
}

impl Recategorized {
    fn interned(&mut self, names: &mut Names, category: &str) -> StrId {
        if let Some(&(_, id)) = self.names.iter().find(|(n, _)| n == category) {
            return id;
        }
        let id = names.string(category);
        // Many rules' names are interned as before: a search of a long
        // list would cost more than the hash.
        if self.names.len() < 16 {
            self.names.push((category.to_string(), id));
        }
        id
    }

    fn with_category(&mut self, names: &mut Names, site: SiteId, category: &str) -> SiteId {
        let category = self.interned(names, category);
        if names.site_of(site).category == Some(category) {
            return site;
        }
        *self.made.entry((site, category)).or_insert_with(|| {
            let s = *names.site_of(site);
            names.site(Site {
                category: Some(category),
                ..s
            })
        })
    }
}

/// The inferred category of each allocation of `memory`, by [`AllocId`].
pub fn infer_memory(names: &Names, memory: &Memory) -> Vec<Inferred> {
    infer_memory_on(names, memory, 1)
}

/// [`infer_memory`] with up to `jobs` threads (0: every core): the walks
/// over the events that read nothing of each other's (the op runs and
/// frees, the recomputations, the versions, the phase spans) on two
/// threads, as half of the categories of a 10^6-entry snapshot were those
/// walks one after the other while the other core idled.
fn infer_memory_on(names: &Names, memory: &Memory, jobs: usize) -> Vec<Inferred> {
    let events = &memory.events;
    let site_of = |id: AllocId| memory.allocations.get(id.index()).map(|a| a.site);
    let other_walks = || {
        (
            recomputation_cutoffs(names, memory),
            versions(names, memory),
            spans_before(memory),
        )
    };
    let runs_walk = || runs_and_frees(memory);
    let ((recomputed_freed_by, versions, spans_before), run_and_frees) =
        if crate::parallel::threads(jobs) > 1 && events.len() >= PARALLEL_EVENTS {
            crate::parallel::join(other_walks, runs_walk)
        } else {
            (other_walks(), runs_walk())
        };
    let run_of_event = |event: usize| run_and_frees[event].run;
    // No free after `made` (an allocation: the frees before it are those
    // up to it) and before `freed`.
    let freed_first = |made: usize, freed: usize| {
        run_and_frees[freed].frees_before == run_and_frees[made].frees_before
    };
    let replaced: rustc_hash::FxHashSet<AllocId> = versions.values().copied().collect();
    // The phase span an event falls in or after (by start), as
    // `partition_point` over the spans finds it: looked up, not searched
    // for (three binary searches a lifespan were half of inferring on a
    // 10^6-entry snapshot).
    let span_of = |event: usize| (spans_before[event] as usize).checked_sub(1);
    // Where the training work starts: the first forward pass, else the
    // first phase the memory shows.
    let first_work = memory
        .phases
        .iter()
        .find(|s| s.phase == Phase::Forward)
        .or(memory.phases.first())
        .map(|s| s.start);
    let forward_starts: Vec<i64> = memory
        .phases
        .iter()
        .filter(|s| s.phase == Phase::Forward)
        .map(|s| s.start)
        .collect();
    let mut out = vec![Inferred::Unknown; memory.allocations.len()];
    replay::for_each_lifespan(memory, |span| {
        let Some(slot) = out.get_mut(span.alloc.index()) else {
            return;
        };
        let Some(site) = site_of(span.alloc) else {
            return;
        };
        let site = names.site_of(site);
        let Some(made) = span.made else {
            // Re-made in place, the storage lives on: a parameter.
            *slot = if replaced.contains(&span.alloc) {
                Inferred::Parameter
            } else {
                before_recording(names, memory, site, span.freed.map(span_of))
            };
            return;
        };
        let made_at = events[made].at;
        // `Memory::phase_at(made_at)`, with the span found already.
        let phase = site.phase.or_else(|| {
            let span = memory.phases.get(span_of(made)?)?;
            (made_at <= span.end).then_some(span.phase)
        });
        let freed_in_run = span
            .freed
            .is_some_and(|f| run_of_event(f) == run_of_event(made));
        let freed_in_span = span.freed.is_some_and(|f| span_of(f) == span_of(made));
        *slot = match phase {
            Some(Phase::Forward | Phase::Loss) if freed_in_run => Inferred::Temporary,
            Some(Phase::Forward | Phase::Loss) => Inferred::Activation,
            Some(Phase::Backward) if span.freed.is_some_and(|f| freed_first(made, f)) => {
                Inferred::Temporary
            }
            Some(Phase::Backward)
                if span
                    .freed
                    .zip(recomputed_freed_by.cutoff(made))
                    .is_some_and(|(f, cutoff)| f < cutoff) =>
            {
                Inferred::Temporary
            }
            Some(Phase::Backward) if freed_in_span => Inferred::AutogradDetail,
            Some(Phase::Backward) => Inferred::Gradient,
            Some(Phase::Optimizer) if freed_in_span => Inferred::Temporary,
            Some(Phase::Optimizer) => Inferred::OptimizerState,
            Some(Phase::ZeroGrad) if freed_in_span => Inferred::Temporary,
            Some(Phase::ZeroGrad) => Inferred::Gradient,
            None if freed_in_run => Inferred::Temporary,
            None => {
                let freed_at = span.freed.map(|f| events[f].at);
                let freed_in = span
                    .freed
                    .and_then(span_of)
                    .and_then(|k| memory.phases.get(k))
                    .map(|s| s.phase);
                match (freed_at, freed_in) {
                    // Kept until the backward pass frees it: saved for it.
                    (Some(_), Some(Phase::Backward)) => Inferred::Activation,
                    (None, _) if first_work.is_some_and(|w| made_at < w) => Inferred::Parameter,
                    (Some(freed_at), _)
                        if forward_starts.iter().any(|&s| made_at < s && s <= freed_at) =>
                    {
                        Inferred::Input
                    }
                    _ => Inferred::Unknown,
                }
            }
        };
    });
    // Each new version of a storage is what the one it replaced was, in
    // event order so a chain of versions takes its first's.
    for e in events.iter().filter(|e| e.kind() == EventKind::Alloc) {
        if let Some(old) = versions
            .get(&e.alloc())
            .and_then(|old| out.get(old.index()))
        {
            let old = *old;
            if let Some(slot) = out.get_mut(e.alloc().index()) {
                *slot = old;
            }
        }
    }
    out
}

/// Each event's op run and the free events before it.
fn runs_and_frees(memory: &Memory) -> Vec<RunAndFrees> {
    let events = &memory.events;
    let site_of = |id: AllocId| memory.allocations.get(id.index()).map(|a| a.site);
    // A run is a stretch of allocations of one site (one op's, for a
    // stack or op that names it): a buffer freed inside the run that made
    // it lived only inside that op.
    //
    // Frees before each event: a buffer freed before anything else was
    // freed after it was made lived inside the op that made it (the
    // autograd engine frees a node's inputs only after the node ran).
    //
    // Both in one walk, side by side: a lifespan reads both at its two
    // events (two arrays walked twice were a fifth of the categories of a
    // 10^6-entry snapshot).
    let mut run_and_frees: Vec<RunAndFrees> = Vec::with_capacity(events.len());
    let (mut run, mut last_site, mut frees) = (0u32, None, 0u32);
    for e in events {
        if e.kind() == EventKind::Alloc {
            let site = site_of(e.alloc());
            if last_site.is_some() && site != last_site {
                run += 1;
            }
            last_site = site;
        }
        run_and_frees.push(RunAndFrees {
            run,
            frees_before: frees,
        });
        frees += u32::from(e.kind() == EventKind::Free);
    }
    run_and_frees
}

/// For each event, how many of the memory's phase spans start at or before
/// its time (`partition_point(|s| s.start <= at)`): one walk beside the
/// events where they are in time order, a search where one goes back.
fn spans_before(memory: &Memory) -> Vec<u32> {
    let spans = &memory.phases;
    let mut out = Vec::with_capacity(memory.events.len());
    let (mut k, mut last) = (0usize, i64::MIN);
    for e in &memory.events {
        if e.at < last {
            k = spans.partition_point(|s| s.start <= e.at);
        } else {
            while spans.get(k).is_some_and(|s| s.start <= e.at) {
                k += 1;
            }
        }
        last = e.at;
        out.push(u32::try_from(k).unwrap_or(u32::MAX));
    }
    out
}

/// Activation checkpointing recomputes a block's forward pass inside the
/// backward pass, when the first autograd node that needs one of its saved
/// tensors unpacks it (`torch/utils/checkpoint.py` in the stack). That node
/// uses what it asked for, makes its gradient (the first allocation after
/// the recomputation) and frees its inputs: a recomputed tensor freed
/// before the allocation after that one lived inside that node, a
/// temporary of it as PyTorch's memory profiler files it; the rest are kept
/// for later nodes (`autograd_detail`). For each allocation event of a
/// recomputation, the event before which it must be freed to be a
/// temporary.
fn recomputation_cutoffs(names: &Names, memory: &Memory) -> RecomputedRuns {
    let events = &memory.events;
    // Per site: unknown yet, recomputing or not; a table by site where a
    // hash lookup per allocation event was a third of the categories of a
    // 10^6-entry snapshot.
    const UNKNOWN: u8 = 0;
    const NOT_RECOMPUTED: u8 = 1;
    const RECOMPUTED: u8 = 2;
    let mut recomputing = vec![UNKNOWN; names.sites().len()];
    let mut is_recomputed = |id: AllocId| {
        let Some(site) = memory.allocations.get(id.index()).map(|a| a.site) else {
            return false;
        };
        let Some(known) = recomputing.get_mut(site.index()) else {
            return false;
        };
        if *known == UNKNOWN {
            let checkpointed = names.frames_of(names.site_of(site).stack).any(|f| {
                names
                    .str(names.frame_of(f).file)
                    .ends_with("torch/utils/checkpoint.py")
            });
            *known = if checkpointed {
                RECOMPUTED
            } else {
                NOT_RECOMPUTED
            };
        }
        *known == RECOMPUTED
    };
    // A run of recomputed allocations (one node's recomputation) ends at
    // the first allocation that is not (`k`, the node's gradient); its
    // cutoff is the allocation after that one, which may start the next
    // run, so a run waits for the allocation after its end.
    let mut runs = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    let mut ended: Option<(usize, usize)> = None;
    for (i, e) in events.iter().enumerate() {
        if e.kind() != EventKind::Alloc {
            continue;
        }
        if let Some((first, last)) = ended.take() {
            runs.push(RecomputedRun {
                first,
                last,
                cutoff: i,
            });
        }
        if is_recomputed(e.alloc()) {
            open = Some(open.map_or((i, i), |(first, _)| (first, i)));
        } else {
            ended = open.take();
        }
    }
    // A run without a gradient, or without an allocation after it, has
    // the end of the events as its cutoff.
    for (first, last) in ended.into_iter().chain(open) {
        runs.push(RecomputedRun {
            first,
            last,
            cutoff: events.len(),
        });
    }
    RecomputedRuns(runs)
}

/// The allocation events of one recomputation, `first..=last` (every
/// allocation event there is one of them), and the event before which each
/// must be freed to be a temporary.
struct RecomputedRun {
    first: usize,
    last: usize,
    cutoff: usize,
}

/// [`recomputation_cutoffs`]' runs, in event order.
struct RecomputedRuns(Vec<RecomputedRun>);

impl RecomputedRuns {
    /// The cutoff of the allocation made by event `made`, if a
    /// recomputation made it.
    fn cutoff(&self, made: usize) -> Option<usize> {
        let after = self.0.partition_point(|r| r.first <= made);
        let run = self.0.get(after.checked_sub(1)?)?;
        (made <= run.last).then_some(run.cutoff)
    }
}

/// The allocations that are new versions of the storage of one just freed:
/// made by the event right after its free, at its address, of its size,
/// with no phase of their own and its stack (a profiler-made snapshot
/// tracks tensor versions: an in-place update of a parameter or of
/// optimizer state frees the old version and makes the new one there).
/// The freed allocation of each new version.
fn versions(names: &Names, memory: &Memory) -> FxHashMap<AllocId, AllocId> {
    let mut out = FxHashMap::default();
    for pair in memory.events.windows(2) {
        let (free, alloc) = (&pair[0], &pair[1]);
        if free.kind() != EventKind::Free || alloc.kind() != EventKind::Alloc {
            continue;
        }
        let (Some(old), Some(new)) = (
            memory.allocations.get(free.alloc().index()),
            memory.allocations.get(alloc.alloc().index()),
        ) else {
            continue;
        };
        let new_site = names.site_of(new.site);
        if old.address.is_none()
            || old.address != new.address
            || old.bytes != new.bytes
            || new_site.phase.is_some()
        {
            continue;
        }
        let frames = |site: SiteId| {
            names
                .frames_of(names.site_of(site).stack)
                .filter(|&f| names.before_recording_frame(f).is_none())
                .collect::<Vec<_>>()
        };
        if frames(old.site) == frames(new.site) {
            out.insert(alloc.alloc(), free.alloc());
        }
    }
    out
}

/// The category of memory made before the recording: still live at the end,
/// a parameter (made before the first forward pass of the recording and
/// never freed); freed in a backward pass, an activation of a forward pass
/// before the recording; freed by `zero_grad`, a gradient; freed by the
/// optimizer's step, optimizer state that its update replaced (made by the
/// step before); else unknown.
fn before_recording(
    names: &Names,
    memory: &Memory,
    site: &Site,
    freed_span: Option<Option<usize>>,
) -> Inferred {
    let which = names.before_recording_op(site.op);
    match freed_span {
        None => match which {
            // A live block whose stack the file kept: the phase its frames
            // name, as for an allocation of the recording that stays live.
            Some(BeforeRecording::StillLive) | None => Inferred::Parameter,
            Some(BeforeRecording::Freed) => Inferred::Unknown,
        },
        Some(span) => match span.and_then(|s| memory.phases.get(s)).map(|s| s.phase) {
            Some(Phase::Backward) => Inferred::Activation,
            Some(Phase::ZeroGrad) => Inferred::Gradient,
            Some(Phase::Optimizer) => Inferred::OptimizerState,
            _ => Inferred::Unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, Event, Frame, MemoryKind};

    /// One step: weights and a batch before it, a forward pass with an
    /// activation and an op's temporary, a backward pass with a gradient,
    /// an activation's gradient on its way and an op's temporary, an
    /// optimizer step with its state and a temporary; and memory from
    /// before the recording freed by the backward pass.
    #[test]
    fn each_rule_on_one_step() {
        let mut names = Names::default();
        let site = |names: &mut Names, function: &str, phase| {
            let function = names.string(function);
            let frame = names.frame(Frame {
                function,
                file: StrId(0),
                line: 1,
            });
            let stack = names.stack_leaf_first(&[frame]);
            names.site(Site {
                stack,
                phase,
                ..Site::default()
            })
        };
        let setup = site(&mut names, "setup", None);
        let batch = site(&mut names, "batch", None);
        let linear = site(&mut names, "linear", Some(Phase::Forward));
        let softmax = site(&mut names, "softmax", Some(Phase::Forward));
        let engine = site(&mut names, "engine", Some(Phase::Backward));
        let adam = site(&mut names, "adam", Some(Phase::Optimizer));
        let earlier = names.before_recording_site(
            BeforeRecording::Freed,
            crate::model::StackId(0),
            None,
            None,
            None,
        );
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
        let alloc = |m: &mut Memory, site| {
            m.push_allocation(Allocation {
                bytes: 1,
                requested: 1,
                count: 1,
                address: None,
                site,
            })
        };
        let weights = alloc(&mut m, setup);
        let input = alloc(&mut m, batch);
        let activation = alloc(&mut m, linear);
        let temporary = alloc(&mut m, softmax);
        let output = alloc(&mut m, softmax);
        let before = alloc(&mut m, earlier);
        let detail = alloc(&mut m, engine);
        let scratch = alloc(&mut m, engine);
        let gradient = alloc(&mut m, engine);
        let state = alloc(&mut m, adam);
        let update = alloc(&mut m, adam);
        m.live_at_start = vec![before];
        use EventKind::{Alloc, Free};
        let plan = [
            (Alloc, weights),
            (Alloc, input),
            (Alloc, activation),
            (Alloc, temporary),
            (Free, temporary),
            (Alloc, output),
            (Free, output),
            (Alloc, detail),
            (Free, before),
            (Alloc, scratch),
            (Free, scratch),
            (Alloc, gradient),
            (Free, activation),
            (Free, detail),
            (Alloc, state),
            (Alloc, update),
            (Free, update),
            (Free, input),
        ];
        for (at, (kind, alloc)) in plan.into_iter().enumerate() {
            m.events.push(Event::new(at as i64, kind, alloc));
        }
        m.find_phases(&names);
        let got = infer_memory(&names, &m);
        let want = [
            (weights, Inferred::Parameter),
            (input, Inferred::Input),
            (activation, Inferred::Activation),
            (temporary, Inferred::Temporary),
            // Freed before an allocation of another site: a temporary too.
            (output, Inferred::Temporary),
            (before, Inferred::Activation),
            (detail, Inferred::AutogradDetail),
            (scratch, Inferred::Temporary),
            (gradient, Inferred::Gradient),
            (state, Inferred::OptimizerState),
            (update, Inferred::Temporary),
        ];
        for (id, category) in want {
            assert_eq!(got[id.index()], category, "{id:?}");
        }
    }

    #[test]
    fn user_rules_parse_from_flags_and_files() {
        let rule = CategoryRule::parse("nccl=nccl|ProcessGroup").unwrap();
        assert_eq!(rule.name, "nccl");
        assert!(rule.pattern.is_match("ProcessGroupNCCL"));
        assert!(CategoryRule::parse("nccl")
            .unwrap_err()
            .contains("NAME=REGEX"));
        assert!(CategoryRule::parse("=x").unwrap_err().contains("no name"));
        let err = CategoryRule::parse("bad=(").unwrap_err();
        assert!(
            !err.contains('\n') && err.contains("unclosed group"),
            "{err}"
        );
        let rules = CategoryRule::parse_file(
            "team.toml",
            "# rules\n[categories]\nkv_cache = 'past_key_values|kv\\.cache'\n\
             lora = \"(?i)lora\\\\d\" # adapters\n\n",
        )
        .unwrap();
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["kv_cache", "lora"]);
        assert!(rules[0].pattern.is_match("kv.cache"));
        assert!(rules[1].pattern.is_match("LoRA1"));
        for bad in [
            "x = unquoted",
            "x = 'open",
            "just words",
            "x = 'a' trailing",
        ] {
            let err = CategoryRule::parse_file("f.toml", bad).unwrap_err();
            assert!(err.starts_with("f.toml:1: "), "{err}");
        }
    }
}
