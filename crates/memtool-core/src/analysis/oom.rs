//! `oom`: why an allocation failed, and what would make it fit.
//!
//! Two kinds of failure are read from the model:
//! - an allocator's recorded failures ([`Memory::out_of_memory`], PyTorch's
//!   `oom` trace entries), with the allocator's segments at that moment
//!   (an out-of-memory observer dumps the snapshot right after the failure,
//!   once the allocator has released every segment with no live block);
//! - a compiled program whose peak exceeds the device's capacity (given,
//!   or recorded in the profile).
//!
//! The verdict for an allocator's failure, with request `Q`, reserved `R`
//! (allocated `A`, pending frees `P`, free blocks `F`), device free `D` and
//! capacity `C` (given; else `R + D`, all the allocator could reach):
//! - **fragmentation** when `Q ≤ F + D`: the memory was there, but no free
//!   block (and no new segment) could take the request whole;
//! - **outside_pytorch** when it was not, but `A + P + Q ≤ C`: the request
//!   would fit on the device if memory held outside the allocator were free;
//! - **capacity** otherwise: what was live plus the request exceeds the
//!   device.

use serde::Serialize;

use crate::model::{
    AllocId, CategorySource, CategorySources, EventKind, Memory, OutOfMemory, Profile,
};
use crate::report::units::bytes as size;
use crate::report::{Cell, Table};

use super::failure_state::{self, AllocatorState};
pub use super::failure_state::{PoolFree, StateAtFailure};
use super::group::{self, GroupBy, Totals};
use super::program_peak::BufferAtPeak;
pub use super::setting_advice::SettingAdvice;
use super::{display_id, point_label, replay, MemoryHeader, Options, PeakFacts};

/// Allocations listed from the last moments before a failure.
const RECENT_ALLOCATIONS: usize = 10;

/// Largest live groups listed per breakdown.
const GROUPS_LISTED: usize = 10;

/// Buffers of a program listed at its peak.
const BUFFERS_LISTED: usize = 20;

/// PyTorch's caching allocator serves requests up to 1 MiB from its small
/// pool (`kSmallSize`), larger ones from the large pool.
const SMALL_POOL_MAX_BYTES: u64 = 1 << 20;

/// Why the memory ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// What was live plus the request exceeds the device.
    Capacity,
    /// Enough memory was free, but not in one piece.
    Fragmentation,
    /// The device would have held it, but memory outside the allocator (other
    /// libraries' workspaces, another process) was in the way.
    OutsidePytorch,
}

impl Verdict {
    /// The name used in every output (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Capacity => "capacity",
            Verdict::Fragmentation => "fragmentation",
            Verdict::OutsidePytorch => "outside_pytorch",
        }
    }
}

/// Where a capacity figure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacitySource {
    /// `--capacity` (or `peak --budget`).
    Given,
    /// The profile records the device's size.
    Profile,
    /// Not known: reserved plus the device's free memory, all the allocator
    /// could reach.
    ReservedPlusFree,
    /// Not known at all (an XLA report that does not state it): the
    /// post-mortem's `capacity_bytes` is 0.
    Unknown,
}

