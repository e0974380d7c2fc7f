//! Structure-aware: builds a `_dump_snapshot` pickle from fuzzer-chosen parts
//! (segments and their blocks, device trace lists, trace entries with the
//! snapshot's keys, frames lists, memo puts and gets, lists and dicts shared
//! by reference and repeated, MARK/APPENDS and SETITEMS batches or single
//! APPEND/SETITEM, protocols 2 to 5) so that the sharing a byte-level mutator
//! seldom writes consistently is reached in a few runs. Each pickle must load
//! the same through the fast and the general path, and pass the `analyses`
//! checks (outputs, and time and memory proportional to its bytes).
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use memtool_core::{LoadOptions, Source};

mod common;
#[path = "../../crates/memtool-core/tests/common/paths.rs"]
mod paths;

#[derive(Arbitrary, Debug)]
struct Snapshot {
    /// 2 to 5 (taken modulo 4).
    protocol: u8,
    /// Keys before the snapshot's own: other data, which may store lists
    /// that the traces then reference.
    prelude: Vec<(Name, Value)>,
    segments: Option<Vec<Segment>>,
    traces: Vec<Trace>,
    annotations: Option<Vec<Annotation>>,
    /// The dict's pairs in one SETITEMS batch, or one SETITEM each.
    batched: bool,
}

#[derive(Arbitrary, Debug)]
enum Trace {
    /// A list of trace entries.
    List(Vec<Entry>),
    /// A reference to the `n`th list written so far (any list: a trace, a
    /// frames list, a prelude value), listed `times` times.
    Again { n: u8, times: u16 },
    /// Something that is not a list.
    Other(Value),
}

#[derive(Arbitrary, Debug)]
struct Entry {
    action: Action,
    addr: Option<u16>,
    size: Option<Int>,
    time_us: Option<Int>,
    frames: Option<Frames>,
    /// Another key, known or not.
    extra: Option<(Name, Value)>,
    /// A reference to the `n`th dict written so far instead of this entry.
    again: Option<u8>,
}

#[derive(Arbitrary, Debug)]
enum Frames {
    List(Vec<Frame>),
    /// A reference to the `n`th list written so far.
    Again(u8),
}

#[derive(Arbitrary, Debug)]
enum Frame {
    New {
        name: Name,
        file: Name,
        line: Int,
    },
    /// A reference to the `n`th dict written so far.
    Again(u8),
    Other(Value),
}

#[derive(Arbitrary, Debug)]
struct Segment {
    address: Option<Int>,
    total_size: Option<Int>,
    device: Option<Int>,
    stream: Option<Int>,
    segment_type: Option<Name>,
    blocks: Option<Blocks>,
}

#[derive(Arbitrary, Debug)]
enum Blocks {
    List(Vec<Block>),
    Again(u8),
}

#[derive(Arbitrary, Debug)]
struct Block {
    size: Option<Int>,
    requested_size: Option<Int>,
    address: Option<Int>,
    state: Option<Name>,
    frames: Option<Frames>,
}

#[derive(Arbitrary, Debug)]
struct Annotation {
    stage: Name,
    name: Name,
    time_us: Int,
    device: Option<Int>,
}

#[derive(Arbitrary, Debug)]
enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Snapshot,
    Other(Name),
}

/// Strings the reader looks for, and a few it does not.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Name {
    Known(u8),
    Numbered(u8),
}

const NAMES: &[&str] = &[
    "action",
    "addr",
    "size",
    "frames",
    "time_us",
    "name",
    "filename",
    "line",
    "segments",
    "device_traces",
    "external_annotations",
    "blocks",
    "state",
    "address",
    "total_size",
    "requested_size",
    "allocated",
    "device",
    "stream",
    "segment_type",
    "category",
    "device_free",
    "real_size",
    "history",
    "stage",
    "START",
    "END",
    "ProfilerStep#1",
    "ProfilerStep#2",
    "active_allocated",
    "active_pending_free",
    "inactive",
    "large",
    "small",
    "train.py",
    "forward",
    "",
    "alloc",
    "free_completed",
];

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Int {
    Small(u8),
    Medium(u32),
    Negative(i16),
    Huge,
    Any(i64),
    /// Past 64 bits (LONG1 of nine bytes).
    Past64,
}

