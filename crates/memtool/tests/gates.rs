//! CI gates (`diff --fail-on-growth`, `peak --budget`, `leaks
//! --fail-on-leak`): in every output format, one pass/fail line on stderr
//! with the measured figure and the threshold exactly, the exit code, and
//! the gate's result in the JSON document.

mod common;

use common::{memtool, repo};

const FORMATS: [&str; 4] = ["table", "json", "csv", "md"];

/// Runs `args` in every format; checks the exit code and that stderr holds
/// exactly one gate line, the same in every format, which it returns with
/// the JSON document.
fn gate_line(args: &[&str], exit: i32) -> (String, serde_json::Value) {
    let mut lines = Vec::new();
    let mut doc = serde_json::Value::Null;
    for format in FORMATS {
        let out = memtool()
            .current_dir(repo())
            .args(args)
            .args(["--format", format])
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(exit), "{args:?} {format}: {stderr}");
        let gate: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(" gate passed: ") || l.contains(" gate FAILED: "))
            .collect();
        assert_eq!(gate.len(), 1, "{args:?} {format}: {stderr}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        // The text formats leave it to stderr (JSON carries it as `gate`).
        if format != "json" {
            assert!(
                !stdout.contains(gate[0].trim_start_matches("memtool: ")),
                "{args:?} {format}"
            );
        }
        lines.push(gate[0].to_string());
        if format == "json" {
            doc = serde_json::from_str(&stdout).unwrap();
        }
    }
    assert!(lines.windows(2).all(|w| w[0] == w[1]), "{lines:?}");
    let line = lines.swap_remove(0);
    assert!(line.starts_with("memtool: "), "{line}");
    assert_eq!(
        doc["gate"]["message"].as_str(),
        line.strip_prefix("memtool: ")
    );
    assert_eq!(doc["gate"]["passed"], exit == 0);
    (line, doc)
}

#[test]
fn growth_gate_shows_growth_beside_the_limit_without_rounding_it_onto_the_limit() {
    let base = "tests/pprof/leak1.prof";
    let new = "tests/pprof/leak4.prof";
    let (line, doc) = gate_line(&["diff", base, new, "--fail-on-growth", "1%"], 0);
    let total = &doc["total"];
    let (b, n) = (
        total["base_bytes"].as_u64().unwrap(),
        total["new_bytes"].as_u64().unwrap(),
    );
    let growth = n - b;
    let percent = growth as f64 * 100.0 / b as f64;
    // Just under the limit: shown with the decimals that tell it apart.
    assert!(
        percent < 1.0 && format!("{percent:.1}") == "1.0",
        "{percent}"
    );
    assert!(line.contains(&format!("(+{growth} B)")), "{line}");
    assert!(
        line.contains(&format!("+{percent:.2}% of the base")),
        "{line}"
    );
    assert!(line.contains(&format!("({b} B)")), "{line}");
    assert!(
        line.contains("growth gate passed: ") && line.ends_with("within the limit 1%"),
        "{line}"
    );
    assert_eq!(doc["gate"]["measured_bytes"], growth);
    assert_eq!(doc["gate"]["measured_percent"].as_f64(), Some(percent));
    assert_eq!(
        doc["gate"]["limit"],
        serde_json::json!({"unit": "percent", "value": 1.0})
    );

    // A limit between the rounded and the exact figure fails, and says
    // by how much with enough decimals.
    let limit = format!("{:.6}%", percent - 0.000_001);
    let (line, _) = gate_line(&["diff", base, new, "--fail-on-growth", &limit], 1);
    assert!(line.contains("growth gate FAILED: "), "{line}");
    let shown = line
        .split(" of the base")
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap();
    let shown: f64 = shown
        .trim_start_matches('+')
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(shown > percent - 0.000_001, "{line}");

    let (line, _) = gate_line(
        &[
            "diff",
            base,
            new,
            "--fail-on-growth",
            &format!("{}", growth - 1),
        ],
        1,
    );
    assert!(
        line.ends_with(&format!("exceeds the limit 35.16 KiB ({} B)", growth - 1)),
        "{line}"
    );
}

