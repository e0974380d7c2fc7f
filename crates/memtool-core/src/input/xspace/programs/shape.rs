//! XLA shapes as XLA prints them (`ShapeUtil::HumanStringWithLayout`):
//! `f32[512,1024]{1,0}`, `bf16[8,128]{1,0:T(8,128)(2,1)}`, `(f32[], s32[4]{0})`,
//! and their unpadded sizes.

use std::fmt::Write;

use memtool_proto::xla::{LayoutProto, ShapeProto};

const TUPLE: i32 = 13;
const OPAQUE: i32 = 14;
const TOKEN: i32 = 17;
/// Tuples nest; a hostile file could nest them without end.
const MAX_DEPTH: usize = 64;

/// The lower-case name XLA prints for a `PrimitiveType`.
pub(super) fn type_name(element_type: i32) -> &'static str {
    match element_type {
        1 => "pred",
        2 => "s8",
        3 => "s16",
        4 => "s32",
        5 => "s64",
        6 => "u8",
        7 => "u16",
        8 => "u32",
        9 => "u64",
        10 => "f16",
        11 => "f32",
        12 => "f64",
        13 => "tuple",
        14 => "opaque",
        15 => "c64",
        16 => "bf16",
        17 => "token",
        18 => "c128",
        19 => "f8e5m2",
        20 => "f8e4m3fn",
        21 => "s4",
        22 => "u4",
        23 => "f8e4m3b11fnuz",
        24 => "f8e5m2fnuz",
        25 => "f8e4m3fnuz",
        26 => "s2",
        27 => "u2",
        28 => "f8e4m3",
        29 => "f8e3m4",
        30 => "s1",
        31 => "u1",
        32 => "f4e2m1fn",
        33 => "f8e8m0fnu",
        34 => "b",
        _ => "invalid",
    }
}

/// The `PrimitiveType` XLA prints as `name` (`f32` is 11), the inverse of
/// [`type_name`]; `None` for a name it never prints.
pub(crate) fn type_named(name: &str) -> Option<i32> {
    (1..=34).find(|&t| type_name(t) == name)
}

/// Bytes per element, as `ShapeUtil::ByteSizeOfPrimitiveType` counts them
/// (sub-byte types take a byte each unless the layout packs them).
pub(crate) fn element_bytes(element_type: i32) -> u64 {
    match element_type {
        3 | 7 | 10 | 16 => 2,
        4 | 8 | 11 => 4,
        5 | 9 | 12 | 15 => 8,
        18 => 16,
        TUPLE | OPAQUE | TOKEN | 0 | 34 => 0,
        _ => 1,
    }
}

fn is_array(shape: &ShapeProto) -> bool {
    !matches!(shape.element_type, TUPLE | OPAQUE | TOKEN | 0)
}

/// The subshape at a tuple index, following every index (XProf follows only
/// the last one). `None` when the index leaves the shape.
pub(super) fn subshape<'s>(shape: &'s ShapeProto, index: &[i64]) -> Option<&'s ShapeProto> {
    let mut shape = shape;
    for &i in index {
        shape = shape.tuple_shapes.get(usize::try_from(i).ok()?)?;
    }
    Some(shape)
}

/// The element type name of an array shape (`f32`), `None` for tuples.
pub(super) fn dtype(shape: &ShapeProto) -> Option<&'static str> {
    is_array(shape).then(|| type_name(shape.element_type))
}

/// The shape without padding or tiling, in bytes: elements times element
/// size; a tuple is a table of 8-byte pointers (XProf's unpadded size).
pub(super) fn unpadded_bytes(shape: &ShapeProto) -> u64 {
    match shape.element_type {
        TUPLE => 8u64.saturating_mul(shape.tuple_shapes.len() as u64),
        OPAQUE => 8,
        TOKEN | 0 => 0,
        t => shape.dimensions.iter().fold(element_bytes(t), |acc, &d| {
            acc.saturating_mul(d.max(0) as u64)
        }),
    }
}

/// The shape as XLA prints it with its layout.
pub(super) fn human_string(shape: &ShapeProto) -> String {
    let mut out = String::new();
    print_shape(&mut out, shape, 0);
    out
}

fn print_shape(out: &mut String, shape: &ShapeProto, depth: usize) {
    match shape.element_type {
        TUPLE => {
            if depth >= MAX_DEPTH {
                out.push_str("(...)");
                return;
            }
            out.push('(');
            for (i, element) in shape.tuple_shapes.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                    if i % 5 == 0 {
                        let _ = write!(out, "/*index={i}*/");
                    }
                }
                print_shape(out, element, depth + 1);
            }
            out.push(')');
        }
        OPAQUE | TOKEN => out.push_str(type_name(shape.element_type)),
        t => {
            out.push_str(type_name(t));
            out.push('[');
            for (i, d) in shape.dimensions.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if shape.is_dynamic_dimension.get(i).copied().unwrap_or(false) {
                    out.push_str("<=");
                }
                push_int(out, *d);
            }
            out.push(']');
            if let Some(layout) = &shape.layout {
                let start = out.len();
                write_layout(out, layout);
                if shape.dimensions.is_empty() && &out[start..] == "{}" {
                    out.truncate(start);
                }
            }
        }
    }
}

