//! The blocks behind the page's drill-down and allocator-state view: each
//! listed allocation's lifetime, size, address and site, the sites' full
//! stacks, and the address ranges the allocator held over time. Bounded
//! whatever the input: at most [`MAX_BLOCKS`] blocks (the largest of each
//! band first, so every band can be drilled into), [`MAX_SITES`] stacks and
//! [`MAX_SEGMENTS`] ranges; the page says how many were left out, and the
//! bytes of a band not covered by listed blocks are shown as such.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::frames::FrameFilter;
use crate::analysis::replay;
use crate::model::{AllocId, BeforeRecording, Memory, Names, SiteId};

use super::escape;

/// Blocks listed per memory.
pub(super) const MAX_BLOCKS: usize = 4000;
/// Distinct sites whose stacks are kept; blocks of other sites list no stack.
pub(super) const MAX_SITES: usize = 600;
/// Frames kept per stack (the leaf first).
const MAX_FRAMES: usize = 64;
/// Bytes of label text (frames, call-tree paths, ops, shapes) kept for the
/// listed sites; a site that would pass it lists no stack. Each label is
/// cut at [`escape::MAX_LABEL_BYTES`], but 600 sites of 64 distinct long
/// frames would still be over 100 MB.
const MAX_LABEL_BYTES: usize = 1 << 20;
/// Address ranges (segments) kept for the allocator-state view.
pub(super) const MAX_SEGMENTS: usize = 2000;
/// Addresses are sent as offsets from the lowest, which JavaScript numbers
/// hold exactly below 2^53.
const EXACT_IN_JS: u64 = 1 << 53;

/// What one memory's drill-down can show. Columns of parallel arrays (one
/// entry per block) keep the JSON small.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct Blocks {
    /// Allocated at, relative to the timeline's `x0`.
    pub start: Vec<i64>,
    /// Freed at, relative to `x0`; `end_open` (one past the last event)
    /// for blocks still live at the end.
    pub end: Vec<i64>,
    pub end_open: i64,
    pub bytes: Vec<u64>,
    pub requested: Vec<u64>,
    /// Timeline band (index into `timeline.bands`).
    pub band: Vec<usize>,
    /// Index into `sites`, or -1 when its stack was not kept.
    pub site: Vec<i64>,
    /// Address as an offset from `base`, or -1 when unknown.
    pub addr: Vec<i64>,
    /// The lowest address, in hex (`0x7f…`), when blocks have addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Op, shape and category of each kept site, and its stack as indices
    /// into `frames`, leaf first.
    pub sites: Vec<SiteInfo>,
    /// Frame labels, and whether each is library code: the labels of the
    /// sites' stacks and call-tree paths (a path's label for a site without
    /// a stack — its category, op or shape — as a frame that is not library
    /// code), each once.
    pub frames: Vec<(String, bool)>,
    /// Blocks the memory has (lifetimes), and how many are listed.
    pub total: usize,
    /// Sites the listed blocks have, and how many stacks were kept.
    pub total_sites: usize,
    /// Ranges the allocator held: `[start offset, bytes, from, to]`, times
    /// relative to `x0` (`from` is the start of the recording for a range
    /// held before it, `to` the end for one held at the end).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<[i64; 4]>,
    /// Ranges held over the recording, and how many are in `segments`.
    pub total_segments: usize,
    /// Index into `sites` of each site whose stack was kept (-1: not kept),
    /// for the allocation view's click to show the same stacks.
    #[serde(skip)]
    pub site_of: HashMap<SiteId, i64>,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct SiteInfo {
    pub op: String,
    pub shape: String,
    pub category: String,
    pub stack: Vec<u32>,
    /// Its path in the page's call tree, outermost first, as indices into
    /// `frames`: a click on a node of the tree lists the blocks whose
    /// path passes through it.
    pub tree: Vec<u32>,
    /// For memory allocated before the recording, which (`still_live`,
    /// `freed`: its stack is then the free's, and its start the
    /// recording's, so its age is a lower bound); empty otherwise.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub before: &'static str,
}

