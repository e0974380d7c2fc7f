//! Finds the serialized `xla.HloProto`s in an XSpace without decoding it: the
//! `/host:metadata` plane keeps one event metadata per compiled module, with
//! the module in an `Hlo Proto` stat and its program id in `program_id`. The
//! XSpace is walked with the shared lazy walker in [`crate::input::xspace`].

use std::borrow::Cow;
use std::ops::{Deref, Range};
use std::rc::Rc;

use crate::error::Result;
use crate::input::source::ByteSource;
use crate::input::xspace::stream::Skim;
use crate::input::xspace::{PlaneAt, Planes, StatValue, StreamError, Window};
use memtool_proto::wire::reader::Header;

const METADATA_PLANE: &str = "/host:metadata";
#[cfg(test)]
const METADATA_PLANE_BYTES: &[u8] = METADATA_PLANE.as_bytes();

/// The stats of a module's event metadata that the reader needs.
#[derive(Clone, Copy, PartialEq)]
enum ModuleStat {
    HloProto,
    ProgramId,
}

/// One compiled module as the XSpace stores it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ModuleBytes<'a> {
    pub program_id: u64,
    /// The serialized `xla.HloProto`.
    pub hlo_proto: HloBytes<'a>,
    /// Offset of `hlo_proto` in the input, for error messages.
    pub offset: u64,
}

/// A module's bytes: borrowed from an input in memory, or a range of the
/// metadata plane read from a file, which its modules share. A copy of each
/// module was the file's size again in fresh memory (110 MB for a program
/// of 10^6 buffers, 27,000 page faults), while the plane it was copied from
/// was still held.
#[derive(Clone, Debug)]
pub(super) enum HloBytes<'a> {
    Borrowed(&'a [u8]),
    Shared(Rc<Vec<u8>>, Range<usize>),
}

impl Deref for HloBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            HloBytes::Borrowed(bytes) => bytes,
            HloBytes::Shared(plane, range) => &plane[range.clone()],
        }
    }
}

impl PartialEq for HloBytes<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for HloBytes<'_> {}

/// The modules of every metadata plane, in program id order.
#[derive(Debug)]
pub(super) struct Modules<'a> {
    pub modules: Vec<ModuleBytes<'a>>,
    /// Program ids met again with a different module, which is left out (a
    /// program id seen twice keeps its first module, as XProf does).
    pub conflicting: Vec<u64>,
}

/// The modules of every metadata plane. Only the metadata planes are read;
/// the others are skipped over.
pub(super) fn modules<'s>(path: &str, source: &'s dyn ByteSource) -> Result<Modules<'s>> {
    walk(source).map_err(|e| e.into_error(path))
}

/// A program id as XProf reads it: unsigned 64-bit, whichever integer field
/// holds it (an id of 2^63 or more is negative as an `int64`).
fn program_id(value: &StatValue<'_>) -> Option<u64> {
    match *value {
        StatValue::Int64(v) => Some(v as u64),
        ref other => other.as_u64(),
    }
}

fn walk(source: &dyn ByteSource) -> Result<Modules<'_>, StreamError> {
    let mut out: Vec<ModuleBytes<'_>> = Vec::new();
    let mut conflicting = Vec::new();
    let mut window = Window::new(source, 64 << 10);
    let mut planes = Planes::new(&window);
    while let Some(at) = planes.next(&mut window)? {
        if at.name != METADATA_PLANE {
            continue;
        }
        let bytes = match at.load(&window)? {
            Cow::Borrowed(plane) => HloBytes::Borrowed(plane),
            Cow::Owned(plane) => {
                let len = plane.len();
                HloBytes::Shared(Rc::new(plane), 0..len)
            }
        };
        let plane = at.parse(&bytes)?;
        let keys = plane.metadata()?.stat_keys(&[
            ("Hlo Proto", ModuleStat::HloProto),
            ("program_id", ModuleStat::ProgramId),
        ]);
        if !keys.contains(ModuleStat::HloProto) {
            continue;
        }
        for meta in plane.event_metadata() {
            let meta = meta?;
            let (mut hlo, mut program_id) = (None, None);
            for stat in meta.stats() {
                let stat = stat?;
                match (keys.get(stat.metadata_id), stat.value) {
                    (Some(ModuleStat::HloProto), StatValue::Bytes(b)) => hlo = Some(b),
                    (Some(ModuleStat::ProgramId), v) => {
                        program_id = self::program_id(&v).or(program_id)
                    }
                    _ => {}
                }
            }
            let Some(hlo) = hlo else {
                continue;
            };
            // XProf keys modules by their event metadata id, a uint64 that
            // the wire stores as an int64.
            let program_id = program_id.unwrap_or(meta.id as u64);
            if let Some(first) = out.iter().find(|m| m.program_id == program_id) {
                if *first.hlo_proto != *hlo && !conflicting.contains(&program_id) {
                    conflicting.push(program_id);
                }
                continue;
            }
            // The stat's bytes are a slice of the plane's.
            let from = (hlo.as_ptr() as usize).saturating_sub(bytes.as_ptr() as usize);
            let module = from..from + hlo.len();
            let hlo_proto = match &bytes {
                HloBytes::Borrowed(plane) => HloBytes::Borrowed(&plane[module]),
                HloBytes::Shared(plane, _) => HloBytes::Shared(Rc::clone(plane), module),
            };
            out.push(ModuleBytes {
                program_id,
                hlo_proto,
                offset: at.start + from as u64,
            });
        }
    }
    out.sort_by_key(|m| m.program_id);
    conflicting.sort_unstable();
    Ok(Modules {
        modules: out,
        conflicting,
    })
}

