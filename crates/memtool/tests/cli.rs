//! The CLI contract shared by every subcommand: exit codes, one-line errors,
//! stdin, atomic `-o`, help with examples. Uses fixtures made by
//! `scripts/capture_jax_pprof.py` and committed under `tests/pprof`.

mod common;

use std::io::Write;

use common::{fails, json, memtool, repo_fixture};
use flate2::read::GzDecoder;

fn fixture(name: &str) -> String {
    repo_fixture(&format!("pprof/{name}")).display().to_string()
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memtool-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

fn raw_profile() -> Vec<u8> {
    let gz = std::fs::read(fixture("training.prof")).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut GzDecoder::new(&gz[..]), &mut raw).unwrap();
    raw
}

/// Asserts exit code 2 and a single line starting with `memtool: <path>: `.
fn one_line_error(args: &[&str], path: &str) -> String {
    let stderr = fails(args, 2);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!("memtool: {path}: ")),
        "names the file: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn malformed_inputs_exit_2_with_one_line_naming_the_file() {
    let dir = temp_dir("malformed");
    let gz = std::fs::read(fixture("training.prof")).unwrap();
    let raw = raw_profile();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.prof", vec![], "file is empty"),
        (
            "truncated-gzip.prof",
            gz[..gz.len() / 2].to_vec(),
            "invalid gzip: gzip stream is truncated",
        ),
        (
            "random.bin",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
            "not a memory profile",
        ),
        (
            "text.txt",
            b"hello, I am not a profile\n".to_vec(),
            "not a memory profile",
        ),
    ];
    for (name, bytes, expected) in cases {
        let p = write(&dir, name, &bytes);
        for cmd in ["summary", "peak", "leaks"] {
            let e = one_line_error(&[cmd, &p], &p);
            assert!(e.contains(expected), "{name}: {e}");
        }
    }
    // Truncated protobuf, at many points: always exit 2 with an offset, never a panic.
    // (Inside a field: training.prof's middle itself falls between two
    // top-level fields, where a cut leaves a shorter but well-formed message.)
    for cut in [7, raw.len() / 3, raw.len() / 2 + 1, raw.len() - 3] {
        let p = write(&dir, &format!("cut{cut}.prof"), &raw[..cut]);
        let e = one_line_error(&["summary", &p], &p);
        assert!(e.contains("invalid pprof profile: "), "{e}");
        assert!(
            e.contains(" (at byte "),
            "corrupt files give the offset: {e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn directories_and_missing_files_exit_2() {
    let dir = temp_dir("paths");
    let d = dir.display().to_string();
    let e = one_line_error(&["summary", &d], &d);
    assert!(e.contains(": is a directory, not a profile file"), "{e}");
    let missing = dir.join("nope.prof").display().to_string();
    let e = one_line_error(&["peak", &missing], &missing);
    assert!(e.ends_with("no such file\n"), "{e}");
    let e = one_line_error(&["diff", &fixture("leak1.prof"), &missing], &missing);
    assert!(e.contains("no such file"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_usage_exits_2() {
    fails(&["summary"], 2);
    fails(&["frobnicate"], 2);
    fails(&["summary", &fixture("leak1.prof"), "--format", "xml"], 2);
    let e = fails(
        &[
            "diff",
            &fixture("leak1.prof"),
            &fixture("leak2.prof"),
            "--fail-on-growth",
            "lots",
        ],
        2,
    );
    assert!(e.contains("neither a size"), "{e}");
}

#[test]
fn uncompressed_profiles_and_stdin_are_read() {
    let dir = temp_dir("stdin");
    let p = write(&dir, "raw.pb", &raw_profile());
    let from_file = json(&["summary", &p]);
    let out = memtool()
        .args(["summary", "-", "--format", "json"])
        .write_stdin(std::fs::read(fixture("training.prof")).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let from_stdin: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_stdin["inputs"][0]["path"], "<stdin>");
    assert_eq!(
        from_file["memories"][0]["top_stacks"],
        from_stdin["memories"][0]["top_stacks"]
    );
    assert_eq!(
        from_file["memories"][0]["peak_bytes"],
        from_stdin["memories"][0]["peak_bytes"]
    );
    assert!(from_file["memories"][0]["peak_bytes"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn output_files_are_written_whole_and_leave_no_temporaries() {
    let dir = temp_dir("out");
    let target = dir.join("peak.json");
    memtool()
        .args(["peak", &fixture("training.prof"), "--format", "json", "-o"])
        .arg(&target)
        .assert()
        .success()
        .stdout("");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    assert_eq!(v["schema"], "memtool/peak/v1");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("peak.json")]);
    // A failed run leaves the old file alone.
    let missing = dir.join("missing.prof");
    memtool()
        .args(["peak"])
        .arg(&missing)
        .args(["-o"])
        .arg(&target)
        .assert()
        .code(2);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&target).unwrap()).unwrap(),
        v
    );
    // An unwritable destination is one clear error.
    let e = fails(
        &[
            "peak",
            &fixture("training.prof"),
            "-o",
            "/nonexistent-dir/x.json",
        ],
        2,
    );
    assert!(
        e.starts_with("memtool: /nonexistent-dir/x.json: cannot write output"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memtool"))
        .args(["peak", &fixture("sharded.prof"), "--format", "csv"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    for cmd in ["summary", "peak", "leaks", "diff"] {
        let out = memtool().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Examples:") && text.contains(&format!("memtool {cmd} ")),
            "{cmd}: {text}"
        );
    }
}

/// `--help` leads with the options a user reaches for first and ends with
/// the rare ones under their own heading.
#[test]
fn help_lists_common_options_first_and_rare_ones_last() {
    for cmd in ["summary", "peak", "leaks", "diff", "frag", "oom"] {
        let out = memtool().args([cmd, "-h"]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{cmd}: no {needle}: {text}"))
        };
        assert!(at("--format") < at("--output"), "{cmd}: {text}");
        assert!(at("--output") < at("--memory"), "{cmd}: {text}");
        assert!(at("--memory") < at("--top"), "{cmd}: {text}");
        assert!(at("--top") < at("Advanced options:"), "{cmd}: {text}");
        assert!(
            at("Advanced options:") < at("--max-decompressed"),
            "{cmd}: {text}"
        );
    }
    let peak = memtool().args(["peak", "-h"]).output().unwrap();
    let text = String::from_utf8(peak.stdout).unwrap();
    let at = |needle: &str| text.find(needle).unwrap();
    assert!(
        at("--memory") < at("--budget") && at("--by") < at("--top"),
        "{text}"
    );
    assert!(at("Advanced options:") < at("--xprof-compat"), "{text}");
}

#[test]
fn tables_fit_100_columns() {
    for args in [
        vec!["summary", "--all-frames"],
        vec!["peak", "--all-frames"],
    ] {
        let out = memtool()
            .args(&args)
            .arg(fixture("training.prof"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        for line in text.lines().filter(|l| !l.contains(": ")) {
            assert!(
                line.chars().count() <= 100,
                "{} chars: {line}",
                line.chars().count()
            );
        }
    }
}

#[test]
fn markdown_output_is_tables() {
    let out = memtool()
        .args(["summary", &fixture("training.prof"), "--format", "md"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("### Memories\n\n| memory | kind | peak_bytes |"),
        "{text}"
    );
    assert!(text.contains("| cpu:0 | device |"));
}

#[test]
fn series_from_committed_fixtures_tell_leaks_from_caches() {
    let leak: Vec<String> = (1..=4).map(|i| fixture(&format!("leak{i}.prof"))).collect();
    let mut args = vec!["leaks"];
    args.extend(leak.iter().map(String::as_str));
    let v = json(&args);
    let top = &v["memories"][0]["findings"][0];
    assert_eq!(top["growth"], "steady");
    assert!(top["key"].as_str().unwrap().starts_with("keep_history "));
    // step k appends k*1000 float32 values: 4000 bytes per step, summed.
    let bytes: Vec<u64> = top["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    assert_eq!(bytes, vec![4000, 12000, 24000, 40000]);

    let cache: Vec<String> = (1..=6)
        .map(|i| fixture(&format!("cache{i}.prof")))
        .collect();
    let mut args = vec!["leaks"];
    args.extend(cache.iter().map(String::as_str));
    let v = json(&args);
    let top = &v["memories"][0]["findings"][0];
    assert_eq!(top["growth"], "bounded");
    assert_eq!(top["stopped_at"], "cache3.prof");
    assert!(top["key"].as_str().unwrap().starts_with("cached_table "));
    let _ = std::io::stdout().flush();
}

#[test]
fn diff_reads_both_sides_in_parallel_but_reports_the_base_first() {
    let dir = temp_dir("diff-both-broken");
    let raw = raw_profile();
    // The base fails late (cut in the middle, inside a field: the middle
    // itself falls between two), the new side at once (empty): the base's
    // error is still the one reported.
    let base = write(&dir, "base.prof", &raw[..raw.len() / 2 + 1]);
    let new = write(&dir, "new.prof", b"");
    let err = one_line_error(&["diff", &base, &new], &base);
    assert!(err.contains("invalid pprof"), "{err}");
    // Both sides good: the same result as reading them one after the other.
    let good = fixture("training.prof");
    let both = json(&["diff", &good, &good]);
    assert_eq!(both["total"]["base_bytes"], 3735552, "{both}");
    assert_eq!(both["total"]["delta_bytes"], 0, "{both}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Committed fixtures name their frames relative to the checkout and the
/// virtualenv (`scripts/…`, `venv/lib/pythonX.Y/site-packages/…`), never by a
/// path of the machine that made them: the capture scripts pass what they
/// write through `scripts/relativize_fixture_paths.py`.
#[test]
fn committed_fixtures_carry_no_absolute_path_of_the_machine_that_made_them() {
    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&common::repo().join("tests"), &mut files);
    walk(&common::repo().join("examples"), &mut files);
    assert!(files.len() > 40, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let mut text = bytes.clone();
        if bytes.starts_with(&[0x1f, 0x8b]) {
            // Broken ones too (as far as they decompress), but not past 1 MiB
            // of the decompression bomb (zeros).
            let mut raw = Vec::new();
            let mut gz = std::io::Read::take(GzDecoder::new(&bytes[..]), 1 << 20);
            let _ = std::io::Read::read_to_end(&mut gz, &mut raw);
            text.extend_from_slice(&raw);
        }
        for prefix in ["/work/", "/tmp/", "/home/", "/root/"] {
            assert!(
                !text.windows(prefix.len()).any(|w| w == prefix.as_bytes()),
                "{} holds a path under {prefix}: rewrite it with scripts/relativize_fixture_paths.py",
                path.display()
            );
        }
    }
}

#[test]
fn every_command_refuses_a_memory_it_does_not_have() {
    let one = fixture("leak1.prof");
    let two = fixture("leak2.prof");
    let cases: Vec<Vec<&str>> = vec![
        vec!["summary", &one],
        vec!["peak", &one],
        vec!["leaks", &one, &two],
        vec!["frag", &one],
        vec!["diff", &one, &two],
        vec!["render", &one],
        vec!["render", &one, &two],
        vec!["render", &one, &two, "--series"],
    ];
    for args in cases {
        let mut args = args.clone();
        args.extend(["--memory", "cpu:9"]);
        let out = memtool().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(out.stdout, b"", "{args:?} prints nothing");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            stderr, "memtool: no memory or module named `cpu:9` (there are: cpu:0)\n",
            "{args:?}"
        );
    }
    // The memory that is there still selects it, in every command.
    for args in [
        vec!["leaks", &one, &two, "--memory", "cpu:0"],
        vec!["frag", &one, "--memory", "cpu:0"],
        vec!["diff", &one, &two, "--memory", "cpu:0"],
    ] {
        let v = json(&args);
        assert_eq!(
            v["schema"].as_str().unwrap().split('/').nth(1),
            Some(args[0])
        );
    }
    memtool()
        .args(["render", &one, "--memory", "cpu:0", "--format", "folded"])
        .assert()
        .success();
}

#[test]
fn diff_takes_exactly_two_profiles() {
    let one = fixture("leak1.prof");
    let e = fails(&["diff", &one], 2);
    assert!(e.contains("2 values required for '<BASE> <NEW>'"), "{e}");
    let e = fails(&["diff", &one, &one, &one], 2);
    assert!(e.contains("2 values required"), "{e}");
}

#[test]
fn group_keys_are_one_vocabulary_for_diff_and_render() {
    let one = fixture("leak1.prof");
    let two = fixture("leak2.prof");
    for key in [
        "stack",
        "user-frame",
        "shape",
        "op",
        "dtype",
        "category",
        "phase",
        "stream",
        "compiled-graph",
    ] {
        let v = json(&["diff", &one, &two, "--by", key]);
        assert_eq!(v["schema"], "memtool/diff/v1", "{key}");
        let v = json(&["peak", &two, "--by", key]);
        assert_eq!(v["schema"], "memtool/peak/v1", "{key}");
        memtool()
            .args(["render", &one, "--format", "svg", "--group-by", key])
            .assert()
            .success();
    }
    for cmd in [
        vec!["diff", &one, &two, "--by"],
        vec!["peak", &one, "--by"],
        vec!["render", &one, "--group-by"],
    ] {
        let mut args = cmd.clone();
        args.push("frame");
        let e = fails(&args, 2);
        assert!(
            e.contains(
                "[possible values: stack, user-frame, shape, op, dtype, category, phase, \
                 stream, compiled-graph]"
            ),
            "{e}"
        );
    }
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}

fn file_type(path: &std::path::Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

fn run_ok(program: &str, args: &[&std::ffi::OsStr]) {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?}");
}

#[test]
fn output_to_a_device_or_fifo_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = temp_dir("devices");
    let profile = fixture("training.prof");
    // Device nodes of our own, never the system's /dev/null and /dev/full;
    // only root may make them.
    if is_root() {
        let null = dir.join("null");
        let full = dir.join("full");
        run_ok(
            "mknod",
            &[null.as_os_str(), "c".as_ref(), "1".as_ref(), "3".as_ref()],
        );
        run_ok(
            "mknod",
            &[full.as_os_str(), "c".as_ref(), "1".as_ref(), "7".as_ref()],
        );
        for args in [
            vec!["summary", &profile],
            vec!["peak", &profile, "--format", "csv"],
            vec!["render", &profile],
        ] {
            memtool()
                .args(&args)
                .arg("-o")
                .arg(&null)
                .assert()
                .success()
                .stdout("")
                .stderr("");
            assert!(file_type(&null).is_char_device(), "{args:?}");
            let out = memtool().args(&args).arg("-o").arg(&full).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert_eq!(
                String::from_utf8(out.stderr).unwrap(),
                format!(
                    "memtool: {}: cannot write output: No space left on device (os error 28)\n",
                    full.display()
                )
            );
            assert!(file_type(&full).is_char_device(), "{args:?}");
        }
    } else {
        eprintln!("not root: device nodes not tested, FIFOs only");
    }
    let fifo = dir.join("fifo");
    run_ok("mkfifo", &[fifo.as_os_str()]);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    memtool()
        .args(["summary", &profile, "--format", "json", "-o"])
        .arg(&fifo)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert_eq!(
        v["memories"][0]["peak_bytes"],
        json(&["summary", &profile])["memories"][0]["peak_bytes"]
    );
    assert!(file_type(&fifo).is_fifo());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names.iter().all(|n| !n.to_string_lossy().ends_with(".tmp")),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dash_o_dash_is_stdout() {
    let profile = fixture("training.prof");
    let to_stdout = memtool().args(["peak", &profile]).output().unwrap();
    let dashed = memtool()
        .args(["peak", &profile, "-o", "-"])
        .output()
        .unwrap();
    assert!(dashed.status.success());
    assert!(to_stdout.stdout.starts_with(b"Peaks\n"));
    assert_eq!(dashed.stdout, to_stdout.stdout);
    let svg = memtool()
        .args(["render", &profile, "--format", "svg", "-o", "-"])
        .output()
        .unwrap();
    assert!(
        svg.stdout.starts_with(b"<svg"),
        "{}",
        String::from_utf8_lossy(&svg.stdout[..40])
    );
    assert!(!std::path::Path::new("-").exists());
}

#[test]
fn output_over_an_input_is_refused() {
    let dir = temp_dir("self");
    let original = std::fs::read(fixture("training.prof")).unwrap();
    let profile = write(&dir, "self.prof", &original);
    let other = fixture("leak1.prof");
    let link = dir.join("link.prof");
    std::fs::hard_link(&profile, &link).unwrap();
    let link = link.display().to_string();
    let refused = format!(
        "memtool: {profile}: is an input ({profile}): refusing to write the report over it\n"
    );
    for args in [
        vec!["summary", &profile, "-o", &profile],
        vec!["peak", &other, &profile, "-o", &profile],
        vec!["leaks", &other, &profile, "-o", &profile],
        vec!["frag", &profile, "-o", &profile],
        vec!["diff", &other, &profile, "-o", &profile],
        vec!["render", &profile, "-o", &profile],
        vec!["render", &other, &profile, "-o", &profile],
    ] {
        assert_eq!(fails(&args, 2), refused, "{args:?}");
    }
    // The same file by another name, or on standard input.
    assert_eq!(
        fails(&["summary", &link, "-o", &profile], 2),
        format!("memtool: {profile}: is an input ({link}): refusing to write the report over it\n")
    );
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("memtool"))
        .args(["summary", "-", "-o", &profile])
        .stdin(std::fs::File::open(&profile).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "memtool: {profile}: is an input (<stdin>): refusing to write the report over it\n"
        )
    );
    assert_eq!(std::fs::read(&profile).unwrap(), original);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What is in `dir`, sorted.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_signal_during_a_write_leaves_neither_temporary_nor_partial_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = temp_dir("signal");
    let profile = fixture("training.prof");
    let target = dir.join("big.html");
    let reference = memtool()
        .args(["render", &profile])
        .output()
        .unwrap()
        .stdout;
    assert!(reference.len() > 10_000);
    // Through a named temporary file, caught while it exists: SIGINT and
    // SIGTERM both remove it and end memtool as the signal does.
    for signal in ["TERM", "INT"] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memtool"))
            .args(["render", &profile, "-o"])
            .arg(&target)
            .env("MEMTOOL_TEST_NAMED_TEMP_MS", "5000")
            .spawn()
            .unwrap();
        let tmp = format!(".big.html.memtool-{}.tmp", child.id());
        let start = std::time::Instant::now();
        while !dir.join(&tmp).exists() {
            assert!(
                start.elapsed().as_secs() < 30,
                "no {tmp}: {:?}",
                listing(&dir)
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        run_ok(
            "kill",
            &[
                format!("-{signal}").as_ref(),
                child.id().to_string().as_ref(),
            ],
        );
        let status = child.wait().unwrap();
        let number = if signal == "TERM" { 15 } else { 2 };
        assert_eq!(status.signal(), Some(number), "{status:?}");
        assert!(
            start.elapsed().as_secs() < 4,
            "killed at once, not after the pause"
        );
        assert_eq!(listing(&dir), Vec::<String>::new(), "{signal}");
    }
    // With the anonymous temporary file, a signal at any moment (SIGKILL
    // included) leaves the target whole, as it was, or absent, and nothing
    // else. A new file is linked whole, never named before. Replacing a
    // file, the temporary name exists from the link to the rename; SIGKILL
    // of memtool sends the process doing the work SIGTERM, which removes it
    // (a moment later: it is another process).
    for old in [None, Some(&b"old"[..])] {
        for delay_ms in [0u64, 5, 10, 20, 40, 80, 160] {
            match old {
                Some(bytes) => std::fs::write(&target, bytes).unwrap(),
                None => {
                    let _ = std::fs::remove_file(&target);
                }
            }
            let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memtool"))
                .args(["render", &profile, "-o"])
                .arg(&target)
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            let signal = if delay_ms % 10 == 0 { "-KILL" } else { "-TERM" };
            let _ = std::process::Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
            child.wait().unwrap();
            let start = std::time::Instant::now();
            while old.is_some() && listing(&dir).len() > 1 && start.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let names = listing(&dir);
            let shown = format!("{signal} after {delay_ms} ms, replacing {old:?}");
            if old.is_none() && names.is_empty() {
                continue;
            }
            assert_eq!(names, vec!["big.html".to_string()], "{shown}");
            let content = std::fs::read(&target).unwrap();
            assert!(
                content == reference || Some(&content[..]) == old,
                "{shown}: {} bytes",
                content.len()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bash completion script loads in bash and completes a subcommand and
/// a flag of it.
#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let script = memtool().args(["completions", "bash"]).output().unwrap();
    assert!(script.status.success());
    // bash calls a completion function with the command, the word being
    // completed and the word before it.
    let complete = |words: &str, cword: usize| -> Vec<String> {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source /dev/stdin; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 _memtool memtool \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\""
            ))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut bash| {
                bash.stdin.take().unwrap().write_all(&script.stdout)?;
                bash.wait_with_output()
            })
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };
    assert_eq!(complete("memtool pe", 1), ["peak"]);
    assert!(complete("memtool peak --bu", 2).contains(&"--budget".to_string()));
}

/// Each command's manual page renders with `man -l`, with its options.
#[test]
fn manual_pages_render_with_man() {
    for (args, name, option) in [
        (vec!["man"], "memtool", "summary"),
        (vec!["man", "peak"], "memtool-peak", "--budget"),
        (vec!["man", "diff"], "memtool-diff", "--fail-on-growth"),
    ] {
        let page = memtool().args(&args).output().unwrap();
        assert!(page.status.success());
        let out = std::process::Command::new("man")
            .args(["-l", "-"])
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut man| {
                man.stdin.take().unwrap().write_all(&page.stdout)?;
                man.wait_with_output()
            })
            .expect("man is installed (Debian's man-db)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{name}(1)")), "{text}");
        assert!(text.contains(option), "{name}: {text}");
        // NAME and SYNOPSIS read as one types the command: `memtool peak`,
        // the options one reaches for first leading the synopsis.
        if let [_, command] = args.as_slice() {
            let words: Vec<&str> = text.split_whitespace().collect();
            let at = |word: &str| words.iter().position(|w| *w == word);
            let name_at = at("NAME").unwrap();
            assert_eq!(
                words[name_at + 1..name_at + 3],
                ["memtool", *command],
                "{text}"
            );
            let synopsis_at = at("SYNOPSIS").unwrap();
            assert_eq!(
                words[synopsis_at + 1..synopsis_at + 4],
                ["memtool", *command, "[--format]"],
                "{text}"
            );
        }
    }
    let dir = std::env::temp_dir().join(format!("memtool-man-{}", std::process::id()));
    let out = memtool()
        .args(["man", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            "memtool-completions.1",
            "memtool-diff.1",
            "memtool-export.1",
            "memtool-frag.1",
            "memtool-leaks.1",
            "memtool-man.1",
            "memtool-mcp.1",
            "memtool-oom.1",
            "memtool-peak.1",
            "memtool-ranks.1",
            "memtool-render.1",
            "memtool-summary.1",
            "memtool.1"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `render` with stdout a terminal refuses, with a hint, instead of printing
/// a page of markup; piped, it writes the page.
#[test]
fn render_never_writes_a_page_into_a_terminal() {
    let bin = assert_cmd::cargo::cargo_bin("memtool");
    let training = repo_fixture("pprof/training.prof");
    // `script` runs the command with its stdout on a new pseudo-terminal.
    let out = std::process::Command::new("script")
        .args(["-qec"])
        .arg(format!("{} render {}", bin.display(), training.display()))
        .arg("/dev/null")
        .output()
        .expect("script (util-linux) runs");
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        "memtool: render writes an HTML page, not text for a terminal; give -o report.html \
         (or redirect stdout)"
    );
    let piped = memtool().arg("render").arg(&training).output().unwrap();
    assert!(piped.status.success());
    assert!(piped.stdout.starts_with(b"<!DOCTYPE html>"));
}

/// Warnings are written to stderr in every format, never among the tables
/// or CSV records, and JSON keeps them in the document too.
#[test]
fn warnings_go_to_stderr_in_every_format() {
    let snapshot = "tests/torch/snapshot.p4.pickle";
    let warning =
        "warning: tests/torch/snapshot.p4.pickle: cuda:0: the trace starts after the program did";
    let commands: [&[&str]; 5] = [
        &["summary", snapshot],
        &["peak", snapshot],
        &["leaks", snapshot],
        &["frag", snapshot],
        &["diff", snapshot, snapshot],
    ];
    for command in commands {
        for format in ["table", "md", "csv", "json"] {
            let out = memtool()
                .current_dir(common::repo())
                .args(command)
                .args(["--format", format])
                .output()
                .unwrap();
            assert!(out.status.success(), "{command:?} {format}");
            let (stdout, stderr) = (
                String::from_utf8(out.stdout).unwrap(),
                String::from_utf8(out.stderr).unwrap(),
            );
            assert!(
                stderr.lines().any(|l| l.starts_with(warning)),
                "{command:?} {format}: {stderr}"
            );
            assert!(
                !stdout.contains("warning:"),
                "{command:?} {format}: {stdout}"
            );
            if format == "json" {
                let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
                assert!(
                    doc["warnings"]
                        .to_string()
                        .contains("the trace starts after the program did"),
                    "{command:?}: {doc}"
                );
            }
        }
    }
    let page = memtool()
        .current_dir(common::repo())
        .args(["render", snapshot, "--format", "folded"])
        .output()
        .unwrap();
    assert!(String::from_utf8(page.stderr)
        .unwrap()
        .lines()
        .any(|l| l.starts_with(warning)));
}

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
