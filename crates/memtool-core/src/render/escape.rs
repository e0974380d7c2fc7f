//! Making profile text safe inside the page.

use serde::Serialize;

/// JSON for a `<script type="application/json">` element. Besides being valid
/// JSON it must never close the element or open a comment (`</script>`,
/// `<!--`), and must stay valid JavaScript should anyone eval it (U+2028 and
/// U+2029 end lines in older engines). Those characters can only occur inside
/// JSON strings, where a `\u` escape means the same thing.
pub(super) fn script_json<T: Serialize>(value: &T) -> String {
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

/// The longest name the page holds: a profile's names (a stack of a million
/// frames, a frame name of a megabyte) are cut here, so the page stays small
/// whatever the input.
pub(super) const MAX_LABEL_BYTES: usize = 4 << 10;

/// `text` as the page shows it: whole, or its first [`MAX_LABEL_BYTES`]
/// (at a character boundary) and a marker saying how much was cut.
pub(super) fn label(text: &str) -> String {
    if text.len() <= MAX_LABEL_BYTES {
        return text.to_string();
    }
    let mut cut = MAX_LABEL_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} more bytes cut]", &text[..cut], text.len() - cut)
}

/// Text for XML (SVG) content and attribute values.
pub(super) fn xml(text: &str) -> String {
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
    fn xml_text_is_escaped() {
        assert_eq!(
            xml("<a href=\"x\">&'\u{1}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\u{fffd}"
        );
    }

    #[test]
    fn long_labels_are_cut_with_a_marker() {
        assert_eq!(label("short"), "short");
        let long = "é".repeat(MAX_LABEL_BYTES);
        let cut = label(&long);
        assert!(cut.len() < MAX_LABEL_BYTES + 40);
        assert!(
            cut.ends_with(&format!("… [{} more bytes cut]", MAX_LABEL_BYTES)),
            "{}",
            &cut[cut.len() - 40..]
        );
    }
}
