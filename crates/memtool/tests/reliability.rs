//! Hostile inputs and outputs (issue 27): profiles from pipes, FIFOs and
//! devices; names with terminal escapes on every message path; `-o` over a
//! private file and through symlinks; a worker killed mid-write.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{memtool, repo_fixture};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "memtool-reliability-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What is in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn profile() -> String {
    repo_fixture("pprof/training.prof").display().to_string()
}

/// `summary` of the test profile to stdout: what `-o` must write.
fn summary_text() -> Vec<u8> {
    let out = memtool().args(["summary", &profile()]).output().unwrap();
    assert!(out.status.success());
    out.stdout
}

#[test]
fn output_over_a_private_file_keeps_its_mode_and_owner() {
    let dir = temp_dir("mode");
    let report = dir.join("report.txt");
    std::fs::write(&report, "old").unwrap();
    std::fs::set_permissions(&report, std::fs::Permissions::from_mode(0o600)).unwrap();
    // As root, the replaced file belongs to someone else (nobody): the
    // report stays theirs. Run as another user, the owner is that user
    // whatever memtool does, and the mode is what is checked.
    let root = rustix_uid() == 0;
    if root {
        std::os::unix::fs::chown(&report, Some(65534), Some(65534)).unwrap();
    }
    let before = std::fs::metadata(&report).unwrap();
    let out = memtool()
        .args(["summary", &profile(), "-o"])
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = std::fs::metadata(&report).unwrap();
    assert_ne!(after.ino(), before.ino(), "replaced, not written in place");
    assert_eq!(after.mode() & 0o7777, 0o600);
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert_eq!(std::fs::read(&report).unwrap(), summary_text());
    assert_eq!(listing(&dir), ["report.txt"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The user id the tests run as (`id -u`).
fn rustix_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
}

#[test]
fn output_through_a_symlink_writes_its_target_and_refuses_a_directory() {
    let dir = temp_dir("links");
    std::fs::create_dir(dir.join("folder")).unwrap();
    std::os::unix::fs::symlink("folder", dir.join("to-folder")).unwrap();
    std::fs::write(dir.join("target.txt"), "old").unwrap();
    std::os::unix::fs::symlink("target.txt", dir.join("to-file")).unwrap();
    std::os::unix::fs::symlink("new.txt", dir.join("dangling")).unwrap();

    // A symlink to a directory is refused as the directory is.
    for name in ["folder", "to-folder"] {
        let out = memtool()
            .current_dir(&dir)
            .args(["summary", &profile(), "-o", name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let through = if name == "to-folder" {
            " (through a symlink)"
        } else {
            ""
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("memtool: {name}: is a directory{through}; give -o a file name\n")
        );
    }
    assert!(std::fs::symlink_metadata(dir.join("to-folder"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(listing(&dir.join("folder")), Vec::<String>::new());

    // A symlink to a file (or to nothing yet) is followed: the target gets
    // the report, the link stays a link.
    for (link, target) in [("to-file", "target.txt"), ("dangling", "new.txt")] {
        let out = memtool()
            .current_dir(&dir)
            .args(["summary", &profile(), "-o", link])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let meta = std::fs::symlink_metadata(dir.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
        assert_eq!(std::fs::read(dir.join(target)).unwrap(), summary_text());
    }
    assert_eq!(
        listing(&dir),
        ["dangling", "folder", "new.txt", "target.txt", "to-file", "to-folder"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process ids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// On a filesystem without `O_TMPFILE` the output is written under a
/// temporary name (the test hook forces that path): SIGKILL of the worker,
/// as the OOM killer sends it, leaves nothing, because the supervisor
/// removes the name.
#[test]
fn a_worker_killed_mid_write_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = temp_dir("killed");
    for old in [None, Some("old")] {
        let target = dir.join("big.html");
        if let Some(old) = old {
            std::fs::write(&target, old).unwrap();
        }
        let mut supervisor = Command::new(assert_cmd::cargo::cargo_bin("memtool"))
            .args(["render", &profile(), "-o"])
            .arg(&target)
            .env("MEMTOOL_TEST_NAMED_TEMP_MS", "20000")
            .spawn()
            .unwrap();
        let tmp = dir.join(format!(".big.html.memtool-{}.tmp", supervisor.id()));
        let start = std::time::Instant::now();
        while !tmp.exists() {
            assert!(start.elapsed().as_secs() < 30, "no temporary file: {:?}", listing(&dir));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let workers = children(supervisor.id());
        assert_eq!(workers.len(), 1, "one worker: {workers:?}");
        let killed = Command::new("kill")
            .args(["-KILL", &workers[0].to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = supervisor.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "dies as its worker did: {status:?}");
        assert!(start.elapsed().as_secs() < 15, "not after the pause");
        let expected: Vec<String> = old.iter().map(|_| "big.html".to_string()).collect();
        assert_eq!(listing(&dir), expected, "replacing {old:?}");
        if let Some(old) = old {
            assert_eq!(std::fs::read_to_string(&target).unwrap(), old);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