/// Where device planes are named: `/device:GPU:0`, `/device:TPU:3`.
const DEVICE_PLANE_PREFIX: &str = "/device:";

/// The device memory's size as the profiler recorded it on the device
/// planes (the plane stat `memory_size`, XProf's `kDevCapMemorySize`): the
/// smallest over the devices, which bounds a program run on any of them;
/// `None` when no device plane records one. Only the planes' metadata and
/// stats are read; their lines are skipped over.
pub(super) fn device_capacity(path: &str, source: &dyn ByteSource) -> Result<Option<u64>> {
    device_capacity_walk(source).map_err(|e| e.into_error(path))
}

fn device_capacity_walk(source: &dyn ByteSource) -> Result<Option<u64>, StreamError> {
    use memtool_proto::wire::writer::put_bytes_field;
    let mut window = Window::new(source, 64 << 10);
    let mut planes = Planes::new(&window);
    let mut smallest: Option<u64> = None;
    while let Some(at) = planes.next(&mut window)? {
        if !at.name.starts_with(DEVICE_PLANE_PREFIX) {
            continue;
        }
        // The plane without its lines: stat metadata (5) and stats (6).
        let mut bytes = Vec::new();
        let mut fields = Skim::new(at.start, at.end);
        while let Some((number, header, value_at)) = fields.next(&mut window)? {
            if let (5 | 6, Header::Len(len)) = (number, header) {
                put_bytes_field(&mut bytes, number, window.bytes(value_at, len)?);
            }
        }
        let plane = PlaneAt {
            name: at.name.clone(),
            start: 0,
            end: bytes.len() as u64,
        }
        .parse(&bytes)?;
        let keys = plane.metadata()?.stat_keys(&[("memory_size", ())]);
        if !keys.contains(()) {
            continue;
        }
        for stat in plane.stats() {
            let stat = stat?;
            if keys.get(stat.metadata_id).is_some() {
                if let Some(size) = stat.value.as_u64().filter(|&s| s > 0) {
                    smallest = Some(smallest.map_or(size, |m| m.min(size)));
                }
            }
        }
    }
    Ok(smallest)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A length-delimited field.
    pub(crate) fn field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = varint(u64::from(number) << 3 | 2);
        out.extend(varint(payload.len() as u64));
        out.extend_from_slice(payload);
        out
    }

    pub(crate) fn varint_field(number: u32, value: u64) -> Vec<u8> {
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
    pub(crate) fn xspace(modules: &[(u64, Option<u64>, &[u8])]) -> Vec<u8> {
        let stat_meta = |id: u64, name: &[u8]| {
            let meta = [varint_field(1, id), field(2, name)].concat();
            field(5, &[varint_field(1, id), field(2, &meta)].concat())
        };
        let mut plane = [
            field(2, METADATA_PLANE_BYTES),
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
        assert_eq!(found.conflicting, vec![34]);
        let found = found.modules;
        let summary: Vec<(u64, &[u8])> = found
            .iter()
            .map(|m| (m.program_id, &*m.hlo_proto))
            .collect();
        assert_eq!(summary, vec![(1, &b"a"[..]), (34, &b"b"[..])]);
        let offset = found[0].offset as usize;
        assert_eq!(&bytes[offset..offset + 1], b"a");
    }

    #[test]
    fn a_cut_xspace_is_an_error_with_an_offset() {
        let bytes = xspace(&[(1, None, b"abc")]);
        let err = modules("x.pb", &bytes[..bytes.len() - 2].to_vec()).unwrap_err();
        assert!(
            err.to_string().starts_with("x.pb: invalid XSpace:"),
            "{err}"
        );
    }
}
