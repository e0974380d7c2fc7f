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
        // Tables list the memories biggest peak first, without those
        // trivial beside the largest (one row of the peaks table).
        let memories = json["memories"].as_array().unwrap();
        let peaks: Vec<(&str, u64)> = memories
            .iter()
            .map(|m| (m["id"].as_str().unwrap(), m["peak_bytes"].as_u64().unwrap()))
            .collect();
        let order = memtool_core::analysis::order_by_peak(&peaks);
        let want: Vec<Vec<String>> = order
            .main
            .iter()
            .map(|&i| &memories[i])
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
                [
                    "phase",
                    "stack",
                    "user frame",
                    "shape",
                    "op",
                    "dtype",
                    "category",
                ]
                .iter()
                .any(|by| t.starts_with(&format!("Live at peak by {by} — ")))
            });
            // A breakdown whose only group is `<no stack>` or `<none>` says
            // nothing and is left out, once the table would show that group.
            let says_nothing = |groups: &Vec<String>| {
                top > 0
                    && groups
                        .iter()
                        .all(|k| k == "&lt;no stack&gt;" || k == "&lt;none&gt;")
            };
            let want: Vec<&Vec<String>> = want.iter().filter(|g| !says_nothing(g)).collect();
            assert_eq!(got.len(), want.len(), "{file} --top {top}");
            for ((rows, omitted), groups) in got.iter().zip(want) {
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

/// Every table of a Markdown report: its title and its rows' cells (header
/// row first), in output order.
fn markdown_tables(md: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let mut tables: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    for line in md.lines() {
        if let Some(title) = line.strip_prefix("### ") {
            tables.push((title.to_string(), Vec::new()));
        } else if let Some(row) = line.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")) {
            if !row.starts_with("---") {
                let table = tables.last_mut().expect("a row under a heading");
                table.1.push(row.split(" | ").map(str::to_string).collect());
            }
        }
    }
    tables
}

/// Every shared fixture: the files of the three format folders.
fn shared_fixtures() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["pprof", "torch", "xspace"] {
        let dir = common::shared_fixture(dir);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                files.push(path.display().to_string());
            }
        }
    }
    files.sort();
    files
}

