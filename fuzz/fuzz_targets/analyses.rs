//! Whatever a reader accepts, every analysis and exporter must handle: runs
//! summary, peak, leaks, diff, oom and render on each profile that loads, in every format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memtool_core::analysis::{diff, leaks, oom, peak, summary, Options};
use memtool_core::report::{exporter, OutputFormat, Report};
use memtool_core::{load, LoadOptions, Source};

fuzz_target!(|data: &[u8]| {
    let options = LoadOptions {
        max_decompressed: Some(16 << 20),
        ..LoadOptions::default()
    };
    let source = || Source::from_bytes("fuzz", data.to_vec());
    let Ok(profile) = load(vec![source()], &options) else {
        return;
    };
    let o = Options::default();
    let reports: Vec<Box<dyn Report>> = vec![
        Box::new(summary::summarize(&profile, &o)),
        Box::new(peak::peak(&profile, &o)),
        Box::new(leaks::leaks(&profile, &o)),
        Box::new(diff::diff(&profile, &profile, &o, None)),
        // A capacity every program exceeds: each gets a post-mortem.
        Box::new(oom::oom(
            &profile,
            &Options {
                capacity: Some(1),
                ..Options::default()
            },
        )),
    ];
    let r = memtool_core::render::RenderOptions::default();
    let one = memtool_core::render::Inputs::One(&profile);
    let _ = memtool_core::render::html(one, &r);
    let _ = memtool_core::render::svg(one, &r);
    let _ = memtool_core::render::folded(one, &r);
    let both = memtool_core::render::Inputs::Diff {
        base: &profile,
        new: &profile,
    };
    let _ = memtool_core::render::html(both, &r);
    for report in &reports {
        for format in [OutputFormat::Table, OutputFormat::Json, OutputFormat::Csv, OutputFormat::Md] {
            let mut out = Vec::new();
            exporter(format).export(report.as_ref(), &mut out).expect("writing to memory");
        }
    }
});