/// The labels the listed sites use, each once, and their bytes.
#[derive(Default)]
struct Labels {
    list: Vec<(String, bool)>,
    index: HashMap<String, u32>,
    bytes: usize,
}

impl Labels {
    /// Bytes of the labels among `labels` not kept yet.
    fn new_bytes<'a>(&self, labels: impl Iterator<Item = &'a (String, bool)>) -> usize {
        let mut seen = std::collections::HashSet::new();
        labels
            .filter(|(l, _)| !self.index.contains_key(l) && seen.insert(l))
            .map(|(l, _)| l.len())
            .sum()
    }

    /// The index of `label`, kept if new. A label seen as library code once
    /// keeps that flag (one frame's text; a path's label is never library).
    fn index(&mut self, (label, library): (String, bool)) -> u32 {
        if let Some(&i) = self.index.get(&label) {
            let kept = &mut self.list[i as usize].1;
            *kept = *kept || library;
            return i;
        }
        let i = self.list.len() as u32;
        self.bytes += label.len();
        self.index.insert(label.clone(), i);
        self.list.push((label, library));
        i
    }
}

/// The blocks of `memory` for its drill-down; `None` for memories without
/// lifetimes (a snapshot series, where each snapshot is its own moment).
pub(super) fn blocks(
    names: &Names,
    memory: &Memory,
    filter: &FrameFilter,
    x0: i64,
    band_of_site: impl Fn(SiteId) -> usize,
) -> Option<Blocks> {
    let mut lifetimes: Vec<(AllocId, i64, i64)> = Vec::new();
    replay::for_each_lifetime(memory, |id, start, end| lifetimes.push((id, start, end)));
    if lifetimes.is_empty() {
        return None;
    }
    let end_at = memory.events.last().map_or(0, |e| e.at);
    // Blocks still live at the end end one past the last event, so a block
    // freed by the last event is told from one that never was.
    let still_live: std::collections::HashSet<AllocId> =
        replay::live_at(memory, memory.events.len())
            .into_iter()
            .collect();
    let end_open = end_at.saturating_add(1);
    let alloc = |id: AllocId| &memory.allocations[id.index()];
    let mut band_of: HashMap<SiteId, usize> = HashMap::new();
    let mut band = |site: SiteId| *band_of.entry(site).or_insert_with(|| band_of_site(site));
    // Largest first (ties: earliest, then id), then at most a fair share of
    // the blocks per band before the rest go by size.
    lifetimes.sort_by(|a, b| {
        alloc(b.0)
            .bytes
            .cmp(&alloc(a.0).bytes)
            .then(a.1.cmp(&b.1))
            .then(a.0.index().cmp(&b.0.index()))
    });
    let total = lifetimes.len();
    let chosen: Vec<(AllocId, i64, i64)> = if total <= MAX_BLOCKS {
        lifetimes
    } else {
        let bands: Vec<usize> = lifetimes.iter().map(|l| band(alloc(l.0).site)).collect();
        let band_count = bands.iter().max().map_or(1, |b| b + 1);
        let share = MAX_BLOCKS / band_count / 2;
        let mut per_band = vec![0usize; band_count];
        let mut taken = vec![false; total];
        let mut count = 0;
        for (i, &b) in bands.iter().enumerate() {
            if per_band[b] < share {
                per_band[b] += 1;
                taken[i] = true;
                count += 1;
            }
        }
        for t in taken.iter_mut() {
            if count >= MAX_BLOCKS {
                break;
            }
            if !*t {
                *t = true;
                count += 1;
            }
        }
        lifetimes
            .into_iter()
            .zip(taken)
            .filter_map(|(l, t)| t.then_some(l))
            .collect()
    };

    let base = chosen
        .iter()
        .filter_map(|l| alloc(l.0).address())
        .chain(memory.held.iter().map(|r| r.start))
        .chain(memory.held_changes.iter().map(|c| c.range.start))
        .min();
    let offset = |address: Option<u64>| -> i64 {
        match (address, base) {
            (Some(a), Some(b)) if a - b < EXACT_IN_JS => (a - b) as i64,
            _ => -1,
        }
    };

    let mut out = Blocks {
        end_open: end_open.wrapping_sub(x0),
        total,
        base: base.map(|b| format!("{b:#x}")),
        ..Blocks::default()
    };
    let mut site_index: HashMap<SiteId, i64> = HashMap::new();
    let mut labels = Labels::default();
    let library = FrameFilter::default();
    for &(id, start, end) in &chosen {
        let a = alloc(id);
        let next = site_index.len();
        let site = *site_index.entry(a.site).or_insert_with(|| {
            if next >= MAX_SITES {
                return -1;
            }
            let s = names.site_of(a.site);
            let stack: Vec<(String, bool)> = names
                .frames_of(s.stack)
                .take(MAX_FRAMES)
                .map(|f| {
                    (
                        escape::label(&names.frame_label(f)),
                        library.is_library(names, f),
                    )
                })
                .collect();
            let tree: Vec<(String, bool)> = super::flame::path(names, a.site, filter)
                .into_iter()
                .map(|label| (label, false))
                .collect();
            let text = |v: Option<crate::model::StrId>| {
                v.map_or(String::new(), |v| escape::label(names.str(v)))
            };
            let (op, shape, category) = (text(s.op), text(s.shape), text(s.category));
            let new_bytes = labels.new_bytes(stack.iter().chain(&tree))
                + op.len()
                + shape.len()
                + category.len();
            if labels.bytes + new_bytes > MAX_LABEL_BYTES {
                return -1;
            }
            out.sites.push(SiteInfo {
                op,
                shape,
                category,
                stack: stack.into_iter().map(|l| labels.index(l)).collect(),
                tree: tree.into_iter().map(|l| labels.index(l)).collect(),
                before: match names.before_recording_op(s.op) {
                    Some(BeforeRecording::StillLive) => "still_live",
                    Some(BeforeRecording::Freed) => "freed",
                    None => "",
                },
            });
            out.sites.len() as i64 - 1
        });
        let end = if still_live.contains(&id) {
            end_open
        } else {
            end
        };
        out.start.push(start.wrapping_sub(x0));
        out.end.push(end.wrapping_sub(x0));
        out.bytes.push(a.bytes);
        out.requested.push(a.requested);
        out.band.push(band(a.site));
        out.site.push(site);
        out.addr.push(offset(a.address()));
    }
    out.total_sites = site_index.len();
    out.site_of = site_index;
    out.frames = labels.list;
    if base.is_some() {
        let start = memory.events.first().map_or(0, |e| e.at);
        let ranges = segment_lifetimes(memory, start, end_open);
        out.total_segments = ranges.len();
        out.segments = ranges
            .into_iter()
            .filter(|r| offset(Some(r.0)) >= 0)
            .take(MAX_SEGMENTS)
            .map(|(s, bytes, from, to)| {
                [
                    offset(Some(s)),
                    bytes.min(EXACT_IN_JS) as i64,
                    from.wrapping_sub(x0),
                    to.wrapping_sub(x0),
                ]
            })
            .collect();
    }
    Some(out)
}

/// Each range the allocator held and when: `(start, bytes, from, to)`, the
/// ranges held at the end with the recorded changes undone, latest first
/// (as [`crate::analysis::segments::held_at`] undoes them). A range taken
/// during the recording starts when it was taken, one given back ends when
/// it was given back; in address order, then by time.
fn segment_lifetimes(memory: &Memory, start: i64, end: i64) -> Vec<(u64, u64, i64, i64)> {
    // Open ranges by start address: (bytes, held until).
    let mut open: HashMap<u64, (u64, i64)> = memory
        .held
        .iter()
        .map(|r| (r.start, (r.bytes, end)))
        .collect();
    let mut done = Vec::new();
    for change in memory.held_changes.iter().rev() {
        let r = change.range;
        if change.reserved {
            if let Some((bytes, to)) = open.remove(&r.start) {
                done.push((r.start, bytes, change.at, to));
            }
        } else {
            open.insert(r.start, (r.bytes, change.at));
        }
    }
    done.extend(
        open.into_iter()
            .map(|(s, (bytes, to))| (s, bytes, start, to)),
    );
    done.sort_unstable();
    done
}
