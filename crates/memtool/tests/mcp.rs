//! `memtool mcp` spoken to over its stdio, JSON-RPC line by line, on the
//! repository's fixtures: the tools are listed with their options, a call's
//! JSON is the command line's, and what the command line refuses (a path out
//! of the root, a hostile profile, a bad value) the tool refuses with the
//! same line. `scripts/mcp_check.py` does the same from the Python MCP SDK
//! on the shared fixtures, in `.ci/run`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

/// One session: `requests` sent in order after the handshake, each answer
/// returned in the same order (the server may answer out of order).
fn session(root: &Path, requests: &[Value]) -> (Value, Vec<Value>) {
    let mut server = Command::new(assert_cmd::cargo::cargo_bin("memtool"))
        .args(["mcp", "--root"])
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    let mut output = BufReader::new(server.stdout.take().unwrap());
    let mut send = |message: Value| writeln!(input, "{message}").unwrap();
    send(json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "memtool-tests", "version": "0" }
        }
    }));
    let mut answers: BTreeMap<u64, Value> = BTreeMap::new();
    let mut read_until = |answers: &mut BTreeMap<u64, Value>, id: u64| {
        while !answers.contains_key(&id) {
            let mut line = String::new();
            assert!(output.read_line(&mut line).unwrap() > 0, "server closed");
            let message: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = message["id"].as_u64() {
                answers.insert(id, message);
            }
        }
    };
    read_until(&mut answers, 0);
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    for (i, request) in requests.iter().enumerate() {
        let mut request = request.clone();
        request["jsonrpc"] = json!("2.0");
        request["id"] = json!(i + 1);
        send(request);
    }
    read_until(&mut answers, requests.len() as u64);
    for id in 1..=requests.len() as u64 {
        read_until(&mut answers, id);
    }
    drop(input);
    server.wait().unwrap();
    let init = answers.remove(&0).unwrap();
    (init, answers.into_values().collect())
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "method": "tools/call", "params": { "name": tool, "arguments": arguments } })
}