/// One failure explained.
#[derive(Debug, Serialize)]
pub struct PostMortem {
    /// Which memory (its `capacity_bytes` left out: the post-mortem's own
    /// is the one it used).
    #[serde(flatten)]
    pub header: MemoryHeader,
    /// Why it failed.
    pub verdict: Verdict,
    /// The verdict in one plain sentence with its figures.
    pub explanation: String,
    /// Bytes asked for (for a program: its peak, what it needs at once).
    pub request_bytes: u64,
    /// The device's capacity used for the verdict.
    pub capacity_bytes: u64,
    /// Where `capacity_bytes` came from.
    pub capacity_source: CapacitySource,
    /// Bytes that would have had to be free for the request to succeed and
    /// were not: for capacity, live + request − capacity; for memory outside
    /// PyTorch, live + request − (reserved + device free); for
    /// fragmentation, the request − the largest free block that could take it.
    pub shortfall_bytes: u64,
    /// The allocator's failure, when this is one.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorFailure>,
    /// The program over capacity, when this is one.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramOverCapacity>,
    /// The XLA report this post-mortem reads, when it is one.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub xla_report: Option<super::xla_report_facts::XlaReportFacts>,
    /// What was live by user frame, largest first.
    pub live_by_user_frame: Vec<group::Group>,
    /// What was live by op, largest first (empty when no allocation names one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live_by_op: Vec<group::Group>,
    /// What was live by category or phase, largest first (empty when none is named).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live_by_category: Vec<group::Group>,
    /// Who named each category of `live_by_category` (`profiler`,
    /// `inferred`, `user`; see docs/categories.md), when any did.
    #[serde(skip_serializing_if = "CategorySources::is_empty")]
    pub category_sources: CategorySources,
    /// For capacity: the largest live groups (by user frame, then op), largest
    /// first, until freeing them together makes the request fit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove_to_fit: Vec<RemovalCandidate>,
}

/// The figures of an allocator's failed allocation.
#[derive(Debug, Serialize)]
pub struct AllocatorFailure {
    /// Position of the failure on the memory's axis.
    pub at: i64,
    /// The position as a person reads it.
    pub at_label: String,
    /// The step it failed in, when the profile marks steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// The stream the request was for, when recorded.
    pub stream: Option<i64>,
    /// The allocator's pool the request goes to (`small` up to 1 MiB, else
    /// `large`), when the segments name pools.
    pub pool: Option<String>,
    /// Free device memory the driver reported at the failure.
    pub device_free_bytes: Option<u64>,
    /// Bytes the allocator held from the device (its segments) at the
    /// failure.
    pub reserved_bytes: u64,
    /// Bytes of blocks handed out at the failure, as the allocator rounds
    /// them (a block's size, not the request: see `live_bytes`).
    pub allocated_bytes: u64,
    /// Bytes the program asked for and held at the failure (the replayed
    /// live set): the figure `summary` and `peak` call live, and what
    /// `live_by_user_frame` adds up to.
    pub live_bytes: u64,
    /// Bytes of blocks freed but waiting for stream work.
    pub pending_free_bytes: u64,
    /// Bytes of free blocks inside the reserved segments.
    pub free_in_reserved_bytes: u64,
    /// The capacity less reserved and device free: memory held outside the
    /// allocator (0 without a capacity).
    pub outside_bytes: u64,
    /// Whether the recorded segments are the allocator's state at the
    /// failure (no event follows it), rather than a later one.
    pub segments_at_failure: bool,
    /// Where the figures at the failure come from: `segments` (recorded
    /// then), `replayed` (events follow the failure, so the segments were
    /// replayed back to it), `unknown` (events follow it and the file does
    /// not record the segments' ranges: free memory inside them is unknown
    /// and counted as none).
    pub state_at_failure: StateAtFailure,
    /// Events recorded after the failure.
    pub events_after_failure: usize,
    /// Free memory per pool and stream, most free first.
    pub pools: Vec<PoolFree>,
    /// For fragmentation: the allocator settings that address it, each with
    /// the figure of this snapshot it would change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingAdvice>,
    /// The stack of the failed allocation as shown (user frames first, leaf
    /// first); empty when none was recorded.
    pub stack: Vec<String>,
    /// The innermost user frame of that stack.
    pub user_frame: Option<String>,
    /// The last allocations before the failure, latest first.
    pub recent_allocations: Vec<RecentAllocation>,
}

/// One allocation from the last moments before a failure.
#[derive(Debug, Serialize)]
pub struct RecentAllocation {
    /// Its position on the memory's axis.
    pub at: i64,
    /// The position as a person reads it (`t+1.930 ms`).
    pub at_label: String,
    /// Its bytes.
    pub bytes: u64,
    /// Whether it was still live at the failure.
    pub live: bool,
    /// Its stack as shown, else its op and shape.
    pub key: String,
}