#[derive(Arbitrary, Debug)]
enum Value {
    None,
    Bool(bool),
    Int(Int),
    Float(u16),
    Str(Name),
    Bytes(u8),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    Dict(Vec<(Name, Value)>),
    /// A reference to the `n`th object memoized so far.
    Again(u8),
}

/// Writes pickle opcodes as CPython's pickler does: every string, list and
/// dict memoized, strings written again by reference.
struct Writer {
    out: Vec<u8>,
    protocol: u8,
    memo_len: u32,
    /// Memo ids of the lists and the dicts written, in order.
    lists: Vec<u32>,
    dicts: Vec<u32>,
    strings: std::collections::HashMap<String, u32>,
}

impl Writer {
    fn put(&mut self) -> u32 {
        let id = self.memo_len;
        if self.protocol >= 4 {
            self.out.push(0x94);
        } else if id < 256 {
            self.out.extend([b'q', id as u8]);
        } else {
            self.out.push(b'r');
            self.out.extend(id.to_le_bytes());
        }
        self.memo_len += 1;
        id
    }

    fn get(&mut self, id: u32) {
        if id < 256 {
            self.out.extend([b'h', id as u8]);
        } else {
            self.out.push(b'j');
            self.out.extend(id.to_le_bytes());
        }
    }

    /// A reference to the `n`th of `ids` (modulo their number), or `None`
    /// when there is none.
    fn again(&mut self, ids: &[u32], n: u8) -> bool {
        match ids.get(n as usize % ids.len().max(1)) {
            Some(&id) => {
                self.get(id);
                true
            }
            None => false,
        }
    }

    fn str(&mut self, s: &str) {
        if let Some(&id) = self.strings.get(s) {
            self.get(id);
            return;
        }
        if self.protocol >= 4 && s.len() < 256 {
            self.out.extend([0x8c, s.len() as u8]);
        } else {
            self.out.push(b'X');
            self.out.extend((s.len() as u32).to_le_bytes());
        }
        self.out.extend(s.as_bytes());
        let id = self.put();
        self.strings.insert(s.to_string(), id);
    }

    fn name(&mut self, name: Name) {
        match name {
            Name::Known(i) => self.str(NAMES[i as usize % NAMES.len()]),
            Name::Numbered(i) => self.str(&format!("s{i}")),
        }
    }

