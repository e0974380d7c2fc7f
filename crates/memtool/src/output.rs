//! Writing a command's output: to stdout, in place to a device or FIFO, or
//! atomically to a file.

use std::fs;
use std::io::{self, BufWriter, IsTerminal, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once};

use anyhow::{bail, Context, Result};
use memtool_core::analysis::Options;
use memtool_core::model::Profile;
use memtool_core::report::{exporter, OutputFormat, Presentation, Report};
use rustix::fs::{AtFlags, Mode, OFlags, CWD};

use crate::cli::{AnalysisArgs, FormatArg, OutputArgs};
use crate::destination::{follow_links, is_stdout, temporary_name};

/// The columns of the Markdown digest `--format mcp` writes after the JSON.
const MCP_DIGEST_WIDTH: usize = 160;

/// Writes `report` in the format and to the place `args` name; text formats
/// show the first `analysis.top` rows of each ranked table. The report's
/// warnings go to standard error whatever the format.
pub fn write(report: &dyn Report, args: &OutputArgs, analysis: &AnalysisArgs) -> Result<()> {
    let _span = memtool_core::timings::span("output");
    let Some(format) = args.format.report_format() else {
        bail!(match args.format {
            FormatArg::Html => crate::cli::HTML_ONLY,
            _ => crate::cli::PPROF_ONLY,
        });
    };
    warn(&report.warnings());
    let width = args.width.map(usize::from).or_else(|| match format {
        OutputFormat::Table => terminal_width(args.output.as_deref()),
        _ => None,
    });
    let presentation = Presentation {
        top: analysis.top,
        width,
    };
    let exporter = exporter(format, presentation);
    if let FormatArg::Mcp = args.format {
        // Labels shortened in the middle, so a row of the digest stays a line.
        let digest = memtool_core::report::exporter(
            OutputFormat::Md,
            Presentation {
                top: analysis.top,
                width: Some(MCP_DIGEST_WIDTH),
            },
        );
        return write_to(args.output.as_deref(), |out| {
            exporter.export(report, out)?;
            out.write_all(b"\0")?;
            digest.export(report, out)
        });
    }
    write_to(args.output.as_deref(), |out| exporter.export(report, out))
}

/// `--format pprof` (`peak`, `summary`): what was live at each memory's peak
/// as a gzipped pprof profile, with the report's warnings on stderr.
pub fn write_pprof(
    report: &dyn Report,
    args: &OutputArgs,
    profile: &Profile,
    options: &Options,
) -> Result<()> {
    let _span = memtool_core::timings::span("output");
    warn(&report.warnings());
    let bytes = memtool_core::render::peak_pprof(profile, options);
    write_to(args.output.as_deref(), |out| out.write_all(&bytes))
}

/// Refuses output that is no text (a page, an image, a gzipped profile)
/// for a terminal on stdout, with a hint: checked before the inputs are read.
pub fn refuse_terminal(command: &str, output: Option<&Path>, what: &str, file: &str) -> Result<()> {
    if is_stdout(output) && io::stdout().is_terminal() {
        bail!(
            "{command} writes {what}, not text for a terminal; give -o {file} (or redirect stdout)"
        );
    }
    Ok(())
}

/// [`refuse_terminal`] for `--format pprof`; other formats are text.
pub fn check_pprof_destination(command: &str, args: &OutputArgs) -> Result<()> {
    match args.format {
        FormatArg::Pprof => refuse_terminal(
            command,
            args.output.as_deref(),
            "a gzipped pprof profile",
            &format!("{command}.pb.gz"),
        ),
        _ => Ok(()),
    }
}

/// Writes warning lines (`warning: PATH: message`) to standard error, the
/// one place they are written.
pub fn warn(lines: &[String]) {
    // Nothing written, nothing to wait for: the wait for the supervisor
    // sleeps a millisecond or more (a tenth of a 660,000-event XSpace
    // summary's output phase, without a warning to show).
    if lines.is_empty() {
        return;
    }
    let mut stderr = io::stderr().lock();
    for line in lines {
        // A closed stderr loses the warning, not the report.
        let _ = writeln!(stderr, "{}", memtool_core::report::visible(line));
    }
    drop(stderr);
    crate::supervise::stderr_written();
}

