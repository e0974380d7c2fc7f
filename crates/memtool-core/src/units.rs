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

/// A duration in picoseconds as a person reads it, in the largest unit
/// under it with about four significant figures: `532 ps`, `1.930 us`,
/// `25.43 ms`, `4.20 s`, `2 min 05.3 s`, `3 h 02 min`.
pub fn duration(ps: i64) -> String {
    duration_with_digits(ps, 0)
}

/// [`duration`] with `more` decimals than it shows (up to the picosecond):
/// two moments a few microseconds apart told apart.
pub fn duration_with_digits(ps: i64, more: usize) -> String {
    let sign = if ps < 0 { "-" } else { "" };
    let ps = ps.unsigned_abs();
    const US: u64 = 1_000_000;
    const S: u64 = 1_000_000_000_000;
    // `exact` decimals of the unit are whole picoseconds: more say nothing.
    let scaled = |value: f64, unit: &str, exact: usize| {
        let decimals = if value < 10.0 {
            3
        } else if value < 100.0 {
            2
        } else {
            1
        };
        let decimals = (decimals + more).min(exact);
        format!("{sign}{value:.decimals$} {unit}")
    };
    match ps {
        0 => "0 s".to_string(),
        1..1_000 => format!("{sign}{ps} ps"),
        1_000..US => scaled(ps as f64 / 1e3, "ns", 3),
        US..1_000_000_000 => scaled(ps as f64 / 1e6, "us", 6),
        1_000_000_000..S => scaled(ps as f64 / 1e9, "ms", 9),
        _ if ps < 60 * S => scaled(ps as f64 / 1e12, "s", 12),
        _ if ps < 3600 * S => {
            let s = ps as f64 / 1e12;
            let minutes = (s / 60.0).floor();
            format!("{sign}{minutes} min {:04.1} s", s - minutes * 60.0)
        }
        _ => {
            let minutes = ps / (60 * S);
            format!("{sign}{} h {:02} min", minutes / 60, minutes % 60)
        }
    }
}

/// A moment of a recording as every table and note shows it: the time
/// since the recording started (`t+25.43 ms`), then what the profile says
/// the program was doing — the step, and the phase (forward, backward, …)
/// where one is known: `t+25.43 ms (step 3, backward)`.
pub fn moment(since_start_ps: i64, step: Option<i64>, phase: Option<&str>) -> String {
    moment_with_digits(since_start_ps, step, phase, 0)
}

/// [`moment`] with `more` decimals in its time ([`duration_with_digits`]).
pub fn moment_with_digits(
    since_start_ps: i64,
    step: Option<i64>,
    phase: Option<&str>,
    more: usize,
) -> String {
    use std::fmt::Write;
    // Built in one string: `summary` labels every landmark (150,000 on a
    // profile of 30,000 steps), and the pieces as strings of their own were
    // most of that cost.
    let duration = duration_with_digits(since_start_ps, more);
    let mut out = String::with_capacity(duration.len() + 32);
    out.push_str(if duration.starts_with('-') { "t" } else { "t+" });
    out.push_str(&duration);
    match (step, phase) {
        (None, None) => {}
        (Some(step), None) => {
            let _ = write!(out, " (step {step})");
        }
        (None, Some(phase)) => {
            let _ = write!(out, " ({phase})");
        }
        (Some(step), Some(phase)) => {
            let _ = write!(out, " (step {step}, {phase})");
        }
    }
    out
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

/// `n` things, the noun agreeing with the number: `1 free`, `2 frees`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
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
    fn durations_keep_four_figures_in_the_largest_unit() {
        assert_eq!(duration(0), "0 s");
        assert_eq!(duration(999), "999 ps");
        assert_eq!(duration(1_930_000), "1.930 us");
        assert_eq!(duration(25_430_000_000), "25.43 ms");
        assert_eq!(duration(999_999_000_000), "1000.0 ms");
        assert_eq!(duration(4_200_000_000_000), "4.200 s");
        assert_eq!(duration(125_300_000_000_000), "2 min 05.3 s");
        assert_eq!(
            duration(3 * 3_600_000_000_000_000 + 120_000_000_000_000),
            "3 h 02 min"
        );
        assert_eq!(duration(-2_000_000), "-2.000 us");
    }

    #[test]
    fn more_digits_tell_close_moments_apart_down_to_the_picosecond() {
        assert_eq!(duration_with_digits(82_566_000_000, 0), "82.57 ms");
        assert_eq!(duration_with_digits(82_566_000_000, 1), "82.566 ms");
        assert_eq!(duration_with_digits(1_500_000, 9), "1.500000 us");
        assert_eq!(duration_with_digits(532, 4), "532 ps");
        assert_eq!(
            moment_with_digits(82_568_000_000, Some(2), None, 1),
            "t+82.568 ms (step 2)"
        );
    }

    #[test]
    fn moments_read_from_the_start_with_step_and_phase() {
        assert_eq!(moment(25_430_000_000, None, None), "t+25.43 ms");
        assert_eq!(moment(25_430_000_000, Some(3), None), "t+25.43 ms (step 3)");
        assert_eq!(
            moment(25_430_000_000, Some(3), Some("backward")),
            "t+25.43 ms (step 3, backward)"
        );
        assert_eq!(
            moment(-1_000_000, None, Some("forward")),
            "t-1.000 us (forward)"
        );
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