#[test]
fn budget_gate_names_the_peak_and_the_budget_in_bytes() {
    let profile = "tests/pprof/training.prof";
    let peak = common::json(&["peak", &repo().join(profile).display().to_string()])["memories"][0]
        ["peak_bytes"]
        .as_u64()
        .unwrap();
    let (line, doc) = gate_line(&["peak", profile, "--budget", &peak.to_string()], 0);
    assert!(line.contains("budget gate passed: "), "{line}");
    assert!(
        line.contains(&format!("({peak} B)"))
            && line.contains(&format!("budget {}", peak_text(peak))),
        "{line}"
    );
    assert_eq!(doc["gate"]["measured_bytes"], peak);

    let budget = peak - 1;
    let (line, doc) = gate_line(&["peak", profile, "--budget", &budget.to_string()], 1);
    assert!(
        line.contains("budget gate FAILED: cpu:0 peaks at "),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "({peak} B), 1 B over the budget {}",
            peak_text(budget)
        )),
        "{line}"
    );
    assert_eq!(doc["gate"]["failed_memories"], serde_json::json!(["cpu:0"]));
    assert_eq!(
        doc["gate"]["limit"],
        serde_json::json!({"unit": "bytes", "value": budget})
    );
}

/// How a size is written exactly: the rounded figure and every byte.
fn peak_text(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    format!("{mib:.2} MiB ({bytes} B)")
}

#[test]
fn leak_gate_says_what_grew_and_the_rule() {
    let leak: Vec<String> = (1..=4)
        .map(|i| format!("tests/pprof/leak{i}.prof"))
        .collect();
    let mut args: Vec<&str> = vec!["leaks"];
    args.extend(leak.iter().map(String::as_str));
    args.push("--fail-on-leak");
    let (line, doc) = gate_line(&args, 1);
    let finding = &doc["memories"][0]["findings"][0];
    let grown = finding["growth_bytes"].as_u64().unwrap();
    assert_eq!(finding["growth"], "steady");
    assert!(
        line.contains("leak gate FAILED: steady growth in cpu:0 +"),
        "{line}"
    );
    assert!(
        line.contains(&format!("({grown} B) net over 4 snapshots")),
        "{line}"
    );
    assert!(line.contains("3 or more snapshots or step ends"), "{line}");
    assert_eq!(doc["gate"]["measured_bytes"], grown);

    let cache: Vec<String> = (1..=6)
        .map(|i| format!("tests/pprof/cache{i}.prof"))
        .collect();
    let mut args: Vec<&str> = vec!["leaks"];
    args.extend(cache.iter().map(String::as_str));
    args.push("--fail-on-leak");
    let (line, doc) = gate_line(&args, 0);
    assert!(
        line.contains("leak gate passed: no steady growth in cpu:0 (6 snapshots)"),
        "{line}"
    );
    assert_eq!(doc["gate"]["measured_bytes"], 0);
}

#[test]
fn without_a_gate_nothing_is_printed_on_stderr_about_one() {
    let out = memtool()
        .current_dir(repo())
        .args(["peak", "tests/pprof/training.prof", "--format", "json"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("gate"));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc.get("gate").is_none());
}

const CAPTURES: &str = "crates/memtool/tests/data/categories";

