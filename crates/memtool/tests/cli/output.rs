//! Where output goes: `-o` files written whole and atomically (no
//! temporaries, even on a signal), devices and FIFOs in place, `-o -`,
//! never over an input, never a page into a terminal; a closed stdout.

use super::{fixture, temp_dir, write};
use crate::common::{fails, json, memtool, repo_fixture};

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
