//! A zero-copy protobuf wire-format reader.
//!
//! Large protobuf inputs (XSpace) are walked field by field with this reader
//! instead of being decoded into owned messages, so memory stays proportional
//! to what an analysis keeps, not to the file. It never allocates and checks
//! every length against the bytes actually present.

/// One field's value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl Value<'_> {
    /// The value as an unsigned integer, for varint and fixed fields.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Varint(v) | Value::Fixed64(v) => Some(v),
            Value::Fixed32(v) => Some(v as u64),
            Value::Bytes(_) => None,
        }
    }
}

/// A wire-format problem at a byte offset of the buffer given to [`Fields`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub offset: usize,
    pub kind: WireErrorKind,
}

impl WireError {
    /// What went wrong, in the words error messages use.
    pub fn message(&self) -> &'static str {
        self.kind.message()
    }
}

/// What kind of wire-format problem a [`WireError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireErrorKind {
    /// The bytes end inside a varint.
    TruncatedVarint,
    /// A varint that does not fit in 64 bits.
    VarintTooLong,
    /// Field number 0, or one past the largest protobuf allows.
    InvalidFieldNumber,
    /// The bytes end inside a fixed64 value.
    TruncatedFixed64,
    /// The bytes end inside a fixed32 value.
    TruncatedFixed32,
    /// A length-delimited field whose payload runs past the end of the data.
    LengthPastEnd,
    /// Wire type 3, 4 (groups), 6 or 7.
    UnsupportedWireType,
}

impl WireErrorKind {
    /// The kind in the words error messages use (pinned by the broken-input
    /// corpus: keep them as they are).
    pub fn message(self) -> &'static str {
        match self {
            WireErrorKind::TruncatedVarint => "truncated varint",
            WireErrorKind::VarintTooLong => "varint longer than 64 bits",
            WireErrorKind::InvalidFieldNumber => "invalid field number",
            WireErrorKind::TruncatedFixed64 => "truncated fixed64",
            WireErrorKind::TruncatedFixed32 => "truncated fixed32",
            WireErrorKind::LengthPastEnd => "length prefix runs past the end of the data",
            WireErrorKind::UnsupportedWireType => "unsupported wire type",
        }
    }

    /// Whether the kind may only mean that the bytes given to [`Fields`] stop
    /// early (a window of a longer message), not that the message is damaged.
    pub fn is_truncation(self) -> bool {
        matches!(
            self,
            WireErrorKind::TruncatedVarint
                | WireErrorKind::TruncatedFixed64
                | WireErrorKind::TruncatedFixed32
                | WireErrorKind::LengthPastEnd
        )
    }
}

/// Iterator over the fields of one message.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf` within the whole input, for error messages.
    base: usize,
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Fields::at(buf, 0)
    }

    /// Fields of a sub-message that starts at `base` in the whole input.
    pub fn at(buf: &'a [u8], base: usize) -> Self {
        Fields { buf, pos: 0, base }
    }

    /// Absolute offset of the next field.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Most varints in profiles (keys, small ids, lengths) are one byte.
    #[inline]
    fn varint(&mut self) -> Result<u64, WireError> {
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.varint_slow()
    }

    fn varint_slow(&mut self) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        while let Some(&byte) = self.buf.get(self.pos) {
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(self.error(WireErrorKind::VarintTooLong));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(self.error(WireErrorKind::VarintTooLong));
            }
        }
        Err(self.error(WireErrorKind::TruncatedVarint))
    }

    fn take(&mut self, n: usize, short: WireErrorKind) -> Result<&'a [u8], WireError> {
        if self.buf.len() - self.pos < n {
            return Err(self.error(short));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn error(&self, kind: WireErrorKind) -> WireError {
        WireError {
            offset: self.base + self.pos,
            kind,
        }
    }

    /// The next field's number and its whole key (wire type in the low bits),
    /// or `None` at the end of the buffer.
    #[inline]
    fn key(&mut self) -> Result<Option<(u64, u64)>, WireError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let start = self.pos;
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            self.pos = start;
            return Err(self.error(WireErrorKind::InvalidFieldNumber));
        }
        Ok(Some((field, key)))
    }

    /// The next field as `(field number, value, absolute offset of the value)`;
    /// for length-delimited fields the offset is that of the payload.
    #[inline]
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>, usize)>, WireError> {
        let start = self.pos;
        let Some((field, key)) = self.key()? else {
            return Ok(None);
        };
        let mut value_at = self.base + self.pos;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8, WireErrorKind::TruncatedFixed64)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                // The value starts after its length prefix: sub-messages are
                // framed from there, so their error offsets must be too.
                value_at = self.base + self.pos;
                Value::Bytes(self.take(len, WireErrorKind::LengthPastEnd)?)
            }
            5 => {
                let b = self.take(4, WireErrorKind::TruncatedFixed32)?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes")))
            }
            _ => {
                self.pos = start;
                return Err(self.error(WireErrorKind::UnsupportedWireType));
            }
        };
        Ok(Some((field as u32, value, value_at)))
    }
}