/// One group whose removal would help the request fit.
#[derive(Debug, Serialize)]
pub struct RemovalCandidate {
    /// The group: a user frame (or an op).
    pub key: String,
    /// Its live bytes.
    pub bytes: u64,
    /// Bytes of this and every larger candidate together.
    pub cumulative_bytes: u64,
}

/// A compiled program whose peak exceeds the device.
#[derive(Debug, Serialize)]
pub struct ProgramOverCapacity {
    /// The program's peak.
    pub peak_bytes: u64,
    /// Where the peak is, as a person reads it.
    pub peak_label: String,
    /// The instruction executing at the peak.
    pub peak_instruction: Option<String>,
    /// Bytes over capacity at the peak.
    pub over_bytes: u64,
    /// Bytes the buffers live at the peak take beyond their unpadded shapes.
    pub padding_waste_bytes: u64,
    /// The peak with every live buffer unpadded.
    pub unpadded_peak_bytes: u64,
    /// Bytes live at the peak by framework op, largest first.
    pub by_op: Vec<group::Group>,
    /// Bytes live at the peak by shape, largest first.
    pub by_shape: Vec<group::Group>,
    /// Bytes live at the peak by source line, largest first.
    pub by_source: Vec<group::Group>,
    /// The largest buffers live at the peak, with their padding.
    pub buffers: Vec<BufferAtPeak>,
}

