//! An `xla.HloProto` split the way the Memory Viewer uses it.
//!
//! The module (instructions, stack frames) is decoded with prost: it is the
//! program, and every buffer names one of its instructions. The buffer
//! assignment grows with the number of buffers, and its heap simulator traces
//! with the number of events (millions for a big program), so it is walked
//! on the wire instead: each logical buffer is decoded alone into a compact
//! [`LogicalBuffer`], and a trace stays a view of the input bytes whose
//! events are read as they are replayed, their instruction names borrowed.
//! A first walk checks every event's framing, so a corrupt trace rejects the
//! module up front, as a whole-message decode would.

use memtool_proto::xla::{BufferAllocationProto, HloModuleProto, LogicalBufferProto};
use prost::Message;

use memtool_proto::wire::reader::{Fields, Value, WireError};

/// What the Memory Viewer reads of one module.
pub(super) struct Decoded<'b> {
    pub module: Option<HloModuleProto>,
    pub logical_buffers: Vec<LogicalBuffer>,
    pub allocations: Vec<BufferAllocationProto>,
    pub traces: Vec<Trace<'b>>,
}

/// A logical buffer, as much of `LogicalBufferProto` as is used.
pub(super) struct LogicalBuffer {
    pub id: i64,
    pub size: i64,
    pub color: i64,
    /// `defined_at.instruction_id`, when the buffer says where it is defined.
    pub instruction_id: Option<i64>,
    pub shape_index: Box<[i64]>,
}

/// One heap simulator trace, its events still on the wire.
#[derive(Clone, Copy)]
pub(super) struct Trace<'b> {
    bytes: &'b [u8],
    first_buffer_id: Option<i64>,
}

/// One `HeapSimulatorTrace.Event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TraceEvent<'b> {
    pub kind: i32,
    pub buffer_id: i64,
    pub instruction_name: &'b str,
    pub share_with_canonical_id: i64,
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
                    self.allocations
                        .push(BufferAllocationProto::decode(allocation).map_err(prost)?);
                }
                (4, Value::Bytes(trace), base) => self.traces.push(Trace::check(trace, base)?),
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
    /// Walks every event once, so that replaying cannot meet a bad one.
    fn check(bytes: &'b [u8], base: usize) -> Result<Trace<'b>, DecodeError> {
        let trace = Trace {
            bytes,
            first_buffer_id: None,
        };
        let mut first_buffer_id = None;
        for event in trace.events_at(base) {
            let event = event?;
            first_buffer_id.get_or_insert(event.buffer_id);
        }
        Ok(Trace {
            bytes,
            first_buffer_id,
        })
    }

    /// The buffer of the first event: XProf decides which allocation a
    /// trace simulates from it.
    pub(super) fn first_buffer_id(&self) -> Option<i64> {
        self.first_buffer_id
    }

    /// The events in order. Framing was checked when the trace was read.
    pub(super) fn events(&self) -> impl Iterator<Item = TraceEvent<'b>> + 'b {
        self.events_at(0).map_while(Result::ok)
    }

    fn events_at(
        &self,
        base: usize,
    ) -> impl Iterator<Item = Result<TraceEvent<'b>, DecodeError>> + 'b {
        Fields::at(self.bytes, base).filter_map(|field| match field {
            Ok((1, Value::Bytes(event), at)) => Some(TraceEvent::parse(event, at)),
            Ok((1, _, _)) => Some(Err("a trace event has the wrong wire type".into())),
            Ok(_) => None,
            Err(e) => Some(Err(wire(e))),
        })
    }
}

impl<'b> TraceEvent<'b> {
    fn parse(bytes: &'b [u8], base: usize) -> Result<TraceEvent<'b>, DecodeError> {
        let mut event = TraceEvent {
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
        let trace = d.traces[0];
        assert_eq!(trace.first_buffer_id(), Some(7));
        let events: Vec<_> = trace.events().collect();
        assert_eq!(
            events,
            [
                TraceEvent {
                    kind: 0,
                    buffer_id: 7,
                    instruction_name: "fusion.1",
                    share_with_canonical_id: 0
                },
                TraceEvent {
                    kind: 2,
                    buffer_id: 8,
                    instruction_name: "bitcast",
                    share_with_canonical_id: 7
                },
                TraceEvent {
                    kind: 1,
                    buffer_id: -1,
                    instruction_name: "",
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
}
