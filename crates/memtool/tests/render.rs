//! `memtool render`: the HTML report and collapsed stacks, checked against the
//! reference numbers in `../shared/fixtures/pprof/expected` (an independent
//! protobuf decoder, `reference.json`). The page's data is read back from its
//! embedded JSON, the way its script reads it.

mod common;

use common::{fails, memtool, shared_fixture};
use serde_json::Value;

fn reference() -> Value {
    let path = shared_fixture("pprof/expected/reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn path(name: &str) -> String {
    shared_fixture(&format!("pprof/{name}"))
        .display()
        .to_string()
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-render-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `memtool render ARGS` to stdout and returns the page.
fn render(args: &[&str]) -> String {
    let out = memtool().arg("render").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "memtool render {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON the page's script draws from.
fn data(page: &str) -> Value {
    let tag = "<script type=\"application/json\" id=\"memtool-data\">";
    let start = page.find(tag).expect("data element") + tag.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).expect("valid JSON")
}

/// Bytes under the outermost call-tree nodes whose frame starts with
/// `name_prefix` (one node per call line, as memtool labels frames).
fn bytes_under(node: &Value, name_prefix: &str) -> u64 {
    if node["n"]
        .as_str()
        .is_some_and(|n| n.starts_with(name_prefix))
    {
        return node["v"].as_u64().unwrap();
    }
    node["c"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| bytes_under(c, name_prefix))
        .sum()
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_snapshot_renders_its_peak_and_call_tree() {
    let reference = reference();
    let want = &reference["memory.prof"];
    let page = render(&[&path("memory.prof")]);
    assert!(page.starts_with("<!DOCTYPE html>"));
    let d = data(&page);
    let m = &d["memories"][0];
    assert_eq!(m["peak"]["bytes"], want["devices"]["cpu:0"]["bytes"]);
    assert_eq!(m["peak"]["label"], "memory.prof");
    assert_eq!(m["timeline"]["hi"][0], want["devices"]["cpu:0"]["bytes"]);
    assert_eq!(m["flame"]["v"], want["buffer_bytes"]);
    // func2's subtree holds every stack through func2 (pprof's `cum`).
    let through_func2: u64 = want["top_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["stack"].as_str().unwrap().contains("func2 "))
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(through_func2, 80_000_000);
    assert_eq!(bytes_under(&m["flame"], "func2 "), through_func2);
    assert!(page.contains(&format!(
        "({} bytes, {} buffers)",
        want["devices"]["cpu:0"]["bytes"], want["devices"]["cpu:0"]["buffers"]
    )));
    // pprof has no addresses: no address view.
    assert!(m.get("addr").is_none());
    assert!(!page.contains("Addresses over time"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_series_is_one_timeline_with_its_leak() {
    let reference = reference();
    let files: Vec<String> = (1..=9).map(|i| path(&format!("memory{i}.prof"))).collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let page = render(&args);
    let d = data(&page);
    let m = &d["memories"][0];
    let want: Vec<u64> = (1..=9)
        .map(|i| {
            reference[format!("memory{i}.prof")]["devices"]["cpu:0"]["bytes"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let hi: Vec<u64> = serde_json::from_value(m["timeline"]["hi"].clone()).unwrap();
    assert_eq!(hi, want);
    assert_eq!(m["labels"][8], "memory9.prof");
    assert_eq!(m["peak"]["label"], "memory9.prof");
    // The one growing stack accounts for the whole growth of the series.
    let line: Vec<u64> = serde_json::from_value(m["leaks"]["lines"][0]["v"].clone()).unwrap();
    assert_eq!(line.len(), 9);
    assert_eq!(line[8] - line[0], want[8] - want[0]);
    assert!(page.contains("<dt>leaks</dt><dd>steady growth: +1.68 MiB over 9 snapshots"));
    assert!(line[0] > 0 && line[8] > line[0]);
    // A leak's lines are growth: drawn alone, on their own scale.
    assert_eq!(m["leaks"]["handover"], false);
}

/// A snapshot whose optimizer state grew while blocks from before the
/// recording were freed as much (the replay's total: 2.85 GiB at the first
/// point and at the last) says "no net growth": its chart draws the flat
/// total with the two stacks that rose, so the picture says what the
/// verdict says, not growth beside "no net growth".
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_handover_is_drawn_with_the_total_that_did_not_grow() {
    let file = shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let page = render(&[file.to_str().unwrap()]);
    let d = data(&page);
    let m = &d["memories"][0];
    let total: Vec<u64> = serde_json::from_value(m["leaks"]["total"].clone()).unwrap();
    assert_eq!(
        (total[0], total[total.len() - 1]),
        (3_064_418_304, 3_064_418_304)
    );
    assert!(page.contains("<dt>leaks</dt><dd>no net growth: 2.85 GiB live"));
    let lines = m["leaks"]["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    for line in lines {
        let v: Vec<u64> = serde_json::from_value(line["v"].clone()).unwrap();
        assert_eq!((v[0], v[v.len() - 1]), (0, 761_840_640));
    }
    assert_eq!(m["leaks"]["handover"], true);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn two_files_are_compared() {
    let reference = reference();
    let base = reference["memory1.prof"]["buffer_bytes"].as_u64().unwrap();
    let new = reference["memory9.prof"]["buffer_bytes"].as_u64().unwrap();
    let page = render(&[&path("memory1.prof"), &path("memory9.prof")]);
    let d = data(&page);
    assert_eq!(d["diff"]["v"].as_u64(), Some(new));
    assert_eq!(d["diff"]["b"].as_u64(), Some(base));
    assert_eq!(d["memories"].as_array().unwrap().len(), 2);
    assert!(page.contains("What changed (new vs base)"));
    // 48,040,000 → 49,800,000 bytes: go tool pprof -diff_base shows 1.68MB (MiB).
    assert!(page.contains("45.81 MiB → 47.49 MiB (+1.68 MiB, +3.7%)"));
    // --series reads the same two files as one timeline instead.
    let series = data(&render(&[
        "--series",
        &path("memory1.prof"),
        &path("memory9.prof"),
    ]));
    assert!(series.get("diff").is_none());
    assert_eq!(
        series["memories"][0]["timeline"]["hi"],
        serde_json::json!([base, new])
    );
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_device_gets_a_section() {
    let reference = reference();
    let page = render(&[&path("sharded.prof")]);
    let d = data(&page);
    let devices = reference["sharded.prof"]["devices"].as_object().unwrap();
    // A contents list links every device's section.
    assert_eq!(page.matches("<li><a href=\"#m0-").count(), devices.len());
    assert!(page.contains("cpu:3 (snapshots)</a>: peak 2.75 MiB at sharded.prof"));
    let memories = d["memories"].as_array().unwrap();
    assert_eq!(memories.len(), devices.len());
    let mut peaks: Vec<u64> = memories
        .iter()
        .map(|m| m["peak"]["bytes"].as_u64().unwrap())
        .collect();
    let mut want: Vec<u64> = devices
        .values()
        .map(|v| v["bytes"].as_u64().unwrap())
        .collect();
    peaks.sort_unstable();
    want.sort_unstable();
    assert_eq!(peaks, want);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn svg_has_one_timeline_per_device() {
    let reference = reference();
    let image = render(&["--format", "svg", &path("sharded.prof")]);
    assert!(image.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let devices = reference["sharded.prof"]["devices"].as_object().unwrap();
    for (device, want) in devices {
        // 2,883,584 bytes each.
        let bytes = want["bytes"].as_u64().unwrap();
        assert_eq!(bytes, 2_883_584);
        assert!(
            image.contains(&format!("{device} — peak 2.75 MiB at sharded.prof")),
            "{device}"
        );
    }
    assert_eq!(image.matches("font-size=\"14\"").count(), devices.len());
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn reports_are_deterministic_and_written_atomically() {
    let dir = temp_dir("det");
    let (a, b) = (dir.join("a.html"), dir.join("b.html"));
    for out in [&a, &b] {
        memtool()
            .args(["render", &path("memory.prof"), "-o"])
            .arg(out)
            .assert()
            .success();
    }
    let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(a, b);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        2,
        "no temporaries left"
    );
    // The SVG namespace is a name, not an address the page loads.
    let page = String::from_utf8(a)
        .unwrap()
        .replace("'http://www.w3.org/2000/svg'", "");
    // Self-contained: no address the browser could fetch.
    for needle in ["http://", "https://", "src=", "@import"] {
        assert!(!page.contains(needle), "page contains {needle}");
    }
    // `url(#clip)` points inside the page; any other `url(` could fetch.
    assert!(page
        .match_indices("url(")
        .all(|(i, _)| page[i + 4..].starts_with('#')));
    assert!(page.contains("default-src 'none'"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn file_names_are_text() {
    let src = shared_fixture("pprof/memory.prof");
    // `/` cannot be in a file name, so the payload spans a directory and a file.
    let dir = temp_dir("xss").join("<");
    std::fs::create_dir_all(&dir).unwrap();
    let hostile = dir.join("script><img src=x onerror=alert(1)>.prof");
    std::fs::copy(src, &hostile).unwrap();
    let shown = hostile.display().to_string();
    assert!(shown.contains("</script><img src=x onerror=alert(1)>"));
    let page = render(&[&shown]);
    assert!(!page.contains("<img"));
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(page.contains("&#60;/script&#62;&#60;img src=x onerror=alert(1)&#62;.prof"));
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn folded_stacks_add_up_to_the_peak() {
    let reference = reference();
    let want = &reference["memory.prof"];
    let out = render(&["--format", "folded", "--all-frames", &path("memory.prof")]);
    let mut total = 0u64;
    for line in out.lines() {
        let (stack, bytes) = line.rsplit_once(' ').unwrap();
        total += bytes.parse::<u64>().unwrap();
        assert!(stack.starts_with("<module> "), "{line}");
    }
    assert_eq!(total, want["buffer_bytes"].as_u64().unwrap());
    // Each reference stack (leaf first, ` <- `) is one folded line (root first, `;`).
    for s in want["top_stacks"].as_array().unwrap() {
        let frames: Vec<&str> = s["stack"].as_str().unwrap().split(" <- ").collect();
        let root_first: Vec<&str> = frames.into_iter().rev().collect();
        assert!(
            out.contains(&root_first.join(";")),
            "missing {root_first:?}"
        );
    }
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn empty_profiles_and_bad_inputs() {
    let page = render(&[&path("empty.prof")]);
    assert!(page.contains("No memory in this input holds any allocation."));
    assert_eq!(data(&page)["memories"], serde_json::json!([]));
    let err = fails(&["render", "/nonexistent/x.prof"], 2);
    assert!(err.contains("/nonexistent/x.prof: no such file"), "{err}");
    fails(&["render", &path("memory.prof"), "--bands", "0"], 2);
}

/// XProf's MiB back to bytes (every size is a whole number of bytes).
fn xprof_bytes(mib: &Value) -> u64 {
    (mib.as_f64().unwrap() * 1048576.0).round() as u64
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn compiled_programs_show_xprofs_heap_peak() {
    let file = shared_fixture("xspace/jax_transformer_small.xplane.pb");
    let page = render(&[file.to_str().unwrap()]);
    let d = data(&page);
    let dir = shared_fixture("xspace/expected");
    let (mut checked, mut trivial) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(module) = name
            .strip_prefix("jax_transformer_small.memory_viewer.")
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        let xprof: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(&name)).unwrap()).unwrap();
        let want = xprof_bytes(&xprof["peakHeapMib"]);
        // The section whose title names the module (`jit_train_step(34)` is
        // `jit_train_step_34_` in XProf's file names).
        let sections: Vec<(&str, &str)> = page
            .split("<section class=\"memory\" id=\"")
            .skip(1)
            .filter_map(|s| {
                let (dom, rest) = s.split_once('"')?;
                let title = rest
                    .split_once("<h2>")?
                    .1
                    .split_once(" (program order)</h2>")?
                    .0;
                Some((dom, title))
            })
            .collect();
        let safe = |t: &str| -> String {
            t.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let Some(&(dom, _)) = sections.iter().find(|(_, t)| safe(t) == module) else {
            // A program trivial beside the largest (peak under 1% of it and
            // under 1 MiB) is a row of the compact table, with its peak.
            let table = page
                .split_once("<details class=\"trivial\">")
                .and_then(|(_, t)| t.split_once("</details>"))
                .map(|(t, _)| t)
                .unwrap_or_else(|| panic!("no section and no small-memory table for {module}"));
            let row = table
                .split("<tr><td>")
                .skip(1)
                .find(|r| {
                    r.split_once("</td>")
                        .is_some_and(|(id, _)| safe(id) == module)
                })
                .unwrap_or_else(|| panic!("no section or row for {module}"));
            assert!(
                row.contains(&format!("data-v=\"{want}\"")),
                "{module}: peak {want} in {row}"
            );
            assert!(want < 1 << 20, "{module}: a program of {want} bytes folded");
            trivial += 1;
            checked += 1;
            continue;
        };
        let m = d["memories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["dom"] == dom)
            .unwrap();
        assert_eq!(m["peak"]["bytes"].as_u64(), Some(want), "{module}: peak");
        let hi = m["timeline"]["hi"].as_array().unwrap();
        assert_eq!(
            hi.iter().filter_map(Value::as_u64).max(),
            Some(want),
            "{module}: timeline"
        );
        let position = m["peak"]["x"].as_i64().unwrap() + m["timeline"]["x0"].as_i64().unwrap();
        assert_eq!(
            position,
            xprof["peakHeapSizePosition"].as_i64().unwrap_or(0),
            "{module}: peak position"
        );
        checked += 1;
    }
    assert_eq!(checked, 18, "every module of the transformer");
    assert_eq!(trivial, 10, "programs under 1% of jit_train_step's 44 MiB");
    // The programs with a section: a contents list links them, biggest
    // peak first, and the page opens on the training step.
    assert!(page.contains("<nav class=\"contents\">"));
    let peaks: Vec<u64> = d["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["peak"]["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(peaks.len(), 8);
    assert!(peaks.windows(2).all(|w| w[0] >= w[1]), "{peaks:?}");
    let first = page.split("<section class=\"memory\"").nth(1).unwrap();
    assert!(first.contains("<h2>jit_train_step(34) (program order)</h2>"));
    // A buffer assignment has no leak or fragmentation section.
    assert!(!first.contains("<h3>Leaks</h3>") && !first.contains("<dt>fragmentation</dt>"));
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn a_tensorflow_allocator_shows_xprofs_peak_its_steps_and_its_leak() {
    let file = shared_fixture("xspace/tf_cnn_leak.xplane.pb");
    let expected = shared_fixture("xspace/expected/tf_cnn_leak.memory_profile.json");
    let xprof: Value = serde_json::from_str(&std::fs::read_to_string(expected).unwrap()).unwrap();
    let summary = &xprof["memoryProfilePerAllocator"]["mklcpu"]["profileSummary"];
    let peak: u64 = summary["peakStats"]["peakBytesInUse"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let page = render(&[file.to_str().unwrap()]);
    let d = data(&page);
    let m = &d["memories"][0];
    assert!(page.contains(&format!("({peak} bytes, ")), "header peak");
    // Six training steps, each marked on the timeline.
    assert_eq!(m["steps"].as_array().unwrap().len(), 6);
    // The fixture keeps six [256,1024] AddV2 tensors alive: a steady leak.
    assert!(page.contains("<dt>leaks</dt><dd>steady growth"));
    assert!(page.contains("AddV2 [256,1024]"));
    // Allocator statistics and addresses: both parts of the frag section.
    assert!(page.contains("<dt>fragmentation</dt><dd>allocator fragmentation max"));
    assert!(m["addr"]["grid"]
        .as_str()
        .unwrap()
        .chars()
        .any(|c| c != '.'));
}

/// `render --format folded` breaks down the peak `peak` reports, on
/// allocators that report their own in-use figure (XSpace, where it can
/// fall elsewhere than the replayed maximum) and on PyTorch files: its lines
/// add up to the live bytes of `peak`'s stack breakdowns.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn folded_stacks_break_down_the_reported_peak() {
    for name in [
        "xspace/tf_keras.xplane.pb",
        "xspace/tf_cnn_leak.xplane.pb",
        "xspace/synth_two_lines_offsets.xplane.pb",
        "xspace/synth_bfc_3events.xplane.pb",
        "torch/silmont2000_memory_forward_bf16_128.pickle",
        "torch/torch_cpu_transformer.pt.trace.json.gz",
    ] {
        let file = shared_fixture(name).display().to_string();
        let out = render(&["--format", "folded", &file]);
        let folded: u64 = out
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        let peak = common::json(&["peak", &file]);
        let live: u64 = peak["memories"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["breakdowns"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["by"] == "stack")
            .flat_map(|b| b["groups"].as_array().cloned().unwrap())
            .map(|g| g["bytes"].as_u64().unwrap())
            .sum();
        assert!(live > 0, "{name}");
        assert_eq!(folded, live, "{name}");
    }
}

/// The allocation view of real snapshots: its tallest column is the peak
/// the page reports (each column is the stack at its highest point), every
/// column's runs add up to a live total no higher, and the kept bands are
/// the largest allocations, largest first.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn the_allocation_view_reaches_the_peak_and_keeps_the_largest() {
    for fixture in [
        "torch/torch_cpu_transformer.snapshot.pickle",
        "torch/magma27_memory_snapshot.pickle",
    ] {
        let file = shared_fixture(fixture).display().to_string();
        let page = render(&[&file]);
        let data = data(&page);
        let m = &data["memories"][0];
        let view = &m["alloc"];
        let unit = view["unit"].as_u64().unwrap();
        let runs: Vec<u64> = serde_json::from_value(view["runs"].clone()).unwrap();
        let columns = view["t"].as_array().unwrap().len() - 1;
        let kept = view["kept"].as_array().unwrap();
        let (mut at, mut tallest) = (0usize, 0u64);
        for _ in 0..columns {
            let count = runs[at] as usize;
            let height: u64 = (0..count).map(|r| runs[at + 2 + 2 * r]).sum();
            for r in 0..count {
                let band = runs[at + 1 + 2 * r] as usize;
                assert!(band <= kept.len(), "{fixture}: band {band} is kept");
            }
            tallest = tallest.max(height);
            at += 1 + 2 * count;
        }
        assert_eq!(at, runs.len(), "{fixture}: runs read whole");
        assert_eq!(
            columns,
            600.min(view["events"].as_u64().unwrap() as usize),
            "{fixture}"
        );
        let peak = m["peak"]["bytes"].as_u64().unwrap();
        assert_eq!(
            tallest,
            peak / unit,
            "{fixture}: tallest column is the peak"
        );
        let sizes: Vec<u64> = kept.iter().map(|k| k["b"].as_u64().unwrap()).collect();
        assert!(
            sizes.windows(2).all(|w| w[0] >= w[1]),
            "{fixture}: largest first"
        );
        assert_eq!(
            sizes.len(),
            500.min(view["allocations"].as_u64().unwrap() as usize),
            "{fixture}"
        );
    }
}
