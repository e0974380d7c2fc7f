//! The live set at each memory's peak as a gzipped pprof `profile.proto`
//! (`peak --format pprof`, `summary --format pprof`), for `go tool pprof`,
//! speedscope, Pyroscope and anything else that reads pprof.
//!
//! One profile covers every memory. Each sample is one site's buffers live at
//! its memory's peak — the peak and live set `peak` reports ([`PeakFacts`],
//! [`replay::live_at`]) — with the values `space/bytes` and `objects/count`
//! and the label `device` set to the memory's id: the label JAX writes and
//! memtool's pprof reader makes memories of, so reading the file back gives
//! the same memories with the same peaks. A sample's stack is every frame of
//! the site's call stack (pprof's own `-focus` and `-hide` filter frames); a
//! site with no stack gets one frame named by its op (else its category, else
//! `<no stack>`), so profiles that name only ops (compiled programs,
//! allocator events) still draw a flame graph. Op, shape, dtype and category
//! are labels as well, for `-tagfocus` and `-tags`.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use memtool_proto::pprof;
use prost::Message;
use rustc_hash::FxHashMap;

use crate::analysis::group::{self, Totals, NO_STACK_LABEL};
use crate::analysis::peak::UNEXPLAINED_OP;
use crate::analysis::{display_id, replay, Options, PeakFacts};
use crate::model::{FrameId, Memory, Names, Profile, SiteId};
use crate::units;

/// The label that names a sample's memory (JAX's, which memtool reads back).
pub const MEMORY_LABEL: &str = "device";

/// Frame of a memory with nothing live at its peak: its one sample, of zero
/// bytes, keeps the memory in the profile.
pub const NOTHING_LIVE_FRAME: &str = "<nothing live at the peak>";

/// The one mapping's id.
const MAPPING_ID: u64 = 1;

/// The gzipped `profile.proto` of what was live at the peak of every memory
/// `options` selects (`options.ties` picks among equal peaks).
pub fn peak_pprof(profile: &Profile, options: &Options) -> Vec<u8> {
    let mut builder = Builder::new(&profile.names, &inputs_named(profile));
    builder.comment("memtool: what was live at each memory's peak".to_string());
    for memory in options.selected(profile) {
        let Some(facts) = PeakFacts::of(memory, options.ties) else {
            continue;
        };
        builder.comment(format!(
            "{}: peak {} at {}",
            display_id(&memory.id),
            units::exact_bytes(facts.peak.bytes),
            facts.label
        ));
        let live = replay::live_at(memory, facts.point().index);
        let by_site = group::totals_by_site(memory, &live);
        let mut any = false;
        for (site, totals) in by_site.iter() {
            builder.site_sample(memory, site, totals);
            any = true;
        }
        // The allocator counted more than the recorded events explain: one
        // sample carries the rest, so the samples add up to the peak `peak`
        // reports, as its rows do.
        let unexplained = facts.peak.bytes.saturating_sub(facts.point().bytes);
        if unexplained > 0 {
            let totals = Totals {
                bytes: unexplained,
                requested_bytes: unexplained,
                count: 0,
            };
            builder.named_sample(memory, UNEXPLAINED_OP, totals, Some(UNEXPLAINED_OP));
        } else if !any {
            builder.named_sample(memory, NOTHING_LIVE_FRAME, Totals::default(), None);
        }
    }
    builder.finish()
}

/// The tables of a profile being written: each string, function and
/// location once, numbered in the order first met.
struct Builder<'a> {
    names: &'a Names,
    profile: pprof::Profile,
    strings: FxHashMap<String, i64>,
    functions: FxHashMap<(i64, i64), u64>,
    locations: FxHashMap<(u64, i64), u64>,
    frame_locations: FxHashMap<FrameId, u64>,
}

impl<'a> Builder<'a> {
    fn new(names: &'a Names, file: &str) -> Self {
        let mut builder = Builder {
            names,
            profile: pprof::Profile::default(),
            strings: FxHashMap::default(),
            functions: FxHashMap::default(),
            locations: FxHashMap::default(),
            frame_locations: FxHashMap::default(),
        };
        // pprof requires the empty string first.
        builder.string("");
        let space = builder.value_type("space", "bytes");
        let objects = builder.value_type("objects", "count");
        builder.profile.sample_type = vec![space, objects];
        builder.profile.default_sample_type = space.r#type;
        // Every location's function, file and line are known: one mapping
        // that says so keeps pprof from trying to symbolize addresses. Its
        // file is what pprof heads its output with (`File:`).
        let filename = builder.string(file);
        builder.profile.mapping = vec![pprof::Mapping {
            id: MAPPING_ID,
            filename,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            ..pprof::Mapping::default()
        }];
        builder
    }

