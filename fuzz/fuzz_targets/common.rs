//! What the `analyses` and `pickle_structured` targets check of any input:
//! every analysis and exporter handles whatever a reader accepts (summary,
//! peak, leaks, frag, diff and render), and memory and time stay
//! proportional to the input: the model holds at most [`ITEMS_PER_BYTE`]
//! items per input byte (after gunzip), and reading plus every output costs
//! at most [`CPU_PER_BYTE`] of CPU per byte (and [`CPU_PER_MEMORY`] per
//! memory) over a fixed allowance, so
//! hostile sharing (one list referenced thousands of times) or a quadratic
//! walk is a finding, not a slow run. Every output (each exporter of each
//! report, the page, the SVG, the folded stacks, the Perfetto trace, the
//! pprof) is at most [`OUTPUT_PER_BYTE`] bytes per input byte over
//! [`OUTPUT_ALLOWANCE`], so a page that grows with what the input claims
//! (a size, a count) rather than with what it holds is a finding too.

use std::io::Read;
use std::time::Duration;

use memtool_core::analysis::peak::PeakSettings;
use memtool_core::analysis::{diff, frag, leaks, oom_report, peak, summary, Options};
use memtool_core::model::Profile;
use memtool_core::report::{exporter, OutputFormat, Presentation, Report};
use memtool_core::{load, LoadOptions, Source};
/// The load options of the fuzz run (`load`'s cap on decompressed bytes).
const MAX_DECOMPRESSED: u64 = 16 << 20;

/// Model items (allocations, events, live-set entries, samples, blocks,
/// warnings) per input byte. The densest honest inputs come near 1: a
/// memory timeline row of nine small numbers changes eight categories, each
/// change a free, an allocation and an event; a two-byte memo reference
/// lists a pickled trace entry's frames again.
const ITEMS_PER_BYTE: usize = 16;
/// CPU time per input byte on top of [`CPU_ALLOWANCE`]: 50 KB/s, far below
/// any reader's speed, so only work superlinear in the input exceeds it.
const CPU_PER_BYTE: Duration = Duration::from_micros(20);
const CPU_ALLOWANCE: Duration = Duration::from_millis(500);
/// CPU time per memory on top of the rest: the page gives each memory views
/// of a fixed size whatever it holds (a timeline of 1,000 columns, a static
/// SVG, an address grid of 600 × 200 cells), twice with the diff page, and
/// a memory can be a dozen bytes of input (a snapshot device trace of one
/// entry, a pprof device label): 370 memories of 30 bytes took 0.8 s
/// under AddressSanitizer where 0.7 s were allowed. Work that grows with a
/// memory's content is still measured by the bytes.
const CPU_PER_MEMORY: Duration = Duration::from_millis(4);
/// Output bytes per input byte (after gunzip), on top of
/// [`OUTPUT_ALLOWANCE`]. Each thing the input holds is shown a bounded
/// number of times (a row per exporter, a block or a label on the page,
/// names cut at 4 KiB), so output grows with the input by a constant
/// factor. The densest honest case is a memory of a dozen bytes (a
/// snapshot device trace of one entry whose keys are memo references)
/// with its own view on the page, about 5 KB with the diff page's two
/// sides: some 400 bytes per byte. A fixed 600 × 200 address grid per
/// memory (120 KB, before it was run-length coded) was 3,500.
const OUTPUT_PER_BYTE: usize = 1024;
/// What an output may hold whatever the input: the page's template, script
/// and style (about 150 KB), a report's headings.
const OUTPUT_ALLOWANCE: usize = 1 << 20;

/// Checks one output's size against the input's (see [`OUTPUT_PER_BYTE`]).
fn check_output(what: &str, output_len: usize, input_len: usize) {
    let allowed = OUTPUT_ALLOWANCE + OUTPUT_PER_BYTE * input_len;
    assert!(
        output_len <= allowed,
        "{what}: {output_len} output bytes from {input_len} input bytes (allowed {allowed})"
    );
}

