//! XLA's dump of a compiled module (`XLA_FLAGS=--xla_dump_to=DIR
//! --xla_dump_hlo_as_proto`): `*.hlo.pb`, an `xla.HloProto` holding the
//! module and its buffer assignment — what an XSpace stores per program for
//! XProf's Memory Viewer, so it is read by the same code
//! (`xspace::programs`), one memory per memory space, named as in an XSpace
//! (`jit_train_step(26)`: the module id is the program id). A dump folder
//! is the binary's to list: it passes each `*after_optimizations.hlo.pb`,
//! and the text `*after_optimizations-buffer-assignment.txt` of a module
//! dumped without protos (`buffer_assignment.rs`).

pub(crate) mod buffer_assignment;

use memtool_proto::wire::reader::varint_at;

use crate::error::{Error, Result};
use crate::input::source::ByteSource;
use crate::model::{Format, InputInfo, Profile};

/// Detection: an `HloProto` starts with its `hlo_module` (field 1), whose
/// own first field is the module's name (field 1, a string). An XSpace's
/// first field is an `XPlane`, whose field 1 is a number (its id) and whose
/// name is field 2, so the two part at the second key. Only the first bytes
/// are looked at (the module may be far longer than the head).
pub(crate) fn looks_like_hlo_proto(head: &[u8]) -> bool {
    let mut at = 0;
    if varint_at(head, &mut at) != Some(0x0a) || varint_at(head, &mut at).is_none() {
        return false;
    }
    if varint_at(head, &mut at) != Some(0x0a) {
        return false;
    }
    let Some(len) = varint_at(head, &mut at) else {
        return false;
    };
    let name = head.get(at..at.saturating_add(len as usize).min(head.len()));
    name.is_some_and(|n| {
        len > 0
            && len < 4096
            && std::str::from_utf8(n).is_ok_and(|n| !n.chars().any(char::is_control))
    })
}

/// Reads the `HloProto` `data` holds into `profile`.
pub(crate) fn read(profile: &mut Profile, path: &str, data: &dyn ByteSource) -> Result<()> {
    let bytes =
        crate::input::source::read_all(data).map_err(|e| crate::input::read_error(path, &e))?;
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::HloProto,
        executables: None,
    });
    let before = profile.memories.len();
    crate::input::xspace::programs::read_hlo_proto(profile, path, &bytes).map_err(|message| {
        Error::Corrupt {
            path: path.to_string(),
            format: "xla.HloProto",
            message,
            offset: None,
        }
    })?;
    if profile.memories.len() == before {
        profile.warn(
            path,
            "the module has no buffer assignment (an XLA dump's `before_optimizations` \
             module; read its `after_optimizations` one)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hlo_proto_is_told_from_an_xspace() {
        // HloProto { hlo_module { name: "jit_f" } }
        assert!(looks_like_hlo_proto(b"\x0a\x07\x0a\x05jit_f"));
        // A head cut inside the module still tells.
        assert!(looks_like_hlo_proto(b"\x0a\x80\x80\x04\x0a\x05jit_f\x12"));
        // XSpace { planes { id: 1, name: "/host:CPU" } } and { name: … }.
        assert!(!looks_like_hlo_proto(b"\x0a\x0d\x08\x01\x12\x09/host:CPU"));
        assert!(!looks_like_hlo_proto(b"\x0a\x0b\x12\x09/host:CPU"));
        assert!(!looks_like_hlo_proto(b""));
        assert!(!looks_like_hlo_proto(b"\x0a\x03\x0a\x01\x01"));
    }
}
