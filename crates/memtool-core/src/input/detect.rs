//! Recognizes a profile format from its bytes, never from the file name.

use std::io::{self, BufReader, Read};

use memtool_proto::wire::reader::{Fields, Value};

use crate::input::source::{ByteSource, SourceReader};
use crate::model::Format;

/// What the (decompressed) bytes look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    Pprof,
    XSpace,
    /// A Python pickle (PyTorch `_dump_snapshot`).
    Pickle,
    /// JSON (PyTorch profiler trace or memory timeline).
    Json,
    Empty,
    Unknown,
}

pub fn sniff(bytes: &[u8]) -> Sniffed {
    if bytes.is_empty() {
        return Sniffed::Empty;
    }
    if bytes[0] == 0x80 && matches!(bytes.get(1), Some(2..=5)) {
        return Sniffed::Pickle;
    }
    let first_text = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first_text, Some(b'{') | Some(b'[')) {
        return Sniffed::Json;
    }
    sniff_protobuf(bytes)
}

/// Wire types pprof's `Profile` declares for its fields (2 = length-delimited,
/// 0 = varint; field 13 may also be packed).
fn pprof_field_fits(number: u32, value: &Value<'_>) -> bool {
    match number {
        1..=6 | 11 | 15 => matches!(value, Value::Bytes(_)),
        7..=10 | 12 | 14 => matches!(value, Value::Varint(_)),
        13 => matches!(value, Value::Varint(_) | Value::Bytes(_)),
        _ => false,
    }
}

/// How many leading top-level fields must frame correctly and fit the schema
/// before a protobuf guess is trusted (text rarely survives more than two).
const FIELDS_CHECKED: usize = 16;

/// pprof and XSpace are both protobuf and both start with field 1. pprof uses
/// top-level fields up to 15 and its field 1 (`ValueType`) holds only varints;
/// XSpace uses fields 1-4, all strings or messages, and its field 1 (`XPlane`)
/// has a name string.
fn sniff_protobuf(bytes: &[u8]) -> Sniffed {
    let mut fields = Fields::new(bytes);
    let (mut pprof, mut xspace) = (true, true);
    let mut seen = 0;
    let mut starts_with_field_1 = false;
    while seen < FIELDS_CHECKED {
        let (number, value) = match fields.next_field() {
            Ok(Some((n, v, _))) => (n, v),
            Ok(None) => break,
            // A file cut short after a plausible start is a corrupt profile,
            // reported as such by its reader with the offset.
            Err(_) if seen >= 2 || starts_with_field_1 => break,
            Err(_) if seen == 0 && truncated_xspace(bytes) => return Sniffed::XSpace,
            Err(_) => return Sniffed::Unknown,
        };
        starts_with_field_1 |= seen == 0 && number == 1;
        seen += 1;
        pprof &= pprof_field_fits(number, &value);
        xspace &= matches!((number, value), (1..=4, Value::Bytes(_)));
        if let (1, Value::Bytes(inner)) = (number, value) {
            let inner: Vec<_> = Fields::new(inner).take(8).collect();
            let only_varints = !inner.is_empty()
                && inner
                    .iter()
                    .all(|f| matches!(f, Ok((1 | 2, Value::Varint(_), _))));
            // `ValueType` is two varints; an `XPlane` has a name string.
            pprof &= only_varints;
            xspace &= !only_varints;
        }
        if !pprof && !xspace {
            return Sniffed::Unknown;
        }
    }
    match (seen, pprof, xspace) {
        (0, _, _) => Sniffed::Unknown,
        (_, true, _) => Sniffed::Pprof,
        (_, false, true) => Sniffed::XSpace,
        _ => Sniffed::Unknown,
    }
}

/// An XSpace cut short inside its first plane (usually the only big one):
/// field 1 is length-delimited and what is there of it starts like an
/// `XPlane` (id, then a name), so the reader can say where it is cut.
fn truncated_xspace(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&0x0a) {
        return false;
    }
    // Skip the length prefix of field 1.
    let Some(len_bytes) = bytes.iter().skip(1).take(10).position(|b| b & 0x80 == 0) else {
        return false;
    };
    let inner = bytes.get(2 + len_bytes..).unwrap_or_default();
    Fields::new(inner).take(4).any(|f| {
        matches!(f, Ok((2, Value::Bytes(name), _)) if std::str::from_utf8(name).is_ok_and(|n| n.starts_with('/') || n == "Task Environment"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_by_content() {
        assert_eq!(sniff(b""), Sniffed::Empty);
        assert_eq!(sniff(b"\x80\x04\x95"), Sniffed::Pickle);
        assert_eq!(sniff(b"  {\"traceEvents\": []}"), Sniffed::Json);
        // pprof: sample_type {type: 1, unit: 2}, string_table ""
        assert_eq!(
            sniff(&[0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x32, 0x00]),
            Sniffed::Pprof
        );
        // XSpace: planes { id: 1, name: "/host:CPU" }
        let mut xspace = vec![0x0a, 0x0d, 0x08, 0x01, 0x12, 0x09];
        xspace.extend_from_slice(b"/host:CPU");
        assert_eq!(sniff(&xspace), Sniffed::XSpace);
        assert_eq!(sniff(b"hello world, not a profile"), Sniffed::Unknown);
        assert_eq!(sniff(b"hello, I am not a profile\n"), Sniffed::Unknown);
    }
}

/// Which PyTorch JSON document the input holds: a memory timeline is an array
/// of arrays (`[times, sizes]` or raw `[[t, action, bytes, category], ...]`);
/// a Chrome trace is an object (or an array of event objects). Only the
/// first two characters that are not whitespace decide, so only they are
/// read.
pub(crate) fn classify(data: &dyn ByteSource) -> io::Result<Format> {
    let mut text = BufReader::with_capacity(4 << 10, SourceReader::new(data)).bytes();
    let mut first_two = [None, None];
    for slot in &mut first_two {
        *slot = text
            .by_ref()
            .find(|b| !b.as_ref().is_ok_and(|b| b.is_ascii_whitespace()))
            .transpose()?;
    }
    Ok(match first_two {
        [Some(b'['), Some(b'[')] => Format::TorchMemoryTimeline,
        _ => Format::TorchTrace,
    })
}