pub(super) fn allocator_post_mortem(
    profile: &Profile,
    memory: &Memory,
    failure: &OutOfMemory,
    options: &Options,
) -> PostMortem {
    let given_capacity = options.capacity;
    let names = &profile.names;
    let request = failure.requested_bytes;
    let device_free = failure.device_free_bytes.unwrap_or(0);
    let request_pool = request_pool(profile, memory, request);

    let live = replay::live_at(memory, failure.events_before);
    let live_bytes = live
        .iter()
        .fold(0u64, |t, &id| t.saturating_add(memory.allocation(id).bytes));
    let state = failure_state::at_failure(memory, failure, &live, |p| names.str(p).to_string());
    let AllocatorState {
        source: state_source,
        reserved,
        allocated,
        pending,
        free,
        ref pools,
        events_after,
        ..
    } = state;
    let reachable = reserved.saturating_add(device_free);
    let (capacity, capacity_source) = match given_capacity.or(memory.capacity) {
        Some(c) if c >= reachable => (
            c,
            if given_capacity.is_some() {
                CapacitySource::Given
            } else {
                CapacitySource::Profile
            },
        ),
        _ => (reachable, CapacitySource::ReservedPlusFree),
    };
    let outside = capacity.saturating_sub(reachable);
    let in_use = allocated.saturating_add(pending);
    let needed = in_use.saturating_add(request);
    // The pool and stream the request goes to: its largest free block is the
    // one that could have taken it.
    let own_pool = pools.iter().find(|p| {
        p.pool == request_pool && (failure.stream.is_none() || p.stream == failure.stream)
    });
    let largest_own = own_pool.map_or(0, |p| p.largest_free_block_bytes);
    let verdict = if request <= free.saturating_add(device_free) {
        Verdict::Fragmentation
    } else if needed <= capacity {
        Verdict::OutsidePytorch
    } else {
        Verdict::Capacity
    };
    let shortfall = match verdict {
        Verdict::Capacity => needed - capacity,
        Verdict::OutsidePytorch => needed.saturating_sub(reachable),
        Verdict::Fragmentation => request.saturating_sub(largest_own.max(device_free)),
    };

    let mut grouper = group::Grouper::new(names, &options.frames);
    let by_site = group::totals_by_site(memory, &live);
    let by_user_frame = grouper.breakdown(&by_site, GroupBy::UserFrame);
    let listed = |groups: Vec<group::Group>| groups.into_iter().take(GROUPS_LISTED).collect();
    let live_by_op = if group::has_values(names, &by_site, GroupBy::Op) {
        grouper.breakdown(&by_site, GroupBy::Op)
    } else {
        Vec::new()
    };
    let live_by_category = if group::has_values(names, &by_site, GroupBy::Category) {
        grouper.breakdown(&by_site, GroupBy::Category)
    } else {
        Vec::new()
    };
    let too_large = request > capacity;
    let remove_to_fit = if verdict == Verdict::Capacity && !too_large {
        removal(&by_user_frame, shortfall)
    } else {
        Vec::new()
    };

    let pool_label = |pool: &Option<String>, stream: Option<i64>| {
        let pool = pool.as_deref().unwrap_or("the");
        match stream {
            Some(s) => format!("{pool} pool of stream {s}"),
            None => format!("{pool} pool"),
        }
    };
    let explanation = match verdict {
        Verdict::Capacity if too_large => format!(
            "capacity: the {} requested alone is more than the {} the device holds{}; no \
             freeing makes it fit, the tensor itself must shrink (or be split across devices)",
            size(request),
            size(capacity),
            match capacity_source {
                CapacitySource::ReservedPlusFree => " (reserved + device free)",
                _ => "",
            }
        ),
        Verdict::Capacity => format!(
            "capacity: {} in use plus the {} requested needs {}, more than the {} the device \
             holds{}; {} must go for the request to fit",
            size(in_use),
            size(request),
            size(needed),
            size(capacity),
            match capacity_source {
                CapacitySource::ReservedPlusFree => " (reserved + device free; give --capacity \
                                                    to tell memory outside PyTorch apart)"
                    .to_string(),
                _ if outside > 0 => format!(", {} of it held outside PyTorch", size(outside)),
                _ => String::new(),
            },
            size(shortfall)
        ),
        Verdict::Fragmentation => {
            format!(
            "fragmentation: {} requested, {} free inside reserved segments ({}) plus {} free on \
             the device, but the largest free block in the {} is {}: the free memory is split",
            size(request),
            size(free),
            pools
                .iter()
                .filter(|p| p.free_bytes > 0)
                .map(|p| format!("{} in the {}", size(p.free_bytes), pool_label(&p.pool, p.stream)))
                .collect::<Vec<_>>()
                .join(", "),
            size(device_free),
            own_pool.map_or_else(
                || pool_label(&request_pool, failure.stream),
                |p| pool_label(&p.pool, p.stream)
            ),
            size(largest_own)
        )
        }
        Verdict::OutsidePytorch => format!(
            "memory outside PyTorch: the device holds {}, PyTorch reserved {} and the driver \
             reported {} free, so {} is held outside PyTorch (NCCL, cuBLAS workspaces, another \
             process); without it the {} request would fit",
            size(capacity),
            size(reserved),
            size(device_free),
            size(outside),
            size(request)
        ),
    };
    let explanation = match state_source {
        StateAtFailure::Segments => explanation,
        StateAtFailure::Replayed => format!(
            "{explanation} (figures at the failure, replayed from the trace: {} events follow \
             it, and the segments recorded are a later state)",
            events_after
        ),
        StateAtFailure::Unknown if events_after > 0 => format!(
            "{explanation} (the file does not say which segments the allocator held at the \
             failure, and {} events follow it: free memory inside them is unknown and counted \
             as none)",
            events_after
        ),
        StateAtFailure::Unknown => format!(
            "{explanation} (the file records no segments: free memory inside them is unknown \
             and counted as none)"
        ),
    };
    let settings = if verdict == Verdict::Fragmentation {
        super::setting_advice::advise(memory, &state, request, device_free, own_pool)
    } else {
        Vec::new()
    };

    let stack = names.site_of(failure.site).stack;
    let shown: Vec<String> = options
        .frames
        .frames(names, stack)
        .into_iter()
        .map(|f| options.frames.frame_text(names, f))
        .collect();
    let user_frame = options
        .frames
        .user_frame(names, stack)
        .map(|f| options.frames.frame_text(names, f));
    let recent_allocations = memory.events[..failure.events_before.min(memory.events.len())]
        .iter()
        .rev()
        .filter(|e| e.kind() == EventKind::Alloc)
        .take(RECENT_ALLOCATIONS)
        .map(|e| {
            let a = memory.allocation(e.alloc());
            RecentAllocation {
                at: e.at,
                at_label: point_label(memory, usize::MAX, e.at),
                bytes: a.bytes,
                live: live.contains(&e.alloc()),
                key: group::stack_or_op_shape(names, a.site, &options.frames),
            }
        })
        .collect();
    let mut header = MemoryHeader::of(memory);
    // The post-mortem states the capacity it used itself (`capacity_bytes`).
    header.capacity_bytes = None;
    PostMortem {
        header,
        verdict,
        explanation,
        request_bytes: request,
        capacity_bytes: capacity,
        capacity_source,
        shortfall_bytes: shortfall,
        allocator: Some(AllocatorFailure {
            at: failure.at,
            at_label: point_label(memory, usize::MAX, failure.at),
            step: memory.step_at(failure.at).map(|s| s.id),
            stream: failure.stream,
            pool: request_pool,
            device_free_bytes: failure.device_free_bytes,
            reserved_bytes: reserved,
            allocated_bytes: allocated,
            live_bytes,
            pending_free_bytes: pending,
            free_in_reserved_bytes: free,
            outside_bytes: outside,
            segments_at_failure: events_after == 0,
            state_at_failure: state_source,
            events_after_failure: events_after,
            pools: state.pools.clone(),
            settings,
            stack: shown,
            user_frame,
            recent_allocations,
        }),
        program: None,
        xla_report: None,
        live_by_user_frame: listed(by_user_frame),
        live_by_op: listed(live_by_op),
        category_sources: sources_of(memory, &listed(live_by_category.clone())),
        live_by_category: listed(live_by_category),
        remove_to_fit,
    }
}

