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
    let h = fnv1a(key);
    let hue = h % 360;
    let sat = 55 + (h >> 9) % 3 * 10;
    let light = 46 + (h >> 13) % 3 * 8;
    format!("hsl({hue} {sat}% {light}%)")
}

/// The colour of the "other" group.
pub const OTHER_COLOR: &str = "hsl(0 0% 62%)";

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
    }
}
