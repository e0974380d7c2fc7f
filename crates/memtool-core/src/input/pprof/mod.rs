//! JAX device-memory profiles: pprof `profile.proto`, as written by
//! `jax.profiler.save_device_memory_profile`.
//!
//! Each sample is `count` live buffers (or executables) of one call stack, with
//! labels `kind=buffer|executable` and `device=<name>`. Each file becomes one
//! [`Instant`] of every device memory; a series of files is a series of
//! instants in command-line order.

use memtool_proto::pprof;
use prost::Message;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::model::{
    Allocation, Axis, Executables, Format, Frame, FrameId, InputInfo, Instant, MemoryKind, Profile,
    Site, StackId,
};

use memtool_proto::wire::reader as wire;
use samples::SampleRef;
pub(in crate::input) use samples::Walk;

mod samples;

/// Reads one pprof file into `profile`, its samples walked as `walk` says;
/// `force_general_path` skips the one walk ([`read_in_one_walk`]) for the
/// checked walk every file can take.
pub(crate) fn read(
    profile: &mut Profile,
    path: &str,
    bytes: &[u8],
    force_general_path: bool,
    walk: Walk,
) -> Result<()> {
    if !force_general_path && profile.is_empty() && read_in_one_walk(profile, path, bytes, walk) {
        return Ok(());
    }
    read_checked(profile, path, bytes, walk)
}

/// Reads a file into a profile that may hold earlier files: nothing is
/// changed until every sample is known good.
fn read_checked(profile: &mut Profile, path: &str, bytes: &[u8], walk: Walk) -> Result<()> {
    // Samples are most of a profile (a million of them, each a few vectors
    // once decoded): prost decodes everything else, and samples are walked
    // on the wire, one at a time, after a first walk has checked them all as
    // prost would.
    // The phase keeps its name: prost still decodes all but the samples here.
    let tables = crate::timings::time("pprof: decode (prost)", || {
        let tables = Tables::decode(bytes).ok()?;
        let count = samples::walk_in_order(bytes, &mut |_| {}).ok()?;
        Some((tables, count))
    });
    if let Some((tables, count)) = tables {
        let mut reader = crate::timings::time("pprof: strings and locations", || {
            Reader::new(profile, path, &tables)
        })?;
        reader.reserve(count);
        return crate::timings::time("pprof: samples (stacks, sites, allocations)", || {
            // Checked above: the walk cannot fail.
            reader
                .read_samples(|each| samples::walk(bytes, walk, each).ok())
                .map(drop)
        });
    }
    // Something is off: prost decodes the whole message, and says what when
    // it fails.
    let decoded = crate::timings::time("pprof: decode (prost)", || {
        pprof::Profile::decode(bytes).map_err(|e| corrupt(path, bytes, e))
    })?;
    let tables = Tables {
        sample_type: decoded.sample_type.clone(),
        location: decoded.location.clone(),
        function: decoded.function.clone(),
        string_table: decoded.string_table.clone(),
        ..Tables::default()
    };
    let reader = Reader::new(profile, path, &tables)?;
    reader
        .read_samples(|each| {
            let mut label = Vec::new();
            for sample in &decoded.sample {
                label.clear();
                label.extend(sample.label.iter().map(|l| (l.key, l.str)));
                each(SampleRef {
                    location_id: &sample.location_id,
                    value: &sample.value,
                    label: &label,
                });
            }
            Some(decoded.sample.len())
        })
        .map(drop)
}

/// Reads the first file of a profile with one walk over its samples, not a
/// checking walk and then a reading one: into a profile of its own, which
/// replaces the empty one only when the walk went through. Anything else
/// (a sample prost would read but the walk does not, a damaged file, no
/// `space` type) leaves `profile` untouched for [`read`]'s two walks, so
/// what a bad file gives is the same whichever way it is read. Returns
/// whether the file was read.
fn read_in_one_walk(profile: &mut Profile, path: &str, bytes: &[u8], walk: Walk) -> bool {
    // Both frame every sample (prost to skip it): side by side where the
    // samples are walked ahead anyway.
    let decode = || Tables::decode(bytes).ok();
    let (count, tables) = crate::timings::time("pprof: decode (prost)", || match walk {
        Walk::Ahead { .. } => crate::parallel::join(|| samples::count(bytes), decode),
        Walk::InOrder => (samples::count(bytes), decode()),
    });
    let Some(tables) = tables else {
        return false;
    };
    let mut fresh = Profile::default();
    let Ok(mut reader) = crate::timings::time("pprof: strings and locations", || {
        Reader::new(&mut fresh, path, &tables)
    }) else {
        return false;
    };
    let read = crate::timings::time("pprof: samples (stacks, sites, allocations)", || {
        reader.reserve(count);
        reader.read_samples(|each| samples::walk(bytes, walk, each).ok())
    });
    if matches!(read, Ok(true)) {
        *profile = fresh;
        return true;
    }
    false
}

