//! Finds the serialized `xla.HloProto`s in an XSpace without decoding it: the
//! `/host:metadata` plane keeps one event metadata per compiled module, with
//! the module in an `Hlo Proto` stat and its program id in `program_id`.
//!
//! Field numbers (tsl `xplane.proto`): XSpace.planes = 1; XPlane.name = 2,
//! event_metadata = 4 and stat_metadata = 5 (maps: key 1, value 2);
//! XEventMetadata.id = 1, stats = 5; XStatMetadata.id = 1, name = 2;
//! XStat.metadata_id = 1, uint64_value = 3, int64_value = 4, bytes_value = 6.

use crate::error::{Error, Result};
use crate::input::wire::{Fields, Value, WireError};

const METADATA_PLANE: &[u8] = b"/host:metadata";
const HLO_PROTO_STAT: &[u8] = b"Hlo Proto";
const PROGRAM_ID_STAT: &[u8] = b"program_id";

/// One compiled module as the XSpace stores it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ModuleBytes<'a> {
    pub program_id: u64,
    /// The serialized `xla.HloProto`.
    pub hlo_proto: &'a [u8],
    /// Offset of `hlo_proto` in the input, for error messages.
    pub offset: usize,
}

/// The modules of every metadata plane, in program id order; a program id
/// seen twice keeps its first module (as XProf does).
pub(super) fn modules<'a>(path: &str, bytes: &'a [u8]) -> Result<Vec<ModuleBytes<'a>>> {
    walk(bytes).map_err(|e| Error::Corrupt {
        path: path.to_string(),
        format: "XSpace",
        message: e.message.to_string(),
        offset: Some(e.offset as u64),
    })
}

fn walk(bytes: &[u8]) -> Result<Vec<ModuleBytes<'_>>, WireError> {
    let mut out: Vec<ModuleBytes<'_>> = Vec::new();
    for field in Fields::new(bytes) {
        let (number, value, at) = field?;
        let (1, Value::Bytes(plane)) = (number, value) else {
            continue;
        };
        if plane_name(plane, at)? != Some(METADATA_PLANE) {
            continue;
        }
        for module in plane_modules(plane, at)? {
            if !out.iter().any(|m| m.program_id == module.program_id) {
                out.push(module);
            }
        }
    }
    out.sort_by_key(|m| m.program_id);
    Ok(out)
}