/// Prints a CI gate's one-line verdict on stderr, in every output format:
/// the CI log shows it whatever stdout holds (a JSON document, a CSV file,
/// a Markdown summary). The report's JSON carries the same result.
pub fn gate_line(gate: Option<&memtool_core::analysis::gate::GateResult>) {
    if let Some(gate) = gate {
        // The message names memories, which come from the file.
        eprintln!("memtool: {}", memtool_core::report::visible(&gate.message));
        crate::supervise::stderr_written();
    }
}

/// The width terminal tables fit: `$COLUMNS` when set, else the terminal's
/// when the output is one (`None`: the exporter's default).
fn terminal_width(output: Option<&Path>) -> Option<usize> {
    let columns = std::env::var("COLUMNS").ok();
    if let Some(width) = columns.and_then(|c| c.trim().parse::<usize>().ok()) {
        return (width > 0).then_some(width);
    }
    let stdout = io::stdout();
    if !is_stdout(output) || !stdout.is_terminal() {
        return None;
    }
    let size = rustix::termios::tcgetwinsize(&stdout).ok()?;
    (size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Writes what `fill` writes to `path` (see [`is_stdout`]), the one way every
/// command's output leaves memtool. A device, FIFO or socket is written in
/// place: replacing it with a file would break `-o /dev/null` (as root, the
/// device node itself) or a pipe a reader waits on.
pub fn write_to(
    path: Option<&Path>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let Some(path) = path.filter(|p| !is_stdout(Some(p))) else {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        fill(&mut out)?;
        out.flush()?;
        return Ok(());
    };
    // A symlink is written through, as `cp` and editors do: its target
    // is replaced, the link stays.
    let target =
        follow_links(path).with_context(|| format!("{}: cannot write output", path.display()))?;
    match fs::metadata(&target) {
        Ok(meta) if meta.is_dir() => bail!(
            "{}: is a directory{}; give -o a file name",
            path.display(),
            if target != path {
                " (through a symlink)"
            } else {
                ""
            }
        ),
        Ok(meta) if is_special(&meta.file_type()) => write_in_place(&target, fill),
        Ok(meta) => write_atomically(&target, Some(&meta), fill),
        Err(_) => write_atomically(&target, None, fill),
    }
    .with_context(|| format!("{}: cannot write output", path.display()))
}

fn is_special(kind: &fs::FileType) -> bool {
    kind.is_char_device() || kind.is_block_device() || kind.is_fifo() || kind.is_socket()
}

fn write_in_place(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let file = fs::OpenOptions::new().write(true).open(path)?;
    let mut out = BufWriter::new(file);
    fill(&mut out)?;
    out.flush()
}

/// The regular file that `-o` would replace, to refuse an output that is
/// one of the inputs (the same device and inode, whatever the names).
pub struct Replaced {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Replaced {
    /// The file at `path`, when `-o path` would replace a regular file.
    pub fn of(path: Option<&Path>) -> Option<Replaced> {
        let path = path.filter(|p| !is_stdout(Some(p)))?;
        let meta = fs::metadata(path).ok()?;
        meta.is_file().then(|| Replaced {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Fails when `input` (a path, or `<stdin>`), the file at `dev`, `ino`,
    /// is the file `-o` would replace.
    pub fn check(&self, input: &str, dev: u64, ino: u64) -> Result<()> {
        if (dev, ino) == (self.dev, self.ino) {
            bail!(
                "{}: is an input ({input}): refusing to write the report over it",
                self.path.display()
            );
        }
        Ok(())
    }
}

/// Set in the environment (to a number of milliseconds) to make
/// [`write_atomically`] use a named temporary file from the start, as on a
/// filesystem without `O_TMPFILE`, and wait that long once it exists: tests
/// reach that path and signal a write in progress with it.
const NAMED_TEMP_ENV: &str = "MEMTOOL_TEST_NAMED_TEMP_MS";

/// Writes to a temporary file beside `path`, then renames it over `path`, so
/// a killed run or a full disk never leaves a half-written file. The
/// temporary file is anonymous (`O_TMPFILE`) while it is written where the
/// filesystem allows it, and named (`.NAME.memtool-PID.tmp`) only from its
/// last write to the rename (not at all when `path` does not exist yet: the
/// file is then linked there whole); a named temporary file is removed on
/// SIGINT or SIGTERM.
///
/// `replaced` is the file at `path` now, if any: the new file takes its
/// mode and, where this process may give them, its owner and group, before
/// a byte is written, so a private report stays private.
pub fn write_atomically(
    path: &Path,
    replaced: Option<&fs::Metadata>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = temporary_name(path, crate::supervise::visible_pid());
    let result = (|| -> io::Result<()> {
        let named_pause = std::env::var(NAMED_TEMP_ENV)
            .ok()
            .map(|ms| std::time::Duration::from_millis(ms.parse().unwrap_or(0)));
        let anonymous = match named_pause {
            Some(_) => None,
            None => anonymous_file(&dir).ok(),
        };
        let file = match anonymous {
            Some(file) => {
                keep_mode_and_owner(&file, replaced)?;
                let file = fill_and_sync(file, fill)?;
                if link_whole(&file, path) {
                    return Ok(());
                }
                name_anonymous(&file, &tmp)?;
                file
            }
            None => {
                let file = create_named(&tmp)?;
                keep_mode_and_owner(&file, replaced)?;
                if let Some(pause) = named_pause {
                    std::thread::sleep(pause);
                }
                fill_and_sync(file, fill)?
            }
        };
        drop(file);
        let mut pending = pending();
        fs::rename(&tmp, path)?;
        *pending = None;
        Ok(())
    })();
    if result.is_err() {
        let mut pending = pending();
        if pending.take().is_some() {
            let _ = fs::remove_file(&tmp);
        }
    }
    result
}

/// Gives `file` the owner, group and mode of `replaced` (the file it is to
/// replace). The owner and group only where allowed (root, or a group this
/// user is in): a report written over someone else's file is then this
/// user's, as with any editor. The mode after, as a change of owner may
/// clear set-id bits.
fn keep_mode_and_owner(file: &fs::File, replaced: Option<&fs::Metadata>) -> io::Result<()> {
    let Some(replaced) = replaced else {
        return Ok(());
    };
    let owner = rustix::process::Uid::from_raw(replaced.uid());
    let group = rustix::process::Gid::from_raw(replaced.gid());
    if rustix::fs::fchown(file, Some(owner), Some(group)).is_err() {
        let _ = rustix::fs::fchown(file, None, Some(group));
    }
    rustix::fs::fchmod(file, Mode::from_raw_mode(replaced.mode() & 0o7777))?;
    Ok(())
}

fn fill_and_sync(
    file: fs::File,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<fs::File> {
    let mut out = BufWriter::new(file);
    fill(&mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file)
}

/// A file in `dir` with no name, opened for reading too so that its bytes
/// can be copied should it prove impossible to link.
fn anonymous_file(dir: &Path) -> io::Result<fs::File> {
    let fd = rustix::fs::openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )?;
    Ok(fs::File::from(fd))
}

/// A file in `dir` that no name reaches, for bytes kept only while memtool
/// runs (a stream spooled to be read as a file): anonymous where the
/// filesystem allows, else created under a fresh name and unlinked at once.
pub fn temporary_file(dir: &Path) -> io::Result<fs::File> {
    if let Ok(file) = anonymous_file(dir) {
        return Ok(file);
    }
    let pid = std::process::id();
    for attempt in 0..100u32 {
        let name = dir.join(format!(".memtool-{pid}-{attempt}.spool"));
        match fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&name)
        {
            Ok(file) => {
                fs::remove_file(&name)?;
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free temporary name"))
}

/// Gives the anonymous, complete `file` the name `path` when nothing has
/// that name yet: no temporary name exists at any moment, so a process
/// killed now leaves nothing behind. False when `path` exists (a file to
/// replace, which only a rename does whole) or the link is not allowed.
fn link_whole(file: &fs::File, path: &Path) -> bool {
    link(file, path).is_ok()
}

/// Links the anonymous `file` at `name`: through `/proc/self/fd`, which
/// needs no privilege, else `AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH`. Fails where `name` exists.
fn link(file: &fs::File, name: &Path) -> rustix::io::Result<()> {
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(CWD, proc_path.as_str(), CWD, name, AtFlags::SYMLINK_FOLLOW)
        .or_else(|_| rustix::fs::linkat(file, "", CWD, name, AtFlags::EMPTY_PATH))
}

/// Gives the anonymous `file` the name `tmp` ([`link`]), else copies its
/// bytes to a new file of that name.
fn name_anonymous(file: &fs::File, tmp: &Path) -> io::Result<()> {
    let mut pending = register(tmp);
    if link(file, tmp).is_ok() {
        return Ok(());
    }
    let copied = (|| {
        let mut named = fs::File::create(tmp)?;
        let mut file = file;
        file.rewind()?;
        io::copy(&mut file, &mut named)?;
        named.sync_all()
    })();
    if copied.is_err() {
        let _ = fs::remove_file(tmp);
        *pending = None;
    }
    copied
}

fn create_named(tmp: &Path) -> io::Result<fs::File> {
    let mut pending = register(tmp);
    let created = fs::File::create(tmp);
    if created.is_err() {
        *pending = None;
    }
    created
}

/// The named temporary file that exists now, if any: a signal removes it.
/// Held locked while the file is created, renamed or removed, so a signal
/// never races them.
static PENDING: Mutex<Option<PathBuf>> = Mutex::new(None);

fn pending() -> MutexGuard<'static, Option<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records `tmp` as pending (the caller creates it while holding the lock)
/// and makes sure SIGINT and SIGTERM remove it.
fn register(tmp: &Path) -> MutexGuard<'static, Option<PathBuf>> {
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        // Without the handler a signal only leaves the file behind, as
        // before: not a reason to fail the write.
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            let watcher = std::thread::Builder::new().stack_size(64 << 10);
            let _ = watcher.spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    let pending = remove_pending();
                    // Ends the process as the signal would have, so the
                    // caller sees it killed; the lock stays held so no
                    // rename follows.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                    drop(pending);
                    std::process::exit(128 + signal);
                }
            });
        }
    });
    let mut pending = pending();
    *pending = Some(tmp.to_path_buf());
    pending
}

/// Removes the pending temporary file, returning the lock so that none is
/// made after it.
fn remove_pending() -> MutexGuard<'static, Option<PathBuf>> {
    let mut pending = pending();
    if let Some(tmp) = pending.take() {
        let _ = fs::remove_file(tmp);
    }
    pending
}

/// Warns when a CI gate's limit is under 100 bytes: a bare number is
/// bytes, so `--fail-on-growth 5` fails on 5 bytes, seldom what was meant.
pub fn warn_of_tiny_limit(flag: &str, bytes: u64) {
    if bytes < 100 {
        warn(&[format!(
            "warning: {flag} {bytes} is {bytes} bytes (a bare number is bytes): give a unit \
             (5MiB){}",
            if flag == "--fail-on-growth" {
                " or a percentage (5%)"
            } else {
                ""
            }
        )]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_removes_the_pending_temporary_file() {
        let dir = std::env::temp_dir().join(format!("memtool-pending-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join(".x.memtool.tmp");
        drop(create_named(&tmp).unwrap());
        assert!(tmp.exists());
        drop(remove_pending());
        assert!(!tmp.exists());
        assert!(pending().is_none());
        fs::remove_dir(&dir).unwrap();
    }
}
