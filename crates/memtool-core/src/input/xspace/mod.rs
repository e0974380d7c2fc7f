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
pub(crate) mod programs;
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
/// `force_general_path` decodes allocator events by the general decoder only;
/// `jobs` threads decode them (0: every core), `run_bytes` of a line's
/// events at a time (0: the default).
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    source: &dyn ByteSource,
    force_general_path: bool,
    jobs: usize,
    run_bytes: u64,
) -> Result<()> {
    let host = host_name(path, source)?;
    let first = profile.memories.len();
    let split = allocator::Split::new(jobs, run_bytes);
    let has_allocator_events =
        allocator::read(profile, path, source, force_general_path, &host, split)?;
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
    for memory in &mut profile.memories[first..] {
        memory.host = Some(host_of(memory, &host));
    }
    Ok(())
}

/// The host a memory is shown with: the recorded host, or where its id was
/// told apart from another file's of the same host name (two processes of
/// one machine, a Keras logdir's `train/` and `validation/` runs), the
/// label that tells it apart — so `host` and `id` never disagree.
fn host_of(memory: &crate::model::Memory, recorded: &str) -> String {
    let label = (memory.kind == MemoryKind::Allocator)
        .then(|| {
            memory
                .id
                .strip_suffix(')')?
                .rsplit_once(" (")
                .map(|(_, h)| h)
        })
        .flatten();
    label.unwrap_or(recorded).to_string()
}

/// The host an XSpace was recorded on: the first of its `hostnames`, else
/// its file name without `.xplane.pb` (TensorBoard names a run's files
/// `<host>.xplane.pb`).
fn host_name(path: &str, source: &dyn ByteSource) -> Result<String> {
    let mut window = Window::new(source, 64 << 10);
    let names = stream::hostnames(&mut window).map_err(|e| e.into_error(path))?;
    Ok(names
        .into_iter()
        .find(|n| !n.is_empty())
        .unwrap_or_else(|| file_host(path).to_string()))
}

/// `worker-0` of `run/worker-0.xplane.pb`: the host TensorBoard names a run's
/// file after.
fn file_host(path: &str) -> &str {
    let name = allocator::file_name(path);
    let name = name.strip_suffix(".gz").unwrap_or(name);
    name.strip_suffix(".xplane.pb").unwrap_or(name)
}

/// Says that the file has no allocator events: with how to record them when
/// nothing else was found (the error then lists it), in one short line when
/// its compiled programs are there to show (JAX on CPU, always).
fn note_no_allocator_events(profile: &mut Profile, path: &str, has_programs: bool) {
    if has_programs {
        profile.note(path, NO_EVENTS_WITH_PROGRAMS);
    } else {
        profile.warn(path, allocator::NO_EVENTS_HINT);
    }
}

const NO_EVENTS_WITH_PROGRAMS: &str =
    "no allocator events (JAX on CPU records none): showing the compiled programs' buffer assignment";

/// Adds `host`, an XSpace read into a profile of its own, to the profile of
/// the other hosts of its run: its names are imported and its memories
/// renamed as reading it into `profile` would have named them
/// ([`allocator_id`]).
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
    let path = inputs.first().map_or("", |i| i.path.as_str());
    let input = profile.inputs.len();
    for mut memory in memories {
        memory.rename(&renames);
        memory.input = input;
        // Allocators, and compiled programs (two runs' `jit_stage(0)`: a
        // compile counter restarts in every process), of one id on several
        // hosts or files are told apart.
        if matches!(
            memory.kind,
            MemoryKind::Allocator | MemoryKind::ProgramSpace
        ) {
            let host = memory.host.clone().unwrap_or_default();
            let id = memory_id(profile, memory.kind, &memory.id, &host, path);
            if id != memory.id {
                relabel(&mut warnings, &memory.id, &id);
                let label = id
                    .strip_prefix(memory.id.as_str())
                    .and_then(|l| l.strip_prefix(" ("))
                    .and_then(|l| l.strip_suffix(')'));
                memory.host = Some(label.map_or(host, str::to_string));
                memory.id = id;
            }
        }
        profile.memories.push(memory);
    }
    profile.inputs.extend(inputs);
    profile.warnings.extend(warnings);
}

/// The id of allocator `name` of `host` (read from `path`) as it joins
/// `profile`: its name while no other host has an allocator of that name;
/// else `name (host)`, and the other host's is labelled too (in its warnings
/// as well), so every host's reads alike. Two files recording one host name
/// (copies, two processes of one machine) are told apart by file name.
pub(super) fn allocator_id(profile: &mut Profile, name: &str, host: &str, path: &str) -> String {
    memory_id(profile, MemoryKind::Allocator, name, host, path)
}