    fn int(&mut self, v: Int) {
        match v {
            Int::Small(v) => self.out.extend([b'K', v]),
            Int::Medium(v) if v < 1 << 16 => {
                self.out.push(b'M');
                self.out.extend((v as u16).to_le_bytes());
            }
            Int::Medium(v) => self.long(i64::from(v)),
            Int::Negative(v) => {
                self.out.push(b'J');
                self.out.extend(i32::from(v).to_le_bytes());
            }
            Int::Huge => self.long(i64::MAX),
            Int::Any(v) => self.long(v),
            Int::Past64 => self.out.extend([0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        }
    }

    fn long(&mut self, v: i64) {
        self.out.extend([0x8a, 8]);
        self.out.extend(v.to_le_bytes());
    }

    /// `items` in a new list: MARK, the items, APPENDS (in batches of 1000,
    /// as CPython writes them).
    fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        self.out.push(b']');
        let id = self.put();
        self.lists.push(id);
        for batch in items.chunks(1000) {
            if batch.len() == 1 {
                item(self, &batch[0]);
                self.out.push(b'a');
                continue;
            }
            self.out.push(b'(');
            for i in batch {
                item(self, i);
            }
            self.out.push(b'e');
        }
    }

    /// A new dict of `pairs`: each writes its key and value.
    fn dict(&mut self, batched: bool, pairs: Vec<Box<dyn FnOnce(&mut Self) + '_>>) {
        self.out.push(b'}');
        let id = self.put();
        self.dicts.push(id);
        if batched && pairs.len() > 1 {
            self.out.push(b'(');
            for pair in pairs {
                pair(self);
            }
            self.out.push(b'u');
        } else {
            for pair in pairs {
                pair(self);
                self.out.push(b's');
            }
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::None => self.out.push(b'N'),
            Value::Bool(b) => self.out.push(if *b { 0x88 } else { 0x89 }),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => {
                self.out.push(b'G');
                self.out.extend((f64::from(*f) / 7.0).to_be_bytes());
            }
            Value::Str(s) => self.name(*s),
            Value::Bytes(n) => {
                self.out.extend([b'C', *n]);
                self.out.extend(std::iter::repeat_n(b'b', *n as usize));
                self.put();
            }
            Value::List(items) => self.list(items, |w, v| w.value(v)),
            Value::Tuple(items) => {
                self.out.push(b'(');
                for i in items {
                    self.value(i);
                }
                self.out.push(b't');
                self.put();
            }
            Value::Dict(pairs) => {
                let pairs: Vec<Box<dyn FnOnce(&mut Self)>> = pairs
                    .iter()
                    .map(|(k, v)| {
                        Box::new(move |w: &mut Self| {
                            w.name(*k);
                            w.value(v);
                        }) as Box<dyn FnOnce(&mut Self)>
                    })
                    .collect();
                self.dict(true, pairs);
            }
            Value::Again(n) => {
                let n = u32::from(*n);
                if n < self.memo_len {
                    self.get(n);
                } else {
                    self.out.push(b'N');
                }
            }
        }
    }

    fn key_int(&mut self, key: &'static str, v: Option<Int>) -> Option<Box<dyn FnOnce(&mut Self)>> {
        let v = v?;
        Some(Box::new(move |w: &mut Self| {
            w.str(key);
            w.int(v);
        }))
    }

    fn frames(&mut self, frames: &Frames) {
        match frames {
            Frames::List(list) => self.list(list, |w, f| match f {
                Frame::New { name, file, line } => {
                    let (name, file, line) = (*name, *file, *line);
                    w.dict(
                        true,
                        vec![
                            Box::new(move |w: &mut Self| {
                                w.str("name");
                                w.name(name);
                            }),
                            Box::new(move |w: &mut Self| {
                                w.str("filename");
                                w.name(file);
                            }),
                            Box::new(move |w: &mut Self| {
                                w.str("line");
                                w.int(line);
                            }),
                        ],
                    );
                }
                Frame::Again(n) => {
                    let dicts = w.dicts.clone();
                    if !w.again(&dicts, *n) {
                        w.out.push(b'N');
                    }
                }
                Frame::Other(v) => w.value(v),
            }),
            Frames::Again(n) => {
                let lists = self.lists.clone();
                if !self.again(&lists, *n) {
                    self.out.push(b']');
                }
            }
        }
    }

    fn entry(&mut self, e: &Entry) {
        if let Some(n) = e.again {
            let dicts = self.dicts.clone();
            if self.again(&dicts, n) {
                return;
            }
        }
        let mut pairs: Vec<Box<dyn FnOnce(&mut Self) + '_>> = Vec::new();
        let action = &e.action;
        pairs.push(Box::new(move |w: &mut Self| {
            w.str("action");
            match action {
                Action::Alloc => w.str("alloc"),
                Action::FreeRequested => w.str("free_requested"),
                Action::FreeCompleted => w.str("free_completed"),
                Action::SegmentAlloc => w.str("segment_alloc"),
                Action::SegmentFree => w.str("segment_free"),
                Action::SegmentMap => w.str("segment_map"),
                Action::SegmentUnmap => w.str("segment_unmap"),
                Action::Oom => w.str("oom"),
                Action::Snapshot => w.str("snapshot"),
                Action::Other(n) => w.name(*n),
            }
        }));
        pairs.extend(self.key_int("addr", e.addr.map(|a| Int::Medium(u32::from(a) << 9))));
        pairs.extend(self.key_int("size", e.size));
        pairs.extend(self.key_int("time_us", e.time_us));
        if let Some(frames) = &e.frames {
            pairs.push(Box::new(move |w: &mut Self| {
                w.str("frames");
                w.frames(frames);
            }));
        }
        if let Some((k, v)) = &e.extra {
            pairs.push(Box::new(move |w: &mut Self| {
                w.name(*k);
                w.value(v);
            }));
        }
        self.dict(true, pairs);
    }

    fn segment(&mut self, s: &Segment) {
        let mut pairs: Vec<Box<dyn FnOnce(&mut Self) + '_>> = Vec::new();
        pairs.extend(self.key_int("address", s.address));
        pairs.extend(self.key_int("total_size", s.total_size));
        pairs.extend(self.key_int("device", s.device));
        pairs.extend(self.key_int("stream", s.stream));
        if let Some(t) = s.segment_type {
            pairs.push(Box::new(move |w: &mut Self| {
                w.str("segment_type");
                w.name(t);
            }));
        }
        if let Some(blocks) = &s.blocks {
            pairs.push(Box::new(move |w: &mut Self| {
                w.str("blocks");
                match blocks {
                    Blocks::List(list) => w.list(list, |w, b| w.block(b)),
                    Blocks::Again(n) => {
                        let lists = w.lists.clone();
                        if !w.again(&lists, *n) {
                            w.out.push(b']');
                        }
                    }
                }
            }));
        }
        self.dict(true, pairs);
    }

    fn block(&mut self, b: &Block) {
        let mut pairs: Vec<Box<dyn FnOnce(&mut Self) + '_>> = Vec::new();
        pairs.extend(self.key_int("size", b.size));
        pairs.extend(self.key_int("requested_size", b.requested_size));
        pairs.extend(self.key_int("address", b.address));
        if let Some(state) = b.state {
            pairs.push(Box::new(move |w: &mut Self| {
                w.str("state");
                w.name(state);
            }));
        }
        if let Some(frames) = &b.frames {
            pairs.push(Box::new(move |w: &mut Self| {
                w.str("frames");
                w.frames(frames);
            }));
        }
        self.dict(true, pairs);
    }

    fn trace(&mut self, t: &Trace) {
        match t {
            Trace::List(entries) => self.list(entries, |w, e| w.entry(e)),
            Trace::Again { n, times } => {
                let lists = self.lists.clone();
                for _ in 0..(*times).max(1) {
                    if !self.again(&lists, *n) {
                        self.out.push(b']');
                    }
                }
            }
            Trace::Other(v) => self.value(v),
        }
    }
}

fn pickle(s: &Snapshot) -> Vec<u8> {
    let mut w = Writer {
        out: Vec::new(),
        protocol: 2 + s.protocol % 4,
        memo_len: 0,
        lists: Vec::new(),
        dicts: Vec::new(),
        strings: Default::default(),
    };
    w.out.extend([0x80, w.protocol]);
    let mut pairs: Vec<Box<dyn FnOnce(&mut Writer) + '_>> = Vec::new();
    for (k, v) in &s.prelude {
        pairs.push(Box::new(move |w: &mut Writer| {
            w.name(*k);
            w.value(v);
        }));
    }
    if let Some(segments) = &s.segments {
        pairs.push(Box::new(move |w: &mut Writer| {
            w.str("segments");
            w.list(segments, |w, s| w.segment(s));
        }));
    }
    pairs.push(Box::new(move |w: &mut Writer| {
        w.str("device_traces");
        // The traces list itself, then its items: a `Trace::Again` may be
        // written several times, so items are written one by one.
        w.out.push(b']');
        let id = w.put();
        w.lists.push(id);
        w.out.push(b'(');
        for t in &s.traces {
            w.trace(t);
        }
        w.out.push(b'e');
    }));
    if let Some(annotations) = &s.annotations {
        pairs.push(Box::new(move |w: &mut Writer| {
            w.str("external_annotations");
            w.list(annotations, |w, a| {
                let (stage, name, time, device) = (a.stage, a.name, a.time_us, a.device);
                w.dict(
                    true,
                    vec![
                        Box::new(move |w: &mut Writer| {
                            w.str("stage");
                            w.name(stage);
                        }),
                        Box::new(move |w: &mut Writer| {
                            w.str("name");
                            w.name(name);
                        }),
                        Box::new(move |w: &mut Writer| {
                            w.str("time_us");
                            w.int(time);
                        }),
                        Box::new(move |w: &mut Writer| {
                            w.str("device");
                            w.int(device.unwrap_or(Int::Small(0)));
                        }),
                    ],
                );
            });
        }));
    }
    w.dict(s.batched, pairs);
    w.out.push(b'.');
    w.out
}

fuzz_target!(|snapshot: Snapshot| {
    let bytes = pickle(&snapshot);
    let options = LoadOptions {
        max_decompressed: Some(16 << 20),
        ..LoadOptions::default()
    };
    paths::assert_paths_agree(
        "structured pickle",
        || vec![Source::from_bytes("fuzz.pickle", bytes.clone())],
        &options,
    );
    common::analyses(&bytes);
});
