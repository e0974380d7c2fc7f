//! An `xla.HloProto` split the way the Memory Viewer uses it.
//!
//! The module (instructions, stack frames) is decoded with prost: it is the
//! program, and every buffer names one of its instructions. The buffer
//! assignment grows with the number of buffers, and its heap simulator traces
//! with the number of events (millions for a big program), so it is walked
//! on the wire instead: each logical buffer is decoded alone into a compact
//! [`LogicalBuffer`], and each trace's events are decoded once, on a short
//! path for the fields XLA writes, into compact events whose instruction
//! names are interned per trace (each distinct name checked as UTF-8 once).
//! A corrupt event rejects the module up front, as a whole-message decode
//! would, with the general field walk's words.

use memtool_proto::xla::{BufferAllocationProto, HloModuleProto, LogicalBufferProto};
use prost::Message;
use rustc_hash::FxHashMap as HashMap;

use super::short_path::{self, LogicalBuffer};

use memtool_proto::wire::reader::{varint_at, Fields, Value, WireError};

/// What the Memory Viewer reads of one module.
pub(super) struct Decoded<'b> {
    pub module: Option<HloModuleProto>,
    pub logical_buffers: Vec<LogicalBuffer>,
    pub allocations: Vec<BufferAllocationProto>,
    pub traces: Vec<Trace<'b>>,
}

/// One heap simulator trace, decoded once into compact events.
pub(super) struct Trace<'b> {
    events: Vec<TraceEvent>,
    /// The events' distinct non-empty instruction names, in the order they
    /// first occur: a replay's steps.
    names: Vec<&'b str>,
}

/// One `HeapSimulatorTrace.Event`; its instruction name a position in
/// [`Trace::names`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TraceEvent {
    pub buffer_id: i64,
    pub share_with_canonical_id: i64,
    pub kind: i32,
    /// `None` for an event without an instruction name.
    pub name: Option<u32>,
}

/// Why a module could not be read.
pub(super) type DecodeError = String;

fn wire(e: WireError) -> DecodeError {
    format!("{} (at byte {} of the module)", e.message(), e.offset)
}

fn prost(e: prost::DecodeError) -> DecodeError {
    e.to_string()
        .replace("failed to decode Protobuf message: ", "")
}

