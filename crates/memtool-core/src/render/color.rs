//! Colours that stay the same for a group in every report.

/// FNV-1a: small, fixed forever (colours must not change between releases,
/// which `std`'s hasher does not promise).
fn fnv1a(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The colour of a group, derived from its key alone so that two reports
/// colour the same group the same way. Saturation and lightness vary a
/// little so that neighbouring hues stay apart; all are readable on white and
/// on a dark background.
pub(super) fn group_color(key: &str) -> String {
    if let Some(c) = category_color(key) {
        return c.to_string();
    }
    let h = fnv1a(key);
    let hue = h % 360;
    let sat = 50 + (h >> 9) % 3 * 15;
    let light = 42 + (h >> 13) % 3 * 12;
    hsl_hex(hue as f64, sat as f64 / 100.0, light as f64 / 100.0)
}

/// Fixed, well-separated colours for the memory categories that frameworks
/// name (PyTorch's memory-profiler categories, XLA's buffer kinds), so that a
/// chart by category always reads the same: parameters blue, activations
/// orange, gradients green. A hash alone can give two of them one hue.
fn category_color(key: &str) -> Option<&'static str> {
    let k: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    Some(match k.as_str() {
        "parameter" | "parameters" | "param" | "params" | "weights" => "#4e79a7",
        "activation" | "activations" => "#f28e2b",
        "gradient" | "gradients" | "grad" | "grads" => "#59a14f",
        "optimizerstate" | "optimizer" => "#b07aa1",
        "temporary" | "temp" | "temps" => "#bab0ac",
        "input" | "inputs" | "entryparameter" => "#76b7b2",
        "output" | "outputs" => "#edc948",
        "autograddetail" => "#ff9da7",
        "unknown" => "#9c755f",
        // `<none>`: no category recorded — memory from before the
        // recording, mostly. A hashed hue made it an orange beside the
        // activations' in the allocation view (docs/memory-viz.md).
        "none" => "#79706e",
        // Training phases: the forward pass makes activations, the backward
        // pass gradients, the optimizer its state.
        "forward" => "#f28e2b",
        "loss" => "#e15759",
        "backward" => "#59a14f",
        "zerograd" => "#9d7660",
        _ => return None,
    })
}

/// `#rrggbb`, which every SVG renderer reads (not all read CSS 4 `hsl()`).
fn hsl_hex(hue: f64, sat: f64, light: f64) -> String {
    let c = (1.0 - (2.0 * light - 1.0).abs()) * sat;
    let x = c * (1.0 - ((hue / 60.0) % 2.0 - 1.0).abs());
    let m = light - c / 2.0;
    let (r, g, b) = match (hue / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// The colour of the "other" group.
pub(super) const OTHER_COLOR: &str = "#9e9e9e";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_depend_on_the_key_only() {
        assert_eq!(group_color("jit(step)/dot"), group_color("jit(step)/dot"));
        assert_ne!(group_color("a"), group_color("b"));
        // FNV-1a of "a" is 0xe40c292c: pinned so colours never drift.
        assert_eq!(fnv1a("a"), 0xe40c_292c);
        assert_eq!(hsl_hex(0.0, 1.0, 0.5), "#ff0000");
        assert_eq!(hsl_hex(120.0, 1.0, 0.25), "#008000");
        assert_eq!(hsl_hex(210.0, 0.5, 0.5), "#4080bf");
        assert!(group_color("x").starts_with('#') && group_color("x").len() == 7);
        // Named categories keep their fixed colours whatever the spelling.
        assert_eq!(group_color("PARAMETER"), group_color("parameter"));
        assert_eq!(group_color("OPTIMIZER_STATE"), "#b07aa1");
        assert_ne!(group_color("activation"), group_color("parameter"));
        assert_eq!(group_color("<none>"), "#79706e");
    }
}