/// `profile.proto`'s `Profile` without its samples (field 2, skipped as
/// unknown): the same fields and types as the generated message, so prost
/// checks them the same way.
#[derive(Clone, PartialEq, Message)]
struct Tables {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<pprof::ValueType>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<pprof::Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<pprof::Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<pprof::Function>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    string_table: Vec<Vec<u8>>,
    #[prost(int64, tag = "7")]
    drop_frames: i64,
    #[prost(int64, tag = "8")]
    keep_frames: i64,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<pprof::ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
    #[prost(string, tag = "15")]
    doc_url: String,
}

fn corrupt(path: &str, bytes: &[u8], e: prost::DecodeError) -> Error {
    // prost does not say where; the wire reader finds the first bad top-level field.
    let located = wire::first_error(bytes);
    let (message, offset) = match located {
        Some(w) => (w.message().to_string(), Some(w.offset as u64)),
        None => (
            e.to_string()
                .replace("failed to decode Protobuf message: ", ""),
            None,
        ),
    };
    Error::Corrupt {
        path: path.to_string(),
        format: "pprof profile",
        message,
        offset,
    }
}

struct Reader<'p> {
    profile: &'p mut Profile,
    path: &'p str,
    strings: Vec<String>,
    count_index: Option<usize>,
    space_index: usize,
    /// Location id → its frames, leaf first (a location's `line` list is
    /// innermost first: inlined functions come before their caller).
    locations: FxHashMap<u64, Vec<FrameId>>,
    /// The last sample's stack, outermost location first: each location id
    /// and the stack up to and including its frames.
    last_stack: Vec<(u64, StackId)>,
    /// Recent `(caller, location id, stack)` pushes, direct-mapped by
    /// [`recent_slot`]: the callers a stack shares with recent samples' are
    /// found here, not in a stack table of millions that no cache holds.
    recent_pushes: Vec<(StackId, u64, StackId)>,
    /// Location ids samples name that the profile does not have.
    unknown_locations: FxHashSet<u64>,
    /// Device label (a string table index) → position in
    /// `profile.memories`, once the memory has this file's instant.
    device_memory: FxHashMap<i64, usize>,
    /// Samples the file holds, and room reserved for so many allocations
    /// so far: each device's memory gets room for the samples not yet
    /// read when it is first met, up to twice the file's in all (a
    /// million allocations grown by copy from empty were faulted in about
    /// twice over).
    samples: usize,
    reserved: usize,
}

