//! JAX device-memory profiles: pprof `profile.proto`, as written by
//! `jax.profiler.save_device_memory_profile`.
//!
//! Each sample is `count` live buffers (or executables) of one call stack, with
//! labels `kind=buffer|executable` and `device=<name>`. Each file becomes one
//! [`Instant`] of every device memory; a series of files is a series of
//! instants in command-line order.

use std::collections::HashMap;

use memtool_proto::pprof;
use prost::Message;

use crate::error::{Error, Result};
use crate::model::{
    Allocation, Axis, Executables, Format, Frame, FrameId, InputInfo, Instant, MemoryKind, Profile,
    Site, StackId,
};

use super::wire;

pub(crate) fn read(profile: &mut Profile, path: &str, bytes: &[u8]) -> Result<()> {
    let decoded = crate::timings::time("pprof: decode (prost)", || {
        pprof::Profile::decode(bytes).map_err(|e| corrupt(path, bytes, e))
    })?;
    let reader = crate::timings::time("pprof: strings and locations", || {
        Reader::new(profile, path, &decoded)
    })?;
    crate::timings::time("pprof: samples (stacks, sites, allocations)", || {
        reader.read_samples(&decoded)
    })
}

fn corrupt(path: &str, bytes: &[u8], e: prost::DecodeError) -> Error {
    // prost does not say where; the wire reader finds the first bad top-level field.
    let located = wire::first_error(bytes);
    let (message, offset) = match located {
        Some(w) => (w.message.to_string(), Some(w.offset as u64)),
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
    locations: HashMap<u64, Vec<FrameId>>,
    stacks: HashMap<Vec<u64>, StackId>,
}

impl<'p> Reader<'p> {
    fn new(profile: &'p mut Profile, path: &'p str, decoded: &pprof::Profile) -> Result<Self> {
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
        let count_index = find("allocations");
        let mut reader = Reader {
            profile,
            path,
            strings,
            count_index,
            space_index,
            locations: HashMap::new(),
            stacks: HashMap::new(),
        };
        reader.intern_locations(decoded);
        Ok(reader)
    }

    fn str(&self, index: i64) -> &str {
        self.strings
            .get(index as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    fn intern_locations(&mut self, decoded: &pprof::Profile) {
        let functions: HashMap<u64, &pprof::Function> =
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

    fn stack(&mut self, location_ids: &[u64], unknown_locations: &mut usize) -> StackId {
        if let Some(&id) = self.stacks.get(location_ids) {
            return id;
        }
        let mut frames = Vec::new();
        for id in location_ids {
            match self.locations.get(id) {
                Some(f) => frames.extend_from_slice(f),
                None => *unknown_locations += 1,
            }
        }
        let stack = self.profile.names.stack_leaf_first(&frames);
        self.stacks.insert(location_ids.to_vec(), stack);
        stack
    }

    fn read_samples(mut self, decoded: &pprof::Profile) -> Result<()> {
        let snapshot = self.profile.inputs.len();
        let path = self.path;
        let label = file_name(path);
        let (kind_key, device_key) = (self.find_string("kind"), self.find_string("device"));
        let mut executables = Executables::default();
        let (mut no_stack, mut unknown_locations, mut short) = (0, 0, 0);
        let (mut negative, mut negative_executables) = (0, 0);
        for sample in &decoded.sample {
            let Some(&bytes) = sample.value.get(self.space_index) else {
                short += 1;
                continue;
            };
            let count = match self.count_index {
                Some(i) => sample.value.get(i).copied().unwrap_or(1),
                None => 1,
            };
            let mut kind = "";
            let mut device = "";
            for l in &sample.label {
                if Some(l.key) == kind_key {
                    kind = self.str(l.str);
                } else if Some(l.key) == device_key {
                    device = self.str(l.str);
                }
            }
            if kind == "executable" {
                executables.count += count.max(0) as u64;
                executables.bytes += bytes;
                if bytes < 0 {
                    negative_executables += 1;
                }
                continue;
            }
            let device = device.to_string();
            if sample.location_id.is_empty() {
                no_stack += 1;
            }
            let stack = self.stack(&sample.location_id, &mut unknown_locations);
            if bytes < 0 {
                negative += 1;
            }
            let bytes = bytes.max(0) as u64;
            let site = self.profile.names.site(Site {
                stack,
                ..Site::default()
            });
            let memory = self.memory(&device, snapshot, &label);
            let id = memory.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: count.max(0) as u64,
                address: None,
                site,
            });
            memory.instants[snapshot].live.push(id);
        }
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
            unknown_locations,
            "frames name a location id that is not in the profile",
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
        if decoded.sample.is_empty() {
            self.profile
                .warn(path, "profile has no samples: nothing was live");
        }
        self.profile.inputs.push(InputInfo {
            path: path.to_string(),
            format: Format::Pprof,
            executables: Some(executables),
        });
        Ok(())
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
            .map(|i| file_name(&i.path))
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

fn file_name(path: &str) -> String {
    path.rsplit(['/', '\\']).next().unwrap_or(path).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{load, LoadOptions, Source};

    fn label(key: i64, value: i64) -> pprof::Label {
        pprof::Label {
            key,
            str: value,
            ..Default::default()
        }
    }

    /// A profile in the shape JAX writes, with the odd cases real files have.
    fn profile() -> Vec<u8> {
        let strings: Vec<Vec<u8>> = [
            &b""[..],
            b"allocations",
            b"count",
            b"space",
            b"bytes",
            b"kind",
            b"buffer",
            b"executable",
            b"device",
            b"cuda:0",
            b"f\xffoo",
            b"model.py",
        ]
        .iter()
        .map(|s| s.to_vec())
        .collect();
        let p = pprof::Profile {
            sample_type: vec![
                pprof::ValueType { r#type: 1, unit: 2 },
                pprof::ValueType { r#type: 3, unit: 4 },
            ],
            function: vec![pprof::Function {
                id: 1,
                name: 10,
                filename: 11,
                ..Default::default()
            }],
            location: vec![pprof::Location {
                id: 7,
                line: vec![pprof::Line {
                    function_id: 1,
                    line: 42,
                    column: 0,
                }],
                ..Default::default()
            }],
            sample: vec![
                pprof::Sample {
                    location_id: vec![7],
                    value: vec![2, 1024],
                    label: vec![label(5, 6), label(8, 9)],
                },
                pprof::Sample {
                    location_id: vec![7, 99],
                    value: vec![1, 10],
                    label: vec![label(5, 6), label(8, 9)],
                },
                pprof::Sample {
                    location_id: vec![],
                    value: vec![1, -64],
                    label: vec![label(5, 7)],
                },
            ],
            string_table: strings,
            ..Default::default()
        };
        p.encode_to_vec()
    }

    #[test]
    fn odd_but_valid_input_gives_warnings_not_errors() {
        let source = Source::from_bytes("odd.prof", profile());
        let p = load(vec![source], &LoadOptions::default()).unwrap();
        assert_eq!(p.memories.len(), 1);
        let m = &p.memories[0];
        assert_eq!(m.id, "cuda:0");
        assert_eq!(m.instants[0].live.len(), 2);
        let total: u64 = m.allocations.iter().map(|a| a.bytes).sum();
        let buffers: u64 = m.allocations.iter().map(|a| a.count).sum();
        assert_eq!((total, buffers), (1034, 3));
        let exe = p.inputs[0].executables.unwrap();
        assert_eq!((exe.count, exe.bytes), (1, -64));
        let leaf = p
            .names
            .leaf(p.names.site_of(m.allocations[0].site).stack)
            .unwrap();
        assert_eq!(p.names.frame_label(leaf), "f\u{fffd}oo model.py:42");
        let messages: Vec<&str> = p.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "1 names are not valid UTF-8; invalid bytes shown as U+FFFD",
                "1 frames name a location id that is not in the profile",
                "1 executable samples have a negative size (kept as reported)",
            ]
        );
    }

    #[test]
    fn a_cpu_profile_is_refused_clearly() {
        let p = pprof::Profile {
            sample_type: vec![pprof::ValueType { r#type: 1, unit: 2 }],
            string_table: vec![b"".to_vec(), b"cpu".to_vec(), b"nanoseconds".to_vec()],
            ..Default::default()
        };
        let source = Source::from_bytes("cpu.prof", p.encode_to_vec());
        let err = load(vec![source], &LoadOptions::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cpu.prof: pprof profile has no `space` sample type, so it is not a device memory \
             profile (sample types: cpu/nanoseconds)"
        );
    }
}