/// Appends an integer in decimal, as `write!(out, "{v}")` does, without the
/// formatting machinery: every buffer of a program has its shape printed,
/// and `Display` was most of that (callgrind, BENCHMARKS.md Run N).
fn push_int(out: &mut String, v: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = v.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    for &digit in &digits[at..] {
        out.push(char::from(digit));
    }
}

/// `Layout::ToString` appended to `out`: minor-to-major order, then tiles,
/// tail padding, index and pointer types, element size, memory space,
/// metadata prefix.
fn write_layout(out: &mut String, layout: &LayoutProto) {
    out.push('{');
    for (i, d) in layout.minor_to_major.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(out, *d);
    }
    let mut colon = false;
    let mut part = |out: &mut String, text: &str| {
        if !colon {
            out.push(':');
            colon = true;
        }
        out.push_str(text);
    };
    if !layout.tiles.is_empty() {
        let mut tiles = String::from("T");
        for tile in &layout.tiles {
            tiles.push('(');
            for (i, d) in tile.dimensions.iter().enumerate() {
                if i > 0 {
                    tiles.push(',');
                }
                if *d == i64::MIN {
                    tiles.push('*');
                } else {
                    let _ = write!(tiles, "{d}");
                }
            }
            tiles.push(')');
        }
        part(out, &tiles);
    }
    let tail = layout.tail_padding_alignment_in_elements;
    if tail != 0 && tail != 1 {
        part(out, &format!("L({tail})"));
    }
    if layout.index_primitive_type != 0 {
        part(
            out,
            &format!("#({})", type_name(layout.index_primitive_type)),
        );
    }
    if layout.pointer_primitive_type != 0 {
        part(
            out,
            &format!("*({})", type_name(layout.pointer_primitive_type)),
        );
    }
    if layout.element_size_in_bits != 0 {
        part(out, &format!("E({})", layout.element_size_in_bits));
    }
    if layout.memory_space != 0 {
        part(out, &format!("S({})", layout.memory_space));
    }
    if layout.dynamic_shape_metadata_prefix_bytes > 0 {
        part(
            out,
            &format!("M({})", layout.dynamic_shape_metadata_prefix_bytes),
        );
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtool_proto::xla::TileProto;

    fn array(t: i32, dims: &[i64], minor_to_major: Option<&[i64]>) -> ShapeProto {
        ShapeProto {
            element_type: t,
            dimensions: dims.to_vec(),
            layout: minor_to_major.map(|m| LayoutProto {
                minor_to_major: m.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn integers_print_as_display_does() {
        for v in [0, 1, -1, 9, 10, -10, 1024, i64::MAX, i64::MIN, -987_654_321] {
            let mut out = String::from("x");
            push_int(&mut out, v);
            assert_eq!(out, format!("x{v}"));
        }
    }

    #[test]
    fn prints_like_xla() {
        assert_eq!(
            human_string(&array(11, &[512, 1024], Some(&[1, 0]))),
            "f32[512,1024]{1,0}"
        );
        assert_eq!(human_string(&array(11, &[], Some(&[]))), "f32[]");
        assert_eq!(human_string(&array(1, &[], None)), "pred[]");
        let mut tiled = array(16, &[8, 128, 256], Some(&[2, 1, 0]));
        let layout = tiled.layout.as_mut().unwrap();
        layout.tiles = vec![
            TileProto {
                dimensions: vec![8, 128],
            },
            TileProto {
                dimensions: vec![2, 1],
            },
        ];
        layout.memory_space = 1;
        assert_eq!(
            human_string(&tiled),
            "bf16[8,128,256]{2,1,0:T(8,128)(2,1)S(1)}"
        );
        let tuple = ShapeProto {
            element_type: TUPLE,
            tuple_shapes: (0..6).map(|_| array(11, &[], Some(&[]))).collect(),
            ..Default::default()
        };
        assert_eq!(
            human_string(&tuple),
            "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])"
        );
        assert_eq!(unpadded_bytes(&tuple), 48);
        assert_eq!(unpadded_bytes(&array(11, &[512, 1024], None)), 2 << 20);
        let nested = ShapeProto {
            element_type: TUPLE,
            tuple_shapes: vec![array(4, &[2], None), tuple.clone()],
            ..Default::default()
        };
        assert_eq!(subshape(&nested, &[1, 5]).map(|s| s.element_type), Some(11));
        assert!(subshape(&nested, &[2]).is_none());
    }
}
