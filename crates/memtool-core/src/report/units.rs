//! Human-readable sizes: binary units (KiB = 1024 bytes), as allocators count.

const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// `1536` → `1.50 KiB`; below 1 KiB exact bytes.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// A signed difference: `+1.50 KiB`, `-200 B`, `0 B`.
pub fn delta_bytes(d: i64) -> String {
    match d {
        0 => "0 B".to_string(),
        d if d > 0 => format!("+{}", bytes(d as u64)),
        d => format!("-{}", bytes(d.unsigned_abs())),
    }
}

/// A size with its exact byte count beside the rounded one, for a figure
/// compared with a threshold: `1.50 KiB (1536 B)`; below 1 KiB `200 B`.
pub fn exact_bytes(n: u64) -> String {
    if n < 1024 {
        bytes(n)
    } else {
        format!("{} ({n} B)", bytes(n))
    }
}

/// [`exact_bytes`] of a signed difference: `+1.50 KiB (+1536 B)`, `-200 B`.
pub fn exact_delta_bytes(d: i64) -> String {
    if d.unsigned_abs() < 1024 {
        delta_bytes(d)
    } else {
        format!("{} ({d:+} B)", delta_bytes(d))
    }
}

/// Parses a size as users write it: `1000`, `64KiB`, `1.5 GiB`, `10MB`
/// (decimal units are powers of 1000, binary ones of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "ki" | "kib" => 1024.0,
        "mi" | "mib" => 1024f64.powi(2),
        "gi" | "gib" => 1024f64.powi(3),
        "ti" | "tib" => 1024f64.powi(4),
        _ => return None,
    };
    let value = number * factor;
    (value.is_finite() && value >= 0.0 && value < u64::MAX as f64).then(|| value.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sizes_keep_every_byte() {
        assert_eq!(exact_bytes(1023), "1023 B");
        assert_eq!(exact_bytes(1_048_575), "1024.00 KiB (1048575 B)");
        assert_eq!(exact_delta_bytes(-1536), "-1.50 KiB (-1536 B)");
        assert_eq!(exact_delta_bytes(10), "+10 B");
    }

    #[test]
    fn formats_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(84_000_000), "80.11 MiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(delta_bytes(-2048), "-2.00 KiB");
        assert_eq!(delta_bytes(1_760_000), "+1.68 MiB");
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("1000"), Some(1000));
        assert_eq!(parse_bytes("64KiB"), Some(65536));
        assert_eq!(parse_bytes("1.5 GiB"), Some(1_610_612_736));
        assert_eq!(parse_bytes("10MB"), Some(10_000_000));
        assert_eq!(parse_bytes("ten"), None);
        assert_eq!(parse_bytes("5%"), None);
    }
}
