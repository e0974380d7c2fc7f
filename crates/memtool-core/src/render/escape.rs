//! Making profile text safe inside the page, and colours that stay the same
//! for a group in every report.

use serde::Serialize;

/// JSON for a `<script type="application/json">` element. Besides being valid
/// JSON it must never close the element or open a comment (`</script>`,
/// `<!--`), and must stay valid JavaScript should anyone eval it (U+2028 and
/// U+2029 end lines in older engines). Those characters can only occur inside
/// JSON strings, where a `\u` escape means the same thing.
pub fn script_json<T: Serialize>(value: &T) -> String {
    // Serializing our own data structures cannot fail: every map key is a string.
    let raw = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
    let mut out = String::with_capacity(raw.len() + raw.len() / 16);
    for c in raw.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

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
pub fn group_color(key: &str) -> String {
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
pub const OTHER_COLOR: &str = "#9e9e9e";

/// Text for XML (SVG) content and attribute values.
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_close_the_script_element() {
        let json = script_json(&vec!["</script><!-- & \u{2028}\u{2029}"]);
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        assert!(!json.contains('\u{2028}') && !json.contains('\u{2029}'));
        let back: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec!["</script><!-- & \u{2028}\u{2029}"]);
    }

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
    }

    #[test]
    fn xml_text_is_escaped() {
        assert_eq!(
            xml("<a href=\"x\">&'\u{1}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\u{fffd}"
        );
    }
}
