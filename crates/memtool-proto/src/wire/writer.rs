//! A protobuf wire-format writer: just enough to re-encode messages field by
//! field, with lengths computed up front so large outputs can be streamed.

pub const VARINT: u32 = 0;
pub const LEN: u32 = 2;

/// Bytes a varint takes.
pub fn varint_len(v: u64) -> u64 {
    u64::from((64 - (v | 1).leading_zeros()).div_ceil(7))
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u32) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

pub fn put_varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    put_key(out, field, VARINT);
    put_varint(out, v);
}

pub fn put_bytes_field(out: &mut Vec<u8>, field: u32, payload: &[u8]) {
    put_key(out, field, LEN);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// The key and length prefix of a length-delimited field.
pub fn put_len_prefix(out: &mut Vec<u8>, field: u32, len: u64) {
    put_key(out, field, LEN);
    put_varint(out, len);
}

/// Encoded size of a length-delimited field with a payload of `len` bytes.
pub fn len_field_size(field: u32, len: u64) -> u64 {
    varint_len(u64::from(field) << 3) + varint_len(len) + len
}

/// A packed repeated varint field.
pub fn put_packed(out: &mut Vec<u8>, field: u32, values: impl Iterator<Item = u64> + Clone) {
    let len: u64 = values.clone().map(varint_len).sum();
    put_len_prefix(out, field, len);
    for v in values {
        put_varint(out, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reader::{Fields, Value};

    #[test]
    fn round_trips_through_the_reader() {
        let mut out = Vec::new();
        put_varint_field(&mut out, 1, 150);
        put_bytes_field(&mut out, 2, b"hi");
        put_varint_field(&mut out, 3, u64::MAX);
        put_packed(&mut out, 4, [1u64, 300].into_iter());
        let fields: Vec<_> = Fields::new(&out).map(|f| f.unwrap()).collect();
        assert_eq!(fields[0].1, Value::Varint(150));
        assert_eq!(fields[1].1, Value::Bytes(b"hi"));
        assert_eq!(fields[2].1, Value::Varint(u64::MAX));
        assert_eq!(fields[3].1, Value::Bytes(&[1, 0xac, 0x02]));
        for v in [0, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len() as u64, varint_len(v), "{v}");
        }
        assert_eq!(len_field_size(2, 2), 4);
    }
}