impl<'b> Decoded<'b> {
    pub(super) fn parse(bytes: &'b [u8]) -> Result<Decoded<'b>, DecodeError> {
        let mut decoded = Decoded {
            module: None,
            logical_buffers: Vec::new(),
            allocations: Vec::new(),
            traces: Vec::new(),
        };
        for field in Fields::new(bytes) {
            match field.map_err(wire)? {
                (1, Value::Bytes(module), _) => {
                    // A repeated singular message merges, as in any decoder.
                    decoded
                        .module
                        .get_or_insert_with(HloModuleProto::default)
                        .merge(module)
                        .map_err(prost)?;
                }
                (3, Value::Bytes(assignment), base) => decoded.assignment(assignment, base)?,
                (1 | 3, _, _) => return Err("a message field has the wrong wire type".into()),
                _ => {}
            }
        }
        Ok(decoded)
    }

    fn assignment(&mut self, bytes: &'b [u8], base: usize) -> Result<(), DecodeError> {
        for field in Fields::at(bytes, base) {
            match field.map_err(wire)? {
                (1, Value::Bytes(buffer), _) => {
                    if let Some(buffer) = short_path::logical_buffer(buffer) {
                        self.logical_buffers.push(buffer);
                        continue;
                    }
                    let proto = LogicalBufferProto::decode(buffer).map_err(prost)?;
                    let (instruction_id, shape_index) = match proto.defined_at {
                        Some(at) => (Some(at.instruction_id), at.shape_index),
                        None => (None, Vec::new()),
                    };
                    self.logical_buffers.push(LogicalBuffer {
                        id: proto.id,
                        size: proto.size,
                        color: proto.color,
                        instruction_id,
                        shape_index: shape_index.into_boxed_slice(),
                    });
                }
                (3, Value::Bytes(allocation), _) => {
                    let decoded = match short_path::allocation(allocation) {
                        Some(decoded) => decoded,
                        None => BufferAllocationProto::decode(allocation).map_err(prost)?,
                    };
                    self.allocations.push(decoded);
                }
                (4, Value::Bytes(trace), base) => self.traces.push(Trace::read(trace, base)?),
                (1 | 3 | 4, _, _) => {
                    return Err("a buffer assignment field has the wrong wire type".into())
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl<'b> Trace<'b> {
    /// Decodes every event, so that a corrupt one rejects the module before
    /// anything is replayed, and no event is read twice.
    fn read(bytes: &'b [u8], base: usize) -> Result<Trace<'b>, DecodeError> {
        let mut trace = Trace {
            events: Vec::new(),
            names: Vec::new(),
        };
        let mut name_ids: HashMap<&'b [u8], u32> = HashMap::default();
        // An instruction's events often come together (its output
        // allocated, its operands freed): the last name needs no lookup.
        let mut last: (&'b [u8], Option<u32>) = (&[], None);
        for event in RawEvents::new(bytes, base) {
            let (event, at) = event?;
            let fast = match fast_event(event) {
                Some(fast) => fast,
                // Whatever the short path does not take, the general parse
                // reads or words the error of.
                None => {
                    let parsed = TraceEvent::parse(event, at)?;
                    FastEvent {
                        kind: parsed.kind,
                        buffer_id: parsed.buffer_id,
                        name: parsed.instruction_name.as_bytes(),
                        share_with_canonical_id: parsed.share_with_canonical_id,
                    }
                }
            };
            if fast.name.is_empty() {
                last = (&[], None);
            } else if fast.name != last.0 {
                let id = match name_ids.get(fast.name) {
                    Some(&id) => id,
                    None => {
                        let Ok(name) = std::str::from_utf8(fast.name) else {
                            // The general parse says where.
                            TraceEvent::parse(event, at)?;
                            return Err("an instruction name is not UTF-8".into());
                        };
                        let id = trace.names.len() as u32;
                        trace.names.push(name);
                        name_ids.insert(fast.name, id);
                        id
                    }
                };
                last = (fast.name, Some(id));
            }
            trace.events.push(TraceEvent {
                buffer_id: fast.buffer_id,
                share_with_canonical_id: fast.share_with_canonical_id,
                kind: fast.kind,
                name: last.1,
            });
        }
        Ok(trace)
    }

    /// The buffer of the first event: XProf decides which allocation a
    /// trace simulates from it.
    pub(super) fn first_buffer_id(&self) -> Option<i64> {
        self.events.first().map(|e| e.buffer_id)
    }

    /// The events in order.
    pub(super) fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    /// The instruction names, in the order they first occur.
    pub(super) fn names(&self) -> &[&'b str] {
        &self.names
    }
}

/// The events of a trace (field 1), each as its bytes and their offset in
/// the module; other fields are skipped. Events, nearly all of a trace,
/// take a short path; any other field goes through [`Fields`], which also
/// words every error.
struct RawEvents<'b> {
    bytes: &'b [u8],
    pos: usize,
    base: usize,
    failed: bool,
}

impl<'b> RawEvents<'b> {
    fn new(bytes: &'b [u8], base: usize) -> RawEvents<'b> {
        RawEvents {
            bytes,
            pos: 0,
            base,
            failed: false,
        }
    }

    /// An event's key (field 1, length-delimited) and length, read on the
    /// short path; `None` for anything else.
    fn fast(&mut self) -> Option<(&'b [u8], usize)> {
        let mut pos = self.pos;
        if *self.bytes.get(pos)? != 0x0a {
            return None;
        }
        pos += 1;
        let len = usize::try_from(varint_at(self.bytes, &mut pos)?).ok()?;
        let event = self.bytes.get(pos..pos.checked_add(len)?)?;
        let at = self.base + pos;
        self.pos = pos + len;
        Some((event, at))
    }
}

impl<'b> Iterator for RawEvents<'b> {
    type Item = Result<(&'b [u8], usize), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed || self.pos >= self.bytes.len() {
                return None;
            }
            if let Some(event) = self.fast() {
                return Some(Ok(event));
            }
            let mut fields = Fields::at(&self.bytes[self.pos..], self.base + self.pos);
            let field = fields.next_field();
            self.pos = fields.offset() - self.base;
            match field {
                Ok(Some((1, Value::Bytes(event), at))) => return Some(Ok((event, at))),
                Ok(Some((1, _, _))) => {
                    self.failed = true;
                    return Some(Err("a trace event has the wrong wire type".into()));
                }
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(wire(e)));
                }
            }
        }
    }
}

/// A trace event read on the short path: its name still bytes.
#[derive(Clone, Copy)]
struct FastEvent<'b> {
    kind: i32,
    buffer_id: i64,
    name: &'b [u8],
    share_with_canonical_id: i64,
}

/// A trace event decoded without the general field walk, for the fields
/// XLA writes (kind, buffer, computation and instruction names, canonical
/// buffer) in their wire types; `None` for anything else or any error, which
/// [`TraceEvent::parse`] then reads (and words). Later values of a field
/// win, as there.
fn fast_event(bytes: &[u8]) -> Option<FastEvent<'_>> {
    let mut event = FastEvent {
        kind: 0,
        buffer_id: 0,
        name: &[],
        share_with_canonical_id: 0,
    };
    let (mut pos, mut named) = (0, false);
    while pos < bytes.len() {
        let key = *bytes.get(pos)?;
        pos += 1;
        // Protobuf int32/int64 are two's complement in a varint.
        match key {
            0x08 => event.kind = varint_at(bytes, &mut pos)? as i32,
            0x10 => event.buffer_id = varint_at(bytes, &mut pos)? as i64,
            0x28 => event.share_with_canonical_id = varint_at(bytes, &mut pos)? as i64,
            0x1a | 0x22 => {
                let len = usize::try_from(varint_at(bytes, &mut pos)?).ok()?;
                let value = bytes.get(pos..pos.checked_add(len)?)?;
                pos += len;
                if key == 0x22 {
                    // A name given twice: the general parse checks the first.
                    if named {
                        return None;
                    }
                    (event.name, named) = (value, true);
                }
            }
            _ => return None,
        }
    }
    Some(event)
}

/// A trace event read by the general field walk.
struct ParsedEvent<'b> {
    kind: i32,
    buffer_id: i64,
    instruction_name: &'b str,
    share_with_canonical_id: i64,
}

impl TraceEvent {
    fn parse(bytes: &[u8], base: usize) -> Result<ParsedEvent<'_>, DecodeError> {
        let mut event = ParsedEvent {
            kind: 0,
            buffer_id: 0,
            instruction_name: "",
            share_with_canonical_id: 0,
        };
        for field in Fields::at(bytes, base) {
            // Protobuf int32/int64 are two's complement in a varint.
            match field.map_err(wire)? {
                (1, Value::Varint(v), _) => event.kind = v as i32,
                (2, Value::Varint(v), _) => event.buffer_id = v as i64,
                (4, Value::Bytes(name), at) => {
                    event.instruction_name = std::str::from_utf8(name).map_err(|_| {
                        format!("an instruction name is not UTF-8 (at byte {at} of the module)")
                    })?;
                }
                (5, Value::Varint(v), _) => event.share_with_canonical_id = v as i64,
                (1 | 2 | 5, _, _) => {
                    return Err("a trace event field has the wrong wire type".into())
                }
                _ => {}
            }
        }
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtool_proto::xla::heap_simulator_trace::Event;
    use memtool_proto::xla::logical_buffer_proto::Location;
    use memtool_proto::xla::{BufferAssignmentProto, HeapSimulatorTrace, HloProto};

