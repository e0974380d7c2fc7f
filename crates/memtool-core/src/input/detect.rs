//! Recognizes a profile format from its bytes, never from the file name.

use std::io::{self, BufReader, Read};

use memtool_proto::wire::reader::{Fields, Value};

use crate::input::source::{ByteSource, SourceReader};
use crate::model::Format;

/// What the (decompressed) bytes look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sniffed {
    Pprof,
    XSpace,
    /// A Python pickle (PyTorch `_dump_snapshot`).
    Pickle,
    /// A pickle of protocol 0 or 1, which has no header saying so; only
    /// the start of a dict or list with its first memo entry is taken as one.
    OldPickle,
    /// JSON (PyTorch profiler trace or memory timeline).
    Json,
    /// JSON after a UTF-8 byte order mark, which JSON readers do not take:
    /// read from the byte after it.
    JsonAfterBom,
    /// Protobuf whose first field is a group (wire type 3), which neither
    /// pprof nor XSpace uses and memtool does not read.
    ProtobufGroup,
    /// An `xla.HloProto` (an XLA dump's `*.hlo.pb`).
    HloProto,
    /// XLA's text buffer assignment (`*-buffer-assignment.txt`).
    BufferAssignmentText,
    /// Text that is none of the above: a log that may hold XLA
    /// out-of-memory reports.
    Text,
    Empty,
    Unknown,
}

pub(crate) fn sniff(bytes: &[u8]) -> Sniffed {
    if bytes.is_empty() {
        return Sniffed::Empty;
    }
    if bytes[0] == 0x80 && matches!(bytes.get(1), Some(2..=5)) {
        return Sniffed::Pickle;
    }
    let old_pickle_starts: [&[u8]; 4] = [b"(dp0\n", b"(lp0\n", b"}q\x00", b"]q\x00"];
    if old_pickle_starts
        .iter()
        .any(|start| bytes.starts_with(start))
    {
        return Sniffed::OldPickle;
    }
    if let Some(text) = bytes.strip_prefix(UTF8_BOM) {
        return match sniff(text) {
            Sniffed::Json => Sniffed::JsonAfterBom,
            _ => Sniffed::Unknown,
        };
    }
    if looks_like_json(bytes) {
        return Sniffed::Json;
    }
    // `{` and `[` are also the keys of protobuf groups (fields 15 and 11).
    if starts_with_group(bytes) {
        return Sniffed::ProtobufGroup;
    }
    if super::xla_dump::looks_like_hlo_proto(bytes) {
        return Sniffed::HloProto;
    }
    if super::xla_dump::buffer_assignment::looks_like_buffer_assignment(bytes) {
        return Sniffed::BufferAssignmentText;
    }
    match sniff_protobuf(bytes) {
        Sniffed::Unknown if super::xla_report::looks_like_text(bytes) => Sniffed::Text,
        sniffed => sniffed,
    }
}

/// Whether the bytes start with a protobuf group: a key of wire type 3,
/// fields, and the key that ends the group (same field, wire type 4).
fn starts_with_group(bytes: &[u8]) -> bool {
    use memtool_proto::wire::reader::{varint_at, WireErrorKind};
    let mut at = 0;
    let Some(key) = varint_at(bytes, &mut at) else {
        return false;
    };
    if key & 7 != 3 || key >> 3 == 0 {
        return false;
    }
    let mut fields = Fields::at(&bytes[at..], at);
    let end = loop {
        match fields.next_field() {
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(e) if e.kind == WireErrorKind::UnsupportedWireType => break e.offset,
            Err(_) => return false,
        }
    };
    let mut end_at = end;
    varint_at(bytes, &mut end_at) == Some(key + 1)
}

