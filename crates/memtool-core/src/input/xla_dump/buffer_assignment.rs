//! XLA's text buffer assignment (`*-buffer-assignment.txt`), dumped by
//! `XLA_FLAGS=--xla_dump_to=DIR` where no proto was asked for
//! (`--xla_dump_hlo_as_proto`): read as the same compiled program the
//! `*.hlo.pb` gives, through the same reader (`xspace::programs`).
//!
//! The text holds each allocation (`allocation 9: size 199168,
//! preallocated-temp:` with its role: `parameter N`, `maybe-live-out`,
//! `constant`, `thread-local`, `color N`) and each value placed in it
//! (` value: <62 fusion.1 @0> (size=65536,offset=0): f32[64,256]{1,0}`).
//! What it lacks beside the proto:
//! - the heap simulator trace, the order in which the temporary
//!   allocation's values are made and freed: the temporary allocation
//!   counts whole, live for the whole program (as XLA reserves it), so the
//!   peak is the allocations' total, XLA's `Total bytes` — equal to the
//!   proto's peak where the heap fills the temporary allocation, and above
//!   it by the allocation's fragmentation otherwise;
//! - the instructions' metadata: no op names, source lines or opcodes;
//! - the module's name and id, taken from the file name
//!   (`module_0026.jit_train_step.…`), and its parameter and result shapes,
//!   so programs pair across runs by name and order only.

use memtool_proto::xla::{
    buffer_allocation_proto::Assigned, BufferAllocationProto, HloComputationProto,
    HloInstructionProto, HloModuleProto, LayoutProto, ShapeProto,
};

use crate::error::{Error, Result};
use crate::input::source::ByteSource;
use crate::input::xspace::programs::{self, shape::type_named, TextAssignment, TextBuffer};
use crate::model::{Format, InputInfo, Profile};

/// The text's first line.
const HEADER: &str = "BufferAssignment:";

/// Detection: the text starts with `BufferAssignment:` and its first
/// allocation.
pub(crate) fn looks_like_buffer_assignment(head: &[u8]) -> bool {
    let Some(rest) = head.strip_prefix(HEADER.as_bytes()) else {
        return false;
    };
    let rest = rest.strip_prefix(b"\r").unwrap_or(rest);
    rest.strip_prefix(b"\n")
        .is_some_and(|r| r.starts_with(b"allocation ") || r.is_empty())
}

/// Reads the buffer assignment `data` holds into `profile`.
pub(crate) fn read(profile: &mut Profile, path: &str, data: &dyn ByteSource) -> Result<()> {
    let bytes =
        crate::input::source::read_all(data).map_err(|e| crate::input::read_error(path, &e))?;
    let corrupt = |line: usize, message: String| Error::Corrupt {
        path: path.to_string(),
        format: "XLA buffer assignment text",
        message: format!("line {line}: {message}"),
        offset: None,
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        corrupt(
            1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
            "not UTF-8 text".into(),
        )
    })?;
    profile.inputs.push(InputInfo {
        path: path.to_string(),
        format: Format::BufferAssignmentText,
        executables: None,
    });
    let (name, id) = module_of(path);
    let assignment = parse(text, &name, id).map_err(|(line, m)| corrupt(line, m))?;
    programs::read_text_assignment(profile, path, assignment);
    profile.note(
        path,
        "a text buffer assignment has no heap simulator trace, op names or source lines: the \
         temporary allocation counts whole, so the peak is the allocations' total (dump with \
         --xla_dump_hlo_as_proto for the program's own peak and its buffers' ops)",
    );
    Ok(())
}

/// The module's name and id from XLA's dump file name
/// (`module_0026.jit_train_step.cpu_after_optimizations-buffer-assignment.txt`
/// → `jit_train_step`, 26); `module`, 0 where the name says neither.
fn module_of(path: &str) -> (String, i64) {
    let file = crate::input::file_name(path);
    let mut parts = file.splitn(3, '.');
    let id = parts
        .next()
        .and_then(|p| p.strip_prefix("module_"))
        .and_then(|n| n.parse().ok());
    match (id, parts.next()) {
        (Some(id), Some(name)) if !name.is_empty() && parts.next().is_some() => {
            (name.to_string(), id)
        }
        _ => ("module".to_string(), 0),
    }
}