    fn string(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        let index = self.profile.string_table.len() as i64;
        self.profile.string_table.push(text.as_bytes().to_vec());
        self.strings.insert(text.to_string(), index);
        index
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> pprof::ValueType {
        pprof::ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn comment(&mut self, text: String) {
        let index = self.string(&text);
        self.profile.comment.push(index);
    }

    /// The location of one source line of `function` in `file`.
    fn location(&mut self, function: &str, file: &str, line: u32) -> u64 {
        let key = (self.string(function), self.string(file));
        let next_function = self.profile.function.len() as u64 + 1;
        let function_id = *self.functions.entry(key).or_insert(next_function);
        if function_id == next_function {
            // No system name: `go tool pprof` would demangle it into the
            // name, and make Python's `<module>` `<unknown>`.
            self.profile.function.push(pprof::Function {
                id: function_id,
                name: key.0,
                system_name: 0,
                filename: key.1,
                start_line: 0,
            });
        }
        let line = i64::from(line);
        let next_location = self.profile.location.len() as u64 + 1;
        let location_id = *self
            .locations
            .entry((function_id, line))
            .or_insert(next_location);
        if location_id == next_location {
            self.profile.location.push(pprof::Location {
                id: location_id,
                mapping_id: MAPPING_ID,
                line: vec![pprof::Line {
                    function_id,
                    line,
                    column: 0,
                }],
                ..pprof::Location::default()
            });
        }
        location_id
    }

    fn frame_location(&mut self, frame: FrameId) -> u64 {
        if let Some(&id) = self.frame_locations.get(&frame) {
            return id;
        }
        let names = self.names;
        let f = names.frame_of(frame);
        let id = self.location(names.str(f.function), names.str(f.file), f.line);
        self.frame_locations.insert(frame, id);
        id
    }

    /// The sample of one site's live buffers in `memory`.
    fn site_sample(&mut self, memory: &Memory, site: SiteId, totals: Totals) {
        let names = self.names;
        let s = names.site_of(site);
        let text = |id: Option<crate::model::StrId>| id.map(|id| names.str(id));
        let mut location_id: Vec<u64> = names
            .frames_of(s.stack)
            .map(|frame| self.frame_location(frame))
            .collect();
        if location_id.is_empty() {
            let name = text(s.op).or(text(s.category)).unwrap_or(NO_STACK_LABEL);
            location_id.push(self.location(name, "", 0));
        }
        let mut labels = self.memory_labels(memory);
        for (key, value) in [
            ("op", text(s.op)),
            ("shape", text(s.shape)),
            ("dtype", text(s.dtype)),
            ("category", text(s.category)),
        ] {
            if let Some(value) = value {
                labels.push(self.label(key, value));
            }
        }
        if totals.requested_bytes != totals.bytes {
            labels.push(pprof::Label {
                key: self.string("requested"),
                num: saturating_i64(totals.requested_bytes),
                num_unit: self.string("bytes"),
                ..pprof::Label::default()
            });
        }
        self.push(location_id, totals, labels);
    }

    /// A sample with no site: one frame named `frame`.
    fn named_sample(&mut self, memory: &Memory, frame: &str, totals: Totals, op: Option<&str>) {
        let location_id = vec![self.location(frame, "", 0)];
        let mut labels = self.memory_labels(memory);
        if let Some(op) = op {
            labels.push(self.label("op", op));
        }
        self.push(location_id, totals, labels);
    }

    fn memory_labels(&mut self, memory: &Memory) -> Vec<pprof::Label> {
        let mut labels = vec![self.label(MEMORY_LABEL, &memory.id)];
        if let Some(host) = &memory.host {
            labels.push(self.label("host", host));
        }
        labels
    }

    fn label(&mut self, key: &str, value: &str) -> pprof::Label {
        pprof::Label {
            key: self.string(key),
            str: self.string(value),
            ..pprof::Label::default()
        }
    }

    fn push(&mut self, location_id: Vec<u64>, totals: Totals, label: Vec<pprof::Label>) {
        self.profile.sample.push(pprof::Sample {
            location_id,
            value: vec![saturating_i64(totals.bytes), saturating_i64(totals.count)],
            label,
        });
    }

    fn finish(self) -> Vec<u8> {
        let encoded = self.profile.encode_to_vec();
        // The gzip header carries no time or name: the same input gives the
        // same bytes.
        let mut gzip = GzEncoder::new(
            Vec::with_capacity(encoded.len() / 4),
            Compression::default(),
        );
        // Writing to a vector cannot fail.
        let _ = gzip.write_all(&encoded);
        gzip.finish().unwrap_or_default()
    }
}

/// The profile's input files by name (`memory1.prof, memory2.prof, … (9
/// files)`), else `memtool`.
fn inputs_named(profile: &Profile) -> String {
    const SHOWN: usize = 3;
    let names: Vec<String> = profile
        .inputs
        .iter()
        .take(SHOWN)
        .map(|i| crate::input::file_name(&i.path))
        .collect();
    match profile.inputs.len() {
        0 => "memtool".to_string(),
        n if n > SHOWN => format!("{}, … ({n} files)", names.join(", ")),
        _ => names.join(", "),
    }
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Allocation, Axis, Frame, MemoryKind, Site};
    use std::io::Read;

    fn decode(gzipped: &[u8]) -> pprof::Profile {
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(gzipped)
            .read_to_end(&mut bytes)
            .unwrap();
        pprof::Profile::decode(bytes.as_slice()).unwrap()
    }

    /// Two memories: one with a stack and an op, one with only an op.
    fn two_memories() -> Profile {
        let mut profile = Profile::default();
        let names = &mut profile.names;
        let (function, file) = (names.string("train_step"), names.string("train.py"));
        let frame = names.frame(Frame {
            function,
            file,
            line: 12,
        });
        let stack = names.stack_leaf_first(&[frame]);
        let matmul = names.string("MatMul");
        let with_stack = names.site(Site {
            stack,
            op: Some(matmul),
            ..Site::default()
        });
        let add = names.string("AddV2");
        let op_only = names.site(Site {
            op: Some(add),
            ..Site::default()
        });
        let mut memories = [
            Memory::new("gpu:0", MemoryKind::Allocator, Axis::EventIndex),
            Memory::new("cpu", MemoryKind::Allocator, Axis::EventIndex),
        ];
        for (memory, site, bytes) in [(0, with_stack, 1000), (0, with_stack, 24), (1, op_only, 7)] {
            let memory = &mut memories[memory];
            let id = memory.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site,
            });
            memory.live_at_start.push(id);
        }
        profile.memories = memories.into();
        profile
    }

    #[test]
    fn each_memory_is_labelled_and_its_samples_add_up_to_its_peak() {
        let profile = two_memories();
        let decoded = decode(&peak_pprof(&profile, &Options::default()));
        let text = |i: i64| String::from_utf8(decoded.string_table[i as usize].clone()).unwrap();
        assert_eq!(text(0), "");
        let types: Vec<String> = decoded
            .sample_type
            .iter()
            .map(|t| format!("{}/{}", text(t.r#type), text(t.unit)))
            .collect();
        assert_eq!(types, ["space/bytes", "objects/count"]);
        assert_eq!(text(decoded.default_sample_type), "space");
        let mut per_memory: Vec<(String, i64, i64)> = Vec::new();
        for sample in &decoded.sample {
            let memory = sample
                .label
                .iter()
                .find(|l| text(l.key) == MEMORY_LABEL)
                .map(|l| text(l.str))
                .unwrap();
            per_memory.push((memory, sample.value[0], sample.value[1]));
        }
        assert_eq!(
            per_memory,
            [("gpu:0".to_string(), 1024, 2), ("cpu".to_string(), 7, 1)]
        );
        // The stack's frame with its file and line; the op-only site's op as
        // its one frame.
        let frame_of = |sample: &pprof::Sample| {
            let location = &decoded.location[sample.location_id[0] as usize - 1];
            let line = &location.line[0];
            let function = &decoded.function[line.function_id as usize - 1];
            (text(function.name), text(function.filename), line.line)
        };
        assert_eq!(
            frame_of(&decoded.sample[0]),
            ("train_step".to_string(), "train.py".to_string(), 12)
        );
        assert_eq!(
            frame_of(&decoded.sample[1]),
            ("AddV2".to_string(), String::new(), 0)
        );
    }

    #[test]
    fn the_same_profile_gives_the_same_bytes() {
        let profile = two_memories();
        assert_eq!(
            peak_pprof(&profile, &Options::default()),
            peak_pprof(&profile, &Options::default())
        );
    }
}