/// The command line's JSON, run from `root` as the server's calls are.
fn cli_json(root: &Path, args: &[&str]) -> Value {
    let out = common::memtool()
        .current_dir(root)
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The command line's error line, under the root the server confines to.
fn cli_error(root: &Path, args: &[&str]) -> String {
    let out = common::memtool()
        .current_dir(root)
        .env("MEMTOOL_ROOT", root.canonicalize().unwrap())
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8(out.stderr)
        .unwrap()
        .trim_end()
        .to_string()
}

fn text(result: &Value) -> &str {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn tools_answer_as_the_command_line_does() {
    let root = common::repo().join("tests");
    let (init, answers) = session(
        &root,
        &[
            json!({ "method": "tools/list" }),
            call("peak", json!({ "files": ["pprof/training.prof"] })),
            call(
                "peak",
                json!({ "files": ["torch/snapshot.p4.pickle"], "by": "phase", "top": 2 }),
            ),
            call(
                "diff",
                json!({ "files": ["pprof/leak1.prof", "pprof/leak4.prof"] }),
            ),
            call(
                "leaks",
                json!({ "files": ["pprof/leak1.prof", "pprof/leak2.prof", "pprof/leak3.prof", "pprof/leak4.prof"] }),
            ),
            call(
                "peak",
                json!({ "files": ["pprof/training.prof"], "budget": "1KiB" }),
            ),
        ],
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "memtool");
    let tools = answers[0]["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["summary", "peak", "leaks", "diff", "frag", "oom", "ranks"]
    );
    let peak = &tools[1]["inputSchema"]["properties"];
    assert_eq!(peak["by"]["enum"][0], "stack");
    assert_eq!(peak["memory"]["type"], "array");
    assert_eq!(peak["top"]["type"], "integer");
    assert_eq!(peak["all_frames"]["type"], "boolean");
    for output in ["format", "output", "width", "list_runs"] {
        assert!(peak.get(output).is_none(), "peak takes {output}");
    }
    assert_eq!(tools[1]["annotations"]["readOnlyHint"], true);

    for (answer, args) in [
        (&answers[1], vec!["peak", "pprof/training.prof"]),
        (
            &answers[2],
            vec![
                "peak",
                "torch/snapshot.p4.pickle",
                "--by",
                "phase",
                "--top",
                "2",
            ],
        ),
        (
            &answers[3],
            vec!["diff", "pprof/leak1.prof", "pprof/leak4.prof"],
        ),
        (
            &answers[4],
            vec![
                "leaks",
                "pprof/leak1.prof",
                "pprof/leak2.prof",
                "pprof/leak3.prof",
                "pprof/leak4.prof",
            ],
        ),
        (
            &answers[5],
            vec!["peak", "pprof/training.prof", "--budget", "1KiB"],
        ),
    ] {
        assert_eq!(answer["result"]["isError"], false, "{args:?}: {answer}");
        assert_eq!(
            answer["result"]["structuredContent"],
            cli_json(&root, &args),
            "{args:?}"
        );
        let digest = text(answer);
        assert!(
            digest.starts_with(&format!("memtool {} {}", args[0], args[1])),
            "{digest}"
        );
        assert!(
            digest.contains("| bytes |") || digest.contains("bytes"),
            "{digest}"
        );
    }
    // `top` is the digest's rows per table: under the last heading, the
    // heading row, the rule and 2 rows.
    let by_phase = text(&answers[2]);
    let table = by_phase.split("### ").last().unwrap();
    assert_eq!(
        table.lines().filter(|l| l.starts_with("| ")).count(),
        2 + 2,
        "{by_phase}"
    );
    // A failed gate is an answer: the digest says it, with the gate's line.
    let gate = text(&answers[5]);
    assert!(
        gate.contains("a gate failed") && gate.contains("1.00 KiB"),
        "{gate}"
    );
}

#[test]
fn tools_refuse_what_the_command_line_refuses() {
    let root = common::repo().join("tests");
    let outside = [
        "../README.md",
        "/etc/passwd",
        "../no/such.prof",
        "pprof/../../Cargo.toml",
    ];
    let hostile = [
        "broken/global-reduce.pickle",
        "broken/deep.pickle",
        "broken/bomb.gz",
    ];
    let mut requests: Vec<Value> = outside
        .iter()
        .chain(&hostile)
        .map(|f| call("peak", json!({ "files": [f] })))
        .collect();
    requests.push(call("peak", json!({ "files": ["-"] })));
    requests.push(call(
        "peak",
        json!({ "files": ["pprof/training.prof"], "by": "colour" }),
    ));
    requests.push(call(
        "peak",
        json!({ "files": ["pprof/training.prof"], "output": "x" }),
    ));
    requests.push(call("render", json!({ "files": ["pprof/training.prof"] })));
    let (_, answers) = session(&root, &requests);
    for (file, answer) in outside.iter().chain(&hostile).zip(&answers) {
        assert_eq!(answer["result"]["isError"], true, "{file}: {answer}");
        let line = cli_error(&root, &["peak", file]);
        assert!(
            !line.contains('\n') && line.starts_with(&format!("memtool: {file}: ")),
            "{line}"
        );
        assert_eq!(text(answer), line, "{file}");
    }
    for answer in &answers[..outside.len()] {
        assert!(text(answer).contains("outside"), "{answer}");
    }
    let rest: Vec<&str> = answers[outside.len() + hostile.len()..]
        .iter()
        .map(text)
        .collect();
    assert_eq!(
        rest,
        [
            "memtool: -: standard input is the MCP channel; give a file under the server's root",
            "memtool: invalid value 'colour' for '--by <KEY>'",
            "memtool: peak takes no argument `output` (it takes: files, memory, budget, at, at_entry, by, \
             top, all_frames, library, jobs, sort, category, categories, max_decompressed, host, run, \
             xprof_compat)",
            "memtool: no tool named `render` (there are: summary, peak, leaks, diff, frag, oom, ranks)",
        ]
    );
    assert!(!root.join("x").exists());
}
