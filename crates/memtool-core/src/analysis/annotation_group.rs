//! `--by annotation`: each allocation grouped by the innermost annotated
//! range ([`Memory::annotations`]: a `record_function`, a user annotation,
//! an optimizer's step) it was made in. Which range is a matter of when the
//! allocation was made, not of where, so it is no field a reader can fill:
//! [`assign`] rewrites each allocation's site to one carrying the range's
//! name ([`Site::annotation`]), as `category::assign` does for categories,
//! and every breakdown then groups by it as by any other field.

use rustc_hash::FxHashMap;

use crate::model::{Annotation, EventKind, Memory, Names, Profile, Site, SiteId, StrId};

/// The group of memory made outside every annotated range: before the
/// recording, between ranges, or in a memory whose file annotates none.
pub const OUTSIDE_LABEL: &str = "<outside any annotation>";

/// Gives each allocation made inside an annotated range of its memory a
/// site naming the innermost such range: the one that started last among
/// those open when it was made (START and END included, as the annotation
/// stages count them). Memory made before the recording, and memories
/// with no annotations, are left as they are ([`OUTSIDE_LABEL`]).
pub fn assign(profile: &mut Profile) {
    let names = &mut profile.names;
    let mut made: FxHashMap<(SiteId, StrId), SiteId> = FxHashMap::default();
    for memory in &mut profile.memories {
        for (alloc, name) in innermost(memory) {
            let name = names.string(&name);
            let Some(allocation) = memory.allocations.get_mut(alloc) else {
                continue;
            };
            let site = allocation.site;
            allocation.site = *made.entry((site, name)).or_insert_with(|| {
                let s = *names.site_of(site);
                names.site(Site {
                    annotation: Some(name),
                    ..s
                })
            });
        }
    }
}

/// Whether any memory of `profile` records an annotated range.
pub fn has_annotations(profile: &Profile) -> bool {
    profile.memories.iter().any(|m| !m.annotations.is_empty())
}

/// The label of an annotation group key: the range's name, else
/// [`OUTSIDE_LABEL`].
pub fn label(names: &Names, site: &Site) -> String {
    match site.annotation {
        Some(id) => names.str(id).to_string(),
        None => OUTSIDE_LABEL.to_string(),
    }
}

/// Each allocation of `memory` made inside an annotated range (by index),
/// with the innermost range's name: one walk of the events, the ranges
/// opened in order of their start (an enclosing range before one nested in
/// it that starts with it), those ended dropped as the walk passes them.
fn innermost(memory: &Memory) -> Vec<(usize, String)> {
    let mut ranges: Vec<&Annotation> = memory.annotations.iter().collect();
    ranges.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut next = 0;
    let mut open: Vec<&Annotation> = Vec::new();
    let mut seen = vec![false; memory.allocations.len()];
    let mut out = Vec::new();
    for event in &memory.events {
        if event.kind() != EventKind::Alloc {
            continue;
        }
        while let Some(range) = ranges.get(next).filter(|r| r.start <= event.at) {
            open.push(range);
            next += 1;
        }
        // The last opened that is still open is the innermost: one opened
        // later has started later. Those beneath the top that have ended
        // are dropped when they come to the top.
        while open.last().is_some_and(|r| r.end < event.at) {
            open.pop();
        }
        let (Some(range), Some(first)) = (open.last(), seen.get_mut(event.alloc().index())) else {
            continue;
        };
        if !*first {
            *first = true;
            out.push((event.alloc().index(), range.name.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocId, Allocation, Axis, Event, MemoryKind};

    #[test]
    fn each_allocation_takes_the_innermost_range_it_was_made_in() {
        let mut profile = Profile::default();
        let site = profile.names.site(Site::default());
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimeUs);
        for (i, at) in [5, 10, 15, 20, 30, 40, 50].into_iter().enumerate() {
            m.allocations.push(Allocation {
                bytes: 1,
                requested: 1,
                count: 1,
                address: None,
                site,
            });
            m.events
                .push(Event::new(at, EventKind::Alloc, AllocId(i as u32)));
        }
        let range = |name: &str, start, end| Annotation {
            name: name.to_string(),
            start,
            end,
        };
        // `inner` nests in `outer`; `overlap` starts inside `outer` and ends
        // after it; nothing is open at 5 and 50.
        m.annotations = vec![
            range("inner", 10, 15),
            range("outer", 10, 30),
            range("overlap", 20, 40),
        ];
        profile.memories.push(m);
        assign(&mut profile);
        let names = &profile.names;
        let labels: Vec<String> = profile.memories[0]
            .allocations
            .iter()
            .map(|a| label(names, names.site_of(a.site)))
            .collect();
        assert_eq!(
            labels,
            [
                OUTSIDE_LABEL,
                "inner",
                "inner",
                "overlap",
                "overlap",
                "overlap",
                OUTSIDE_LABEL
            ]
        );
    }
}
