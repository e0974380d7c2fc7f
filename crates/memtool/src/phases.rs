//! `MEMTOOL_TIMINGS=1`: where the time and memory of one run go, printed to
//! stderr after the command (phases from the core's `timings` spans, each
//! with the process's peak RSS when it ended).

use std::io::Write;

use memtool_core::report::units;
use memtool_core::timings;

/// Turns timings on when `MEMTOOL_TIMINGS` is set to anything but `0`.
pub fn init() {
    if std::env::var_os("MEMTOOL_TIMINGS").is_some_and(|v| !v.is_empty() && v != "0") {
        timings::enable();
        timings::set_memory_probe(peak_rss);
    }
}

/// Peak resident set size so far (Linux `VmHWM`), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

pub fn print() {
    if !timings::enabled() {
        return;
    }
    let spans = timings::take();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "memtool timings (MEMTOOL_TIMINGS):");
    let _ = writeln!(err, "  {:<50} {:>10}  {:>12}", "phase", "ms", "peak RSS");
    for s in spans {
        let name = format!("{}{}", "  ".repeat(s.depth), s.name);
        let ms = s
            .elapsed
            .map(|d| format!("{:.1}", d.as_secs_f64() * 1000.0))
            .unwrap_or_else(|| "-".into());
        let rss = s.memory_after.map(units::bytes).unwrap_or_default();
        let _ = writeln!(err, "  {name:<50} {ms:>10}  {rss:>12}");
    }
}