/// Reads the varint at `*pos` as [`Fields`] does, `None` where it gives an
/// error: the copy hot loops inline (the merged XSpace walk decodes every
/// stat with it), kept beside the canonical one and tested against it.
#[inline(always)]
pub fn varint_at(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let byte = *buf.get(*pos)?;
    if byte < 0x80 {
        *pos += 1;
        return Some(u64::from(byte));
    }
    // Where eight bytes are there, a varint of up to eight is read at once:
    // it ends at the first byte without its top bit, and its 7-bit groups
    // are packed together in three steps (pairs, quads, the whole word),
    // not byte by byte with a branch each.
    if let Some(&word) = buf.get(*pos..).and_then(|b| b.first_chunk::<8>()) {
        let x = u64::from_le_bytes(word);
        let stops = !x & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = stops.trailing_zeros() / 8 + 1;
            let x = match len {
                8 => x,
                _ => x & ((1u64 << (8 * len)) - 1),
            } & 0x7f7f_7f7f_7f7f_7f7f;
            let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
            let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
            let x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
            *pos += len as usize;
            return Some(x);
        }
    }
    *pos += 1;
    let mut value = u64::from(byte & 0x7f);
    let mut shift = 7u32;
    loop {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// A field as far as [`Fields::next_header`] reads it: a scalar whole, a
/// length-delimited field as its claimed length only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    Scalar(Value<'static>),
    /// The payload's claimed length: not yet checked against any end.
    Len(u64),
}

impl Fields<'_> {
    /// The next field's key and value, but for a length-delimited field only
    /// its length: for skipping over sub-messages that are not in memory.
    /// Errors are those of [`Fields::next_field`] but the one for a payload
    /// past the end, which the caller checks against the message's end.
    pub fn next_header(&mut self) -> Result<Option<(u32, Header, usize)>, WireError> {
        let start = self.pos;
        let Some((field, key)) = self.key()? else {
            return Ok(None);
        };
        let mut value_at = self.base + self.pos;
        let header = match key & 7 {
            0 => Header::Scalar(Value::Varint(self.varint()?)),
            1 => {
                let b = self.take(8, WireErrorKind::TruncatedFixed64)?;
                Header::Scalar(Value::Fixed64(u64::from_le_bytes(
                    b.try_into().expect("8 bytes"),
                )))
            }
            2 => {
                let len = self.varint()?;
                value_at = self.base + self.pos;
                Header::Len(len)
            }
            5 => {
                let b = self.take(4, WireErrorKind::TruncatedFixed32)?;
                Header::Scalar(Value::Fixed32(u32::from_le_bytes(
                    b.try_into().expect("4 bytes"),
                )))
            }
            _ => {
                self.pos = start;
                return Err(self.error(WireErrorKind::UnsupportedWireType));
            }
        };
        Ok(Some((field as u32, header, value_at)))
    }
}