impl<'p> Reader<'p> {
    fn new(profile: &'p mut Profile, path: &'p str, decoded: &Tables) -> Result<Self> {
        let mut bad_utf8 = 0usize;
        let strings: Vec<String> = decoded
            .string_table
            .iter()
            .map(|s| match String::from_utf8(s.clone()) {
                Ok(s) => s,
                Err(e) => {
                    bad_utf8 += 1;
                    String::from_utf8_lossy(e.as_bytes()).into_owned()
                }
            })
            .collect();
        if bad_utf8 > 0 {
            profile.warn(
                path,
                format!("{bad_utf8} names are not valid UTF-8; invalid bytes shown as U+FFFD"),
            );
        }
        let name = |i: i64| strings.get(i as usize).map(String::as_str).unwrap_or("");
        let types: Vec<String> = decoded
            .sample_type
            .iter()
            .map(|t| format!("{}/{}", name(t.r#type), name(t.unit)))
            .collect();
        let find = |ty: &str| types.iter().position(|t| t.split('/').next() == Some(ty));
        let Some(space_index) = find("space") else {
            return Err(Error::NoData {
                path: path.to_string(),
                message: format!(
                    "pprof profile has no `space` sample type, so it is not a device memory \
                     profile (sample types: {})",
                    if types.is_empty() {
                        "none".to_string()
                    } else {
                        types.join(", ")
                    }
                ),
            });
        };
        // JAX writes `allocations`; memtool's own `--format pprof`, `objects`.
        let count_index = find("allocations").or_else(|| find("objects"));
        let mut reader = Reader {
            profile,
            path,
            strings,
            count_index,
            space_index,
            locations: FxHashMap::default(),
            last_stack: Vec::new(),
            unknown_locations: FxHashSet::default(),
            recent_pushes: vec![(StackId(u32::MAX), 0, StackId(0)); RECENT_PUSHES],
            device_memory: FxHashMap::default(),
            samples: 0,
            reserved: 0,
        };
        reader.intern_locations(decoded);
        Ok(reader)
    }

    /// Room for `samples` samples, each a stack and a site of its own at
    /// most (a sample is a distinct stack per device, less what it shares
    /// with others: room for one new stack node each).
    fn reserve(&mut self, samples: usize) {
        self.samples = samples;
        self.profile.names.reserve_stacks(samples);
        self.profile.names.reserve_stack_sites(samples);
    }

    fn str(&self, index: i64) -> &str {
        self.strings
            .get(index as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    fn intern_locations(&mut self, decoded: &Tables) {
        let functions: FxHashMap<u64, &pprof::Function> =
            decoded.function.iter().map(|f| (f.id, f)).collect();
        let mut missing_functions = 0usize;
        for location in &decoded.location {
            let mut frames = Vec::with_capacity(location.line.len());
            for line in &location.line {
                let Some(function) = functions.get(&line.function_id) else {
                    missing_functions += 1;
                    continue;
                };
                let name = self.str(function.name).to_string();
                let file = self.str(function.filename).to_string();
                let names = &mut self.profile.names;
                let frame = Frame {
                    function: names.string(&name),
                    file: names.string(&file),
                    line: u32::try_from(line.line).unwrap_or(0),
                };
                frames.push(names.frame(frame));
            }
            self.locations.insert(location.id, frames);
        }
        if missing_functions > 0 {
            self.profile.warn(
                self.path,
                format!("{missing_functions} frames name a function id that is not in the profile"),
            );
        }
    }

    /// Interns a sample's stack (location ids leaf first). The outer part of
    /// a stack is usually the previous sample's (pprof writes a million
    /// distinct stacks that share their callers), so the walk starts where
    /// the two part: no per-stack key to hash or allocate, and only the new
    /// frames are looked up in the stack table.
    fn stack(&mut self, location_ids: &[u64]) -> StackId {
        let shared = self
            .last_stack
            .iter()
            .zip(location_ids.iter().rev())
            .take_while(|((location, _), id)| location == *id)
            .count();
        self.last_stack.truncate(shared);
        let mut stack = self
            .last_stack
            .last()
            .map_or(StackId(0), |&(_, stack)| stack);
        for &id in location_ids[..location_ids.len() - shared].iter().rev() {
            let slot = recent_slot(stack, id);
            if let Some(&(caller, location, pushed)) = self.recent_pushes.get(slot) {
                if caller == stack && location == id {
                    stack = pushed;
                    self.last_stack.push((id, stack));
                    continue;
                }
            }
            let caller = stack;
            match self.locations.get(&id) {
                // A location's frames are leaf first too: push its outermost first.
                Some(frames) => {
                    for &frame in frames.iter().rev() {
                        stack = self.profile.names.push_frame(stack, frame);
                    }
                }
                None => {
                    self.unknown_locations.insert(id);
                }
            }
            if let Some(recent) = self.recent_pushes.get_mut(slot) {
                *recent = (caller, id, stack);
            }
            self.last_stack.push((id, stack));
        }
        stack
    }

    /// Reads the samples `drive` passes to its callback, one at a time;
    /// `drive` returns how many there were, or `None` when the samples
    /// could not all be walked (then `Ok(false)`, and the profile holds
    /// part of the file: its caller drops it).
    fn read_samples(
        mut self,
        drive: impl FnOnce(&mut dyn FnMut(SampleRef<'_>)) -> Option<usize>,
    ) -> Result<bool> {
        let snapshot = self.profile.inputs.len();
        let path = self.path;
        let label = crate::input::file_name(path);
        let (kind_key, device_key) = (self.find_string("kind"), self.find_string("device"));
        let mut executables = Executables::default();
        let (mut no_stack, mut short) = (0, 0);
        let (mut negative, mut negative_executables) = (0, 0);
        let mut huge_counts = 0;
        let mut read = 0usize;
        let samples = drive(&mut |sample| {
            read += 1;
            let Some(&bytes) = sample.value.get(self.space_index) else {
                short += 1;
                return;
            };
            let count = match self.count_index {
                Some(i) => sample.value.get(i).copied().unwrap_or(1),
                None => 1,
            };
            let mut kind = "";
            let mut device = None;
            for &(key, str) in sample.label {
                if Some(key) == kind_key {
                    kind = self.str(str);
                } else if Some(key) == device_key {
                    device = Some(str);
                }
            }
            if kind == "executable" {
                executables.count = executables.count.saturating_add(count.max(0) as u64);
                executables.bytes = executables.bytes.saturating_add(bytes);
                if bytes < 0 {
                    negative_executables += 1;
                }
                return;
            }
            if sample.location_id.is_empty() {
                no_stack += 1;
            }
            let stack = self.stack(sample.location_id);
            if bytes < 0 {
                negative += 1;
            }
            let bytes = bytes.max(0) as u64;
            let site = self.profile.names.site(Site {
                stack,
                ..Site::default()
            });
            // A missing device label reads as the empty string, as an index
            // past the string table does.
            let device = device.unwrap_or(-1);
            let position = match self.device_memory.get(&device) {
                Some(&position) => position,
                None => {
                    let name = self.str(device).to_string();
                    self.memory(&name, snapshot, &label);
                    let position =
                        self.profile
                            .memory_position(&name, MemoryKind::Device, Axis::Snapshot);
                    self.device_memory.insert(device, position);
                    let room = (self.samples.saturating_sub(read) + 1)
                        .min((2 * self.samples).saturating_sub(self.reserved));
                    if let Some(memory) = self.profile.memories.get_mut(position) {
                        self.reserved += room;
                        let _ = memory.allocations.try_reserve(room);
                        if let Some(instant) = memory.instants.get_mut(snapshot) {
                            let _ = instant.live.try_reserve(room);
                        }
                    }
                    position
                }
            };
            let Some(memory) = self.profile.memories.get_mut(position) else {
                return;
            };
            let count = u32::try_from(count.max(0)).unwrap_or_else(|_| {
                huge_counts += 1;
                u32::MAX
            });
            let id = memory.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count,
                address: None,
                site,
            });
            if let Some(instant) = memory.instants.get_mut(snapshot) {
                instant.live.push(id);
            }
        });
        let Some(samples) = samples else {
            return Ok(false);
        };
        // Every device gets an instant for this file, even one it has no buffers in.
        let ids: Vec<String> = self.profile.memories.iter().map(|m| m.id.clone()).collect();
        for id in ids {
            self.memory(&id, snapshot, &label);
        }
        let warn = |p: &mut Profile, n: usize, what: &str| {
            if n > 0 {
                p.warn(path, format!("{n} {what}"));
            }
        };
        warn(
            self.profile,
            no_stack,
            "samples have no call stack (tracebacks were off); shown as an empty stack",
        );
        warn(
            self.profile,
            self.unknown_locations.len(),
            "location ids named by samples are not in the profile; their frames are left out",
        );
        warn(
            self.profile,
            negative,
            "buffer samples have a negative size; counted as 0 bytes",
        );
        warn(
            self.profile,
            negative_executables,
            "executable samples have a negative size (kept as reported)",
        );
        warn(
            self.profile,
            short,
            "samples have fewer values than sample types and were skipped",
        );
        warn(
            self.profile,
            huge_counts,
            "buffer samples count more than 4,294,967,295 buffers; counted as that many",
        );
        if samples == 0 {
            self.profile
                .warn(path, "profile has no samples: nothing was live");
        }
        self.profile.inputs.push(InputInfo {
            path: path.to_string(),
            format: Format::Pprof,
            executables: Some(executables),
        });
        Ok(true)
    }

    fn find_string(&self, s: &str) -> Option<i64> {
        self.strings.iter().position(|x| x == s).map(|i| i as i64)
    }

    /// The device's memory, with empty instants up to and including `snapshot`.
    fn memory(&mut self, device: &str, snapshot: usize, label: &str) -> &mut crate::model::Memory {
        let earlier: Vec<String> = self
            .profile
            .inputs
            .iter()
            .map(|i| crate::input::file_name(&i.path))
            .collect();
        let memory = self
            .profile
            .memory_mut(device, MemoryKind::Device, Axis::Snapshot);
        while memory.instants.len() <= snapshot {
            let index = memory.instants.len();
            memory.instants.push(Instant {
                label: earlier
                    .get(index)
                    .cloned()
                    .unwrap_or_else(|| label.to_string()),
                at: index as i64 + 1,
                live: Vec::new(),
            });
        }
        memory
    }
}

/// Slots of [`Reader::recent_pushes`]: a power of two, small enough for the
/// CPU's first-level caches (48 KiB).
const RECENT_PUSHES: usize = 2048;

fn recent_slot(caller: StackId, location: u64) -> usize {
    let mixed = (u64::from(caller.0) << 32 ^ location).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 53) as usize & (RECENT_PUSHES - 1)
}

#[cfg(test)]
mod tests;
