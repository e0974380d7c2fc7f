//! A shape as XLA prints it in its reports (`u8[327680,327680]{1,0:T(8,128)(4,1)}`),
//! read back to compute its sizes: unpadded (elements times element size)
//! and padded as `ShapeUtil::ArraySize` pads a tiled layout — the first tile
//! rounds the minor dimensions up to its own (a tile with more dimensions
//! than the shape pads dimensions of 1 on the major side), later tiles only
//! arrange elements inside it (XLA assumes they add no padding), and an
//! element size (`E(4)`) packs sub-byte elements.

use crate::input::xspace::programs::shape::{element_bytes, type_named};
use crate::model::LayoutSizes;
use crate::units::bytes as size;

/// A tile dimension written `*`: dimensions combined, not padded.
const COMBINED: Option<u64> = None;

/// The sizes of `text` (an array shape with or without a layout); `None`
/// when it is no array shape memtool can read (a tuple, a token, damage).
pub(crate) fn sizes(text: &str) -> Option<LayoutSizes> {
    let text = text.trim();
    let open = text.find('[')?;
    let close = open + text[open..].find(']')?;
    let dtype = &text[..open];
    let element_type = type_named(dtype)?;
    let element = element_bytes(element_type);
    if element == 0 {
        return None;
    }
    let dims: Vec<u64> = if close == open + 1 {
        Vec::new()
    } else {
        text[open + 1..close]
            .split(',')
            // Dynamic dimensions print as `<=N`: N is what is allocated.
            .map(|d| d.trim().trim_start_matches("<=").parse().ok())
            .collect::<Option<_>>()?
    };
    let layout = text[close + 1..].trim();
    let (minor_to_major, tiles, element_bits) = if layout.is_empty() {
        ((0..dims.len()).rev().collect(), Vec::new(), None)
    } else {
        parse_layout(layout, dims.len())?
    };
    let elements = dims.iter().try_fold(1u64, |t, &d| t.checked_mul(d))?;
    let bytes_of = |elements: u64| match element_bits {
        Some(bits) => elements.checked_mul(bits).map(|b| b.div_ceil(8)),
        None => elements.checked_mul(element),
    };
    let unpadded = bytes_of(elements)?;
    let Some(tile) = tiles.first() else {
        return Some(LayoutSizes {
            unpadded_bytes: unpadded,
            padded_bytes: unpadded,
            explanation: "no tiling: the shape takes its elements' bytes".to_string(),
        });
    };
    // Dimensions from minor to major, as the layout orders them.
    let ordered: Vec<u64> = minor_to_major.iter().map(|&d| dims[d]).collect();
    let mut padded_elements = 1u64;
    let mut padded_dims = Vec::new();
    for i in 0..tile.len().max(ordered.len()) {
        let dim = ordered.get(i).copied().unwrap_or(1);
        let tile_dim = if i < tile.len() {
            tile[tile.len() - 1 - i]
        } else {
            Some(1)
        };
        let padded = match tile_dim {
            Some(t) if t > 0 => dim.div_ceil(t).checked_mul(t)?,
            _ => dim,
        };
        padded_dims.push((i, dim, padded, tile_dim));
        padded_elements = padded_elements.checked_mul(padded)?;
    }
    let padded = bytes_of(padded_elements)?;
    let mut explanation = format!("tiles of {}", tile_text(tile));
    let rounded: Vec<String> = padded_dims
        .iter()
        .filter(|(i, ..)| *i < tile.len())
        .rev()
        .map(|&(i, dim, padded, _)| match minor_to_major.get(i) {
            Some(d) => format!("dim {d}: {dim}→{padded}"),
            None => format!("an added dim of 1→{padded}"),
        })
        .collect();
    explanation.push_str(&format!(
        " pad the minor dimensions ({})",
        rounded.join(", ")
    ));
    for sub in &tiles[1..] {
        explanation.push_str(&sub_tile_text(sub, dtype, element, element_bits));
    }
    if let Some(bits) = element_bits {
        explanation.push_str(&format!("; {bits}-bit elements"));
    }
    explanation.push_str(&format!(
        ": {} unpadded, {} padded",
        size(unpadded),
        size(padded)
    ));
    if padded > unpadded && unpadded > 0 {
        explanation.push_str(&format!(" ({:.1}x)", padded as f64 / unpadded as f64));
    }
    Some(LayoutSizes {
        unpadded_bytes: unpadded,
        padded_bytes: padded,
        explanation,
    })
}

type Tile = Vec<Option<u64>>;