/// The pool a request of `request` bytes goes to, when the segments name
/// pools: PyTorch's small pool up to 1 MiB, else its large pool.
fn request_pool(profile: &Profile, memory: &Memory, request: u64) -> Option<String> {
    let named = |name: &str| {
        memory
            .segments
            .iter()
            .any(|s| s.pool.is_some_and(|p| profile.names.str(p) == name))
    };
    let want = if request <= SMALL_POOL_MAX_BYTES {
        "small"
    } else {
        "large"
    };
    (named("small") || named("large")).then(|| want.to_string())
}

/// The largest groups, largest first, until together they cover `needed`.
pub(super) fn removal(groups: &[group::Group], needed: u64) -> Vec<RemovalCandidate> {
    let mut out = Vec::new();
    let mut cumulative = 0u64;
    for g in groups {
        if cumulative >= needed {
            break;
        }
        cumulative = cumulative.saturating_add(g.totals.bytes);
        out.push(RemovalCandidate {
            key: g.key.to_string(),
            bytes: g.totals.bytes,
            cumulative_bytes: cumulative,
        });
    }
    out
}

/// A program's buffers (`buffers`) grouped by `key` (op, shape, source
/// line), the largest groups first; none where no buffer names a group, as
/// such a breakdown says nothing. One code path for a profile's programs
/// and XLA's reports.
pub(super) fn buffers_by(
    buffers: &[BufferAtPeak],
    key: fn(&BufferAtPeak) -> Option<&String>,
) -> Vec<group::Group> {
    let mut groups: Vec<group::Group> = Vec::new();
    for b in buffers {
        let k = key(b).map_or(group::NONE_LABEL, String::as_str);
        let totals = Totals {
            bytes: b.bytes,
            requested_bytes: b.unpadded_bytes,
            count: 1,
        };
        match groups.iter_mut().find(|g| &*g.key == k) {
            Some(g) => g.totals.add(totals),
            None => groups.push(group::Group {
                key: k.into(),
                totals,
            }),
        }
    }
    group::sort_groups(&mut groups);
    groups.truncate(GROUPS_LISTED);
    if groups.iter().all(|g| &*g.key == group::NONE_LABEL) {
        groups.clear();
    }
    groups
}

