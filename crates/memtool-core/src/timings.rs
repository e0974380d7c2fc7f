//! Optional phase timings (`MEMTOOL_TIMINGS=1` in the binary), to see where
//! time and memory go for a given input: reading, decompression, decoding,
//! interning, analysis, output.
//!
//! Off by default and then nearly free (one relaxed atomic load per span).
//! The core only records; the binary enables it, may install a memory probe
//! (peak RSS, read from the OS, which the core must not do itself) and
//! prints the spans.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static SPANS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
static MEMORY_PROBE: OnceLock<fn() -> Option<u64>> = OnceLock::new();

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One finished (or still open) span, in the order spans were opened.
#[derive(Clone, Debug)]
pub struct Record {
    /// What the span measured (`read input`, `analysis`, ...).
    pub name: &'static str,
    /// Nesting level: 0 for the outermost spans.
    pub depth: usize,
    /// How long it took; `None` while it is still open.
    pub elapsed: Option<Duration>,
    /// What the memory probe said when the span ended (peak RSS in bytes).
    pub memory_after: Option<u64>,
}

/// Turns spans on for the rest of the process (off by default).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether spans are on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Called at the end of every span; its value is kept with the span.
pub fn set_memory_probe(probe: fn() -> Option<u64>) {
    let _ = MEMORY_PROBE.set(probe);
}

/// A timed region, ended when dropped.
#[must_use = "a span measures until it is dropped"]
pub struct Span {
    open: Option<(usize, Instant)>,
}

/// Opens a span named `name`; it ends when the returned value is dropped.
pub fn span(name: &'static str) -> Span {
    if !enabled() {
        return Span { open: None };
    }
    let depth = DEPTH.with(|d| {
        let depth = d.get();
        d.set(depth + 1);
        depth
    });
    let Ok(mut spans) = SPANS.lock() else {
        return Span { open: None };
    };
    spans.push(Record {
        name,
        depth,
        elapsed: None,
        memory_after: None,
    });
    Span {
        open: Some((spans.len() - 1, Instant::now())),
    }
}

/// Runs `f` inside a span named `name`.
pub fn time<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let _span = span(name);
    f()
}

impl Drop for Span {
    fn drop(&mut self) {
        let Some((index, start)) = self.open else {
            return;
        };
        let elapsed = start.elapsed();
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        let memory = MEMORY_PROBE.get().and_then(|probe| probe());
        if let Ok(mut spans) = SPANS.lock() {
            if let Some(record) = spans.get_mut(index) {
                record.elapsed = Some(elapsed);
                record.memory_after = memory;
            }
        }
    }
}

/// The spans recorded so far, in the order they were opened.
pub fn take() -> Vec<Record> {
    SPANS
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

/// How deep spans opened now on this thread nest (0: outermost).
pub fn depth() -> usize {
    DEPTH.with(Cell::get)
}

/// Runs `f` with this thread's spans nested at `depth`: work handed to
/// another thread ([`crate::parallel::join`]) is printed under the span of
/// the thread that handed it over, not as a phase of its own.
pub fn nested_at<T>(depth: usize, f: impl FnOnce() -> T) -> T {
    let was = DEPTH.with(|d| d.replace(depth));
    let out = f();
    DEPTH.with(|d| d.set(was));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_spans_are_recorded_in_opening_order() {
        enable();
        {
            let _outer = span("timings-test-outer");
            time("timings-test-inner", || std::hint::black_box(1 + 1));
        }
        let spans: Vec<_> = take()
            .into_iter()
            .filter(|r| r.name.starts_with("timings-test"))
            .collect();
        assert_eq!(spans.len(), 2);
        assert_eq!((spans[0].name, spans[0].depth), ("timings-test-outer", 0));
        assert_eq!((spans[1].name, spans[1].depth), ("timings-test-inner", 1));
        assert!(spans[0].elapsed.unwrap() >= spans[1].elapsed.unwrap());
    }
}
