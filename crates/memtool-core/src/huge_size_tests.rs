//! Files that claim sizes whose sum does not fit in 64 bits, one of every
//! format: the figures are capped, never wrapped, and a warning says so.
//! Each test also runs every analysis, exporter and render output on the
//! profile: tests build with overflow checks, so a plain `+` on these sizes
//! anywhere on the way panics here.

use memtool_proto::pprof;
use prost::Message;

use crate::analysis::peak::PeakSettings;
use crate::analysis::{diff, frag, leaks, peak, replay, summary, GroupBy, Options};
use crate::model::Profile;
use crate::render::{self, Inputs, RenderOptions};
use crate::report::{exporter, OutputFormat, Presentation, Report};
use crate::{load, LoadOptions, Source};

/// The largest size every format can state (pickles, JSON and pprof hold
/// signed 64-bit integers); three of them do not fit in 64 bits.
const HUGE: u64 = i64::MAX as u64;

/// What `load` says of a memory whose sizes do not fit.
pub(crate) const MEMORY_WARNING: &str = "add up to more than 16 EiB (2^64 bytes); sums are capped";

fn loaded(path: &str, bytes: Vec<u8>) -> Profile {
    load(
        vec![Source::from_bytes(path, bytes)],
        &LoadOptions::default(),
    )
    .unwrap()
}

/// Every report in every output format, the peak as XProf lists it, every
/// render output, and the series of every grouping.
pub(crate) fn every_output(profile: &Profile) {
    let options = Options::default();
    let reports: Vec<Box<dyn Report>> = vec![
        Box::new(summary::summarize(profile, &options)),
        Box::new(peak::peak(profile, &options)),
        Box::new(peak::peak_with(
            profile,
            &options,
            &PeakSettings {
                budget: Some(1),
                xprof_compat: true,
                ..Default::default()
            },
        )),
        Box::new(leaks::leaks(profile, &options)),
        Box::new(frag::frag(profile, &options)),
        Box::new(diff::diff(profile, profile, &options, None)),
        Box::new(diff::diff(&Profile::default(), profile, &options, None)),
    ];
    for report in &reports {
        for format in [
            OutputFormat::Table,
            OutputFormat::Json,
            OutputFormat::Csv,
            OutputFormat::Md,
        ] {
            let mut out = Vec::new();
            exporter(
                format,
                Presentation {
                    top: 5,
                    width: None,
                },
            )
            .export(report.as_ref(), &mut out)
            .unwrap();
        }
    }
    for group_by in [
        None,
        Some(GroupBy::Stack),
        Some(GroupBy::Op),
        Some(GroupBy::Category),
    ] {
        let r = RenderOptions {
            group_by,
            ..RenderOptions::default()
        };
        render::html(Inputs::One(profile), &r);
        render::svg(Inputs::One(profile), &r);
        render::folded(Inputs::One(profile), &r);
        render::html(
            Inputs::Diff {
                base: profile,
                new: profile,
            },
            &r,
        );
    }
}

/// The first memory's replayed peak is capped at `u64::MAX`, summary shows
/// `summary_peak`, and `warning` is among the profile's warnings.
fn assert_capped(profile: &Profile, summary_peak: u64, warning: &str) {
    let memory = &profile.memories[0];
    assert_eq!(replay::peak(memory).unwrap().bytes, u64::MAX);
    let summary = summary::summarize(profile, &Options::default());
    assert_eq!(summary.memories[0].peak.peak_bytes, summary_peak);
    assert!(
        profile.warnings.iter().any(|w| w.message.contains(warning)),
        "{:?}",
        profile.warnings
    );
    every_output(profile);
}