/// The post-mortem of a compiled program whose peak exceeds `capacity`;
/// `None` when it fits.
pub fn program_post_mortem(
    profile: &Profile,
    memory: &Memory,
    options: &Options,
    capacity: u64,
    capacity_source: CapacitySource,
) -> Option<PostMortem> {
    let facts = PeakFacts::of(memory, options.ties)?;
    let peak = facts.peak.bytes;
    if peak <= capacity {
        return None;
    }
    let point = facts.point();
    let live: Vec<AllocId> = replay::live_at(memory, point.index);
    let program = super::program_peak::program_peak(profile, memory, point, &live, false)?;
    let padding_waste = program.buffers_at_peak.iter().fold(0u64, |t, b| {
        t.saturating_add(b.bytes.saturating_sub(b.unpadded_bytes))
    });
    let by = |key| buffers_by(&program.buffers_at_peak, key);
    let by_op = by(|b| b.op_name.as_ref().or(b.opcode.as_ref()));
    let by_shape = by(|b| b.shape.as_ref());
    let by_source = by(|b| b.source.as_ref());
    let over = peak - capacity;
    let unpadded_peak = peak.saturating_sub(padding_waste);
    let explanation = format!(
        "capacity: {} needs {} at its peak ({}), {} more than the {} the device holds{}",
        program_name(memory),
        size(peak),
        facts.label,
        size(over),
        size(capacity),
        if padding_waste == 0 {
            String::new()
        } else if unpadded_peak <= capacity {
            format!(
                "; {} of it is layout padding, and without it the program would fit",
                size(padding_waste)
            )
        } else {
            format!("; {} of it is layout padding", size(padding_waste))
        }
    );
    let mut grouper = group::Grouper::new(&profile.names, &options.frames);
    let by_site = group::totals_by_site(memory, &live);
    let by_user_frame: Vec<group::Group> = grouper
        .breakdown(&by_site, GroupBy::UserFrame)
        .into_iter()
        .take(GROUPS_LISTED)
        .collect();
    let mut header = facts.header;
    header.capacity_bytes = None;
    let mut buffers = program.buffers_at_peak;
    buffers.truncate(BUFFERS_LISTED);
    let phases = program.phases;
    Some(PostMortem {
        header,
        verdict: Verdict::Capacity,
        explanation,
        request_bytes: peak,
        capacity_bytes: capacity,
        capacity_source,
        shortfall_bytes: over,
        allocator: None,
        remove_to_fit: removal(&by_op, over),
        program: Some(ProgramOverCapacity {
            peak_bytes: peak,
            peak_label: facts.label,
            peak_instruction: program.peak_instruction,
            over_bytes: over,
            padding_waste_bytes: padding_waste,
            unpadded_peak_bytes: unpadded_peak,
            by_op,
            by_shape,
            by_source,
            buffers,
        }),
        xla_report: None,
        live_by_user_frame: by_user_frame,
        live_by_op: Vec::new(),
        live_by_category: phases,
        category_sources: CategorySources::new(),
    })
}

/// Who named each category of `groups`, as the memory records it.
fn sources_of(memory: &Memory, groups: &[group::Group]) -> CategorySources {
    groups
        .iter()
        .filter_map(|g| Some((g.key.to_string(), memory.category_source(&g.key)?)))
        .collect()
}