/// [`allocator_id`] for a memory of any `kind`: told apart from the
/// memories of that kind only (a compiled program's from programs).
fn memory_id(
    profile: &mut Profile,
    kind: MemoryKind,
    name: &str,
    host: &str,
    path: &str,
) -> String {
    let labelled = format!("{name} (");
    let mut taken = false;
    for i in 0..profile.memories.len() {
        let m = &profile.memories[i];
        if m.kind != kind {
            continue;
        }
        if m.id == name {
            // The first host's, unlabelled while it was alone.
            let label = format!("{name} ({})", m.host.as_deref().unwrap_or("?"));
            relabel(&mut profile.warnings, name, &label);
            profile.memories[i].id = label;
            profile.reindex_memories();
            taken = true;
        } else if m.id.starts_with(&labelled) {
            taken = true;
        }
    }
    if !taken {
        return name.to_string();
    }
    // The host's name, else the file's, else the Keras tag folder it is
    // under with it (`validation/vm` of `logs/validation/plugins/profile/
    // <run>/vm.xplane.pb`), else its path: the first no other memory has.
    let path_host = path.strip_suffix(".gz").unwrap_or(path);
    let path_host = path_host.strip_suffix(".xplane.pb").unwrap_or(path_host);
    let tagged = path
        .replace('\\', "/")
        .split_once("/plugins/profile/")
        .map(|(before, _)| {
            let tag = before.rsplit('/').next().unwrap_or(before);
            format!("{tag}/{}", file_host(path))
        });
    [
        Some(host.to_string()),
        Some(file_host(path).to_string()),
        tagged,
        Some(path_host.to_string()),
    ]
    .into_iter()
    .flatten()
    .map(|h| format!("{name} ({h})"))
    .find(|label| !profile.memories.iter().any(|m| &m.id == label))
    .unwrap_or_else(|| format!("{name} ({path})"))
}

/// Warnings about memory `id` name it `label` instead.
fn relabel(warnings: &mut [crate::model::Warning], id: &str, label: &str) {
    let prefix = format!("{id}: ");
    for w in warnings {
        if let Some(rest) = w.message.strip_prefix(&prefix) {
            w.message = format!("{label}: {rest}");
        }
    }
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

    /// Two runs of one program (`summary a.xplane.pb b.xplane.pb`) compile it
    /// under one id, the compile counter restarting in each process: the
    /// ids that collide are told apart as allocators' are, by host, then by
    /// file name; the others keep theirs.
    #[test]
    fn programs_of_one_id_in_several_files_are_told_apart() {
        use crate::model::{Axis, Memory};
        let file = |path: &str, ids: &[&str]| {
            let mut p = Profile::default();
            for &id in ids {
                let mut m = Memory::new(id, MemoryKind::ProgramSpace, Axis::ProgramOrder);
                m.host = Some("vm".to_string());
                p.memories.push(m);
            }
            p.warn(
                path,
                "jit_stage(0): 2 more heap simulator traces are not replayed",
            );
            p.inputs.push(InputInfo {
                path: path.into(),
                format: Format::XSpace,
                executables: None,
            });
            p
        };
        let mut run = Profile::default();
        append_host(
            &mut run,
            file("x/jax_mlp.xplane.pb", &["jit_stage(0)", "jit_step(10)"]),
        );
        append_host(
            &mut run,
            file(
                "x/jax_transformer_small.xplane.pb",
                &["jit_stage(0)", "jit_train_step(34)"],
            ),
        );
        let ids: Vec<&str> = run.memories.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "jit_stage(0) (vm)",
                "jit_step(10)",
                "jit_stage(0) (jax_transformer_small)",
                "jit_train_step(34)"
            ]
        );
        let hosts: Vec<&str> = run
            .memories
            .iter()
            .filter_map(|m| m.host.as_deref())
            .collect();
        assert_eq!(hosts, ["vm", "vm", "jax_transformer_small", "vm"]);
        let messages: Vec<&str> = run.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "jit_stage(0) (vm): 2 more heap simulator traces are not replayed",
                "jit_stage(0) (jax_transformer_small): 2 more heap simulator traces are not \
                 replayed"
            ]
        );
    }

    #[test]
    fn allocators_of_one_name_on_several_hosts_are_labelled_with_their_hosts() {
        use crate::model::{Allocation, Axis, Memory, Site};
        let host = |path: &str, hostname: &str, op: &str| {
            let mut p = Profile::default();
            let op = Some(p.names.string(op));
            let site = p.names.site(Site {
                op,
                ..Site::default()
            });
            let mut m = Memory::new("GPU_0_bfc", MemoryKind::Allocator, Axis::TimePs);
            m.host = Some(hostname.to_string());
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
        let read_run = |hosts: Vec<Profile>| {
            let mut run = Profile::default();
            for h in hosts {
                append_host(&mut run, h);
            }
            run
        };
        let ids =
            |run: &Profile| -> Vec<String> { run.memories.iter().map(|m| m.id.clone()).collect() };
        // Two files recording one host name (copies, two processes of one
        // machine) are told apart by file name.
        let copies = read_run(vec![
            host("run/a.xplane.pb", "vm", "MatMul"),
            host("run/b.xplane.pb", "vm", "MatMul"),
            host("run/c.xplane.pb", "vm", "MatMul"),
        ]);
        assert_eq!(
            ids(&copies),
            ["GPU_0_bfc (vm)", "GPU_0_bfc (b)", "GPU_0_bfc (c)"]
        );
        // Each one's host is the label its id carries, so the two agree.
        assert_eq!(copies.memories[0].host.as_deref(), Some("vm"));
        assert_eq!(copies.memories[1].host.as_deref(), Some("b"));

        let run = read_run(vec![
            host("run/w0.xplane.pb", "worker-0", "MatMul"),
            host("run/w1.xplane.pb", "worker-1", "Conv2D"),
        ]);
        assert_eq!(ids(&run), ["GPU_0_bfc (worker-0)", "GPU_0_bfc (worker-1)"]);
        let messages: Vec<&str> = run.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "GPU_0_bfc (worker-0): 3 frees have no address and match no allocation",
                "something else",
                "GPU_0_bfc (worker-1): 3 frees have no address and match no allocation",
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
