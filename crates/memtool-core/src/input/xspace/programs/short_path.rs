//! Logical buffers and buffer allocations decoded without prost, for what
//! XLA writes of them: a program's buffer assignment holds one logical
//! buffer and one `assigned` entry per buffer (millions in a big program),
//! and prost's general decode of each was most of the module's reading
//! (BENCHMARKS.md Run O-programs). Each decoder returns `None` for anything
//! it does not take (an unknown field, a field given twice, any error), and
//! the caller then decodes with prost, so what is accepted, and the words of
//! every error, stay prost's.

use memtool_proto::wire::reader::{varint_at, Fields, Value};
use memtool_proto::xla::buffer_allocation_proto::Assigned;
use memtool_proto::xla::BufferAllocationProto;
use prost::Message;

/// A logical buffer, as much of `LogicalBufferProto` as is used.
pub(super) struct LogicalBuffer {
    pub id: i64,
    pub size: i64,
    pub color: i64,
    /// `defined_at.instruction_id`, when the buffer says where it is defined.
    pub instruction_id: Option<i64>,
    pub shape_index: Box<[i64]>,
}

/// A length-delimited value at `*pos`, its key already read.
fn bytes_at<'b>(bytes: &'b [u8], pos: &mut usize) -> Option<&'b [u8]> {
    let len = usize::try_from(varint_at(bytes, pos)?).ok()?;
    let value = bytes.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some(value)
}

/// A `LogicalBufferProto`: id, size, color and `defined_at` (instruction
/// name, id and shape index, packed or not), each at most once but the
/// shape index's elements. Protobuf int64s are two's complement varints.
pub(super) fn logical_buffer(bytes: &[u8]) -> Option<LogicalBuffer> {
    let mut buffer = LogicalBuffer {
        id: 0,
        size: 0,
        color: 0,
        instruction_id: None,
        shape_index: Box::new([]),
    };
    let (mut pos, mut seen) = (0, [false; 4]);
    while pos < bytes.len() {
        let key = bytes[pos];
        pos += 1;
        let field = usize::from(key >> 3);
        // Each field once: prost merges a repeated `defined_at`.
        if !(1..=4).contains(&field) || std::mem::replace(&mut seen[field - 1], true) {
            return None;
        }
        match key {
            0x08 => buffer.id = varint_at(bytes, &mut pos)? as i64,
            0x10 => buffer.size = varint_at(bytes, &mut pos)? as i64,
            0x1a => {
                let (id, index) = location(bytes_at(bytes, &mut pos)?)?;
                buffer.instruction_id = Some(id);
                buffer.shape_index = index;
            }
            0x20 => buffer.color = varint_at(bytes, &mut pos)? as i64,
            _ => return None,
        }
    }
    Some(buffer)
}

/// A `LogicalBufferProto.Location`: its instruction id and shape index.
fn location(bytes: &[u8]) -> Option<(i64, Box<[i64]>)> {
    let (mut pos, mut id, mut index) = (0, 0i64, Vec::new());
    let (mut named, mut numbered) = (false, false);
    while pos < bytes.len() {
        let key = bytes[pos];
        pos += 1;
        match key {
            0x12 if !named => {
                // prost checks a string field's UTF-8; names are ASCII.
                let name = bytes_at(bytes, &mut pos)?;
                if !name.is_ascii() {
                    std::str::from_utf8(name).ok()?;
                }
                named = true;
            }
            0x18 => index.push(varint_at(bytes, &mut pos)? as i64),
            0x1a => {
                let packed = bytes_at(bytes, &mut pos)?;
                let mut at = 0;
                while at < packed.len() {
                    index.push(varint_at(packed, &mut at)? as i64);
                }
            }
            0x20 if !numbered => {
                id = varint_at(bytes, &mut pos)? as i64;
                numbered = true;
            }
            _ => return None,
        }
    }
    Some((id, index.into_boxed_slice()))
}

/// One `assigned` entry: logical buffer id, offset, size, each at most once;
/// other varint fields (XLA writes an element count this crate does not
/// declare) skipped, as prost skips them.
fn assigned(bytes: &[u8]) -> Option<Assigned> {
    let mut entry = Assigned::default();
    let (mut pos, mut seen) = (0, [false; 3]);
    while pos < bytes.len() {
        let key = bytes[pos];
        pos += 1;
        let value = varint_at(bytes, &mut pos)? as i64;
        let (slot, field) = match key {
            0x08 => (&mut entry.logical_buffer_id, 0),
            0x10 => (&mut entry.offset, 1),
            0x18 => (&mut entry.size, 2),
            // Fields 4 to 15 as varints: unknown to prost too.
            0x20..=0x78 if key & 7 == 0 => continue,
            _ => return None,
        };
        if std::mem::replace(&mut seen[field], true) {
            return None;
        }
        *slot = value;
    }
    Some(entry)
}

