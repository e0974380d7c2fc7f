//! Hostile inputs and outputs (issue 27): profiles from pipes, FIFOs and
//! devices; names with terminal escapes on every message path; `-o` over a
//! private file and through symlinks; a worker killed mid-write.

mod common;

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{memtool, repo_fixture};

fn temp_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("memtool-reliability-{tag}-{}", std::process::id()));
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
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
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta = std::fs::symlink_metadata(dir.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
        assert_eq!(std::fs::read(dir.join(target)).unwrap(), summary_text());
    }
    assert_eq!(
        listing(&dir),
        [
            "dangling",
            "folder",
            "new.txt",
            "target.txt",
            "to-file",
            "to-folder"
        ]
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
            assert!(
                start.elapsed().as_secs() < 30,
                "no temporary file: {:?}",
                listing(&dir)
            );
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
        assert_eq!(
            status.signal(),
            Some(9),
            "dies as its worker did: {status:?}"
        );
        assert!(start.elapsed().as_secs() < 15, "not after the pause");
        let expected: Vec<String> = old.iter().map(|_| "big.html".to_string()).collect();
        assert_eq!(listing(&dir), expected, "replacing {old:?}");
        if let Some(old) = old {
            assert_eq!(std::fs::read_to_string(&target).unwrap(), old);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What writes a test's standard input.
type Feed = Box<dyn FnMut(&mut dyn Write) -> std::io::Result<()> + Send>;

/// Runs memtool `args` with `feed` writing its standard input on a thread
/// until memtool stops reading (a broken pipe) or `feed` ends; returns the
/// output and how many bytes memtool took. Fails the test after 60 s.
fn run_fed(
    args: &[&str],
    mut feed: impl FnMut(&mut dyn Write) -> std::io::Result<()> + Send + 'static,
) -> (std::process::Output, u64) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("memtool"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut counted = Counted { inner: stdin, n: 0 };
        let _ = feed(&mut counted);
        counted.n
    });
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!("memtool {args:?} still reading after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    (output, writer.join().unwrap())
}

/// A writer that counts what went through.
struct Counted<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `chunk` again and again, `limit` bytes at most.
fn repeat(chunk: Vec<u8>, limit: u64) -> impl FnMut(&mut dyn Write) -> std::io::Result<()> + Send {
    move |out| {
        let mut sent = 0;
        while sent < limit {
            out.write_all(&chunk)?;
            sent += chunk.len() as u64;
        }
        Ok(())
    }
}

/// Pseudo-random bytes (xorshift), the same on every run.
fn random_bytes(n: usize, mut state: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

const NOT_A_PROFILE: &str = "<stdin>: not a memory profile memtool can read";

/// Endless or huge input that is no profile is refused after its head:
/// memtool stops reading at once (the writer's pipe breaks), whatever
/// follows, and says what the bytes are not.
#[test]
fn a_stream_that_is_no_profile_is_refused_after_its_head() {
    let endless = u64::MAX;
    let cases: Vec<(&str, Feed)> = vec![
        (
            "zeros (cat /dev/zero)",
            Box::new(repeat(vec![0; 1 << 16], endless)),
        ),
        ("yes", Box::new(repeat(b"y\n".repeat(1 << 15), endless))),
        // 300 MB of random bytes, as `head -c 300M /dev/urandom`.
        (
            "random bytes",
            Box::new(repeat(random_bytes(1 << 20, 27), 300 << 20)),
        ),
        // A gzip stream of zeros: refused on its inflated head.
        ("gzip'd zeros", Box::new(repeat_gzip_of_zeros())),
    ];
    for (what, feed) in cases {
        let start = std::time::Instant::now();
        let (out, taken) = run_fed(&["summary", "-"], feed);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(
            stderr.starts_with(&format!("memtool: {NOT_A_PROFILE}")),
            "{what}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        // The head (64 KiB), what the pipe and the writer held when it
        // broke: a few MB at most, never the stream.
        assert!(taken < 4 << 20, "{what}: {taken} bytes read");
        // Within a second on an idle machine; the tests share loaded cores.
        assert!(
            start.elapsed().as_secs() < 20,
            "{what}: {:?}",
            start.elapsed()
        );
    }
}

/// A gzip stream of zeros, 1 GiB inflated, written as it is compressed.
fn repeat_gzip_of_zeros() -> impl FnMut(&mut dyn Write) -> std::io::Result<()> + Send {
    |out| {
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            gz.write_all(&zeros)?;
        }
        gz.finish().map(|_| ())
    }
}

/// A character device is a stream too: `memtool summary /dev/zero` stops.
#[test]
fn a_device_that_is_no_profile_is_refused_after_its_head() {
    let start = std::time::Instant::now();
    let out = memtool()
        .args(["summary", "/dev/zero"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "memtool: /dev/zero: not a memory profile memtool can read (expected pprof, XSpace \
         .xplane.pb, a PyTorch snapshot pickle, a PyTorch trace JSON, or a log holding an XLA \
         out-of-memory report)\n"
    );
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

/// The test snapshot gzip'd, then 32 MiB of NUL padding (which gzip readers
/// take as the end), so that reading the stream whole would show in the
/// memory.
fn padded_gzip_snapshot() -> Vec<u8> {
    let snapshot = std::fs::read(repo_fixture("torch/snapshot.p2.pickle")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&snapshot).unwrap();
    let mut bytes = gz.finish().unwrap();
    bytes.resize(bytes.len() + (32 << 20), 0);
    bytes
}

/// Peak RSS in MiB at the end of a `MEMTOOL_TIMINGS` phase.
fn phase_rss_mib(timings: &str, phase: &str) -> f64 {
    let line = timings
        .lines()
        .find(|l| l.split_whitespace().next() == Some(phase))
        .unwrap_or_else(|| panic!("no phase {phase} in {timings}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[fields.len() - 1], "MiB", "{line}");
    fields[fields.len() - 2].parse().unwrap()
}

/// A profile on standard input or a FIFO reads as from a file: the same
/// report, and the same memory (the stream is spooled to a temporary
/// file, not held).
#[test]
fn a_gzipped_snapshot_piped_in_reads_as_from_a_file() {
    let dir = temp_dir("piped");
    let bytes = padded_gzip_snapshot();
    let file = dir.join("snapshot.pickle.gz");
    std::fs::write(&file, &bytes).unwrap();
    let from_file = memtool()
        .args(["summary", "--format", "json"])
        .arg(&file)
        .env("MEMTOOL_TIMINGS", "1")
        .output()
        .unwrap();
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    let file_timings = String::from_utf8_lossy(&from_file.stderr).into_owned();
    let report = |out: &[u8], path: &str| -> serde_json::Value {
        let text = String::from_utf8_lossy(out).replace(path, "INPUT");
        serde_json::from_str(&text).unwrap()
    };
    let expected = report(&from_file.stdout, &file.display().to_string());

    let fed = bytes.clone();
    let (piped, taken) = run_fed(&["summary", "--format", "json", "-"], move |out| {
        out.write_all(&fed)
    });
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(taken, bytes.len() as u64);
    assert_eq!(report(&piped.stdout, "<stdin>"), expected);

    // The same through a FIFO, with the timings.
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, &bytes))
    };
    let through_fifo = memtool()
        .args(["summary", "--format", "json"])
        .arg(&fifo)
        .env("MEMTOOL_TIMINGS", "1")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        through_fifo.status.success(),
        "{}",
        String::from_utf8_lossy(&through_fifo.stderr)
    );
    assert_eq!(
        report(&through_fifo.stdout, &fifo.display().to_string()),
        expected
    );
    let fifo_timings = String::from_utf8_lossy(&through_fifo.stderr).into_owned();
    // Read whole, the 32 MiB stream would be in memory when the files are
    // read; spooled, it is not.
    let read = phase_rss_mib(&fifo_timings, "read");
    assert!(
        read < 24.0,
        "{read} MiB after reading the FIFO:\n{fifo_timings}"
    );
    let (file_total, fifo_total) = (
        phase_rss_mib(&file_timings, "total"),
        phase_rss_mib(&fifo_timings, "total"),
    );
    assert!(
        fifo_total <= file_total * 1.1 + 2.0,
        "{fifo_total} MiB from the FIFO, {file_total} MiB from the file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A name that drives a terminal when printed raw: it sets the window title
/// (OSC … BEL), clears the screen (ESC [2J), starts a C1 CSI (U+009B),
/// reverses the text that follows (U+202E) and starts a line of its own.
const HOSTILE: &str = "dev\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}evil\nmemtool: FAKE";

/// Fails when `text` holds any of [`HOSTILE`]'s controls raw.
fn assert_neutral(what: &str, text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    for raw in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!text.contains(raw), "{what}: raw {raw:?} in {text}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("memtool: FAKE")),
        "{what}: a name's newline split the line: {text}"
    );
}

/// A protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field.
fn field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A JAX device memory profile (pprof) of one 1 KiB buffer on each of
/// `devices`, the device labels as given.
fn pprof_with_devices(devices: &[&str]) -> Vec<u8> {
    let strings = [
        "",
        "allocations",
        "count",
        "space",
        "bytes",
        "device",
        "kind",
        "buffer",
    ];
    let mut profile = Vec::new();
    for (kind, unit) in [(1, 2), (3, 4)] {
        let mut value_type = Vec::new();
        for (number, v) in [(1, kind), (2, unit)] {
            varint(&mut value_type, number << 3);
            varint(&mut value_type, v);
        }
        field(&mut profile, 1, &value_type);
    }
    for d in 0..devices.len() as u64 {
        let mut sample = Vec::new();
        let mut values = Vec::new();
        varint(&mut values, 1);
        varint(&mut values, 1024);
        field(&mut sample, 2, &values);
        for (key, value) in [(5, strings.len() as u64 + d), (6, 7)] {
            let mut label = Vec::new();
            for (number, v) in [(1, key), (2, value)] {
                varint(&mut label, number << 3);
                varint(&mut label, v);
            }
            field(&mut sample, 3, &label);
        }
        field(&mut profile, 2, &sample);
    }
    for s in strings.iter().chain(devices) {
        field(&mut profile, 6, s.as_bytes());
    }
    profile
}

/// Names from a profile, a file name or a logdir's folders reach the output
/// only neutralised (`\u{1b}`, as the tables show them): every error,
/// status and listing path, with a name holding ESC, BEL, U+009B, U+202E
/// and a newline.
#[test]
fn hostile_names_never_reach_the_terminal_raw() {
    let dir = temp_dir("names");
    let profile = dir.join("memory.prof");
    std::fs::write(&profile, pprof_with_devices(&[HOSTILE, "TPU_1"])).unwrap();
    let profile = profile.display().to_string();
    // The same profile under a hostile file name.
    let named = dir.join(format!("{HOSTILE}.prof"));
    std::fs::copy(&profile, &named).unwrap();
    let named = named.display().to_string();
    // A logdir whose run and host are hostile names.
    let logdir = dir.join("logdir");
    let run = logdir.join("plugins/profile").join(HOSTILE);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(
        repo_fixture("xspace/jax_mlp.xplane.pb"),
        run.join(format!("{HOSTILE}.xplane.pb")),
    )
    .unwrap();
    let older = logdir.join("plugins/profile/2020_01_01_00_00_00");
    std::fs::create_dir_all(&older).unwrap();
    std::fs::copy(
        repo_fixture("xspace/jax_mlp.xplane.pb"),
        older.join("host.xplane.pb"),
    )
    .unwrap();
    let logdir = logdir.display().to_string();
    let missing = dir.join(HOSTILE).display().to_string();
    let folder = dir.join(format!("{HOSTILE}.d"));
    std::fs::create_dir(&folder).unwrap();
    let folder = folder.display().to_string();

    let runs: Vec<(&str, Vec<&str>, Option<i32>)> = vec![
        // The memory names in the tables (the tables' own path).
        ("tables", vec!["summary", &profile], Some(0)),
        ("peak table", vec!["peak", &profile], Some(0)),
        // `--memory` / `--module`: "no memory named … (there are: …)".
        (
            "--memory",
            vec!["summary", &profile, "--memory", "nope"],
            Some(2),
        ),
        (
            "--module",
            vec!["peak", &profile, "--module", "nope"],
            Some(2),
        ),
        // A gate's line on stderr names the memory.
        ("gate", vec!["peak", &profile, "--budget", "1B"], Some(1)),
        // A file name in warnings, errors and reports.
        ("file name", vec!["summary", &named], Some(0)),
        ("no such file", vec!["summary", &missing], Some(2)),
        (
            "-o a folder",
            vec!["summary", &profile, "-o", &folder],
            Some(2),
        ),
        // The logdir's "reading run …" line, its listing, and its errors.
        (
            "reading run",
            vec!["summary", &logdir, "--run", HOSTILE],
            Some(0),
        ),
        (
            "--list-runs",
            vec!["summary", &logdir, "--list-runs"],
            Some(0),
        ),
        (
            "--host",
            vec!["summary", &logdir, "--run", HOSTILE, "--host", "nope"],
            Some(2),
        ),
        ("--run", vec!["summary", &logdir, "--run", "nope"], Some(2)),
        (
            "render",
            vec!["render", &named, "--format", "folded"],
            Some(0),
        ),
    ];
    for (what, args, code) in runs {
        let out = memtool().args(&args).output().unwrap();
        if let Some(code) = code {
            assert_eq!(
                out.status.code(),
                Some(code),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_neutral(&format!("{what} stdout"), &out.stdout);
        assert_neutral(&format!("{what} stderr"), &out.stderr);
        // The name is shown, neutralised, where the message names it.
        let both = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if what != "render" {
            assert!(
                both.contains("\\u{1b}"),
                "{what}: the name is not shown: {both}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bare pickle list of a million references to one segment (2 MB) was a
/// million segments (5.5 GB for 20 MB, issue 27): refused at the second,
/// in memory of the order of the file's size.
#[test]
fn a_million_references_to_one_segment_cost_what_the_file_does() {
    let dir = temp_dir("segments");
    let pickle = dir.join("segments.pickle");
    let mut bytes = vec![0x80, 4, b']', 0x94, b'(', b'}', 0x94];
    bytes.extend(b"h\x01".repeat(1_000_000));
    bytes.extend(b"e.");
    std::fs::write(&pickle, &bytes).unwrap();
    for command in ["frag", "render"] {
        let out = memtool()
            .args([command])
            .arg(&pickle)
            .args(["-o", "-"])
            .env("MEMTOOL_TIMINGS", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("memo entry 1, a segment already read, is listed again"),
            "{stderr}"
        );
        // About 8 MiB of program, the 2 MB file, and the decoder's stack
        // of references (a value each) before the list is handed over.
        let peak = phase_rss_mib(&stderr, "total");
        assert!(peak < 64.0, "{command}: {peak} MiB for a 2 MB pickle");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream that starts as a profile and never ends (a pickle header, then
/// zeros) stops at `--max-decompressed`, not when the disk is full.
#[test]
fn an_endless_stream_that_starts_as_a_profile_stops_at_the_cap() {
    let feed: Feed = Box::new(|out| {
        out.write_all(&[0x80, 4])?;
        repeat(vec![0; 1 << 16], u64::MAX)(out)
    });
    let (out, taken) = run_fed(&["summary", "-", "--max-decompressed", "8MiB"], feed);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "memtool: <stdin>: the stream is longer than the limit of 8.00 MiB \
         (--max-decompressed); raise it with --max-decompressed BYTES if the input is \
         trusted\n"
    );
    assert!(taken < 16 << 20, "{taken} bytes read");
}