fn plane_name(plane: &[u8], base: usize) -> Result<Option<&[u8]>, WireError> {
    for field in Fields::at(plane, base) {
        if let (2, Value::Bytes(name), _) = field? {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// A message's bytes and their offset in the input.
type Located<'a> = (&'a [u8], usize);

/// The key and value of a protobuf map entry.
fn map_entry(entry: &[u8], base: usize) -> Result<(Option<u64>, Option<Located<'_>>), WireError> {
    let (mut key, mut value) = (None, None);
    for field in Fields::at(entry, base) {
        match field? {
            (1, v, _) => key = v.as_u64(),
            (2, Value::Bytes(b), at) => value = Some((b, at)),
            _ => {}
        }
    }
    Ok((key, value))
}

fn plane_modules(plane: &[u8], base: usize) -> Result<Vec<ModuleBytes<'_>>, WireError> {
    let (mut hlo_stat, mut program_stat) = (None, None);
    for field in Fields::at(plane, base) {
        let (5, Value::Bytes(entry), at) = field? else {
            continue;
        };
        let (key, Some((meta, meta_at))) = map_entry(entry, at)? else {
            continue;
        };
        let (mut id, mut name) = (key, None);
        for f in Fields::at(meta, meta_at) {
            match f? {
                (1, v, _) => id = v.as_u64().or(id),
                (2, Value::Bytes(n), _) => name = Some(n),
                _ => {}
            }
        }
        match name {
            Some(HLO_PROTO_STAT) => hlo_stat = id,
            Some(PROGRAM_ID_STAT) => program_stat = id,
            _ => {}
        }
    }
    let Some(hlo_stat) = hlo_stat else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for field in Fields::at(plane, base) {
        let (4, Value::Bytes(entry), at) = field? else {
            continue;
        };
        let (key, Some((meta, meta_at))) = map_entry(entry, at)? else {
            continue;
        };
        let mut id = key.unwrap_or(0);
        let (mut hlo, mut program_id) = (None, None);
        for f in Fields::at(meta, meta_at) {
            match f? {
                (1, v, _) => id = v.as_u64().unwrap_or(id),
                (5, Value::Bytes(stat), stat_at) => {
                    let (metadata_id, value) = stat_value(stat, stat_at)?;
                    match (metadata_id, value) {
                        (Some(m), Some(StatValue::Bytes(b, at))) if m == hlo_stat => {
                            hlo = Some((b, at))
                        }
                        (Some(m), Some(StatValue::Int(v))) if Some(m) == program_stat => {
                            program_id = Some(v)
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if let Some((hlo_proto, offset)) = hlo {
            out.push(ModuleBytes {
                program_id: program_id.unwrap_or(id),
                hlo_proto,
                offset,
            });
        }
    }
    Ok(out)
}

enum StatValue<'a> {
    Int(u64),
    Bytes(&'a [u8], usize),
}

fn stat_value(stat: &[u8], base: usize) -> Result<(Option<u64>, Option<StatValue<'_>>), WireError> {
    let (mut metadata_id, mut value) = (None, None);
    for field in Fields::at(stat, base) {
        match field? {
            (1, v, _) => metadata_id = v.as_u64(),
            (3 | 4, v, _) => value = v.as_u64().map(StatValue::Int),
            (6, Value::Bytes(b), at) => value = Some(StatValue::Bytes(b, at)),
            _ => {}
        }
    }
    Ok((metadata_id, value))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A length-delimited field.
    pub fn field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = varint(u64::from(number) << 3 | 2);
        out.extend(varint(payload.len() as u64));
        out.extend_from_slice(payload);
        out
    }

    pub fn varint_field(number: u32, value: u64) -> Vec<u8> {
        let mut out = varint(u64::from(number) << 3);
        out.extend(varint(value));
        out
    }

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// An XSpace with one metadata plane holding the given (metadata id,
    /// program id, HloProto bytes) modules.
    pub fn xspace(modules: &[(u64, Option<u64>, &[u8])]) -> Vec<u8> {
        let stat_meta = |id: u64, name: &[u8]| {
            let meta = [varint_field(1, id), field(2, name)].concat();
            field(5, &[varint_field(1, id), field(2, &meta)].concat())
        };
        let mut plane = [
            field(2, METADATA_PLANE),
            stat_meta(7, b"Hlo Proto"),
            stat_meta(9, b"program_id"),
        ]
        .concat();
        for &(id, program_id, hlo) in modules {
            let mut meta = varint_field(1, id);
            meta.extend(field(5, &[varint_field(1, 7), field(6, hlo)].concat()));
            if let Some(p) = program_id {
                meta.extend(field(5, &[varint_field(1, 9), varint_field(4, p)].concat()));
            }
            plane.extend(field(4, &[varint_field(1, id), field(2, &meta)].concat()));
        }
        let other = field(2, b"/host:CPU");
        [field(1, &other), field(1, &plane)].concat()
    }

    #[test]
    fn finds_modules_by_stat_name_and_program_id() {
        let bytes = xspace(&[(5, Some(34), b"b"), (1, None, b"a"), (6, Some(34), b"dup")]);
        let found = modules("x", &bytes).unwrap();
        let summary: Vec<(u64, &[u8])> =
            found.iter().map(|m| (m.program_id, m.hlo_proto)).collect();
        assert_eq!(summary, vec![(1, &b"a"[..]), (34, &b"b"[..])]);
        assert_eq!(&bytes[found[0].offset..found[0].offset + 1], b"a");
    }

    #[test]
    fn a_cut_xspace_is_an_error_with_an_offset() {
        let bytes = xspace(&[(1, None, b"abc")]);
        let err = modules("x.pb", &bytes[..bytes.len() - 2]).unwrap_err();
        assert!(
            err.to_string().starts_with("x.pb: invalid XSpace:"),
            "{err}"
        );
    }
}