/// A `BufferAllocationProto` whose `assigned` entries (field 9) are read on
/// the short path and whose other fields, a few bytes, go to prost; `None`
/// where anything is not taken, for prost to decode the whole.
pub(super) fn allocation(bytes: &[u8]) -> Option<BufferAllocationProto> {
    let mut entries = Vec::new();
    let mut rest = Vec::new();
    let mut fields = Fields::new(bytes);
    let mut start = 0;
    while let Some((number, value, _)) = fields.next_field().ok()? {
        let end = fields.offset();
        match (number, value) {
            (9, Value::Bytes(entry)) => entries.push(assigned(entry)?),
            _ => rest.extend_from_slice(&bytes[start..end]),
        }
        start = end;
    }
    let mut allocation = BufferAllocationProto::decode(&rest[..]).ok()?;
    allocation.assigned = entries;
    Some(allocation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtool_proto::xla::logical_buffer_proto::Location;
    use memtool_proto::xla::LogicalBufferProto;

    /// What prost reads, in the compact form.
    fn by_prost(bytes: &[u8]) -> Option<LogicalBuffer> {
        let proto = LogicalBufferProto::decode(bytes).ok()?;
        let (instruction_id, shape_index) = match proto.defined_at {
            Some(at) => (Some(at.instruction_id), at.shape_index),
            None => (None, Vec::new()),
        };
        Some(LogicalBuffer {
            id: proto.id,
            size: proto.size,
            color: proto.color,
            instruction_id,
            shape_index: shape_index.into_boxed_slice(),
        })
    }

    fn same(a: &LogicalBuffer, b: &LogicalBuffer) -> bool {
        (a.id, a.size, a.color, a.instruction_id, &a.shape_index)
            == (b.id, b.size, b.color, b.instruction_id, &b.shape_index)
    }

    /// Every one-byte change and cut of a few messages: the short path
    /// reads what prost reads, or leaves it to prost.
    #[test]
    fn the_short_paths_read_what_prost_reads() {
        let buffers = [
            LogicalBufferProto {
                id: 300,
                size: -1,
                defined_at: Some(Location {
                    instruction_name: "fusion.7".into(),
                    shape_index: vec![1, 200],
                    instruction_id: 1 << 40,
                }),
                color: 5,
            },
            LogicalBufferProto {
                id: 1,
                ..Default::default()
            },
        ];
        let sample = BufferAllocationProto {
            index: 3,
            size: 1 << 20,
            maybe_live_out: true,
            assigned: vec![
                Assigned {
                    logical_buffer_id: 300,
                    offset: 64,
                    size: 128,
                },
                Assigned::default(),
            ],
            ..Default::default()
        };
        let mut changed = Vec::new();
        let originals: Vec<Vec<u8>> = buffers.iter().map(Message::encode_to_vec).collect();
        for bytes in originals.iter().chain([&sample.encode_to_vec()]) {
            changed.push(bytes.clone());
            for at in 0..bytes.len() {
                changed.push(bytes[..at].to_vec());
                for byte in [
                    0x00, 0x08, 0x0a, 0x12, 0x1a, 0x20, 0x28, 0x4a, 0x80, 0xc3, 0xff,
                ] {
                    let mut one = bytes.clone();
                    one[at] = byte;
                    changed.push(one);
                }
            }
        }
        let (mut fast_buffers, mut fast_allocations) = (0, 0);
        for bytes in &changed {
            if let Some(fast) = logical_buffer(bytes) {
                fast_buffers += 1;
                let slow = by_prost(bytes).unwrap_or_else(|| panic!("{bytes:?}"));
                assert!(same(&fast, &slow), "{bytes:?}");
            }
            if let Some(fast) = allocation(bytes) {
                fast_allocations += 1;
                let slow = BufferAllocationProto::decode(&bytes[..]).unwrap();
                assert_eq!(fast, slow, "{bytes:?}");
            }
        }
        assert!(fast_buffers > 2 && fast_allocations > 1);
        let read = logical_buffer(&originals[0]).unwrap();
        assert_eq!(
            (
                read.id,
                read.size,
                read.instruction_id,
                &read.shape_index[..]
            ),
            (300, -1, Some(1 << 40), &[1, 200][..])
        );
    }
}
