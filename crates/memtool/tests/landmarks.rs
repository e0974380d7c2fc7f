//! `summary`'s landmarks (`landmarks[]`) on PyTorch snapshots of training
//! loops: the repo's captures (crates/memtool/tests/data/categories/, CNN and
//! transformer, AdamW and SGD, with and without activation checkpointing)
//! and the shared `magma27_memory_snapshot.pickle` and
//! `torch_cpu_transformer.snapshot.pickle`. The figures stated here are
//! `scripts/landmarks_reference.py`'s, worked out from each pickle with the
//! standard library alone: every landmark's kind, step, start and end
//! (trace positions, or `time_us` where the trace has times) and bytes.

mod common;

use std::path::Path;

use common::{json, shared_fixture};

/// (kind, step, start, end, bytes); `end` is left unchecked where `None`.
type Expected = (&'static str, Option<i64>, i64, Option<i64>, u64);

/// memtool's landmarks of the file's one memory equal `expected` (the
/// largest allocation: the first of memtool's three), it has no others of
/// those kinds, and every step names its forward, loss and backward spans
/// (and its optimizer step, where the loop ran one), a cliff after the loss,
/// and — with activation checkpointing, and only then — recompute waves;
/// the optimizer's state is made in the first step where `state_made`.
fn check(path: &Path, checkpointed: bool, state_made: bool, expected: &[Expected]) {
    let doc = json(&["summary", path.to_str().unwrap()]);
    let memories = doc["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1);
    let landmarks = memories[0]["landmarks"].as_array().unwrap();
    let got: Vec<Expected> = landmarks
        .iter()
        .map(|l| {
            (
                kind_name(l["kind"].as_str().unwrap()),
                l["step"].as_i64(),
                l["start"].as_i64().unwrap(),
                l["end"].as_i64(),
                l["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    for e in expected {
        let found = got.iter().any(|g| {
            (g.0, g.1, g.2, g.4) == (e.0, e.1, e.2, e.4) && e.3.is_none_or(|end| g.3 == Some(end))
        });
        assert!(found, "{}: expected {e:?} among {got:#?}", path.display());
    }
    // The largest allocation is memtool's first; others of the kinds the
    // reference lists are all expected.
    let largest = got.iter().find(|g| g.0 == "largest_allocation").unwrap();
    let want = expected
        .iter()
        .find(|e| e.0 == "largest_allocation")
        .unwrap();
    assert_eq!((largest.2, largest.3, largest.4), (want.2, want.3, want.4));
    for g in got.iter().filter(|g| g.0 != "largest_allocation") {
        assert!(
            expected
                .iter()
                .any(|e| (e.0, e.1, e.2, e.4) == (g.0, g.1, g.2, g.4)),
            "{}: unexpected {g:?}",
            path.display()
        );
    }
    let steps: Vec<i64> = got
        .iter()
        .filter(|g| g.0 == "step")
        .filter_map(|g| g.1)
        .collect();
    assert!(!steps.is_empty());
    let optimizer = got.iter().any(|g| g.0 == "optimizer");
    for step in &steps {
        let has = |kind: &str| got.iter().any(|g| g.0 == kind && g.1 == Some(*step));
        for kind in ["forward", "loss", "backward"] {
            assert!(has(kind), "{}: step {step} has no {kind}", path.display());
        }
        assert_eq!(has("optimizer"), optimizer, "step {step}");
        assert_eq!(has("recompute"), checkpointed, "step {step}");
        assert!(
            landmarks.iter().any(|l| l["kind"] == "cliff"
                && l["step"] == *step
                && l["label"]
                    .as_str()
                    .unwrap()
                    .starts_with("cliff after the loss")),
            "{}: step {step} has no cliff after the loss",
            path.display()
        );
    }
    let state: Vec<_> = landmarks
        .iter()
        .filter(|l| l["kind"] == "optimizer_state")
        .collect();
    assert_eq!(state.len(), usize::from(state_made), "{}", path.display());
    if let Some(state) = state.first() {
        assert_eq!(state["step"], steps[0]);
    }
}

/// The kind as a `'static` name, so rows compare with the stated ones.
fn kind_name(kind: &str) -> &'static str {
    [
        "step",
        "forward",
        "loss",
        "backward",
        "optimizer",
        "zero_grad",
        "largest_allocation",
        "spike",
        "cliff",
        "recompute",
        "optimizer_state",
        "floor",
    ]
    .into_iter()
    .find(|k| *k == kind)
    .unwrap_or_else(|| panic!("unknown landmark kind {kind}"))
}

#[test]
fn cnn_adamw() {
    check(
        &common::repo().join("crates/memtool/tests/data/categories/cnn_adamw.snapshot.pickle.gz"),
        false,
        true,
        &[
            ("floor", None, 1463, None, 164976),
            ("step", Some(0), 0, Some(761), 2482152),
            ("forward", Some(0), 0, Some(33), 1956216),
            ("loss", Some(0), 34, Some(36), 1695744),
            ("backward", Some(0), 37, Some(103), 2482152),
            ("optimizer", Some(0), 108, Some(726), 224296),
            ("spike", Some(0), 78, Some(81), 524288),
            ("cliff", Some(0), 71, Some(77), 524544),
            ("cliff", Some(0), 88, Some(90), 1048576),
            ("cliff", Some(0), 95, Some(101), 1048704),
            ("step", Some(1), 762, Some(1463), 2526304),
            ("forward", Some(1), 762, Some(795), 2000368),
            ("loss", Some(1), 796, Some(798), 1739896),
            ("backward", Some(1), 799, Some(865), 2526304),
            ("optimizer", Some(1), 870, Some(1428), 224296),
            ("spike", Some(1), 840, Some(843), 524288),
            ("cliff", Some(1), 833, Some(839), 524544),
            ("cliff", Some(1), 850, Some(852), 1048576),
            ("cliff", Some(1), 857, Some(863), 1048704),
            ("step", Some(2), 1464, Some(2165), 2526304),
            ("forward", Some(2), 1464, Some(1497), 2000368),
            ("loss", Some(2), 1498, Some(1500), 1739896),
            ("backward", Some(2), 1501, Some(1567), 2526304),
            ("optimizer", Some(2), 1572, Some(2130), 224296),
            ("spike", Some(2), 1542, Some(1545), 524288),
            ("cliff", Some(2), 1535, Some(1541), 524544),
            ("cliff", Some(2), 1552, Some(1554), 1048576),
            ("cliff", Some(2), 1559, Some(1565), 1048704),
            ("optimizer_state", Some(0), 171, Some(711), 44152),
            ("largest_allocation", None, 0, Some(97), 524288),
        ],
    );
}

#[test]
fn cnn_sgd_momentum() {
    check(
        &common::repo()
            .join("crates/memtool/tests/data/categories/cnn_sgd_momentum.snapshot.pickle.gz"),
        false,
        true,
        &[
            ("floor", None, 453, None, 142880),
            ("step", Some(0), 0, Some(171), 2482152),
            ("forward", Some(0), 0, Some(33), 1956216),
            ("loss", Some(0), 34, Some(36), 1695744),
            ("backward", Some(0), 37, Some(103), 2482152),
            ("optimizer", Some(0), 108, Some(144), 165260),
            ("spike", Some(0), 78, Some(81), 524288),
            ("cliff", Some(0), 71, Some(77), 524544),
            ("cliff", Some(0), 88, Some(90), 1048576),
            ("cliff", Some(0), 95, Some(101), 1048704),
            ("step", Some(1), 172, Some(453), 2504208),
            ("forward", Some(1), 172, Some(205), 1978272),
            ("loss", Some(1), 206, Some(208), 1717800),
            ("backward", Some(1), 209, Some(275), 2504208),
            ("optimizer", Some(1), 280, Some(426), 165272),
            ("spike", Some(1), 250, Some(253), 524288),
            ("cliff", Some(1), 243, Some(249), 524544),
            ("cliff", Some(1), 260, Some(262), 1048576),
            ("cliff", Some(1), 267, Some(273), 1048704),
            ("step", Some(2), 454, Some(735), 2504208),
            ("forward", Some(2), 454, Some(487), 1978272),
            ("loss", Some(2), 488, Some(490), 1717800),
            ("backward", Some(2), 491, Some(557), 2504208),
            ("optimizer", Some(2), 562, Some(708), 165272),
            ("spike", Some(2), 532, Some(535), 524288),
            ("cliff", Some(2), 525, Some(531), 524544),
            ("cliff", Some(2), 542, Some(544), 1048576),
            ("cliff", Some(2), 549, Some(555), 1048704),
            ("optimizer_state", Some(0), 108, Some(144), 22056),
            ("largest_allocation", None, 0, Some(97), 524288),
        ],
    );
}

#[test]
fn cnn_sgd_momentum_checkpoint() {
    check(
        &common::repo().join(
            "crates/memtool/tests/data/categories/cnn_sgd_momentum_checkpoint.snapshot.pickle.gz",
        ),
        true,
        true,
        &[
            ("floor", None, 513, None, 142880),
            ("step", Some(0), 0, Some(201), 2238568),
            ("forward", Some(0), 0, Some(35), 1169400),
            ("loss", Some(0), 36, Some(38), 646784),
            ("backward", Some(0), 39, Some(133), 2238568),
            ("optimizer", Some(0), 138, Some(174), 165260),
            ("cliff", Some(0), 100, Some(104), 786440),
            ("cliff", Some(0), 118, Some(120), 1048576),
            ("cliff", Some(0), 125, Some(131), 1048704),
            ("recompute", Some(0), 67, Some(74), 786696),
            ("recompute", Some(0), 106, Some(113), 1573000),
            ("step", Some(1), 202, Some(513), 2260624),
            ("forward", Some(1), 202, Some(237), 1191456),
            ("loss", Some(1), 238, Some(240), 668840),
            ("backward", Some(1), 241, Some(335), 2260624),
            ("optimizer", Some(1), 340, Some(486), 165272),
            ("cliff", Some(1), 302, Some(306), 786440),
            ("cliff", Some(1), 320, Some(322), 1048576),
            ("cliff", Some(1), 327, Some(333), 1048704),
            ("recompute", Some(1), 269, Some(276), 786696),
            ("recompute", Some(1), 308, Some(315), 1573000),
            ("step", Some(2), 514, Some(825), 2260624),
            ("forward", Some(2), 514, Some(549), 1191456),
            ("loss", Some(2), 550, Some(552), 668840),
            ("backward", Some(2), 553, Some(647), 2260624),
            ("optimizer", Some(2), 652, Some(798), 165272),
            ("cliff", Some(2), 614, Some(618), 786440),
            ("cliff", Some(2), 632, Some(634), 1048576),
            ("cliff", Some(2), 639, Some(645), 1048704),
            ("recompute", Some(2), 581, Some(588), 786696),
            ("recompute", Some(2), 620, Some(627), 1573000),
            ("optimizer_state", Some(0), 138, Some(174), 22056),
            ("largest_allocation", None, 0, Some(9), 524288),
        ],
    );
}

#[test]
fn transformer_adamw() {
    check(
        &common::repo()
            .join("crates/memtool/tests/data/categories/transformer_adamw.snapshot.pickle.gz"),
        false,
        true,
        &[
            ("floor", None, 4523, None, 1579484),
            ("step", Some(0), 0, Some(2342), 3161560),
            ("forward", Some(0), 0, Some(185), 2393552),
            ("loss", Some(0), 186, Some(188), 2649560),
            ("backward", Some(0), 189, Some(579), 3161560),
            ("optimizer", Some(0), 584, Some(2273), 2617532),
            ("spike", Some(0), 177, Some(216), 834048),
            ("cliff", Some(0), 195, Some(197), 512000),
            ("cliff", Some(0), 202, Some(204), 288768),
            ("cliff", Some(0), 2284, Some(2342), 783780),
            ("step", Some(1), 2343, Some(4523), 4213220),
            ("forward", Some(1), 2343, Some(2528), 3445212),
            ("loss", Some(1), 2529, Some(2531), 3701220),
            ("backward", Some(1), 2532, Some(2922), 4213220),
            ("optimizer", Some(1), 2927, Some(4454), 2617532),
            ("spike", Some(1), 2520, Some(2557), 833536),
            ("cliff", Some(1), 2538, Some(2540), 512000),
            ("cliff", Some(1), 2545, Some(2547), 288768),
            ("cliff", Some(1), 4465, Some(4523), 783780),
            ("step", Some(2), 4524, Some(6704), 4213220),
            ("forward", Some(2), 4524, Some(4709), 3445212),
            ("loss", Some(2), 4710, Some(4712), 3701220),
            ("backward", Some(2), 4713, Some(5103), 4213220),
            ("optimizer", Some(2), 5108, Some(6635), 2617532),
            ("spike", Some(2), 4701, Some(4738), 833536),
            ("cliff", Some(2), 4719, Some(4721), 512000),
            ("cliff", Some(2), 4726, Some(4728), 288768),
            ("cliff", Some(2), 6646, Some(6704), 783780),
            ("optimizer_state", Some(0), 749, Some(2258), 1051660),
            ("largest_allocation", None, 185, Some(2340), 256000),
        ],
    );
}

#[test]
fn transformer_adamw_checkpoint() {
    check(
        &common::repo().join(
            "crates/memtool/tests/data/categories/transformer_adamw_checkpoint.snapshot.pickle.gz",
        ),
        true,
        true,
        &[
            ("floor", None, 5039, None, 1579484),
            ("step", Some(0), 0, Some(2600), 2617532),
            ("forward", Some(0), 0, Some(261), 921040),
            ("loss", Some(0), 262, Some(264), 1138136),
            ("backward", Some(0), 265, Some(837), 1966760),
            ("optimizer", Some(0), 842, Some(2531), 2617532),
            ("spike", Some(0), 2439, Some(2482), 384012),
            ("cliff", Some(0), 271, Some(273), 512000),
            ("cliff", Some(0), 278, Some(280), 288768),
            ("cliff", Some(0), 2542, Some(2600), 783780),
            ("recompute", Some(0), 281, Some(369), 1198668),
            ("recompute", Some(0), 559, Some(647), 1198668),
            ("step", Some(1), 2601, Some(5039), 3018420),
            ("forward", Some(1), 2601, Some(2862), 1972700),
            ("loss", Some(1), 2863, Some(2865), 2189796),
            ("backward", Some(1), 2866, Some(3438), 3018420),
            ("optimizer", Some(1), 3443, Some(4970), 2617532),
            ("spike", Some(1), 3265, Some(3294), 131072),
            ("cliff", Some(1), 2872, Some(2874), 512000),
            ("cliff", Some(1), 2879, Some(2881), 288768),
            ("cliff", Some(1), 4981, Some(5039), 783780),
            ("recompute", Some(1), 2882, Some(2970), 1198668),
            ("recompute", Some(1), 3160, Some(3248), 1198668),
            ("step", Some(2), 5040, Some(7478), 3018420),
            ("forward", Some(2), 5040, Some(5301), 1972700),
            ("loss", Some(2), 5302, Some(5304), 2189796),
            ("backward", Some(2), 5305, Some(5877), 3018420),
            ("optimizer", Some(2), 5882, Some(7409), 2617532),
            ("spike", Some(2), 5704, Some(5733), 131072),
            ("cliff", Some(2), 5311, Some(5313), 512000),
            ("cliff", Some(2), 5318, Some(5320), 288768),
            ("cliff", Some(2), 7420, Some(7478), 783780),
            ("recompute", Some(2), 5321, Some(5409), 1198668),
            ("recompute", Some(2), 5599, Some(5687), 1198668),
            ("optimizer_state", Some(0), 1007, Some(2516), 1051660),
            ("largest_allocation", None, 261, Some(2598), 256000),
        ],
    );
}

#[test]
fn transformer_sgd_momentum() {
    check(
        &common::repo().join(
            "crates/memtool/tests/data/categories/transformer_sgd_momentum.snapshot.pickle.gz",
        ),
        false,
        true,
        &[
            ("floor", None, 1796, None, 1053600),
            ("step", Some(0), 0, Some(749), 3161560),
            ("forward", Some(0), 0, Some(185), 2393552),
            ("loss", Some(0), 186, Some(188), 2649560),
            ("backward", Some(0), 189, Some(579), 3161560),
            ("optimizer", Some(0), 584, Some(688), 1835380),
            ("spike", Some(0), 190, Some(195), 256000),
            ("cliff", Some(0), 195, Some(197), 512000),
            ("cliff", Some(0), 202, Some(204), 288768),
            ("cliff", Some(0), 693, Some(749), 781780),
            ("step", Some(1), 750, Some(1796), 3687336),
            ("forward", Some(1), 750, Some(935), 2919328),
            ("loss", Some(1), 936, Some(938), 3175336),
            ("backward", Some(1), 939, Some(1329), 3687336),
            ("optimizer", Some(1), 1334, Some(1735), 1835392),
            ("spike", Some(1), 936, Some(952), 768000),
            ("cliff", Some(1), 945, Some(947), 512000),
            ("cliff", Some(1), 952, Some(954), 288768),
            ("cliff", Some(1), 1740, Some(1796), 781780),
            ("step", Some(2), 1797, Some(2843), 3687336),
            ("forward", Some(2), 1797, Some(1982), 2919328),
            ("loss", Some(2), 1983, Some(1985), 3175336),
            ("backward", Some(2), 1986, Some(2376), 3687336),
            ("optimizer", Some(2), 2381, Some(2782), 1835392),
            ("spike", Some(2), 1983, Some(1999), 768000),
            ("cliff", Some(2), 1992, Some(1994), 512000),
            ("cliff", Some(2), 1999, Some(2001), 288768),
            ("cliff", Some(2), 2787, Some(2843), 781780),
            ("optimizer_state", Some(0), 584, Some(688), 525776),
            ("largest_allocation", None, 185, Some(747), 256000),
        ],
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn magma27() {
    check(
        &shared_fixture("torch/magma27_memory_snapshot.pickle"),
        false,
        // A benchmark of forward and backward: no optimizer step.
        false,
        &[
            ("floor", None, 1776479641333549, None, 1373919236),
            (
                "step",
                Some(0),
                1776479641085368,
                Some(1776479641333549),
                13923997700,
            ),
            (
                "forward",
                Some(0),
                1776479641085368,
                Some(1776479641110196),
                13268473860,
            ),
            (
                "loss",
                Some(0),
                1776479641223240,
                Some(1776479641223530),
                13923997700,
            ),
            (
                "backward",
                Some(0),
                1776479641228669,
                Some(1776479641333336),
                13923964936,
            ),
            (
                "spike",
                Some(0),
                1776479641223240,
                Some(1776479641229615),
                983203840,
            ),
            (
                "cliff",
                Some(0),
                1776479641229498,
                Some(1776479641229520),
                655392768,
            ),
            (
                "largest_allocation",
                None,
                1776479641110196,
                Some(1776479641333549),
                327680000,
            ),
        ],
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn torch_cpu_transformer() {
    check(
        &shared_fixture("torch/torch_cpu_transformer.snapshot.pickle"),
        false,
        // Adam's state was made before the recording (108 frees of
        // allocations made before it, every step as high as the first);
        // the profiler records its in-place updates as new allocations.
        false,
        &[
            ("floor", None, 3875, None, 7846732),
            ("step", Some(0), 0, Some(1937), 32045908),
            ("forward", Some(0), 0, Some(185), 25901900),
            ("loss", Some(0), 186, Some(188), 27949908),
            ("backward", Some(0), 189, Some(579), 32045908),
            ("optimizer", Some(0), 584, Some(1868), 13533436),
            ("spike", Some(0), 178, Some(204), 6406144),
            ("cliff", Some(0), 195, Some(197), 4096000),
            ("cliff", Some(0), 202, Some(204), 2310144),
            ("cliff", Some(0), 1879, Some(1937), 4666180),
            ("step", Some(1), 1938, Some(3875), 32045908),
            ("forward", Some(1), 1938, Some(2123), 25901900),
            ("loss", Some(1), 2124, Some(2126), 27949908),
            ("backward", Some(1), 2127, Some(2517), 32045908),
            ("optimizer", Some(1), 2522, Some(3806), 13533436),
            ("spike", Some(1), 2116, Some(2142), 6406144),
            ("cliff", Some(1), 2133, Some(2135), 4096000),
            ("cliff", Some(1), 2140, Some(2142), 2310144),
            ("cliff", Some(1), 3817, Some(3875), 4666180),
            ("step", Some(2), 3876, Some(5759), 32045908),
            ("forward", Some(2), 3876, Some(4061), 25901900),
            ("loss", Some(2), 4062, Some(4064), 27949908),
            ("backward", Some(2), 4065, Some(4455), 32045908),
            ("optimizer", Some(2), 4460, Some(5744), 13533436),
            ("spike", Some(2), 4054, Some(4080), 6406144),
            ("cliff", Some(2), 4071, Some(4073), 4096000),
            ("cliff", Some(2), 4078, Some(4080), 2310144),
            ("cliff", Some(2), 4110, Some(4112), 2097152),
            ("largest_allocation", None, 185, Some(1881), 2048000),
        ],
    );
}

/// Native frames lead every stack of a snapshot that records C++ frames
/// (`torch::unwind::unwind()` first): recompute waves are told by Python
/// frames alone, so a loop without checkpointing shows none. None of the
/// shared snapshots checkpoints activations (the reference finds no wave).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn no_recompute_waves_without_checkpointing() {
    for name in [
        "bcrafton_memory_snapshot.pickle",
        "magma27_memory_snapshot.pickle",
        "silmont2000_mem_snapshot.pickle",
        "silmont2000_memory_forward_bf16_128.pickle",
        "silmont2000_memory_forward_fp32_128.pickle",
        "torch_cpu_transformer.snapshot.pickle",
        "transformer_nuggets_mini_snapshot.pickle",
    ] {
        let path = shared_fixture(&format!("torch/{name}"));
        let doc = json(&["summary", path.to_str().unwrap()]);
        for m in doc["memories"].as_array().unwrap() {
            let kinds: Vec<&str> = m["landmarks"]
                .as_array()
                .map(|ls| ls.iter().filter_map(|l| l["kind"].as_str()).collect())
                .unwrap_or_default();
            assert!(kinds.contains(&"largest_allocation"), "{name}: {kinds:?}");
            assert!(!kinds.contains(&"recompute"), "{name}: {kinds:?}");
        }
    }
}

/// `summary`'s table says what the timeline shows, a row per landmark with
/// its position and bytes (the figures above).
#[test]
fn the_table_says_what_the_timeline_shows() {
    let path = common::repo().join(
        "crates/memtool/tests/data/categories/transformer_adamw_checkpoint.snapshot.pickle.gz",
    );
    let out = common::memtool()
        .args(["summary", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let section = text
        .split("What the timeline shows — device:0")
        .nth(1)
        .expect("the section");
    let row = |name: &str| {
        section
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no row {name} in {section}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(row("step 0").starts_with("step 0 #0 2.50 MiB forward #0"));
    assert!(row("step 1").starts_with("step 1 #2601 2.88 MiB"));
    assert!(row("cliff after the loss").starts_with("cliff after the loss #271 500.00 KiB"));
    assert!(row("optimizer state made in step 0")
        .starts_with("optimizer state made in step 0 #1007 1.00 MiB"));
    assert!(row("constant floor").starts_with("constant floor #5039 1.51 MiB"));
    // Two waves of 1,198,668 B each.
    assert!(row("recompute in step 0").starts_with("recompute in step 0 #281 2.29 MiB 2 waves"));
}
