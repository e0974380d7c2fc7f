//! The leak verdict on every profile memtool is tested with: the table in
//! docs/verdicts.md, each row checked against memtool's output, and every
//! profile under ../shared/fixtures, tests/ and examples/ in the table.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{memtool, repo};

const SHARED: &str = "../shared/fixtures/";

/// One row of the table.
#[derive(Debug)]
struct Row {
    args: Vec<String>,
    memory: String,
    verdicts: Vec<String>,
    exit: i32,
}

/// `a{1..3}b` → `a1b a2b a3b`, as the shell expands it.
fn expand(word: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (word.find('{'), word.find('}')) else {
        return vec![word.to_string()];
    };
    let (from, to) = word[open + 1..close].split_once("..").expect("{a..b}");
    let (from, to): (u32, u32) = (from.parse().unwrap(), to.parse().unwrap());
    (from..=to)
        .map(|i| format!("{}{i}{}", &word[..open], &word[close + 1..]))
        .collect()
}

fn rows() -> Vec<Row> {
    let doc = std::fs::read_to_string(repo().join("docs/verdicts.md")).unwrap();
    let rows: Vec<Row> = doc
        .lines()
        .filter(|l| l.starts_with("| `leaks "))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 5, "{line}");
            let command = cells[0].trim_matches('`');
            Row {
                args: command.split_whitespace().flat_map(expand).collect(),
                memory: cells[1].to_string(),
                verdicts: cells[2].split(", ").map(str::to_string).collect(),
                exit: cells[3].parse().unwrap(),
            }
        })
        .collect();
    assert!(
        rows.len() > 40,
        "the table in docs/verdicts.md was not found"
    );
    rows
}

/// The verdict `leaks` gives a memory of its JSON document: its strongest
/// finding's growth, `none` or `one point`.
fn verdict_of(memory: &serde_json::Value) -> String {
    if memory["points"].as_array().unwrap().len() < 2 {
        return "one point".into();
    }
    match memory["findings"].as_array().unwrap().first() {
        Some(f) => f["growth"].as_str().unwrap().to_string(),
        None => "none".into(),
    }
}

fn check(rows: &[Row]) {
    let mut checked = 0;
    for row in rows {
        let args: Vec<String> = row
            .args
            .iter()
            .map(|a| match a.strip_prefix(SHARED) {
                Some(rel) => common::shared_fixture(rel).display().to_string(),
                None => a.clone(),
            })
            .collect();
        let out = memtool()
            .current_dir(repo())
            .args(&args)
            .args(["--fail-on-leak", "--format", "json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(row.exit),
            "{:?}: {stderr}",
            row.args
        );
        if row.exit == 2 {
            assert_eq!(row.verdicts, ["error"], "{:?}", row.args);
            checked += 1;
            continue;
        }
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["gate"]["passed"], row.exit == 0, "{:?}", row.args);
        let gate_lines: Vec<&str> = stderr.lines().filter(|l| l.contains("leak gate")).collect();
        assert_eq!(gate_lines.len(), 1, "{:?}: {stderr}", row.args);
        let memories = doc["memories"].as_array().unwrap();
        let chosen: Vec<&serde_json::Value> = memories
            .iter()
            .filter(|m| row.memory == "every" || m["id"] == row.memory.as_str())
            .collect();
        assert!(
            !chosen.is_empty() || (row.memory == "every" && memories.is_empty()),
            "{:?}: no memory {}",
            row.args,
            row.memory
        );
        for m in chosen {
            let got = verdict_of(m);
            assert!(
                row.verdicts.contains(&got),
                "{:?} {}: verdict {got}, the table says {:?} ({})",
                row.args,
                m["id"],
                row.verdicts,
                m["verdict"]
            );
            // A leak, and only a leak, fails the gate.
            assert_eq!(m["leaking"], got == "steady", "{:?} {}", row.args, m["id"]);
        }
        checked += 1;
    }
    assert_eq!(checked, rows.len());
}

/// Every profile file under `dir` (recursively), but the reference tools'
/// outputs in `expected/` folders and the folders' READMEs.
fn profiles_under(dir: &Path, shown_as: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let shown = format!("{shown_as}{name}");
        if path.is_dir() {
            if name != "expected" {
                profiles_under(&path, &format!("{shown}/"), out);
            }
        } else if !name.ends_with(".md") && !name.ends_with(".sha256") {
            out.insert(shown);
        }
    }
}

fn assert_all_in_table(rows: &[Row], files: BTreeSet<String>) {
    let named: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.args.iter().map(String::as_str))
        .collect();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !named.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "profiles without a row in docs/verdicts.md: {missing:?}"
    );
}

#[test]
fn every_committed_profile_has_the_verdict_the_table_gives() {
    let rows: Vec<Row> = rows()
        .into_iter()
        .filter(|r| !r.args.iter().any(|a| a.starts_with(SHARED)))
        .collect();
    let mut files = BTreeSet::new();
    for dir in ["tests/pprof", "tests/torch", "tests/xspace", "examples"] {
        profiles_under(&repo().join(dir), &format!("{dir}/"), &mut files);
    }
    assert_all_in_table(&rows, files);
    check(&rows);
}

#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn every_shared_profile_has_the_verdict_the_table_gives() {
    let rows: Vec<Row> = rows()
        .into_iter()
        .filter(|r| r.args.iter().any(|a| a.starts_with(SHARED)))
        .collect();
    let mut files = BTreeSet::new();
    for dir in ["pprof", "torch", "xspace"] {
        let path = common::shared_fixture(dir);
        profiles_under(&path, &format!("{SHARED}{dir}/"), &mut files);
    }
    assert_all_in_table(&rows, files);
    check(&rows);
}

#[test]
fn a_buffer_that_moved_from_a_library_stack_to_a_user_stack_is_not_growth() {
    // In step 2 a 1 MiB buffer is freed under a library stack and made again
    // under the user's, while each device keeps 10 KiB more.
    let files: Vec<String> = (1..=3)
        .map(|i| format!("tests/torch/series/moved_step{i}.pickle"))
        .collect();
    let mut args: Vec<&str> = vec!["leaks"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--all-frames", "--format", "json"]);
    let doc: serde_json::Value =
        serde_json::from_str(&common::stdout_in_repo(&args, &[0])).unwrap();
    let memories = doc["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 2, "one series per device");
    for m in memories {
        let findings = m["findings"].as_array().unwrap();
        let grew: Vec<&serde_json::Value> = findings
            .iter()
            .filter(|f| f["growth_bytes"].as_u64() > Some(0))
            .collect();
        assert_eq!(grew.len(), 1, "{}", m["id"]);
        assert_eq!(grew[0]["growth_bytes"], 10 << 10);
        assert_eq!(grew[0]["growth"], "once");
        assert!(grew[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("log_metrics train.py:47"));
        let moved = findings
            .iter()
            .find(|f| {
                f["key"]
                    .as_str()
                    .unwrap()
                    .starts_with("cache_output train.py:44")
            })
            .unwrap();
        assert_eq!(moved["growth"], "handover");
        assert_eq!(moved["gross_growth_bytes"], 1 << 20);
        assert!(m["verdict"]
            .as_str()
            .unwrap()
            .starts_with("grew once: +10.00 KiB by moved_step2.pickle"));
    }
}
