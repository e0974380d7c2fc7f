use super::*;
use crate::input::{load, LoadOptions, Source};

fn label(key: i64, value: i64) -> pprof::Label {
    pprof::Label {
        key,
        str: value,
        ..Default::default()
    }
}

/// A profile in the shape JAX writes, with the odd cases real files have.
fn profile() -> Vec<u8> {
    let strings: Vec<Vec<u8>> = [
        &b""[..],
        b"allocations",
        b"count",
        b"space",
        b"bytes",
        b"kind",
        b"buffer",
        b"executable",
        b"device",
        b"cuda:0",
        b"f\xffoo",
        b"model.py",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let p = pprof::Profile {
        sample_type: vec![
            pprof::ValueType { r#type: 1, unit: 2 },
            pprof::ValueType { r#type: 3, unit: 4 },
        ],
        function: vec![pprof::Function {
            id: 1,
            name: 10,
            filename: 11,
            ..Default::default()
        }],
        location: vec![pprof::Location {
            id: 7,
            line: vec![pprof::Line {
                function_id: 1,
                line: 42,
                column: 0,
            }],
            ..Default::default()
        }],
        sample: vec![
            pprof::Sample {
                location_id: vec![7],
                value: vec![2, 1024],
                label: vec![label(5, 6), label(8, 9)],
            },
            pprof::Sample {
                location_id: vec![7, 99],
                value: vec![1, 10],
                label: vec![label(5, 6), label(8, 9)],
            },
            pprof::Sample {
                location_id: vec![],
                value: vec![1, -64],
                label: vec![label(5, 7)],
            },
        ],
        string_table: strings,
        ..Default::default()
    };
    p.encode_to_vec()
}

#[test]
fn odd_but_valid_input_gives_warnings_not_errors() {
    let source = Source::from_bytes("odd.prof", profile());
    let p = load(vec![source], &LoadOptions::default()).unwrap();
    assert_eq!(p.memories.len(), 1);
    let m = &p.memories[0];
    assert_eq!(m.id, "cuda:0");
    assert_eq!(m.instants[0].live.len(), 2);
    let total: u64 = m.allocations.iter().map(|a| a.bytes).sum();
    let buffers: u64 = m.allocations.iter().map(|a| u64::from(a.count)).sum();
    assert_eq!((total, buffers), (1034, 3));
    let exe = p.inputs[0].executables.unwrap();
    assert_eq!((exe.count, exe.bytes), (1, -64));
    let leaf = p
        .names
        .leaf(p.names.site_of(m.allocations[0].site).stack)
        .unwrap();
    assert_eq!(p.names.frame_label(leaf), "f\u{fffd}oo model.py:42");
    let messages = warnings(&p);
    assert_eq!(
        messages,
        [
            "1 names are not valid UTF-8; invalid bytes shown as U+FFFD",
            "1 location ids named by samples are not in the profile; their frames are left out",
            "1 executable samples have a negative size (kept as reported)",
        ]
    );
}

#[test]
fn stacks_that_share_callers_with_the_last_sample_are_the_stacks_alone() {
    // Locations 1..=4 each one frame `fN model.py:N`; location 2 has two
    // (an inlined `g` in `f2`). Samples in an order that shares, then
    // drops, then re-extends the last sample's callers; 99 is unknown.
    let mut strings: Vec<Vec<u8>> = [
        "", "space", "bytes", "kind", "buffer", "device", "cuda:0", "model.py", "g",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let mut function = vec![pprof::Function {
        id: 9,
        name: 8,
        filename: 7,
        ..Default::default()
    }];
    let mut location = Vec::new();
    for n in 1..=4u64 {
        strings.push(format!("f{n}").into_bytes());
        function.push(pprof::Function {
            id: n,
            name: strings.len() as i64 - 1,
            filename: 7,
            ..Default::default()
        });
        let line = |function_id| pprof::Line {
            function_id,
            line: n as i64,
            column: 0,
        };
        location.push(pprof::Location {
            id: n,
            line: if n == 2 {
                vec![line(9), line(2)]
            } else {
                vec![line(n)]
            },
            ..Default::default()
        });
    }
    let stacks: [&[u64]; 7] = [
        &[1, 2, 3],
        &[4, 2, 3],
        &[2, 3],
        &[1, 2, 3],
        &[99, 2, 3],
        &[3, 3, 3],
        &[1, 2, 4],
    ];
    let p = pprof::Profile {
        sample_type: vec![pprof::ValueType { r#type: 1, unit: 2 }],
        function,
        location,
        sample: stacks
            .iter()
            .map(|ids| pprof::Sample {
                location_id: ids.to_vec(),
                value: vec![8],
                label: vec![label(3, 4), label(5, 6)],
            })
            .collect(),
        string_table: strings,
        ..Default::default()
    };
    let source = Source::from_bytes("shared.prof", p.encode_to_vec());
    let profile = load(vec![source], &LoadOptions::default()).unwrap();
    let names = &profile.names;
    let m = &profile.memories[0];
    let shown: Vec<String> = m
        .allocations
        .iter()
        .map(|a| names.stack_label(names.site_of(a.site).stack))
        .collect();
    assert_eq!(
        shown,
        [
            "f1 model.py:1 <- g model.py:2 <- f2 model.py:2 <- f3 model.py:3",
            "f4 model.py:4 <- g model.py:2 <- f2 model.py:2 <- f3 model.py:3",
            "g model.py:2 <- f2 model.py:2 <- f3 model.py:3",
            "f1 model.py:1 <- g model.py:2 <- f2 model.py:2 <- f3 model.py:3",
            "g model.py:2 <- f2 model.py:2 <- f3 model.py:3",
            "f3 model.py:3 <- f3 model.py:3 <- f3 model.py:3",
            "f1 model.py:1 <- g model.py:2 <- f2 model.py:2 <- f4 model.py:4",
        ]
    );
    // The same stack is the same site, however it was reached.
    let site = |i: usize| m.allocations[i].site;
    assert_eq!(site(0), site(3));
    assert_eq!(site(2), site(4));
    assert_ne!(site(0), site(6));
    let messages = warnings(&profile);
    assert_eq!(
        messages,
        ["1 location ids named by samples are not in the profile; their frames are left out"]
    );
}

/// Top-level field 2 (a sample) with this payload, in wire format.
fn sample_field(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x12, payload.len() as u8];
    out.extend_from_slice(payload);
    out
}

fn shown(p: &Profile) -> String {
    format!("{:?}", (&p.inputs, &p.memories, &p.warnings))
}

/// In order, and ahead in batches of a few samples.
const WALKS: [Walk; 2] = [Walk::InOrder, Walk::Ahead { batch_bytes: 8 }];

#[test]
fn a_first_file_read_in_one_walk_is_the_file_checked_then_read() {
    for walk in WALKS {
        first_file_read_in_one_walk_is_the_file_checked_then_read(walk);
    }
}

fn first_file_read_in_one_walk_is_the_file_checked_then_read(walk: Walk) {
    let bytes = profile();
    let mut one = Profile::default();
    assert!(read_in_one_walk(&mut one, "a.prof", &bytes, walk));
    let mut two = Profile::default();
    read_checked(&mut two, "a.prof", &bytes, walk).unwrap();
    assert_eq!(shown(&one), shown(&two));
    assert!(!one.memories[0].allocations.is_empty());
    let stacks = |p: &Profile| {
        let m = &p.memories[0];
        (0..m.allocations.len() as u32)
            .map(|i| {
                let site = m.allocation(crate::model::AllocId(i)).site;
                p.names.stack_label(p.names.site_of(site).stack)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(stacks(&one), stacks(&two));

    // A sample whose location id is cut short, after the good ones
    // (whole as a field, so only the walk sees it): the one walk gives
    // up and leaves the profile as it was, for the checked read.
    let mut cut = profile();
    cut.extend([0x12, 2, 0x08, 0x80]);
    let mut p = Profile::default();
    assert!(!read_in_one_walk(&mut p, "cut.prof", &cut, walk));
    assert!(p.is_empty());
    let checked = read_checked(&mut Profile::default(), "cut.prof", &cut, walk).unwrap_err();
    let via_read = read(&mut Profile::default(), "cut.prof", &cut, false, walk).unwrap_err();
    assert_eq!(via_read.to_string(), checked.to_string());
}

#[test]
fn unpacked_fields_and_unknown_ones_read_as_prost_reads_them() {
    // The first sample again, written unpacked (location 7; values 2 and
    // 1024), with an unknown field in the sample and in a label.
    let mut unpacked = profile();
    unpacked.extend(sample_field(&[
        0x08, 7, // location_id 7
        0x10, 2, // value 2
        0x10, 0x80, 0x08, // value 1024
        0x1a, 6, 0x08, 5, 0x10, 6, 0x28, 1, // label kind=buffer, unknown field 5
        0x1a, 4, 0x08, 8, 0x10, 9, // label device=cuda:0
        0x20, 3, // unknown field 4
    ]));
    let p = load(
        vec![Source::from_bytes("u.prof", unpacked.clone())],
        &LoadOptions::default(),
    )
    .unwrap();
    let m = &p.memories[0];
    assert_eq!(m.instants[0].live.len(), 3);
    assert_eq!(m.allocations[2].bytes, 1024);
    assert_eq!(m.allocations[2].count, 2);
    assert_eq!(m.allocations[2].site, m.allocations[0].site);
    // What the wire walk read is what prost decodes.
    let decoded = pprof::Profile::decode(unpacked.as_slice()).unwrap();
    let last = decoded.sample.last().unwrap();
    assert_eq!(
        (last.location_id.as_slice(), last.value.as_slice()),
        (&[7][..], &[2, 1024][..])
    );
    assert_eq!(
        last.label
            .iter()
            .map(|l| (l.key, l.str))
            .collect::<Vec<_>>(),
        [(5, 6), (8, 9)]
    );
}

#[test]
fn a_sample_prost_refuses_is_refused_with_prost_s_words() {
    // location_id as a fixed32: framed correctly, but not what the field is.
    let mut bad = profile();
    bad.extend(sample_field(&[0x0d, 1, 0, 0, 0]));
    let err = load(
        vec![Source::from_bytes("bad.prof", bad.clone())],
        &LoadOptions::default(),
    )
    .unwrap_err();
    let prost = pprof::Profile::decode(bad.as_slice()).unwrap_err();
    assert_eq!(
        err.to_string(),
        corrupt("bad.prof", &bad, prost).to_string()
    );
    assert!(err.to_string().contains("invalid wire type"), "{err}");
}

#[test]
fn groups_in_a_sample_are_left_to_prost() {
    // An empty group (start and end tags of field 9) in a sample: prost
    // skips it; the wire walk does not frame groups, so prost reads the
    // whole profile, to the same model.
    let mut with_group = profile();
    with_group.extend(sample_field(&[0x08, 7, 0x10, 1, 0x10, 8, 0x4b, 0x4c]));
    let mut plain = profile();
    plain.extend(sample_field(&[0x08, 7, 0x10, 1, 0x10, 8]));
    let read = |bytes: Vec<u8>| {
        load(
            vec![Source::from_bytes("g.prof", bytes)],
            &LoadOptions::default(),
        )
        .unwrap()
    };
    assert!(samples::walk_in_order(&with_group, &mut |_| {}).is_err());
    assert_eq!(shown(&read(with_group)), shown(&read(plain)));
}

#[test]
fn a_cpu_profile_is_refused_clearly() {
    let p = pprof::Profile {
        sample_type: vec![pprof::ValueType { r#type: 1, unit: 2 }],
        string_table: vec![b"".to_vec(), b"cpu".to_vec(), b"nanoseconds".to_vec()],
        ..Default::default()
    };
    let source = Source::from_bytes("cpu.prof", p.encode_to_vec());
    let err = load(vec![source], &LoadOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cpu.prof: pprof profile has no `space` sample type, so it is not a device memory \
         profile (sample types: cpu/nanoseconds)"
    );
}

/// The warnings' messages, in order.
fn warnings(profile: &Profile) -> Vec<&str> {
    profile
        .warnings
        .iter()
        .map(|w| w.message.as_str())
        .collect()
}

/// A profile of samples of `(allocations count, space bytes)` each, with
/// no stack.
fn counted(samples: &[(i64, i64)]) -> Vec<u8> {
    let strings: Vec<Vec<u8>> = [&b""[..], b"allocations", b"count", b"space", b"bytes"]
        .iter()
        .map(|s| s.to_vec())
        .collect();
    pprof::Profile {
        sample_type: vec![
            pprof::ValueType { r#type: 1, unit: 2 },
            pprof::ValueType { r#type: 3, unit: 4 },
        ],
        sample: samples
            .iter()
            .map(|&(count, bytes)| pprof::Sample {
                location_id: vec![],
                value: vec![count, bytes],
                label: vec![],
            })
            .collect(),
        string_table: strings,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Sizes whose sum does not fit in 64 bits give capped figures and a
/// warning, never a wrapped peak (three buffers of 2^63 - 1 bytes once
/// reported a peak of 2^63 - 3).
#[test]
fn sizes_past_64_bits_are_capped_with_a_warning() {
    // The warning is `memtool_core::load`'s, after the reader.
    let profile = crate::load(
        vec![Source::from_bytes(
            "huge.prof",
            counted(&[(1, i64::MAX); 3]),
        )],
        &LoadOptions::default(),
    )
    .unwrap();
    let memory = &profile.memories[0];
    let peak = crate::analysis::replay::peak(memory).unwrap();
    assert_eq!(peak.bytes, u64::MAX);
    assert!(
        profile
            .warnings
            .iter()
            .any(|w| w.message.contains("add up to more than 16 EiB")),
        "{:?}",
        profile.warnings
    );
}

/// A sample of more buffers than an allocation counts (2^32 - 1) is
/// counted as that many, with a warning; the others as they are.
#[test]
fn counts_past_32_bits_are_capped_with_a_warning() {
    let profile = load(
        vec![Source::from_bytes(
            "many.prof",
            counted(&[(1 << 33, 64), (5, 64)]),
        )],
        &LoadOptions::default(),
    )
    .unwrap();
    let counts: Vec<u32> = profile.memories[0]
        .allocations
        .iter()
        .map(|a| a.count)
        .collect();
    assert_eq!(counts, [u32::MAX, 5]);
    let messages = warnings(&profile);
    assert_eq!(
        messages,
        [
            "2 samples have no call stack (tracebacks were off); shown as an empty stack",
            "1 buffer samples count more than 4,294,967,295 buffers; counted as that many",
        ]
    );
}

/// A sample's location ids, values and labels, owned.
type OwnedSample = (Vec<u64>, Vec<i64>, Vec<(i64, i64)>);

/// Every sample `walk` passes on, as owned lists, and how it ended.
fn walked(bytes: &[u8], how: Walk) -> (Vec<OwnedSample>, Result<usize, ()>) {
    let mut seen = Vec::new();
    let end = samples::walk(bytes, how, &mut |s| {
        seen.push((s.location_id.to_vec(), s.value.to_vec(), s.label.to_vec()))
    });
    (seen, end)
}

/// Walked ahead in batches of any size, the samples are those walked in
/// order, in order, and so is the end: on the whole profile, on every
/// truncation of it (a sample cut short ends the walk where it is) and
/// with a damaged sample among good ones.
#[test]
fn samples_walked_ahead_are_those_walked_in_order() {
    let mut bytes = profile();
    for i in 0..50u8 {
        bytes.extend(sample_field(&[
            0x08, 7, 0x10, 1, 0x10, i, 0x1a, 4, 0x08, 8, 0x10, 9,
        ]));
    }
    let in_order = walked(&bytes, Walk::InOrder);
    assert_eq!(in_order.1, Ok(in_order.0.len()));
    assert!(in_order.0.len() > 50, "{}", in_order.0.len());
    for batch_bytes in [1, 7, 30, 200, 4096] {
        let ahead = Walk::Ahead { batch_bytes };
        assert_eq!(
            walked(&bytes, ahead),
            in_order,
            "batches of {batch_bytes} bytes"
        );
        for cut in (0..bytes.len()).step_by(13) {
            assert_eq!(
                walked(&bytes[..cut], ahead),
                walked(&bytes[..cut], Walk::InOrder),
                "batches of {batch_bytes} bytes, cut at {cut}"
            );
        }
    }
    // A sample whose location ids are a fixed64: prost refuses it.
    let mut damaged = bytes.clone();
    damaged.extend(sample_field(&[0x09, 1, 2, 3, 4, 5, 6, 7, 8]));
    damaged.extend(sample_field(&[0x08, 7, 0x10, 1, 0x10, 2]));
    let in_order = walked(&damaged, Walk::InOrder);
    assert_eq!(in_order.1, Err(()));
    assert_eq!(walked(&damaged, Walk::Ahead { batch_bytes: 64 }), in_order);
}