fn pprof_profile(devices: &[&str]) -> Vec<u8> {
    let strings = [
        "",
        "allocations",
        "count",
        "space",
        "bytes",
        "device",
        "kind",
        "buffer",
    ];
    let mut string_table: Vec<Vec<u8>> = strings.iter().map(|s| s.as_bytes().to_vec()).collect();
    let first_device = string_table.len() as i64;
    string_table.extend(devices.iter().map(|d| d.as_bytes().to_vec()));
    let sample = |device: i64| pprof::Sample {
        location_id: vec![],
        value: vec![1, HUGE as i64],
        label: vec![
            pprof::Label {
                key: 5,
                str: first_device + device,
                ..Default::default()
            },
            pprof::Label {
                key: 6,
                str: 7,
                ..Default::default()
            },
        ],
    };
    let per_device = if devices.len() == 1 { 3 } else { 1 };
    pprof::Profile {
        sample_type: vec![
            pprof::ValueType { r#type: 1, unit: 2 },
            pprof::ValueType { r#type: 3, unit: 4 },
        ],
        sample: (0..devices.len() as i64)
            .flat_map(|d| std::iter::repeat_n(sample(d), per_device))
            .collect(),
        string_table,
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn pprof_sizes_past_64_bits_are_capped() {
    assert_capped(
        &loaded("huge.prof", pprof_profile(&["TPU_0"])),
        u64::MAX,
        MEMORY_WARNING,
    );
}

/// Three devices of one buffer each: every device fits, their sum (the
/// snapshot's overall peak, diff's totals) does not.
#[test]
fn pprof_devices_whose_sum_is_past_64_bits_are_capped_together() {
    let profile = loaded("huge.prof", pprof_profile(&["TPU_0", "TPU_1", "TPU_2"]));
    assert_eq!(profile.memories.len(), 3);
    let peak = peak::peak(&profile, &Options::default());
    assert_eq!(peak.overall.unwrap().bytes, u64::MAX);
    assert!(
        profile.warnings.iter().any(|w| w
            .message
            .contains("across its memories; totals over memories are capped")),
        "{:?}",
        profile.warnings
    );
    every_output(&profile);
}

#[test]
fn trace_sizes_past_64_bits_are_capped() {
    let event = |addr: u32| {
        format!(
            r#"{{"name": "[memory]", "ph": "i", "ts": {addr}, "tid": 1,
                 "args": {{"Bytes": {HUGE}, "Addr": {addr}, "Device Type": 1, "Device Id": 0}}}}"#
        )
    };
    let text = format!(
        r#"{{"traceEvents": [{}, {}, {}]}}"#,
        event(1),
        event(2),
        event(3)
    );
    assert_capped(
        &loaded("huge.pt.trace.json", text.into_bytes()),
        u64::MAX,
        MEMORY_WARNING,
    );
}

#[test]
fn memory_timeline_sizes_past_64_bits_are_capped() {
    let text = format!("[[1, 2], [[1, {HUGE}, {HUGE}], [2, {HUGE}, {HUGE}, {HUGE}]]]");
    assert_capped(
        &loaded("huge.json", text.into_bytes()),
        u64::MAX,
        MEMORY_WARNING,
    );
}

/// A protocol-2 pickle of `{'segments': [], 'device_traces': [[entry] * 3]}`,
/// each entry an allocation of `HUGE` bytes at its own address.
#[test]
fn snapshot_sizes_past_64_bits_are_capped() {
    fn str(out: &mut Vec<u8>, s: &str) {
        out.push(b'X');
        out.extend((s.len() as u32).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let mut p = vec![0x80, 2, b'}', b'('];
    str(&mut p, "segments");
    p.push(b']');
    str(&mut p, "device_traces");
    p.extend([b']', b'(', b']', b'(']);
    for addr in 1..=3u8 {
        p.extend([b'}', b'(']);
        str(&mut p, "action");
        str(&mut p, "alloc");
        str(&mut p, "addr");
        p.extend([b'K', addr]);
        str(&mut p, "size");
        p.extend([0x8a, 8]);
        p.extend(HUGE.to_le_bytes());
        str(&mut p, "frames");
        p.push(b']');
        p.push(b'u');
    }
    p.extend([b'e', b'e', b'u', b'.']);
    assert_capped(&loaded("huge.pickle", p), u64::MAX, MEMORY_WARNING);
}

/// Protobuf wire format, for the XSpace below.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn int(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

/// An XSpace whose `/host:CPU` line holds three `MemoryAllocation`s of
/// `HUGE` bytes each; the allocator's in-use figure stops at `2 * HUGE`.
#[test]
fn xspace_allocator_sizes_past_64_bits_are_capped() {
    let stat = |id: u64, value: u64| {
        let mut s = Vec::new();
        int(&mut s, 1, id);
        int(&mut s, 3, value);
        s
    };
    let mut line = Vec::new();
    int(&mut line, 3, 0);
    for i in 1..=3u64 {
        let mut event = Vec::new();
        int(&mut event, 1, 1);
        int(&mut event, 2, i * 10);
        let mut name = Vec::new();
        int(&mut name, 1, 10);
        field(&mut name, 5, b"gpu");
        field(&mut event, 4, &name);
        let in_use = HUGE * i.min(2);
        for s in [
            stat(11, i << 12),
            stat(12, in_use),
            stat(13, HUGE),
            stat(14, HUGE),
        ] {
            field(&mut event, 4, &s);
        }
        field(&mut line, 4, &event);
    }
    let metadata = |out: &mut Vec<u8>, map: u32, id: u64, name: &str| {
        let mut meta = Vec::new();
        int(&mut meta, 1, id);
        field(&mut meta, 2, name.as_bytes());
        let mut entry = Vec::new();
        int(&mut entry, 1, id);
        field(&mut entry, 2, &meta);
        field(out, map, &entry);
    };
    let mut plane = Vec::new();
    field(&mut plane, 2, b"/host:CPU");
    field(&mut plane, 3, &line);
    metadata(&mut plane, 4, 1, "MemoryAllocation");
    for (id, name) in [
        (10, "allocator_name"),
        (11, "addr"),
        (12, "bytes_allocated"),
        (13, "allocation_bytes"),
        (14, "requested_bytes"),
    ] {
        metadata(&mut plane, 5, id, name);
    }
    let mut space = Vec::new();
    field(&mut space, 1, &plane);
    // Summary shows the allocator's own in-use figure, which the file states.
    assert_capped(&loaded("huge.xplane.pb", space), 2 * HUGE, MEMORY_WARNING);
}
