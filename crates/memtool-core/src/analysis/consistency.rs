//! Warnings about a loaded profile whose own figures contradict each other.
//! They need the replay and the held ranges, so they are worked out here,
//! after the loader (which imports nothing from the analyses) has read the
//! profile; [`crate::load`] runs them on every profile it returns.

use super::{point_label, replay, segments};
use crate::model::{Memory, Profile};
use crate::report::units::bytes;

/// Warns, per memory, when the profile's own figures contradict each other
/// ([`inconsistencies`]). Every figure memtool derives from them
/// (fragmentation above all) is then suspect, and the user should know
/// before reading it. The warnings name the first input.
pub(crate) fn warn_of_inconsistent_figures(profile: &mut Profile) {
    let Some(path) = profile.inputs.first().map(|i| i.path.clone()) else {
        return;
    };
    let mut found = Vec::new();
    for memory in &profile.memories {
        for body in inconsistencies(memory) {
            found.push(format!("{}: {body}", memory.id));
        }
    }
    for message in found {
        profile.warn(&path, message);
    }
}

/// What contradicts what in `memory`'s own figures: more in use than the
/// allocator reserved, or a peak above the capacity the file declares; each
/// a warning's text after the memory's id (which a summary of many files
/// knows only once every file is read). Memories without a reserved figure
/// or a declared capacity cost nothing.
pub(crate) fn inconsistencies(memory: &Memory) -> Vec<String> {
    let mut found = Vec::new();
    let (mut over, mut first) = (0u64, None);
    segments::for_each_reserved_point(memory, |r| {
        if r.in_use_bytes > r.reserved_bytes {
            over += 1;
            first.get_or_insert(r);
        }
    });
    if let Some(r) = first {
        found.push(format!(
            "more in use than the allocator reserved at {over} points (first at {}: \
             {} in use, {} reserved); the file's figures disagree, so fragmentation \
             figures there are not reliable",
            point_label(memory, r.point.index, r.point.at),
            bytes(r.in_use_bytes),
            bytes(r.reserved_bytes)
        ));
    }
    let Some(capacity) = memory.capacity else {
        return found;
    };
    if let Some(peak) = replay::reported_peak(memory, replay::Ties::First) {
        if peak.bytes > capacity {
            found.push(format!(
                "the peak, {} at {}, is above the device's capacity of {}; the \
                 file's figures disagree",
                bytes(peak.bytes),
                point_label(memory, peak.point.index, peak.point.at),
                bytes(capacity)
            ));
        }
    }
    if let Some(lifetime) = memory.allocator_peak_bytes.filter(|&p| p > capacity) {
        found.push(format!(
            "the allocator's lifetime peak, {}, is above the device's capacity of {}",
            bytes(lifetime),
            bytes(capacity)
        ));
    }
    found
}