pub(crate) const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// Whether the text starts as a JSON object or array does: `{` then a key
/// or `}`, `[` then a value or `]` (whitespace between). A protobuf group
/// key (`{` is field 15, wire type 3) is followed by binary field keys.
fn looks_like_json(bytes: &[u8]) -> bool {
    let mut text = bytes.iter().copied().filter(|b| !b.is_ascii_whitespace());
    let next = text.next();
    let after = text.next();
    match next {
        Some(b'{') => matches!(after, None | Some(b'"' | b'}')),
        Some(b'[') => matches!(
            after,
            None | Some(b'{' | b'[' | b']' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
        ),
        _ => false,
    }
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

/// Bytes of a length-delimited field's payload that [`sniff_source`] reads:
/// enough for the rules (a pprof `ValueType`, the start of an `XPlane`).
const PAYLOAD_PREFIX: u64 = 4 << 10;

/// [`sniff`] for an input longer than `head`, its first bytes. When the head
/// does not decide because one of the first fields runs past it (a first
/// field longer than the head), the first fields are walked through `data`
/// by their headers, reading a prefix of each payload and jumping over the
/// rest, so detection never reads more than a few KiB past the head,
/// whatever the input's size.
pub(crate) fn sniff_source(data: &dyn ByteSource, head: &[u8]) -> io::Result<Sniffed> {
    let sniffed = sniff(head);
    if sniffed != Sniffed::Unknown || head.len() as u64 >= data.len() || !runs_past(head) {
        return Ok(sniffed);
    }
    // The first fields again, each payload cut to a prefix (its length
    // rewritten), for the rules that judged the head.
    let mut skeleton = Vec::new();
    let mut offset = 0u64;
    for _ in 0..FIELDS_CHECKED {
        let mut header = [0u8; 20];
        let n = header.len().min((data.len() - offset) as usize);
        if n == 0 {
            break;
        }
        data.read_exact_at(offset, &mut header[..n])?;
        let header = &header[..n];
        let mut at = 0;
        let Some(key) = memtool_proto::wire::reader::varint_at(header, &mut at) else {
            break;
        };
        let fixed = match key & 7 {
            0 => {
                if memtool_proto::wire::reader::varint_at(header, &mut at).is_none() {
                    break;
                }
                0
            }
            1 => 8,
            5 => 4,
            2 => {
                let key_len = at;
                let Some(len) = memtool_proto::wire::reader::varint_at(header, &mut at) else {
                    break;
                };
                let start = offset + at as u64;
                if len > data.len() - start.min(data.len()) {
                    break;
                }
                let mut prefix = vec![0u8; len.min(PAYLOAD_PREFIX) as usize];
                data.read_exact_at(start, &mut prefix)?;
                skeleton.extend_from_slice(&header[..key_len]);
                let mut prefix_len = prefix.len() as u64;
                while prefix_len >= 0x80 {
                    skeleton.push(prefix_len as u8 | 0x80);
                    prefix_len >>= 7;
                }
                skeleton.push(prefix_len as u8);
                skeleton.extend_from_slice(&prefix);
                offset = start + len;
                continue;
            }
            _ => break,
        };
        let end = at + fixed;
        if end > header.len() {
            break;
        }
        skeleton.extend_from_slice(&header[..end]);
        offset += end as u64;
    }
    Ok(sniff_protobuf(&skeleton))
}

/// Whether one of the first fields of `head` runs past its end.
pub(crate) fn runs_past(head: &[u8]) -> bool {
    let mut fields = Fields::new(head);
    for _ in 0..FIELDS_CHECKED {
        match fields.next_field() {
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(e) => return e.kind.is_truncation(),
        }
    }
    false
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
        // Text is left to the XLA report reader, which refuses it when it
        // holds no report.
        assert_eq!(sniff(b"hello world, not a profile"), Sniffed::Text);
        assert_eq!(sniff(b"hello, I am not a profile\n"), Sniffed::Text);
        assert_eq!(sniff(b"hello\x00world"), Sniffed::Unknown);
        // pickle.dumps({'segments': []}, protocol=0) and protocol=1
        assert_eq!(sniff(b"(dp0\nVsegments\np1\n(lp2\ns."), Sniffed::OldPickle);
        assert_eq!(
            sniff(b"}q\x00X\x08\x00\x00\x00segmentsq\x01]q\x02s."),
            Sniffed::OldPickle
        );
    }

    /// `bytes`, then zeros up to `len`, counting what is read.
    struct Counted {
        bytes: Vec<u8>,
        len: u64,
        read: std::sync::atomic::AtomicU64,
    }

    impl ByteSource for Counted {
        fn len(&self) -> u64 {
            self.len
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.read
                .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
            for (i, b) in buf.iter_mut().enumerate() {
                let at = offset + i as u64;
                *b = self.bytes.get(at as usize).copied().unwrap_or(0);
            }
            Ok(())
        }
    }

    fn sniff_counted(bytes: Vec<u8>, len: u64) -> (Sniffed, u64) {
        let data = Counted {
            bytes,
            len,
            read: std::sync::atomic::AtomicU64::new(0),
        };
        let mut head = vec![0u8; len.min(64 << 10) as usize];
        data.read_exact_at(0, &mut head).unwrap();
        let sniffed = sniff_source(&data, &head).unwrap();
        (sniffed, data.read.into_inner())
    }

    /// A large input that is not a profile is judged by its head: 4 GiB of
    /// zeros cost 64 KiB of reading, not 4 GiB.
    #[test]
    fn a_large_input_that_is_no_profile_is_judged_by_its_head() {
        let (sniffed, read) = sniff_counted(Vec::new(), 4 << 30);
        assert_eq!(sniffed, Sniffed::Unknown);
        assert_eq!(read, 64 << 10);
    }

    /// A pprof whose first field (its string table) outgrows the head is
    /// recognised by walking its first fields' headers, not by reading it all.
    #[test]
    fn a_first_field_longer_than_the_head_is_jumped_over() {
        let table = vec![b'x'; 100 << 10];
        let mut pprof = vec![0x32, 0x80, 0xa0, 0x06]; // string_table, 100 KiB
        pprof.extend(&table);
        pprof.extend([0x0a, 0x04, 0x08, 0x01, 0x10, 0x02]); // sample_type
        pprof.extend([0x32, 0x00]);
        let len = pprof.len() as u64;
        let (sniffed, read) = sniff_counted(pprof, len);
        assert_eq!(sniffed, Sniffed::Pprof);
        assert!(read < (64 << 10) + (8 << 10) + 100, "{read} bytes read");
    }

    #[test]
    fn a_byte_order_mark_before_json_is_stepped_over() {
        assert_eq!(
            sniff(b"\xef\xbb\xbf{\"traceEvents\": []}"),
            Sniffed::JsonAfterBom
        );
        assert_eq!(sniff(b"\xef\xbb\xbfhello"), Sniffed::Unknown);
    }

    #[test]
    fn a_protobuf_group_is_not_json() {
        // Field 15 as a group ({ ... |) holding field 1 = 5, then an XPlane.
        let mut xspace = vec![0x7b, 0x08, 0x05, 0x7c];
        xspace.extend([0x0a, 0x0b, 0x12, 0x09]);
        xspace.extend(b"/host:CPU");
        assert_eq!(sniff(&xspace), Sniffed::ProtobufGroup);
        // `[` as field 11's group, empty.
        assert_eq!(sniff(&[0x5b, 0x5c, 0x0a, 0x00]), Sniffed::ProtobufGroup);
        // Text that starts with a byte of wire type 3 is still no profile.
        assert_eq!(sniff(b"# notes\nnothing here"), Sniffed::Text);
        assert_eq!(sniff(b"{not json"), Sniffed::Text);
        assert_eq!(sniff(b"[ 1, 2 ]"), Sniffed::Json);
        assert_eq!(sniff(b"{ }"), Sniffed::Json);
    }
}