/// The assignment in `text`, or the line (1-based) that is not one and why.
fn parse(text: &str, name: &str, id: i64) -> std::result::Result<TextAssignment, (usize, String)> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, first)) if first.trim_end() == HEADER => {}
        _ => return Err((1, format!("does not start with `{HEADER}`"))),
    }
    let mut allocations: Vec<BufferAllocationProto> = Vec::new();
    let mut buffers: Vec<TextBuffer> = Vec::new();
    let mut instructions: Vec<HloInstructionProto> = Vec::new();
    for (i, line) in lines {
        let number = i + 1;
        if let Some(rest) = line.strip_prefix("allocation ") {
            allocations
                .push(allocation(rest).ok_or_else(|| {
                    (number, "an allocation line XLA does not write".to_string())
                })?);
        } else if let Some(rest) = line.trim_start().strip_prefix("value: ") {
            let Some(allocation) = allocations.last_mut() else {
                return Err((number, "a value before any allocation".into()));
            };
            let v = value(rest)
                .ok_or_else(|| (number, "a value line XLA does not write".to_string()))?;
            if buffers.iter().any(|b| b.id == v.id) {
                return Err((number, format!("value {} is placed twice", v.id)));
            }
            allocation.assigned.push(Assigned {
                logical_buffer_id: v.id,
                offset: v.offset,
                size: v.size,
            });
            buffers.push(TextBuffer {
                id: v.id,
                size: v.size,
                color: allocation.color,
            });
            // One instruction per value, named as XProf names the buffer
            // (`fusion.3{1}` for a tuple element), with the value's shape.
            instructions.push(HloInstructionProto {
                name: v.name,
                id: v.id,
                shape: v.shape,
                ..HloInstructionProto::default()
            });
        } else if line.trim().is_empty() {
            continue;
        } else {
            // What follows the allocations (`Total bytes used`, `Used
            // values:`, live ranges in newer XLA) is not read.
            break;
        }
    }
    Ok(TextAssignment {
        module: HloModuleProto {
            name: name.to_string(),
            id,
            computations: vec![HloComputationProto {
                instructions,
                ..HloComputationProto::default()
            }],
            ..HloModuleProto::default()
        },
        buffers,
        allocations,
    })
}

/// `N: size S, <roles>:` after `allocation `.
fn allocation(rest: &str) -> Option<BufferAllocationProto> {
    let (index, rest) = rest.split_once(": size ")?;
    let rest = rest.strip_suffix(':')?;
    let (size, roles) = rest.split_once(',').unwrap_or((rest, ""));
    let mut a = BufferAllocationProto {
        index: index.parse().ok()?,
        size: non_negative(size)?,
        ..BufferAllocationProto::default()
    };
    // Shapes between `|` hold commas of their own: drop them first.
    let mut plain = String::new();
    for (i, part) in roles.split('|').enumerate() {
        if i % 2 == 0 {
            plain.push_str(part);
        }
    }
    for role in plain.split(',').map(str::trim) {
        if let Some(n) = role.strip_prefix("parameter ") {
            a.is_entry_computation_parameter = true;
            a.parameter_number = n.split_whitespace().next()?.parse().ok()?;
        } else if let Some(n) = role.strip_prefix("color ") {
            a.color = n.parse().ok()?;
        } else {
            match role {
                "maybe-live-out" => a.maybe_live_out = true,
                "thread-local" => a.is_thread_local = true,
                "constant" => a.is_constant = true,
                // `preallocated-temp`, `output shape is`, `shape`, `at
                // ShapeIndex {}`, …: roles the proto does not flag.
                _ => {}
            }
        }
    }
    Some(a)
}

/// One value: `<ID NAME[{i,j}][ (phi)] @POS> (size=S,offset=O): SHAPE`.
struct Value {
    id: i64,
    name: String,
    size: i64,
    offset: i64,
    shape: Option<ShapeProto>,
}

fn value(rest: &str) -> Option<Value> {
    let rest = rest.strip_prefix('<')?;
    let (short, rest) = rest.split_once("> (size=")?;
    let (id, short) = short.split_once(' ')?;
    let (position, _) = short.rsplit_once(" @")?;
    let position = position.strip_suffix(" (phi)").unwrap_or(position);
    // `tuple.1{}` is the whole tuple: XProf names it `tuple.1`.
    let name = position.strip_suffix("{}").unwrap_or(position);
    let (size, rest) = rest.split_once(",offset=")?;
    let (offset, shape) = rest.split_once("):")?;
    Some(Value {
        id: id.parse().ok()?,
        name: name.to_string(),
        size: non_negative(size)?,
        offset: non_negative(offset)?,
        shape: array_shape(shape.trim()),
    })
}

fn non_negative(text: &str) -> Option<i64> {
    text.trim().parse().ok().filter(|&n: &i64| n >= 0)
}