/// `{1,0:T(8,128)(4,1)E(4)S(1)}` → minor-to-major order, tiles, element
/// size in bits.
fn parse_layout(layout: &str, rank: usize) -> Option<(Vec<usize>, Vec<Tile>, Option<u64>)> {
    let inner = layout.strip_prefix('{')?.strip_suffix('}')?;
    let (order, rest) = inner.split_once(':').unwrap_or((inner, ""));
    let minor_to_major: Vec<usize> = if order.trim().is_empty() {
        Vec::new()
    } else {
        order
            .split(',')
            .map(|d| d.trim().parse().ok())
            .collect::<Option<_>>()?
    };
    let mut seen = vec![false; rank];
    if minor_to_major.len() != rank
        || minor_to_major
            .iter()
            .any(|&d| d >= rank || std::mem::replace(&mut seen[d], true))
    {
        return None;
    }
    let mut tiles = Vec::new();
    let mut element_bits = None;
    let mut rest = rest.trim();
    while let Some(c) = rest.chars().next() {
        match c {
            'T' => {
                rest = &rest[1..];
                while let Some(after) = rest.strip_prefix('(') {
                    let end = after.find(')')?;
                    let tile: Tile = after[..end]
                        .split(',')
                        .map(|d| match d.trim() {
                            "*" => Some(COMBINED),
                            d => d.parse().ok().map(Some),
                        })
                        .collect::<Option<_>>()?;
                    tiles.push(tile);
                    rest = &after[end + 1..];
                }
            }
            'E' => {
                let (value, after) = parenthesized(&rest[1..])?;
                element_bits = Some(value.parse().ok()?);
                rest = after;
            }
            // L(n) tail padding, S(n) memory space, #(…) and *(…) index and
            // pointer types, M(…) metadata: no bearing on the size here.
            _ => {
                let open = rest.find('(')?;
                let (_, after) = parenthesized(&rest[open..])?;
                rest = after;
            }
        }
    }
    Some((minor_to_major, tiles, element_bits.filter(|&b| b > 0)))
}

/// `(text)rest` → (`text`, `rest`).
fn parenthesized(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('(')?;
    let end = inner.find(')')?;
    Some((&inner[..end], &inner[end + 1..]))
}

fn tile_text(tile: &Tile) -> String {
    tile.iter()
        .map(|d| d.map_or("*".to_string(), |d| d.to_string()))
        .collect::<Vec<_>>()
        .join("×")
}

/// A later tile in words: `(4,1)` on u8 packs 4 elements of adjacent rows
/// in one 32-bit word; `(2,1)` on bf16 two.
fn sub_tile_text(sub: &Tile, dtype: &str, element: u64, element_bits: Option<u64>) -> String {
    let bits = element_bits.unwrap_or(element * 8);
    match sub[..] {
        [Some(rows), Some(1)] if rows > 1 && rows.checked_mul(bits) == Some(32) => format!(
            ", then {}×1 sub-tiles: {rows} {dtype} elements of adjacent rows packed in one \
             32-bit word",
            rows
        ),
        _ => format!(", then sub-tiles of {}", tile_text(sub)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Figures the TPU compiler printed for these shapes (each a public
    /// report's `Size:` and `Unpadded size:`), computed here from the shape.
    #[test]
    fn padded_sizes_are_xlas() {
        let check = |shape: &str, unpadded: u64, padded: u64| {
            let s = sizes(shape).unwrap_or_else(|| panic!("{shape}"));
            assert_eq!(
                (s.unpadded_bytes, s.padded_bytes),
                (unpadded, padded),
                "{shape}"
            );
        };
        // 9 → 16 (tile 8) and 18 → 128: 40.50M → 512.00M.
        check(
            "f32[4,128,128,9,18]{4,3,0,2,1:T(8,128)}",
            4 * 128 * 128 * 9 * 18 * 4,
            512 * MIB,
        );
        check(
            "bf16[4,512,512,64]{3,0,2,1:T(4,128)(2,1)}",
            128 * MIB,
            256 * MIB,
        );
        check("f32[4,256,256,256]{3,0,2,1:T(4,128)}", 256 * MIB, 256 * MIB);
        check(
            "u8[327680,327680]{1,0:T(8,128)(4,1)}",
            107_374_182_400,
            107_374_182_400,
        );
        // A rank-1 shape under a 2-D tile pads an added major dimension.
        check("f32[64]{0:T(256)}", 256, 1024);
        check("f32[10]{0:T(8,128)}", 40, 8 * 128 * 4);
        // Packed 4-bit elements.
        check("s4[8,128]{1,0:T(8,128)(2,1)E(4)}", 512, 512);
        check("f32[]", 4, 4);
        check("f32[3,5]{1,0}", 60, 60);
        // Minor dimension first in the layout: dim 0 is the minor one.
        check(
            "f32[128,256,896,18]{0,3,2,1:T(8,128)}",
            128 * 256 * 896 * 18 * 4,
            128 * 256 * 896 * 24 * 4,
        );
    }

    #[test]
    fn explains_the_tiles() {
        let s = sizes("u8[327680,327680]{1,0:T(8,128)(4,1)}").unwrap();
        assert_eq!(
            s.explanation,
            "tiles of 8×128 pad the minor dimensions (dim 0: 327680→327680, dim 1: \
             327680→327680), then 4×1 sub-tiles: 4 u8 elements of adjacent rows packed in \
             one 32-bit word: 100.00 GiB unpadded, 100.00 GiB padded"
        );
        let s = sizes("f32[4,128,128,9,18]{4,3,0,2,1:T(8,128)}").unwrap();
        assert!(
            s.explanation.starts_with(
                "tiles of 8×128 pad the minor dimensions (dim 3: 9→16, dim 4: 18→128)"
            ),
            "{}",
            s.explanation
        );
        assert!(s.explanation.ends_with("(12.6x)"), "{}", s.explanation);
    }

    #[test]
    fn what_is_no_array_shape_is_refused() {
        for text in [
            "",
            "(f32[2]{0}, s32[])",
            "token[]",
            "f32[2,",
            "f32[2]{1}",
            "f32[2,2]{0,0}",
            "q32[2]",
            "f32[99999999999,99999999999,99999999999]",
            "f32[2]{0:T(8",
        ] {
            assert_eq!(sizes(text), None, "{text}");
        }
    }
}