fn program_name(memory: &Memory) -> String {
    match &memory.program {
        Some(p) if p.memory_space != 0 => format!("{} (memory space {})", p.module, p.memory_space),
        Some(p) => p.module.clone(),
        None => memory.id.clone(),
    }
}

impl PostMortem {
    /// The post-mortem's tables, for `oom` and the reports that open with it.
    pub fn tables(&self) -> Vec<Table> {
        let id = display_id(&self.header.id);
        let mut tables = Vec::new();
        let mut figures = Table::new(
            format!("Out of memory — {id}: {}", self.verdict.name()),
            vec!["figure", "bytes"],
        );
        let mut row = |name: &str, bytes: Option<u64>| {
            if let Some(b) = bytes {
                figures.rows.push(vec![name.into(), Cell::Bytes(b)]);
            }
        };
        row("request", Some(self.request_bytes));
        row(
            match self.capacity_source {
                CapacitySource::ReservedPlusFree => "capacity (reserved + device free)",
                CapacitySource::Given => "capacity (given)",
                CapacitySource::Profile if self.xla_report.is_some() => {
                    "capacity (from the report)"
                }
                CapacitySource::Profile => "capacity (from the profile)",
                CapacitySource::Unknown => "capacity (unknown: give --capacity)",
            },
            Some(self.capacity_bytes),
        );
        if let Some(a) = &self.allocator {
            let reserved = match a.state_at_failure {
                StateAtFailure::Segments => "reserved",
                StateAtFailure::Replayed => "reserved (replayed to the failure)",
                StateAtFailure::Unknown => "reserved (unknown: live blocks only)",
            };
            row(reserved, Some(a.reserved_bytes));
            row("allocated (blocks, rounded)", Some(a.allocated_bytes));
            row("live (requested)", Some(a.live_bytes));
            if a.pending_free_bytes > 0 {
                row("pending free", Some(a.pending_free_bytes));
            }
            row("free in reserved", Some(a.free_in_reserved_bytes));
            row("device free", a.device_free_bytes);
            if self.capacity_source != CapacitySource::ReservedPlusFree {
                row("outside PyTorch", Some(a.outside_bytes));
            }
        }
        if let Some(p) = &self.program {
            row("peak", Some(p.peak_bytes));
            row("over capacity", Some(p.over_bytes));
            row("padding waste at peak", Some(p.padding_waste_bytes));
            row("peak without padding", Some(p.unpadded_peak_bytes));
        }
        row("shortfall", Some(self.shortfall_bytes));
        tables.push(figures);
        if let Some(x) = &self.xla_report {
            tables.extend(x.tables(&id));
        }

        if let Some(a) = &self.allocator {
            if !a.pools.is_empty() {
                let mut t = Table::new(
                    format!("Free inside reserved segments — {id}"),
                    vec![
                        "pool",
                        "stream",
                        "segments",
                        "reserved",
                        "free",
                        "free_blocks",
                        "largest_free_block",
                    ],
                );
                for p in &a.pools {
                    t.rows.push(vec![
                        p.pool.clone().unwrap_or_else(|| "-".into()).into(),
                        p.stream.map_or(Cell::Empty, Cell::Int),
                        Cell::Count(p.segments as u64),
                        Cell::Bytes(p.reserved_bytes),
                        Cell::Bytes(p.free_bytes),
                        Cell::Count(p.free_blocks as u64),
                        Cell::Bytes(p.largest_free_block_bytes),
                    ]);
                }
                tables.push(t);
            }
            if !a.settings.is_empty() {
                let mut t = Table::new(
                    format!("Allocator settings that address it — {id} (PYTORCH_CUDA_ALLOC_CONF)"),
                    vec!["setting", "bytes"],
                );
                for s in &a.settings {
                    t.rows
                        .push(vec![s.setting.clone().into(), Cell::Bytes(s.bytes)]);
                    t.notes.push(format!("{}: {}", s.setting, s.effect));
                }
                tables.push(t);
            }
        }
        if !self.remove_to_fit.is_empty() {
            let mut t = Table::ranked(
                format!(
                    "What must go for it to fit — {id}: {} short",
                    size(self.shortfall_bytes)
                ),
                vec!["group", "bytes", "cumulative"],
            );
            for c in &self.remove_to_fit {
                t.rows.push(vec![
                    c.key.clone().into(),
                    Cell::Bytes(c.bytes),
                    Cell::Bytes(c.cumulative_bytes),
                ]);
            }
            tables.push(t);
        }
        let mut groups = |title: &str, column: &'static str, rows: &[group::Group]| {
            if rows.is_empty() {
                return;
            }
            let mut t = Table::ranked(format!("{title} — {id}"), vec![column, "bytes", "buffers"]);
            for g in rows {
                t.rows.push(vec![
                    g.key.to_string().into(),
                    Cell::Bytes(g.totals.bytes),
                    Cell::Count(g.totals.count),
                ]);
            }
            tables.push(t);
        };
        let when = if self.program.is_some() {
            "at the peak"
        } else {
            "at the failure"
        };
        groups(
            &format!("Live {when} by user frame"),
            "user_frame",
            &self.live_by_user_frame,
        );
        groups(&format!("Live {when} by op"), "op", &self.live_by_op);
        let inferred = self
            .category_sources
            .values()
            .any(|&s| s == CategorySource::Inferred);
        groups(
            &format!(
                "Live {when} by category{}",
                if inferred { " (inferred)" } else { "" }
            ),
            "category",
            &self.live_by_category,
        );
        if let Some(p) = &self.program {
            groups("Live at the peak by op", "op", &p.by_op);
            groups("Live at the peak by shape", "shape", &p.by_shape);
            groups("Live at the peak by source line", "source", &p.by_source);
            let mut t = Table::ranked(
                format!("Largest buffers at the peak — {id}"),
                vec![
                    "instruction",
                    "shape",
                    "bytes",
                    "unpadded",
                    "padding",
                    "op",
                    "source",
                ],
            );
            for b in &p.buffers {
                t.rows.push(vec![
                    b.instruction.clone().into(),
                    b.shape.clone().unwrap_or_default().into(),
                    Cell::Bytes(b.bytes),
                    Cell::Bytes(b.unpadded_bytes),
                    Cell::Bytes(b.bytes.saturating_sub(b.unpadded_bytes)),
                    b.op_name
                        .clone()
                        .or_else(|| b.opcode.clone())
                        .unwrap_or_default()
                        .into(),
                    b.source.clone().unwrap_or_default().into(),
                ]);
            }
            tables.push(t);
        }
        if let Some(a) = &self.allocator {
            let mut t = Table::new(
                format!(
                    "The failed allocation — {id}: {} at {}",
                    size(self.request_bytes),
                    a.at_label,
                ),
                vec!["frame"],
            );
            if a.stack.is_empty() {
                t.rows.push(vec!["<no stack recorded>".into()]);
            }
            for f in &a.stack {
                t.rows.push(vec![f.clone().into()]);
            }
            tables.push(t);
            if !a.recent_allocations.is_empty() {
                let mut t = Table::ranked(
                    format!("Allocated just before it — {id}, latest first"),
                    vec!["at", "bytes", "live", "stack"],
                );
                for r in &a.recent_allocations {
                    t.rows.push(vec![
                        Cell::Figure {
                            value: Some(r.at),
                            label: r.at_label.clone(),
                        },
                        Cell::Bytes(r.bytes),
                        if r.live { "live" } else { "freed" }.into(),
                        r.key.clone().into(),
                    ]);
                }
                tables.push(t);
            }
        }
        tables
    }

    /// The one-line verdict printed under the tables.
    pub fn note(&self) -> String {
        format!(
            "out of memory on {}: {}",
            display_id(&self.header.id),
            self.explanation
        )
    }
}
