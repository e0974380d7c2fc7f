//! Running out of memory, and panics, through the supervisor: one line
//! for every command and format.

use std::io::Write;

use super::{fixture, temp_dir, write};
use crate::common::{memtool, repo_fixture};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Runs memtool under an address-space limit (`ulimit -v`, KiB).
fn under_ulimit(kib: u64, args: &[&str]) -> std::process::Output {
    let mut script = format!(
        "ulimit -v {kib}; exec {}",
        assert_cmd::cargo::cargo_bin("memtool").display()
    );
    for a in args {
        script.push_str(&format!(" '{a}'"));
    }
    std::process::Command::new("sh")
        .args(["-c", &script])
        // The standard library's out-of-memory message prints a backtrace
        // under it, which once hung memtool: every run has it.
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

#[test]
fn a_panic_shows_the_backtrace_asked_for_through_the_supervisor() {
    let profile = fixture("training.prof");
    for (style, shown) in [(None, false), (Some("1"), true), (Some("full"), true)] {
        let mut command = memtool();
        command
            .args(["summary", &profile])
            .env("MEMTOOL_TEST_PANIC", "1")
            .env_remove("RUST_BACKTRACE");
        if let Some(style) = style {
            command.env("RUST_BACKTRACE", style);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(101), "{style:?}: {stderr}");
        assert!(stderr.contains("MEMTOOL_TEST_PANIC is set"), "{stderr}");
        assert_eq!(
            stderr.contains("stack backtrace:") && stderr.contains("memtool::main"),
            shown,
            "{style:?}: {stderr}"
        );
        // The short form starts at the panic, the full one in the hook.
        assert_eq!(
            stderr.contains("panic_backtraces"),
            style == Some("full"),
            "{style:?}: {stderr}"
        );
    }
}

#[test]
fn running_out_of_memory_while_inflating_is_one_line_for_every_command() {
    // 600 MiB that start like a trace, in 600 KB of gzip members: within
    // the 4 GiB cap, not within an address space of 300 MiB.
    let dir = temp_dir("oom");
    let mut bytes = gzip(br#"{"traceEvents": ["#);
    let spaces = gzip(&vec![b' '; 1 << 20]);
    for _ in 0..600 {
        bytes.extend_from_slice(&spaces);
    }
    let path = write(&dir, "big.json.gz", &bytes);
    let out_file = dir.join("out").display().to_string();
    for args in [
        vec!["summary", &path],
        vec!["peak", &path],
        vec!["leaks", &path],
        vec!["frag", &path],
        vec!["diff", &path, &path],
        vec!["render", &path, "-o", &out_file],
    ] {
        let out = under_ulimit(300 << 10, &args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "memtool: {path}: out of memory: the decompressed input needed more than "
            )),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("ulimit -v"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PyTorch trace of `n` allocations, each freed after the next one and
/// under an operator of its own: tens of MiB of model and analysis from a
/// few MiB of text.
fn large_trace(n: usize) -> String {
    let mut text = String::from(r#"{"traceEvents": ["#);
    for i in 0..n {
        let ts = i * 10;
        let addr = 4096 * (i % 1000 + 1);
        text.push_str(&format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "aten::op{}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 9, "args": {{}}}}, "#,
            i % 5000
        ));
        text.push_str(&format!(
            r#"{{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {}, "args": {{"Addr": {addr}, "Bytes": 1024, "Device Id": 0, "Device Type": 1}}}}, "#,
            ts + 1
        ));
        if i > 0 {
            text.push_str(&format!(
                r#"{{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {}, "args": {{"Addr": {}, "Bytes": -1024, "Device Id": 0, "Device Type": 1}}}}, "#,
                ts + 2,
                4096 * ((i - 1) % 1000 + 1)
            ));
        }
    }
    text.push_str(r#"{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]}"#);
    text
}

/// A memory timeline of `n` rows whose categories all change every row.
fn large_timeline(n: usize) -> String {
    let times: Vec<String> = (0..n).map(|i| (i * 10).to_string()).collect();
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let row: Vec<String> = (0..9)
                .map(|c| ((i * 7 + c * 13) % 4096).to_string())
                .collect();
            format!("[{}]", row.join(", "))
        })
        .collect();
    format!("[[{}], [{}]]", times.join(", "), rows.join(", "))
}

#[test]
fn running_out_of_memory_anywhere_is_one_line_for_every_command_and_format() {
    // The smallest address space memtool runs in (its binary, libraries
    // and what it sets up, read to the end of an empty file), in steps of
    // 128 KiB: below it, too little is left for any input. What it sets up
    // includes its arguments, parsed before anything is supervised: the
    // empty file is given as many times as the longest command line below.
    let empty = repo_fixture("broken/empty.prof").display().to_string();
    let mut empties = vec!["summary"];
    empties.extend(std::iter::repeat_n(empty.as_str(), 60));
    let start = (4096..32768)
        .step_by(128)
        .find(|&kib| {
            let out = under_ulimit(kib, &empties);
            String::from_utf8_lossy(&out.stderr).contains("file is empty")
        })
        .expect("memtool runs in 32 MiB");
    let dir = temp_dir("oom-anywhere");
    let trace = write(&dir, "large.pt.trace.json", large_trace(10_000).as_bytes());
    let timeline = write(
        &dir,
        "large.memory_timeline.json",
        large_timeline(10_000).as_bytes(),
    );
    let page = dir.join("page.html").display().to_string();
    // Small fixtures given many times (a series of profiles or snapshots)
    // and large generated ones: each needs more than memtool itself.
    let many = |rel: &str| vec![repo_fixture(rel).display().to_string(); 60];
    let inputs: [Vec<String>; 6] = [
        many("pprof/training.prof"),
        many("torch/snapshot.p4.pickle"),
        many("torch/synthetic.pt.trace.json.gz"),
        vec![repo_fixture("xspace/jax_mlp.xplane.pb")
            .display()
            .to_string()],
        vec![trace],
        vec![timeline],
    ];
    let commands = [
        "summary", "peak", "leaks", "frag", "diff", "render", "oom", "ranks",
    ];
    let mut limits_failed = 0;
    let mut by_command = [0; 8];
    for files in &inputs {
        let mut for_input = 0;
        for (c, command) in commands.iter().enumerate() {
            let mut args: Vec<&str> = vec![command];
            match *command {
                // One side a file, the other the rest.
                "diff" => args.extend([files[0].as_str(), files[files.len() - 1].as_str()]),
                _ => args.extend(files.iter().map(String::as_str)),
            }
            if *command == "render" {
                args.extend(["-o", &page]);
            }
            // Limits from where memtool runs up to where the command
            // succeeds: each runs out at a later point of the work.
            let mut kib = start;
            loop {
                let out = under_ulimit(kib, &args);
                if out.status.success() {
                    break;
                }
                let stderr = String::from_utf8_lossy(&out.stderr);
                let shown = format!("{command} {} at {kib} KiB: {stderr}", files[0]);
                assert_eq!(out.status.code(), Some(2), "{shown}");
                // Warnings and notes said before it ran out may precede the line.
                let lines: Vec<&str> = stderr
                    .lines()
                    .filter(|l| !l.starts_with("warning: ") && !l.starts_with("note: "))
                    .collect();
                assert_eq!(lines.len(), 1, "{shown}");
                assert!(lines[0].starts_with("memtool: "), "{shown}");
                assert!(lines[0].contains("out of memory"), "{shown}");
                by_command[c] += 1;
                for_input += 1;
                // Fine steps where small inputs run out, wider above.
                kib += ((kib - start) / 4).max(64);
                assert!(kib < 4 << 20, "{shown}: never succeeds");
            }
        }
        assert!(
            for_input >= 2,
            "{}: only {for_input} limits too small",
            files[0]
        );
        limits_failed += for_input;
    }
    for (command, failures) in commands.iter().zip(by_command) {
        assert!(failures >= 2, "{command}: only {failures} limits too small");
    }
    eprintln!("{limits_failed} runs out of memory, each one line");
    let _ = std::fs::remove_dir_all(&dir);
}