/// memtool's stdout for `args`, or `None` when it refuses the input (exit 2:
/// a command that does not apply, such as `frag` on a pprof snapshot).
fn output_of(args: &[&str], env: Option<(&str, &str)>) -> Option<String> {
    let mut cmd = common::memtool();
    cmd.args(args).env_remove("COLUMNS");
    if let Some((key, value)) = env {
        cmd.env(key, value);
    }
    let out = cmd.output().unwrap();
    match out.status.code() {
        Some(0 | 1) => Some(String::from_utf8(out.stdout).unwrap()),
        Some(2) => None,
        other => panic!(
            "memtool {args:?}: {other:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Every command on every shared fixture (and the derived ones beside the
/// tests), with the series, the post-mortems and the diffs by every key.
fn every_command_on_every_fixture() -> Vec<Vec<String>> {
    let files = shared_fixtures();
    let mut runs: Vec<Vec<String>> = Vec::new();
    for file in &files {
        for command in [
            &["summary"][..],
            &["peak"],
            &["peak", "--all-frames"],
            &["leaks"],
            &["frag"],
            &["oom"],
            &["oom", "--capacity", "1MiB"],
            &["peak", "--budget", "1MiB"],
        ] {
            let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
            args.push(file.clone());
            runs.push(args);
        }
    }
    let series: Vec<String> = (1..=9)
        .map(|i| {
            common::shared_fixture(&format!("pprof/memory{i}.prof"))
                .display()
                .to_string()
        })
        .collect();
    runs.push([vec!["leaks".to_string()], series.clone()].concat());
    runs.push([vec!["peak".to_string()], series.clone()].concat());
    runs.push([vec!["summary".to_string()], series.clone()].concat());
    // The post-mortems of the committed out-of-memory snapshots.
    for oom in [
        "capacity",
        "fragmentation",
        "outside_pytorch",
        "after_failure",
        "fragmentation_expandable",
    ] {
        let file = common::repo()
            .join("crates/memtool/tests/data/oom")
            .join(format!("{oom}.pickle"));
        for command in ["oom", "summary", "peak"] {
            runs.push(vec![command.to_string(), file.display().to_string()]);
        }
    }
    for (base, new) in [
        ("pprof/memory1.prof", "pprof/memory9.prof"),
        (
            "torch/silmont2000_memory_forward_fp32_128.pickle",
            "torch/silmont2000_memory_forward_bf16_128.pickle",
        ),
        (
            "torch/silmont2000_mem_snapshot.pickle",
            "torch/silmont2000_memory_forward_fp32_128.pickle",
        ),
        ("xspace/tf_cnn.xplane.pb", "xspace/tf_cnn_leak.xplane.pb"),
        (
            "xspace/jax_mlp.xplane.pb",
            "xspace/jax_transformer_small.xplane.pb",
        ),
        (
            "torch/torch_cpu_transformer.snapshot.pickle",
            "torch/torch_cpu_transformer.pt.trace.json.gz",
        ),
    ] {
        for by in ["stack", "user-frame", "op", "shape", "dtype", "category"] {
            runs.push(
                [
                    "diff",
                    &common::shared_fixture(base).display().to_string(),
                    &common::shared_fixture(new).display().to_string(),
                    "--by",
                    by,
                ]
                .map(str::to_string)
                .to_vec(),
            );
        }
    }
    for trace in ["steps_cpu_gpu", "rocm"] {
        let file = common::repo()
            .join("crates/memtool/tests/data/torch_trace")
            .join(format!("{trace}.pt.trace.json"));
        for command in ["summary", "peak", "frag", "leaks"] {
            runs.push(vec![command.to_string(), file.display().to_string()]);
        }
    }
    runs
}

/// Every command's tables (every breakdown of `diff`, the post-mortems
/// of `oom`, `peak --budget`) narrowed to `WIDTH` columns, the default: no two rows whose keys
/// differ are shown alike (Markdown given the width shortens labels as the
/// terminal does; without one it shows them whole), and every terminal
/// table line fits (`$COLUMNS` sets the width).
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn shown_keys_tell_rows_apart_on_every_shared_fixture() {
    const WIDTH: &str = "100";
    let runs = every_command_on_every_fixture();
    let mut checked_rows = 0;
    let mut too_wide = Vec::new();
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let md = |width: Option<&str>| {
            let mut a = args.clone();
            a.extend(["--format", "md"]);
            a.extend(width.map(|w| ["--width", w]).into_iter().flatten());
            output_of(&a, None)
        };
        let (Some(whole), Some(narrow)) = (md(None), md(Some(WIDTH))) else {
            continue;
        };
        let (whole, narrow) = (markdown_tables(&whole), markdown_tables(&narrow));
        assert_eq!(whole.len(), narrow.len(), "{args:?}");
        for ((title, full), (_, shown)) in whole.iter().zip(&narrow) {
            assert_eq!(full.len(), shown.len(), "{args:?}: {title}");
            for i in 1..full.len() {
                for j in i + 1..full.len() {
                    for c in 0..full[i].len() {
                        assert!(
                            shown[i][c] != shown[j][c] || full[i][c] == full[j][c],
                            "{args:?}: {title}: rows {i} and {j} both show {:?} for {:?} and {:?}",
                            shown[i][c],
                            full[i][c],
                            full[j][c]
                        );
                    }
                }
            }
            checked_rows += full.len();
        }
        // Every frame of deep native stacks (`--all-frames`) can differ far
        // from the leaf in more frames than the width holds: those rows are
        // told apart, wider than the width.
        if args.contains(&"--all-frames") {
            continue;
        }
        let text = output_of(&args, Some(("COLUMNS", WIDTH))).unwrap();
        for line in text.lines().filter(|l| l.starts_with([' ', '─'])) {
            if line.chars().count() > WIDTH.parse().unwrap() {
                too_wide.push(format!(
                    "{args:?}: {} columns: {line}",
                    line.chars().count()
                ));
            }
        }
    }
    assert!(too_wide.is_empty(), "{}", too_wide.join("\n"));
    assert!(checked_rows > 1000, "only {checked_rows} rows were checked");
}

#[test]
fn ranks_table() {
    insta::assert_snapshot!(run(&[
        "ranks",
        "crates/memtool/tests/data/oom/*.pickle",
        "--capacity",
        "64MiB",
    ]));
}

/// A terminal table as printed: its title, column headings and rows, the
/// cells found by the runs of 3+ spaces that run down every line of it
/// (cells hold single spaces only). Rows that continue a wrapped cell (their
/// first cell blank) are left out.
struct PrintedTable {
    title: String,
    headings: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn printed_tables(text: &str) -> Vec<PrintedTable> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        // A rule line closes the header; the header runs up from it to the
        // title (the first line after a blank one).
        let Some(rule) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim();
            !t.is_empty() && t.chars().all(|c| c == '─')
        }) else {
            break;
        };
        let title = (0..rule)
            .rev()
            .find(|&j| j == 0 || lines[j - 1].trim().is_empty())
            .unwrap_or(0);
        let header: Vec<&str> = lines[title + 1..rule].to_vec();
        let mut end = rule + 1;
        while end < lines.len()
            && !lines[end].trim().is_empty()
            && lines[end].starts_with(' ')
            && !lines[end].starts_with(" - ")
        {
            end += 1;
        }
        let body: Vec<&str> = lines[rule + 1..end].to_vec();
        i = end;
        if body.is_empty() {
            continue;
        }
        let chars: Vec<Vec<char>> = header
            .iter()
            .chain(&body)
            .map(|l| l.chars().collect())
            .collect();
        let width = chars.iter().map(Vec::len).max().unwrap_or(0);
        let blank: Vec<bool> = (0..width)
            .map(|p| chars.iter().all(|l| l.get(p).is_none_or(|c| *c == ' ')))
            .collect();
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut p = 0;
        while p < width {
            if blank[p] {
                p += 1;
                continue;
            }
            let start = p;
            loop {
                while p < width && !blank[p] {
                    p += 1;
                }
                // A gap of 1 or 2 spaces is inside a cell.
                let gap = (p..width).take_while(|&q| blank[q]).count();
                if p < width && gap < 3 && p + gap < width {
                    p += gap;
                } else {
                    break;
                }
            }
            spans.push((start, p));
        }
        let cell = |l: &[char], (a, b): (usize, usize)| -> String {
            l.get(a..b.min(l.len())).map_or(String::new(), |s| {
                s.iter().collect::<String>().trim().to_string()
            })
        };
        let headings: Vec<String> = spans
            .iter()
            .map(|&s| {
                chars[..header.len()]
                    .iter()
                    .map(|l| cell(l, s))
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let rows: Vec<Vec<String>> = chars[header.len()..]
            .iter()
            .map(|l| spans.iter().map(|&s| cell(l, s)).collect::<Vec<_>>())
            .filter(|r: &Vec<String>| !r[0].is_empty())
            .collect();
        out.push(PrintedTable {
            title: lines[title].to_string(),
            headings,
            rows,
        });
    }
    out
}

/// Whether a printed cell is a figure (bytes, a count, a share, a position).
fn is_figure(cell: &str) -> bool {
    cell == "n/a"
        || cell.starts_with(|c: char| c.is_ascii_digit() || "+-#>≥".contains(c))
        || cell.starts_with("t+")
}

/// Every command on every fixture, as a terminal 100 columns wide shows it:
/// no line runs past the width, no shape or memory id is shortened (they
/// wrap), and no text column says nothing — empty, or one value in every
/// row of a table of two rows or more.
#[test]
#[cfg_attr(not(shared_fixtures), ignore = "needs ../shared/fixtures")]
fn tables_never_cut_the_answer_at_100_columns() {
    const WIDTH: usize = 100;
    let mut faults: Vec<String> = Vec::new();
    let mut tables_checked = 0;
    for args in every_command_on_every_fixture() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(text) = output_of(&args, Some(("COLUMNS", "100"))) else {
            continue;
        };
        // Deep native stacks shown whole (`--all-frames`) are told apart
        // wider than the width; the other checks hold for them too.
        if !args.contains(&"--all-frames") {
            for line in text.lines() {
                if line.chars().count() > WIDTH {
                    faults.push(format!(
                        "{args:?}: {} columns: {line}",
                        line.chars().count()
                    ));
                }
            }
        }
        for t in printed_tables(&text) {
            tables_checked += 1;
            for (c, heading) in t.headings.iter().enumerate() {
                let column: Vec<&str> = t.rows.iter().map(|r| r[c].as_str()).collect();
                if ["shape", "memory"].contains(&heading.as_str()) {
                    for cell in column.iter().filter(|cell| cell.contains('…')) {
                        faults.push(format!("{args:?}: {}: {heading} cut: {cell}", t.title));
                    }
                }
                if c == 0 || column.len() < 2 {
                    continue;
                }
                if column.iter().all(|cell| cell.is_empty()) {
                    faults.push(format!("{args:?}: {}: column {heading} is empty", t.title));
                } else if column.iter().all(|cell| *cell == column[0]) && !is_figure(column[0]) {
                    faults.push(format!(
                        "{args:?}: {}: column {heading} is {} in every row",
                        t.title, column[0]
                    ));
                }
            }
        }
    }
    assert!(
        tables_checked > 500,
        "only {tables_checked} tables were read"
    );
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}