/// The error [`Fields::next_field`] gives for a payload that runs past the
/// end of its message, for readers that check lengths themselves.
pub fn past_the_end(value_at: usize) -> WireError {
    WireError {
        offset: value_at,
        kind: WireErrorKind::LengthPastEnd,
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>, usize), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_field() {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => None,
            Err(e) => {
                // Stop after the first error: the rest cannot be framed.
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}

/// Decodes a packed repeated varint field.
pub fn packed_varints(
    buf: &[u8],
    base: usize,
) -> impl Iterator<Item = Result<u64, WireError>> + '_ {
    let mut fields = Fields::at(buf, base);
    std::iter::from_fn(move || {
        if fields.pos >= fields.buf.len() {
            return None;
        }
        let r = fields.varint();
        if r.is_err() {
            fields.pos = fields.buf.len();
        }
        Some(r)
    })
}

/// The first framing error of a message's top level, if any.
pub fn first_error(buf: &[u8]) -> Option<WireError> {
    Fields::new(buf).find_map(Result::err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_wire_type() {
        // field 1 varint 150, field 2 bytes "hi", field 3 fixed32 1, field 4 fixed64 2
        let buf = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let fields: Vec<_> = Fields::new(&buf).map(|f| f.unwrap()).collect();
        assert_eq!(fields[0], (1, Value::Varint(150), 1));
        assert_eq!(fields[1], (2, Value::Bytes(b"hi"), 5));
        assert_eq!(fields[2].1, Value::Fixed32(1));
        assert_eq!(fields[3].1, Value::Fixed64(2));
    }

    #[test]
    fn a_length_past_the_end_is_an_error_not_an_allocation() {
        // field 2, length 2^62
        let buf = [0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        let err = first_error(&buf).unwrap();
        assert_eq!(err.message(), "length prefix runs past the end of the data");
        assert_eq!(err.offset, 10);
    }

    #[test]
    fn truncated_and_invalid_keys_are_errors() {
        assert_eq!(first_error(&[0x08]).unwrap().message(), "truncated varint");
        assert_eq!(
            first_error(&[0x00]).unwrap().message(),
            "invalid field number"
        );
        assert_eq!(
            first_error(&[0x0b]).unwrap().message(),
            "unsupported wire type"
        );
        assert_eq!(
            first_error(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])
                .unwrap()
                .message(),
            "varint longer than 64 bits"
        );
    }

    #[test]
    fn packed_varints_decode() {
        let v: Vec<_> = packed_varints(&[1, 0x96, 0x01, 3], 0)
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(v, vec![1, 150, 3]);
        assert!(packed_varints(&[0x80], 0).any(|r| r.is_err()));
    }

    /// Encodes `v` as a minimal varint.
    fn encode(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    #[test]
    fn the_inlined_varint_agrees_with_the_reader() {
        let mut cases: Vec<Vec<u8>> = vec![
            vec![],
            // Overlong: an 11th byte, or a 10th above 1.
            vec![0x80; 10].into_iter().chain([0x00]).collect(),
            vec![0xff; 9].into_iter().chain([0x02]).collect(),
            vec![0xff; 10].into_iter().chain([0x01]).collect(),
            // Not minimal but within 10 bytes: both read 0 and 1.
            vec![0x80, 0x00],
            vec![0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        ];
        // 1 to 10 bytes: the smallest and largest value of each length, and
        // each cut one byte short.
        for bytes in 1..=10u32 {
            let low = if bytes == 1 {
                0
            } else {
                1u64 << (7 * (bytes - 1))
            };
            let high = 1u64.checked_shl(7 * bytes).map_or(u64::MAX, |n| n - 1);
            for v in [low, high, u64::MAX] {
                let encoded = encode(v);
                cases.push(encoded[..encoded.len() - 1].to_vec());
                cases.push(encoded);
            }
        }
        for case in &cases {
            // A trailing byte shows where each stops.
            let buf: Vec<u8> = case.iter().copied().chain([0x2a]).collect();
            let cut = case.clone();
            // Eight bytes or more from the start: read a word at a time.
            let padded: Vec<u8> = case.iter().copied().chain([0x2a; 8]).collect();
            for buf in [&buf, &cut, &padded] {
                let mut fields = Fields::new(buf);
                let canonical = fields.varint().ok().map(|v| (v, fields.pos));
                let mut pos = 0;
                let inlined = varint_at(buf, &mut pos).map(|v| (v, pos));
                assert_eq!(inlined, canonical, "{buf:02x?}");
            }
        }
        assert_eq!(varint_at(&encode(u64::MAX), &mut 0), Some(u64::MAX));
        assert_eq!(encode(u64::MAX).len(), 10);
    }

    #[test]
    fn errors_have_a_kind_and_keep_their_message() {
        let kind = |buf: &[u8]| first_error(buf).unwrap().kind;
        assert_eq!(kind(&[0x08]), WireErrorKind::TruncatedVarint);
        assert_eq!(kind(&[0x09, 0]), WireErrorKind::TruncatedFixed64);
        assert_eq!(kind(&[0x0d, 0]), WireErrorKind::TruncatedFixed32);
        assert_eq!(kind(&[0x12, 5, 0]), WireErrorKind::LengthPastEnd);
        assert_eq!(kind(&[0x00]), WireErrorKind::InvalidFieldNumber);
        assert_eq!(kind(&[0x0b]), WireErrorKind::UnsupportedWireType);
        assert!(kind(&[0x12, 5, 0]).is_truncation());
        assert!(!kind(&[0x0b]).is_truncation());
        assert_eq!(
            first_error(&[0x0d, 0]).unwrap().message(),
            "truncated fixed32"
        );
    }
}
