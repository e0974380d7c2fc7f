//! `memtool oom LOG` on the XLA out-of-memory reports of `tests/xla/`
//! (written by `scripts/make_xla_reports.py` in XLA's format): the
//! post-mortem's figures are the report's own, and every listed shape's
//! padded and unpadded sizes — computed by memtool from the layout — are
//! the ones worked out here by hand from the tiles.

mod common;

use serde_json::Value;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn oom(name: &str, extra: &[&str]) -> Vec<Value> {
    let path = common::repo_fixture(&format!("xla/{name}"))
        .display()
        .to_string();
    let mut args = vec!["oom", path.as_str()];
    args.extend_from_slice(extra);
    let doc = common::json(&args);
    assert_eq!(doc["schema"], "memtool/oom/v1");
    assert_eq!(doc["inputs"][0]["format"], "xla_report");
    doc["oom"].as_array().unwrap().clone()
}

/// The size a report prints (`2.87G`) after `marker` on the line that
/// holds it, read here on its own: (value in bytes, half a unit of its last
/// digit).
fn printed(text: &str, marker: &str) -> (f64, f64) {
    let at = text.find(marker).unwrap_or_else(|| panic!("{marker}")) + marker.len();
    let rest = &text[at..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap();
    let number = &rest[..digits];
    let unit = &rest[digits..digits + 1];
    let scale = match unit {
        "K" => 1024.0,
        "M" => MIB as f64,
        "G" => GIB as f64,
        "B" => 1.0,
        other => panic!("{other}"),
    };
    let decimals = number.split_once('.').map_or(0, |(_, f)| f.len());
    (
        number.parse::<f64>().unwrap() * scale,
        0.5 * 10f64.powi(-(decimals as i32)) * scale,
    )
}

fn prints_as(bytes: &Value, (value, half_unit): (f64, f64)) {
    let bytes = bytes.as_u64().unwrap() as f64;
    assert!(
        (bytes - value).abs() <= half_unit + 1.0,
        "{bytes} vs {value}"
    );
}

#[test]
fn the_tpu_compile_time_report_gives_its_own_figures() {
    let text = std::fs::read_to_string(common::repo_fixture("xla/tpu_compile_oom.log")).unwrap();
    let all = oom("tpu_compile_oom.log", &[]);
    assert_eq!(all.len(), 2);
    let hbm = &all[0];
    assert_eq!(hbm["source"], "xla_report");
    assert_eq!(hbm["report_kind"], "compile_time");
    assert_eq!(hbm["verdict"], "capacity");
    assert_eq!(hbm["capacity_bytes"], 16 * GIB);
    assert_eq!(hbm["capacity_source"], "profile");
    prints_as(&hbm["request_bytes"], printed(&text, "hbm. Used "));
    prints_as(
        &hbm["shortfall_bytes"],
        printed(&text, "Exceeded hbm capacity by "),
    );
    let usage: Vec<(&str, Option<u64>)> = hbm["usage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["name"].as_str().unwrap(), u["bytes"].as_u64()))
        .collect();
    assert_eq!(
        usage,
        [
            ("reserved", Some(528 * MIB)),
            ("program", Some((18.36 * GIB as f64).round() as u64)),
            ("arguments", None),
            ("output", None)
        ]
    );
    // The allocations, sizes worked out by hand from each first tile.
    let expected: [(u64, u64); 4] = [
        // s32[29360128,10]{1,0:T(8,128)}: 10 → 128.
        (29_360_128 * 128 * 4, 29_360_128 * 10 * 4),
        // f32[4,128,128,9,18]{4,3,0,2,1:T(8,128)}: 9 → 16, 18 → 128.
        (4 * 128 * 128 * 16 * 128 * 4, 4 * 128 * 128 * 9 * 18 * 4),
        // bf16[4,512,512,64]{3,0,2,1:T(4,128)(2,1)}: 64 → 128.
        (4 * 512 * 512 * 128 * 2, 4 * 512 * 512 * 64 * 2),
        // f32[4,256,256,256]{3,0,2,1:T(4,128)}: no padding.
        (4 * 256 * 256 * 256 * 4, 4 * 256 * 256 * 256 * 4),
    ];
    let allocations = hbm["allocations"].as_array().unwrap();
    for (a, (padded, unpadded)) in allocations.iter().zip(expected) {
        assert_eq!(a["bytes"], padded, "{a}");
        assert_eq!(a["unpadded_bytes"], unpadded, "{a}");
        assert_eq!(a["padding_bytes"], padded - unpadded, "{a}");
        assert_eq!(a["agrees_with_report"], true, "{a}");
    }
    let listed_padding: u64 = expected.iter().map(|(p, u)| p - u).sum();
    assert_eq!(hbm["padding_waste_bytes"], listed_padding);
    assert_eq!(
        allocations[0]["layout"].as_str().unwrap().split(':').next(),
        Some("tiles of 8×128 pad the minor dimensions (dim 0")
    );
    // The padding alone is more than the excess: the program would fit
    // without it, and removing the labels' one-hot alone covers the excess.
    assert!(hbm["explanation"]
        .as_str()
        .unwrap()
        .ends_with("and without it the program would fit"));
    assert_eq!(hbm["remove_to_fit"][0]["key"], "jit(train_step)/labels");
    assert_eq!(hbm["remove_to_fit"].as_array().unwrap().len(), 1);
    assert_eq!(hbm["buffers"][0]["source"], Value::Null);
    assert_eq!(hbm["buffers"][1]["source"], "train.py:41");
    // The vmem report: the HLO temp's own padded and unpadded sizes,
    // rounded to 10 KiB, say no more than the listed allocations' exact
    // padding: 1000 → 1024 floats of 64 rows, 3000 → 3072 bf16 of 512.
    let vmem = &all[1];
    assert_eq!(vmem["space"], "vmem");
    assert_eq!(vmem["capacity_bytes"], 16 * MIB);
    assert_eq!(vmem["padding_waste_bytes"], 64 * 24 * 4 + 512 * 72 * 2);
    let (padded, half) = printed(&text, "Padded (");
    let (unpadded, _) = printed(&text, "Unpadded (");
    assert!(((padded - unpadded) - (64 * 24 * 4 + 512 * 72 * 2) as f64).abs() <= 2.0 * half);
}

#[test]
fn the_one_line_report_is_read_once_with_its_shape_explained() {
    let all = oom("tpu_allocation_oom.log", &[]);
    assert_eq!(all.len(), 2);
    let hbm = &all[0];
    assert_eq!(hbm["report_kind"], "allocation");
    assert_eq!(hbm["repeated_at_lines"], serde_json::json!([8]));
    assert_eq!(hbm["request_bytes"], 107_374_182_400u64);
    assert_eq!(hbm["capacity_bytes"], 17_179_869_184u64);
    assert_eq!(hbm["shortfall_bytes"], 107_374_182_400u64 - 17_179_869_184);
    let a = &hbm["allocations"][0];
    assert_eq!(a["allocation"], "#allocation7");
    // u8 packed 4 to a 32-bit word, in 8×128 tiles that 327680 fills.
    assert_eq!(a["bytes"], 327_680u64 * 327_680);
    assert_eq!(a["padding_bytes"], 0);
    assert_eq!(a["agrees_with_report"], true);
    assert!(a["layout"]
        .as_str()
        .unwrap()
        .contains("4 u8 elements of adjacent rows packed in one 32-bit word"));
    let fit: Vec<&str> = hbm["would_fit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(fit.len(), 1);
    assert!(
        fit[0].starts_with("split across at least 7 devices"),
        "{fit:?}"
    );
    // Scoped vmem of a kernel: smaller blocks, not more devices.
    assert!(all[1]["would_fit"][0]
        .as_str()
        .unwrap()
        .starts_with("smaller blocks: vmem holds 64.00 MiB"));
}

#[test]
fn the_gpu_failure_weighs_the_request_against_the_allocators_limit() {
    let all = oom("gpu_bfc_oom.log", &[]);
    assert_eq!(all.len(), 1);
    let gpu = &all[0];
    assert_eq!(gpu["report_kind"], "gpu_allocator");
    assert_eq!(gpu["kind"], "allocator");
    assert_eq!(gpu["request_bytes"], 214_748_364_800u64);
    assert_eq!(gpu["capacity_bytes"], 15_753_315_328u64);
    assert_eq!(gpu["verdict"], "capacity");
    let in_use = gpu["bfc"]["in_use_bytes"].as_u64().unwrap();
    assert_eq!(
        gpu["shortfall_bytes"].as_u64().unwrap(),
        in_use + 214_748_364_800 - 15_753_315_328
    );
    assert!(gpu["explanation"]
        .as_str()
        .unwrap()
        .contains("the 200.00 GiB requested alone is more than the 14.67 GiB"));
    // The bare line says the device's size is unknown, until given.
    let bare = oom("gpu_oom_line.txt", &[]);
    assert_eq!(bare[0]["capacity_source"], "unknown");
    let given = oom("gpu_oom_line.txt", &["--capacity", "80GiB"]);
    assert_eq!(given[0]["capacity_source"], "given");
    assert_eq!(given[0]["shortfall_bytes"], 120 * GIB);
}

#[test]
fn a_report_is_read_from_standard_input() {
    let text = std::fs::read(common::repo_fixture("xla/tpu_allocation_oom.log")).unwrap();
    let out = common::memtool()
        .args(["oom", "-", "--format", "json"])
        .write_stdin(text)
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["oom"][0]["request_bytes"], 107_374_182_400u64);
}

#[test]
fn text_without_a_report_is_no_input() {
    let dir = std::env::temp_dir().join(format!("memtool-xla-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notes.log");
    std::fs::write(&path, "I1126 compiler.cc:1] all fine\nStep 1; loss 0.5\n").unwrap();
    let stderr = common::fails(&["oom", path.to_str().unwrap()], 2);
    assert!(stderr.contains("not a memory profile"), "{stderr}");
    assert!(stderr.contains("XLA out-of-memory report"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A log has no timeline: `peak`, `leaks` and `frag` say so in one line and
/// fail as for any input with no memory (exit 2), pointing at `oom`.
#[test]
fn commands_that_need_a_timeline_refuse_a_log_in_one_line() {
    let path = common::repo_fixture("xla/tpu_compile_oom.log");
    let path = path.to_str().unwrap();
    for command in ["peak", "leaks", "frag"] {
        let stderr = common::fails(&[command, path], 2);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("no memory timeline for `{command}`")),
            "{stderr}"
        );
        assert!(stderr.contains("2 XLA out-of-memory reports"), "{stderr}");
        assert!(
            stderr.contains(&format!("`memtool oom {path}`")),
            "{stderr}"
        );
    }
}

/// The note on a log fits every command that reads it: it says what a log
/// holds and names no command (under `oom` it pointed at `oom` itself).
#[test]
fn the_note_on_a_log_fits_every_command() {
    let path = common::repo_fixture("xla/tpu_allocation_oom.log");
    let path = path.to_str().unwrap();
    for command in ["oom", "summary", "render"] {
        let out = common::memtool().args([command, path]).output().unwrap();
        assert!(out.status.success(), "{command}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            stderr.trim_end(),
            format!(
                "note: {path}: 2 XLA out-of-memory reports and no memory timeline: a log \
                 tells each report's post-mortem, not memory over time"
            ),
            "{command}"
        );
    }
}

/// The capacity of a report read from a log is labelled as the report's,
/// a given one as given.
#[test]
fn the_capacity_of_a_log_is_the_reports() {
    let path = common::repo_fixture("xla/tpu_compile_oom.log");
    let path = path.to_str().unwrap();
    let text = common::stdout_in_repo(&["oom", path], &[0]);
    assert!(text.contains("capacity (from the report)"), "{text}");
    assert!(!text.contains("capacity (from the profile)"), "{text}");
    let given = common::stdout_in_repo(&["oom", path, "--capacity", "32GiB"], &[0]);
    assert!(given.contains("capacity (given)"), "{given}");
}
