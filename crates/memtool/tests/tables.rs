//! Golden terminal tables for the committed fixtures (insta snapshots under
//! `snapshots/`). Review a changed snapshot as you would a changed UI.

mod common;

use common::repo_fixture;

fn run(args: &[&str]) -> String {
    common::stdout_in_repo(args, &[0])
}

#[test]
fn summary_table() {
    assert!(repo_fixture("pprof/training.prof").exists());
    insta::assert_snapshot!(run(&["summary", "tests/pprof/training.prof"]));
}

#[test]
fn peak_table_of_a_sharded_profile() {
    insta::assert_snapshot!(run(&[
        "peak",
        "tests/pprof/sharded.prof",
        "--memory",
        "cpu:0"
    ]));
}

#[test]
fn leaks_table() {
    insta::assert_snapshot!(run(&[
        "leaks",
        "tests/pprof/cache1.prof",
        "tests/pprof/cache2.prof",
        "tests/pprof/cache3.prof",
        "tests/pprof/cache4.prof",
        "tests/pprof/cache5.prof",
        "tests/pprof/cache6.prof",
    ]));
}

#[test]
fn diff_table() {
    insta::assert_snapshot!(run(&[
        "diff",
        "tests/pprof/leak1.prof",
        "tests/pprof/leak4.prof",
        "--fail-on-growth",
        "1MiB"
    ]));
}

#[test]
fn diff_markdown() {
    insta::assert_snapshot!(run(&[
        "diff",
        "tests/pprof/leak1.prof",
        "tests/pprof/leak4.prof",
        "--format",
        "md"
    ]));
}

/// Each breakdown table's rows and its "N more rows" line, in output order.
fn breakdown_tables(md: &str, title: impl Fn(&str) -> bool) -> Vec<(Vec<String>, usize)> {
    let mut tables = Vec::new();
    let mut lines = md.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(heading) = line.strip_prefix("### ") else {
            continue;
        };
        if !title(heading) {
            continue;
        }
        let mut rows = Vec::new();
        let mut omitted = 0;
        while let Some(&next) = lines.peek() {
            if next.starts_with("### ") {
                break;
            }
            lines.next();
            if let Some(more) = next.strip_suffix(" more rows (see --top, or --format json)") {
                omitted = more.parse().unwrap();
            } else if next.starts_with("| ") && !next.starts_with("| ---") {
                rows.push(
                    next.split(" | ")
                        .next()
                        .unwrap()
                        .trim_start_matches("| ")
                        .to_string(),
                );
            }
        }
        // The first row is the header.
        rows.remove(0);
        tables.push((rows, omitted));
    }
    tables
}

#[test]
fn tables_show_the_first_groups_of_the_json_and_count_the_rest() {
    // Table output keeps only `--top` groups of each breakdown (the rest
    // are counted, not labelled); what it shows must be the JSON's first.
    let escape = |key: &str| key.replace('<', "&lt;").replace('>', "&gt;");
    for file in [
        "tests/xspace/jax_mlp.xplane.pb",
        "tests/pprof/training.prof",
    ] {
        let json: serde_json::Value =
            serde_json::from_str(&run(&["peak", file, "--format", "json"])).unwrap();
        let want: Vec<Vec<String>> = json["memories"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["breakdowns"].as_array().unwrap())
            .map(|b| {
                let groups = b["groups"].as_array().unwrap();
                groups
                    .iter()
                    .map(|g| escape(g["key"].as_str().unwrap()))
                    .collect()
            })
            .collect();
        let largest = want.iter().map(Vec::len).max().unwrap_or(0);
        assert!(largest >= 3, "{file}");
        for top in 0..=largest + 1 {
            let md = run(&["peak", file, "--format", "md", "--top", &top.to_string()]);
            let got = breakdown_tables(&md, |t| {
                ["stack", "user frame", "shape", "op", "dtype", "category"]
                    .iter()
                    .any(|by| t.starts_with(&format!("Live at peak by {by} — ")))
            });
            assert_eq!(got.len(), want.len(), "{file} --top {top}");
            for ((rows, omitted), groups) in got.iter().zip(&want) {
                let shown = top.min(groups.len());
                assert_eq!(rows[..], groups[..shown], "{file} --top {top}");
                assert_eq!(*omitted, groups.len() - shown, "{file} --top {top}");
            }
        }
    }
    let json: serde_json::Value = serde_json::from_str(&run(&[
        "summary",
        "tests/pprof/training.prof",
        "--format",
        "json",
    ]))
    .unwrap();
    let stacks: Vec<String> = json["memories"][0]["top_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| escape(g["key"].as_str().unwrap()))
        .collect();
    let md = run(&[
        "summary",
        "tests/pprof/training.prof",
        "--format",
        "md",
        "--top",
        "1",
    ]);
    let got = breakdown_tables(&md, |t| t.starts_with("Top stacks at peak"));
    assert_eq!(got, vec![(stacks[..1].to_vec(), stacks.len() - 1)]);
}
