//! XSpace (`*.xplane.pb`, `tensorflow.profiler.XSpace`, see
//! `proto/xplane.proto`): a lazy, zero-copy walker over planes, lines, events
//! and stats, and the readers built on it.
//!
//! XSpace files reach gigabytes, so nothing here decodes a whole message: a
//! [`Plane`], [`Line`], [`Event`] or [`Stat`] is a view into the input bytes,
//! and its children are framed only when asked for. Only the per-plane
//! metadata maps (names of event and stat types) are collected into memory;
//! they are small next to the events.
//!
//! XSpace files also outgrow memory, so the input is never held whole:
//! [`stream`] walks it through its `ByteSource`, skimming planes by field
//! headers and reading lines through a window; the planes read whole
//! (`Task Environment`, `/host:metadata`) and single events are walked here,
//! as bytes at their absolute offset in the input, by [`walk`]. Both are
//! shared by every reader of XSpace content (allocator events in
//! [`allocator`]; compiled programs on `/host:metadata`, in [`programs`]).

mod allocator;
mod programs;
mod stream;
mod walk;

use crate::error::{Error, Result};
use crate::input::source::ByteSource;
use crate::model::{Format, InputInfo, MemoryKind, Profile};
use memtool_proto::wire::reader::WireError;

pub(crate) use stream::{PlaneAt, Planes, StreamError, Window};
use walk::{as_i64, text, Slice};
pub(crate) use walk::{Event, Metadata, Plane, StatKeys, StatValue};

/// Reads an XSpace into `profile`, recording the input once: its allocator
/// events, then its compiled programs ([`programs`]). One XSpace may hold
/// both; each walks it in place, reading only the parts it needs.
/// `force_general_path` decodes allocator events by the general decoder only.
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    force_general_path: bool,
) -> Result<()> {
    let has_allocator_events = allocator::read(profile, path, source, force_general_path)?;
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::XSpace,
        executables: None,
    });
    let before = profile.memories.len();
    programs::read(profile, path, source)?;
    if !has_allocator_events {
        let has_programs = profile.memories.len() > before;
        note_no_allocator_events(profile, path, has_programs);
    }
    Ok(())
}

/// Says that the file has no allocator events: with how to record them when
/// nothing else was found (the error then lists it), in one short line when
/// its compiled programs are there to show (JAX on CPU, always).
fn note_no_allocator_events(profile: &mut Profile, path: &str, has_programs: bool) {
    if has_programs {
        profile.warn(path, NO_EVENTS_WITH_PROGRAMS);
    } else {
        profile.warn(path, allocator::NO_EVENTS_HINT);
    }
}

const NO_EVENTS_WITH_PROGRAMS: &str = "no allocator events (MemoryAllocation/MemoryDeallocation) \
    on /host:CPU: the memories shown are the compiled programs' (XLA buffer assignment); JAX on \
    CPU records no allocator events, GPU and TPU runs do";

/// Adds `host`, an XSpace read into a profile of its own, to the profile of
/// the other hosts of its run: its names are imported and its memories
/// renamed as reading it into `profile` would have named them (an allocator
/// whose name another host already uses gets the file name appended, in its
/// warnings too).
pub(crate) fn append_host(profile: &mut Profile, host: Profile) {
    let Profile {
        inputs,
        names,
        memories,
        mut warnings,
        ..
    } = host;
    let renames = profile.names.import(&names);
    drop(names);
    for mut memory in memories {
        memory.rename(&renames);
        let taken = profile.memories.iter().any(|m| m.id == memory.id);
        if taken && memory.kind == MemoryKind::Allocator {
            let file = inputs.first().map_or("", |i| allocator::file_name(&i.path));
            let renamed = format!("{} ({file})", memory.id);
            let prefix = format!("{}: ", memory.id);
            for w in &mut warnings {
                if let Some(rest) = w.message.strip_prefix(&prefix) {
                    w.message = format!("{renamed}: {rest}");
                }
            }
            memory.id = renamed;
        }
        profile.memories.push(memory);
    }
    profile.inputs.extend(inputs);
    profile.warnings.extend(warnings);
}

/// The error for a framing problem found while walking `path`.
pub(crate) fn corrupt(path: &str, e: WireError) -> Error {
    Error::Corrupt {
        path: path.to_string(),
        format: "XSpace",
        message: e.message().to_string(),
        offset: Some(e.offset as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_whose_allocator_name_is_taken_is_renamed_with_its_warnings() {
        use crate::model::{Allocation, Axis, Memory, Site};
        let host = |path: &str, op: &str| {
            let mut p = Profile::default();
            let op = Some(p.names.string(op));
            let site = p.names.site(Site {
                op,
                ..Site::default()
            });
            let mut m = Memory::new("GPU_0_bfc", MemoryKind::Allocator, Axis::TimePs);
            m.push_allocation(Allocation {
                bytes: 8,
                requested: 8,
                count: 1,
                address: None,
                site,
            });
            p.memories.push(m);
            p.warn(
                path,
                "GPU_0_bfc: 3 frees have no address and match no allocation",
            );
            p.warn(path, "something else");
            p.inputs.push(InputInfo {
                path: path.into(),
                format: Format::XSpace,
                executables: None,
            });
            p
        };
        let mut run = Profile::default();
        append_host(&mut run, host("run/worker0.xplane.pb", "MatMul"));
        append_host(&mut run, host("run/worker1.xplane.pb", "Conv2D"));
        let ids: Vec<&str> = run.memories.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["GPU_0_bfc", "GPU_0_bfc (worker1.xplane.pb)"]);
        let messages: Vec<&str> = run.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "GPU_0_bfc: 3 frees have no address and match no allocation",
                "something else",
                "GPU_0_bfc (worker1.xplane.pb): 3 frees have no address and match no allocation",
                "something else",
            ]
        );
        // Sites point into the run's table.
        let op = |m: &Memory| {
            let site = run.names.site_of(m.allocations[0].site);
            run.names.str(site.op.unwrap()).to_string()
        };
        assert_eq!(op(&run.memories[0]), "MatMul");
        assert_eq!(op(&run.memories[1]), "Conv2D");
        assert_eq!(run.inputs.len(), 2);
    }

    pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub(super) fn field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
        varint(out, (u64::from(number) << 3) | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    pub(super) fn int(out: &mut Vec<u8>, number: u32, v: u64) {
        varint(out, u64::from(number) << 3);
        varint(out, v);
    }
}