/// `--fail-on-growth GROUP:LIMIT` judges one category's bytes at the peaks:
/// activation checkpointing cuts the CNN's activations (1,049,032 B →
/// 328 B) and doubles its temporaries (524,288 B → 1,048,576 B, the
/// recomputed block's), in every format.
#[test]
fn growth_gate_on_one_category() {
    let base = format!("{CAPTURES}/cnn_sgd_momentum.snapshot.pickle.gz");
    let new = format!("{CAPTURES}/cnn_sgd_momentum_checkpoint.snapshot.pickle.gz");
    let (line, doc) = gate_line(
        &["diff", &base, &new, "--fail-on-growth", "activation:0%"],
        0,
    );
    assert!(
        line.contains("growth gate passed: category activation growth -1.00 MiB (-1048704 B), -99.97% of the base 1.00 MiB (1049032 B), is within the limit 0%"),
        "{line}"
    );
    assert_eq!(doc["gate"]["group"]["by"], "category");
    assert_eq!(doc["gate"]["group"]["key"], "activation");
    assert_eq!(doc["gate"]["measured_bytes"], -1_048_704);
    let (line, doc) = gate_line(
        &["diff", &base, &new, "--fail-on-growth", "temporary:50%"],
        1,
    );
    assert!(
        line.contains("growth gate FAILED: category temporary growth +512.00 KiB (+524288 B), +100.00% of the base 512.00 KiB (524288 B), exceeds the limit 50%"),
        "{line}"
    );
    assert_eq!(doc["gate"]["measured_percent"], 100.0);
    // The whole is judged as before when no group is named.
    let (line, _) = gate_line(&["diff", &base, &new, "--fail-on-growth", "1%"], 0);
    assert!(line.contains(": total growth "), "{line}");
}

/// `peak --budget GROUP:BYTES` checks one category's bytes at each peak:
/// the AdamW CNN holds 44,152 B of optimizer state at its peak.
#[test]
fn budget_gate_on_one_category() {
    let file = format!("{CAPTURES}/cnn_adamw.snapshot.pickle.gz");
    let (line, doc) = gate_line(&["peak", &file, "--budget", "optimizer_state:44152"], 0);
    assert!(
        line.ends_with("budget gate passed: category optimizer_state at device:0's peak, 43.12 KiB (44152 B), is within the budget 43.12 KiB (44152 B)"),
        "{line}"
    );
    assert_eq!(doc["gate"]["measured_bytes"], 44_152);
    let (line, doc) = gate_line(&["peak", &file, "--budget", "optimizer_state:40KiB"], 1);
    assert!(
        line.ends_with("budget gate FAILED: device:0 holds 43.12 KiB (44152 B) of category optimizer_state at its peak, 3.12 KiB (3192 B) over the budget 40.00 KiB (40960 B)"),
        "{line}"
    );
    assert_eq!(doc["gate"]["failed_memories"][0], "device:0");
    assert_eq!(doc["gate"]["group"]["key"], "optimizer_state");
    // The whole peak is not what is judged: it is far above 40 KiB and no
    // per-memory budget table is made.
    assert!(doc["memories"][0].get("budget").is_none());
}

/// A group no allocation has is a usage error (exit 2) naming those there
/// are: a typo must not pass a gate by measuring nothing.
#[test]
fn a_gate_on_a_group_that_does_not_exist_says_which_do() {
    let file = format!("{CAPTURES}/cnn_adamw.snapshot.pickle.gz");
    let out = memtool()
        .current_dir(repo())
        .args(["peak", &file, "--budget", "optimiser_state:2GiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("--budget: no allocation has category `optimiser_state` (there are: <none>, activation, autograd_detail, gradient, input, optimizer_state, parameter, temporary, unknown)"),
        "{stderr}"
    );
    let out = memtool()
        .current_dir(repo())
        .args(["diff", &file, &file, "--fail-on-growth", "activaton:5%"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// On a plain CUDA snapshot the gate judges the inferred categories.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn budget_gate_on_an_inferred_category() {
    let file = common::shared_fixture("torch/bcrafton_memory_snapshot.pickle");
    let file = file.to_str().unwrap();
    let (line, _) = gate_line(&["peak", file, "--budget", "optimizer_state:2GiB"], 0);
    assert!(line.contains("1.71 GiB (1832460288 B)"), "{line}");
    gate_line(&["peak", file, "--budget", "optimizer_state:1GiB"], 1);
}