/// An array shape as XLA prints it (`f32[64,256]{1,0}`, `u32[]`), its
/// tiles left out; `None` for a tuple or a shape not read.
fn array_shape(text: &str) -> Option<ShapeProto> {
    let (dtype, rest) = text.split_once('[')?;
    let element_type = type_named(dtype)?;
    let (dims, layout) = rest.split_once(']')?;
    let dimensions = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse::<i64>().ok().filter(|&d| d >= 0))
            .collect::<Option<Vec<i64>>>()?
    };
    let layout = match layout.strip_prefix('{') {
        Some(l) => {
            let l = l.split([':', '}']).next()?;
            let minor_to_major = if l.is_empty() {
                Vec::new()
            } else {
                l.split(',')
                    .map(|d| d.trim().parse().ok())
                    .collect::<Option<Vec<i64>>>()?
            };
            Some(LayoutProto {
                minor_to_major,
                ..LayoutProto::default()
            })
        }
        None => None,
    };
    Some(ShapeProto {
        element_type,
        dimensions,
        layout,
        ..ShapeProto::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "BufferAssignment:
allocation 0: size 64, output shape is |(s32[], u32[4]{0})|, maybe-live-out:
 value: <7 tuple.1{} @0> (size=16,offset=0): (s32[], u32[4]{0})
 value: <8 arg.5{1} (phi) @0> (size=16,offset=0): u32[4]{0}
allocation 1: size 1024, parameter 2, shape |f32[16,16]| at ShapeIndex {}:
 value: <3 p.1 @0> (size=1024,offset=0): f32[16,16]{1,0}
allocation 2: size 48, color 1, preallocated-temp:
 value: <4 fusion @0> (size=16,offset=32): bf16[2,4]{1,0}
 value: <5 c @0> (size=4,offset=0): pred[]

Total bytes used: 1136
";

    #[test]
    fn the_text_is_told_by_its_first_lines() {
        assert!(looks_like_buffer_assignment(TEXT.as_bytes()));
        assert!(looks_like_buffer_assignment(
            b"BufferAssignment:\r\nallocation 0: size 4:"
        ));
        assert!(!looks_like_buffer_assignment(b"BufferAssignment: done\n"));
        assert!(!looks_like_buffer_assignment(b"I1126 BufferAssignment:\n"));
    }

    #[test]
    fn allocations_and_values_are_read_with_their_roles() {
        let a = parse(TEXT, "jit_f", 4).unwrap();
        assert_eq!(a.module.name, "jit_f");
        assert_eq!(a.allocations.len(), 3);
        let (out, param, temp) = (&a.allocations[0], &a.allocations[1], &a.allocations[2]);
        assert!(out.maybe_live_out && !out.is_entry_computation_parameter);
        assert!(param.is_entry_computation_parameter && param.parameter_number == 2);
        assert_eq!((temp.size, temp.color), (48, 1));
        assert!(!temp.maybe_live_out && !temp.is_constant && !temp.is_thread_local);
        let placed: Vec<(i64, i64, i64)> = temp
            .assigned
            .iter()
            .map(|x| (x.logical_buffer_id, x.offset, x.size))
            .collect();
        assert_eq!(placed, [(4, 32, 16), (5, 0, 4)]);
        let names: Vec<&str> = a.module.computations[0]
            .instructions
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(names, ["tuple.1", "arg.5{1}", "p.1", "fusion", "c"]);
        let fusion = &a.module.computations[0].instructions[3];
        let shape = fusion.shape.as_ref().unwrap();
        assert_eq!(shape.dimensions, [2, 4]);
        assert_eq!(shape.layout.as_ref().unwrap().minor_to_major, [1, 0]);
        assert!(a.module.computations[0].instructions[0].shape.is_none());
        assert_eq!(a.buffers.iter().map(|b| b.color).sum::<i64>(), 2);
    }

    #[test]
    fn lines_xla_does_not_write_are_refused_with_their_number() {
        let bad = "BufferAssignment:\nallocation 0: size -4:\n";
        assert_eq!(parse(bad, "m", 0).unwrap_err().0, 2);
        let bad = "BufferAssignment:\nallocation 0: size 4:\n value: <1 a @0> (size=4\n";
        assert_eq!(parse(bad, "m", 0).unwrap_err().0, 3);
        let twice = "BufferAssignment:\nallocation 0: size 4:\n value: <1 a @0> \
                     (size=4,offset=0): u8[4]{0}\n value: <1 a @0> (size=4,offset=0): u8[4]{0}\n";
        assert!(parse(twice, "m", 0).unwrap_err().1.contains("twice"));
        assert_eq!(parse("BufferAssignment\n", "m", 0).unwrap_err().0, 1);
        let orphan = "BufferAssignment:\n value: <1 a @0> (size=4,offset=0): u8[4]{0}\n";
        assert!(parse(orphan, "m", 0).is_err());
    }

    #[test]
    fn the_module_is_named_by_the_dump_file() {
        assert_eq!(
            module_of("d/module_0026.jit_train_step.cpu_after_optimizations-buffer-assignment.txt"),
            ("jit_train_step".to_string(), 26)
        );
        assert_eq!(module_of("-"), ("module".to_string(), 0));
        assert_eq!(module_of("assignment.txt"), ("module".to_string(), 0));
    }
}
