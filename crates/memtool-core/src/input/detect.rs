//! Recognizes a profile format from its bytes, never from the file name.

use super::wire::{Fields, Value};

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

impl Sniffed {
    pub fn describe(self) -> &'static str {
        match self {
            Sniffed::Pprof => "a pprof profile",
            Sniffed::XSpace => "an XSpace (.xplane.pb) profile",
            Sniffed::Pickle => "a Python pickle (PyTorch memory snapshot)",
            Sniffed::Json => "a JSON document (PyTorch trace or memory timeline)",
            Sniffed::Empty => "an empty file",
            Sniffed::Unknown => "not a memory profile",
        }
    }
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

/// pprof and XSpace are both protobuf and both start with field 1. pprof uses
/// top-level fields up to 15 and its field 1 (`ValueType`) holds only varints;
/// XSpace uses fields 1-4 and its field 1 (`XPlane`) has a name string.
fn sniff_protobuf(bytes: &[u8]) -> Sniffed {
    let mut fields = Fields::new(bytes);
    let mut seen_any = false;
    // Text can frame as a few varint fields by chance; real profiles start
    // with a length-delimited field, so an early framing error only keeps
    // the vote once one was seen.
    let mut seen_message = false;
    let mut vote = Sniffed::Unknown;
    // The first few top-level fields decide; a huge XSpace has only a handful.
    for _ in 0..64 {
        let (number, value) = match fields.next_field() {
            Ok(Some((n, v, _))) => (n, v),
            Ok(None) => break,
            Err(_) if !seen_any && truncated_xspace(bytes) => return Sniffed::XSpace,
            Err(_) => return if seen_message { vote } else { Sniffed::Unknown },
        };
        seen_any = true;
        seen_message |= matches!(value, Value::Bytes(_));
        match (number, value) {
            (5..=15, _) => vote = Sniffed::Pprof,
            (1, Value::Bytes(inner)) => {
                let inner: Vec<_> = Fields::new(inner).take(8).collect();
                if inner.iter().any(|f| f.is_err()) {
                    return Sniffed::Unknown;
                }
                let only_varints = inner
                    .iter()
                    .all(|f| matches!(f, Ok((1 | 2, Value::Varint(_), _))));
                vote = if only_varints {
                    Sniffed::Pprof
                } else {
                    Sniffed::XSpace
                };
            }
            (2..=4, Value::Bytes(_)) => {}
            _ => return Sniffed::Unknown,
        }
    }
    vote
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
    }
}