pub fn analyses(data: &[u8]) {
    let options = LoadOptions {
        max_decompressed: Some(MAX_DECOMPRESSED),
        ..LoadOptions::default()
    };
    let input_len = decompressed_len(data);
    let started = cpu_time();
    let source = || Source::from_bytes("fuzz", data.to_vec());
    let Ok(profile) = load(vec![source()], &options) else {
        return;
    };
    let items = model_items(&profile);
    assert!(
        items <= ITEMS_PER_BYTE * input_len + 1024,
        "{items} model items from {input_len} input bytes"
    );
    let o = Options::default();
    let reports: Vec<Box<dyn Report>> = vec![
        Box::new(summary::summarize(&profile, &o)),
        Box::new(peak::peak(&profile, &o)),
        Box::new(peak::peak_with(
            &profile,
            &o,
            &PeakSettings {
                budget: Some(1 << 20),
                xprof_compat: true,
                by: Some(memtool_core::analysis::GroupBy::Phase),
                at: None,
            },
        )),
        // The live set at a moment other than the peak (`peak --at-entry`).
        Box::new(peak::peak_with(
            &profile,
            &o,
            &PeakSettings {
                budget: None,
                xprof_compat: false,
                by: None,
                at: Some((memtool_core::analysis::moment::Moment::Entry(3), "entry 3".into())),
            },
        )),
        Box::new(leaks::leaks(&profile, &o)),
        Box::new(frag::frag(&profile, &o)),
        Box::new(diff::diff(&profile, &profile, &o, None)),
        // A capacity every program exceeds: each gets a post-mortem.
        Box::new(oom_report::oom(
            &profile,
            &Options {
                capacity: Some(1),
                ..Options::default()
            },
        )),
    ];
    let r = memtool_core::render::RenderOptions::default();
    let one = memtool_core::render::Inputs::One(&profile);
    let check = |what: &str, len: usize| check_output(what, len, input_len);
    check("page", memtool_core::render::html(one, &r).len());
    check("svg", memtool_core::render::svg(one, &r).len());
    check("folded", memtool_core::render::folded(one, &r).len());
    check("perfetto", memtool_core::render::perfetto(one, &r).len());
    check("pprof", memtool_core::render::peak_pprof(&profile, &o).len());
    let both = memtool_core::render::Inputs::Diff {
        base: &profile,
        new: &profile,
    };
    check("diff page", memtool_core::render::html(both, &r).len());
    check("diff perfetto", memtool_core::render::perfetto(both, &r).len());
    for report in &reports {
        for format in [
            OutputFormat::Table,
            OutputFormat::Json,
            OutputFormat::Csv,
            OutputFormat::Md,
        ] {
            let mut out = Vec::new();
            exporter(format, Presentation { top: 10, width: None })
                .export(report.as_ref(), &mut out)
                .expect("writing to memory");
            check(&format!("{format:?} report"), out.len());
        }
    }
    if let (Some(started), Some(ended)) = (started, cpu_time()) {
        let spent = ended.saturating_sub(started);
        let memories = u32::try_from(profile.memories.len()).unwrap_or(u32::MAX);
        let allowed = CPU_ALLOWANCE
            + CPU_PER_BYTE * input_len as u32
            + CPU_PER_MEMORY.saturating_mul(memories);
        assert!(
            spent <= allowed,
            "{spent:?} of CPU for {input_len} input bytes (allowed {allowed:?})"
        );
    }
}

/// The input's length as the readers see it: gzip members decompressed (up
/// to `load`'s cap), so a small compressed input of a large profile is
/// measured by what it holds.
fn decompressed_len(data: &[u8]) -> usize {
    if !data.starts_with(&[0x1f, 0x8b]) {
        return data.len();
    }
    let mut out = Vec::new();
    let _ = flate2::read::MultiGzDecoder::new(data)
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out);
    out.len().max(data.len())
}

/// Everything the model holds per allocation, event or sample.
fn model_items(profile: &Profile) -> usize {
    let per_memory: usize = profile
        .memories
        .iter()
        .map(|m| {
            m.allocations.len()
                + m.events.len()
                + m.live_at_start.len()
                + m.instants.iter().map(|i| 1 + i.live.len()).sum::<usize>()
                + m.allocator_samples.len()
                + m.steps.len()
                + m.segments.iter().map(|s| 1 + s.blocks.len()).sum::<usize>()
                + 1
        })
        .sum();
    per_memory + profile.warnings.len()
}

/// CPU time of the whole process (every thread), from `/proc/self/stat`
/// (user and system time in clock ticks of 10 ms): unlike wall time, it does
/// not grow when other processes share the machine.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_name.split(' ');
    // utime and stime are fields 14 and 15; the name (field 2) is cut off
    // and `after_name` starts at field 3.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}