    fn proto() -> HloProto {
        HloProto {
            hlo_module: Some(HloModuleProto {
                name: "m".into(),
                ..Default::default()
            }),
            buffer_assignment: Some(BufferAssignmentProto {
                logical_buffers: vec![LogicalBufferProto {
                    id: 7,
                    size: 64,
                    defined_at: Some(Location {
                        instruction_id: 3,
                        shape_index: vec![1, 0],
                        ..Default::default()
                    }),
                    color: 1,
                }],
                buffer_allocations: vec![BufferAllocationProto {
                    index: 0,
                    size: 128,
                    ..Default::default()
                }],
                heap_simulator_traces: vec![HeapSimulatorTrace {
                    events: vec![
                        Event {
                            kind: 0,
                            buffer_id: 7,
                            instruction_name: "fusion.1".into(),
                            ..Default::default()
                        },
                        Event {
                            kind: 2,
                            buffer_id: 8,
                            share_with_canonical_id: 7,
                            instruction_name: "bitcast".into(),
                            ..Default::default()
                        },
                        Event {
                            kind: 1,
                            buffer_id: -1,
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
            }),
        }
    }

    #[test]
    fn reads_what_a_whole_decode_reads() {
        let bytes = proto().encode_to_vec();
        let d = Decoded::parse(&bytes).unwrap();
        assert_eq!(d.module.unwrap().name, "m");
        let b = &d.logical_buffers[0];
        assert_eq!(
            (b.id, b.size, b.color, b.instruction_id),
            (7, 64, 1, Some(3))
        );
        assert_eq!(&b.shape_index[..], [1, 0]);
        assert_eq!(d.allocations[0].size, 128);
        let trace = &d.traces[0];
        assert_eq!(trace.first_buffer_id(), Some(7));
        assert_eq!(trace.names(), ["fusion.1", "bitcast"]);
        assert_eq!(
            trace.events(),
            [
                TraceEvent {
                    kind: 0,
                    buffer_id: 7,
                    name: Some(0),
                    share_with_canonical_id: 0
                },
                TraceEvent {
                    kind: 2,
                    buffer_id: 8,
                    name: Some(1),
                    share_with_canonical_id: 7
                },
                TraceEvent {
                    kind: 1,
                    buffer_id: -1,
                    name: None,
                    share_with_canonical_id: 0
                },
            ]
        );
    }

    #[test]
    fn a_cut_trace_rejects_the_module() {
        let bytes = proto().encode_to_vec();
        // Every strict prefix either fails or reads less, never panics; cuts
        // inside the trace's events fail.
        for cut in 0..bytes.len() {
            let _ = Decoded::parse(&bytes[..cut]);
        }
        let err = Decoded::parse(&bytes[..bytes.len() - 3]).err().unwrap();
        assert!(err.contains("at byte"), "{err}");
    }

    /// The short path never accepts what the general parse rejects, and
    /// reads what it reads: every one-byte change and cut of a few events.
    #[test]
    fn the_short_path_reads_what_the_general_parse_reads() {
        let events = [
            Event {
                kind: 2,
                buffer_id: 300,
                computation_name: "main".into(),
                instruction_name: "fusion.1".into(),
                share_with_canonical_id: -5,
            },
            Event {
                kind: 1,
                buffer_id: 1 << 40,
                ..Default::default()
            },
        ];
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for event in &events {
            let bytes = event.encode_to_vec();
            for at in 0..bytes.len() {
                inputs.push(bytes[..at].to_vec());
                for byte in [0x00, 0x0a, 0x22, 0x80, 0xc3, 0xff] {
                    let mut changed = bytes.clone();
                    changed[at] = byte;
                    inputs.push(changed);
                }
            }
            // A name given twice, the first not UTF-8.
            let mut twice = bytes.clone();
            twice.extend_from_slice(&[0x22, 1, 0xff, 0x22, 1, b'a']);
            inputs.push(twice);
        }
        for bytes in &inputs {
            let Some(fast) = fast_event(bytes) else {
                continue;
            };
            let parsed = TraceEvent::parse(bytes, 0);
            match std::str::from_utf8(fast.name) {
                Ok(name) => {
                    let parsed = parsed.unwrap_or_else(|e| panic!("{bytes:?}: {e}"));
                    assert_eq!(
                        (parsed.kind, parsed.buffer_id, parsed.instruction_name),
                        (fast.kind, fast.buffer_id, name),
                        "{bytes:?}"
                    );
                    assert_eq!(
                        parsed.share_with_canonical_id, fast.share_with_canonical_id,
                        "{bytes:?}"
                    );
                }
                Err(_) => assert!(parsed.is_err(), "{bytes:?}"),
            }
        }
        let mut twice = events[0].encode_to_vec();
        twice.extend_from_slice(&[0x22, 1, 0xff, 0x22, 1, b'a']);
        assert!(fast_event(&twice).is_none());
    }

    /// A name that is not UTF-8 rejects the module with the general
    /// parse's words and offset, whichever path read the event.
    #[test]
    fn a_name_that_is_not_utf8_is_placed() {
        let mut proto = proto();
        let assignment = proto.buffer_assignment.as_mut().unwrap();
        assignment.heap_simulator_traces[0].events[1].instruction_name = "bitcas\u{e9}".into();
        let mut bytes = proto.encode_to_vec();
        let at = bytes.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
        bytes[at] = 0xff;
        let err = Decoded::parse(&bytes).err().unwrap();
        assert!(
            err.starts_with("an instruction name is not UTF-8 (at byte "),
            "{err}"
        );
    }
}
