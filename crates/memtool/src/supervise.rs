//! Running out of memory as one line and exit 2, whichever allocation fails.
//!
//! Stable Rust gives a program no say over a failed allocation: the
//! standard library prints `memory allocation of N bytes failed` and aborts
//! (`set_alloc_error_hook` is unstable, and a global allocator that reports
//! the failure itself needs `unsafe`). Reserving fallibly covers only the
//! allocations one thinks of; under `ulimit -v` any of the thousands of
//! others fails as well. So a command that reads profiles runs in a child
//! process — the same binary, executed again — whose standard error passes
//! through this one: everything is forwarded as it comes, except a line
//! that could be the standard library's message, held back until it is
//! complete; when the child then dies of SIGABRT, that line becomes one
//! `memtool: …: out of memory` line and the exit status 2. Everything else
//! is passed on as it is: standard input and output are the child's own,
//! its exit status or fatal signal becomes this process's, SIGINT, SIGTERM,
//! SIGHUP and SIGQUIT are forwarded to it, and the child dies with this
//! process (SIGTERM on the parent's death, so a killed run still removes its
//! temporary file). Whether standard error is a terminal is passed to the
//! child, whose own standard error is a pipe. The child runs without
//! `RUST_BACKTRACE`, under which the standard library's message can hang on
//! running out of memory; a panic prints the backtrace asked for all the
//! same, and a child that printed the message and does not abort is killed.
//!
//! `MEMTOOL_SUPERVISED` marks the child; set by hand (to `0`, or anything
//! but a process id), it runs memtool in one process, as under a debugger.

use std::ffi::OsString;
use std::io::{self, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal};

/// The environment variable that marks the child: `PID:terminal` or
/// `PID:pipe`, the supervisor's id and what its standard error is.
const ENV: &str = "MEMTOOL_SUPERVISED";

/// The caller's `RUST_BACKTRACE`, passed to the child in its place.
const PANIC_BACKTRACE_ENV: &str = "MEMTOOL_PANIC_BACKTRACE";

/// How long a child that printed the allocation-failure message has to end
/// before it is killed: it is about to abort, and anything that keeps it
/// (a lock taken again while printing) would keep the command forever.
const ABORT_GRACE: Duration = Duration::from_secs(10);

/// The standard library's message for a failed allocation, up to the size.
const ALLOC_FAILED: &[u8] = b"memory allocation of ";
const ALLOC_FAILED_END: &[u8] = b" bytes failed";
/// How glibc starts the message of a fatal error before it aborts; out of
/// memory inside glibc itself (registering a thread-local destructor when a
/// thread starts) ends that way rather than through Rust's message.
const GLIBC_FATAL: &[u8] = b"Fatal glibc error: ";
/// The lines held back until the child has ended.
const HELD: [&[u8]; 2] = [ALLOC_FAILED, GLIBC_FATAL];

/// The signals a supervisor passes on to the child.
const FORWARDED: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// What the child is told: its supervisor's id and whether the
/// supervisor's standard error is a terminal.
struct Mark {
    supervisor: Option<u32>,
    stderr_terminal: Option<bool>,
}

/// This process's mark, when it has one (the child, or memtool run
/// unsupervised by hand).
fn mark() -> Option<Mark> {
    let value = std::env::var_os(ENV)?;
    let value = value.to_string_lossy();
    let (pid, stderr) = value.split_once(':').unwrap_or((&value, ""));
    Some(Mark {
        supervisor: pid.parse().ok().filter(|&pid| pid > 0),
        stderr_terminal: match stderr {
            "terminal" => Some(true),
            "pipe" => Some(false),
            _ => None,
        },
    })
}

/// Whether standard error is a terminal: the supervisor's, in the child.
pub fn stderr_is_terminal() -> bool {
    mark()
        .and_then(|m| m.stderr_terminal)
        .unwrap_or_else(|| io::stderr().is_terminal())
}

/// Waits (a moment at most) until the supervisor has taken what this
/// process wrote to standard error, so that what it writes next to standard
/// output comes after it on a terminal or a log both go to: standard error
/// passes through the supervisor, standard output does not. Call it after
/// a write to standard error that output follows (a status line, a note,
/// warnings). Nothing to wait for when unsupervised.
pub fn stderr_written() {
    if mark().and_then(|m| m.supervisor).is_none() {
        return;
    }
    let start = std::time::Instant::now();
    while let Ok(1..) = rustix::io::ioctl_fionread(io::stderr()) {
        if start.elapsed() > std::time::Duration::from_millis(200) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    // The supervisor has read the bytes; a moment more for it to write them
    // on (these calls are a handful per run).
    std::thread::sleep(std::time::Duration::from_millis(1));
}

/// The process id the caller of memtool sees: the supervisor's, in the
/// child (temporary file names carry it).
pub fn visible_pid() -> u32 {
    mark()
        .and_then(|m| m.supervisor)
        .unwrap_or_else(std::process::id)
}

/// Runs the command in a supervised child and returns how this process
/// ends, or `None` when this process is to run it: it is the child, or no
/// child could be started (then memtool runs unsupervised, as it can).
/// `inputs` name the profiles in the out-of-memory line; `outputs` are the
/// files the command writes, whose temporary names a child killed by a
/// signal leaves behind where the filesystem has no anonymous files.
pub fn supervise(inputs: &[String], outputs: &[&Path]) -> Option<ExitCode> {
    if let Some(mark) = mark() {
        if let Some(pid) = mark.supervisor {
            // A supervisor killed outright (SIGKILL) takes the child along.
            let _ = rustix::process::set_parent_process_death_signal(Some(Signal::TERM));
            if rustix::process::getppid().map(Pid::as_raw_pid) != Some(pid as i32) {
                // It died before the line above took effect.
                return Some(ExitCode::from(2));
            }
            panic_backtraces();
        }
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let stderr_terminal = io::stderr().is_terminal();
    let mark = format!(
        "{}:{}",
        std::process::id(),
        if stderr_terminal { "terminal" } else { "pipe" }
    );
    // Everything this process needs is set up before the child starts, and
    // memory is set aside for the last line: under a limit the child runs
    // out in, this process has no more to ask for.
    let mut stderr = io::stderr().lock();
    let mut filter = StderrFilter::default();
    let mut buffer = vec![0u8; 8192];
    let mut reserve: Vec<u8> = Vec::new();
    if reserve.try_reserve_exact(64 << 10).is_err() {
        // Too little memory to set this aside is too little to run: said
        // as when the child cannot start, not as an abort.
        let _ = writeln!(stderr, "memtool: {}", out_of_memory(inputs, Failed::Start));
        return Some(ExitCode::from(2));
    }
    let Ok(wake) = UnixStream::pair() else {
        return None;
    };
    let mut command = Command::new(exe);
    command
        .args(std::env::args_os().skip(1).collect::<Vec<OsString>>())
        .env(ENV, mark)
        .stderr(Stdio::piped());
    // Under RUST_BACKTRACE the standard library's allocation-failure message
    // prints a backtrace, holding its backtrace lock, and printing it
    // allocates (the working directory, symbol names): out of memory there
    // waits forever for the lock it holds. The child runs without it and
    // prints a panic's backtrace itself, as asked ([`panic_backtraces`]);
    // error values then capture none (memtool never shows one) unless
    // RUST_LIB_BACKTRACE asks.
    if let Some(style) = std::env::var_os("RUST_BACKTRACE") {
        command.env("RUST_BACKTRACE", "0");
        if style != "0" {
            command.env(PANIC_BACKTRACE_ENV, style);
        }
    }
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
            // Too little memory to start a child is too little to run.
            drop(reserve);
            let _ = writeln!(stderr, "memtool: {}", out_of_memory(inputs, Failed::Start));
            return Some(ExitCode::from(2));
        }
        Err(_) => return None,
    };
    // Caught from here on and passed to the child. A signal before this
    // ends this process as it would have, and the child with it (its
    // parent-death signal).
    let signals = Forwarding::register(wake);
    let killed_after_message = match child.stderr.take() {
        Some(pipe) => pass_on(
            &pipe,
            Pid::from_child(&child),
            signals.as_ref(),
            ABORT_GRACE,
            &mut buffer,
            &mut filter,
            &mut stderr,
        ),
        None => false,
    };
    let status = loop {
        match child.wait() {
            Ok(status) => break status,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Some(ExitCode::from(2)),
        }
    };
    drop(reserve);
    if status.signal().is_some() {
        remove_temporary_names(outputs);
    }
    Some(end(
        status,
        killed_after_message,
        filter,
        &mut stderr,
        stderr_terminal,
        inputs,
    ))
}

/// Removes the temporary names a child killed by a signal (SIGKILL from the
/// OOM killer, say) may have left: on a filesystem without `O_TMPFILE`
/// (NFS, CIFS, vfat) the output is written under its temporary name
/// throughout, and on any filesystem it has one between its link and its
/// rename. The names carry this process's id, so none is another run's.
fn remove_temporary_names(outputs: &[&Path]) {
    for output in outputs {
        if crate::destination::is_stdout(Some(output)) {
            continue;
        }
        if let Ok(target) = crate::destination::follow_links(output) {
            let _ = std::fs::remove_file(crate::destination::temporary_name(
                &target,
                std::process::id(),
            ));
        }
    }
}

/// The signals caught for the child: a flag each, and a socket that wakes
/// the supervisor when one arrives. One thread does all the supervising:
/// under a memory limit the child runs out in, a thread may not start.
struct Forwarding {
    flags: [Arc<AtomicBool>; FORWARDED.len()],
    wake: UnixStream,
}

impl Forwarding {
    /// Catches the forwarded signals, waking `wake`'s other end; `None`
    /// when they cannot be caught (they then end this process, and the
    /// child through its parent-death signal).
    fn register((wake, wake_write): (UnixStream, UnixStream)) -> Option<Forwarding> {
        let flags: [Arc<AtomicBool>; FORWARDED.len()] = Default::default();
        wake.set_nonblocking(true).ok()?;
        for (signal, flag) in FORWARDED.iter().zip(&flags) {
            signal_hook::flag::register(*signal, Arc::clone(flag)).ok()?;
            signal_hook::low_level::pipe::register(*signal, wake_write.try_clone().ok()?).ok()?;
        }
        Some(Forwarding { flags, wake })
    }

    /// Sends the child the signals that arrived since the last call.
    fn forward(&self, child: Pid) {
        let mut drained = [0u8; 64];
        while let Ok(1..) = (&self.wake).read(&mut drained) {}
        for (signal, flag) in FORWARDED.iter().zip(&self.flags) {
            if flag.swap(false, Ordering::SeqCst) {
                if let Some(signal) = Signal::from_named_raw(*signal) {
                    let _ = rustix::process::kill_process(child, signal);
                }
            }
        }
    }
}

/// Passes the child's standard error (`pipe`) through `filter` to `out`
/// until it closes, forwarding signals as they arrive. A child that has
/// printed the allocation-failure message and is still there `grace` later
/// is killed (it is about to abort; anything that keeps it, such as a lock
/// taken again while printing, would keep the command forever); returns
/// whether it was.
fn pass_on(
    pipe: &impl AsFd,
    child: Pid,
    signals: Option<&Forwarding>,
    grace: Duration,
    buffer: &mut [u8],
    filter: &mut StderrFilter,
    out: &mut impl Write,
) -> bool {
    let mut message_at: Option<Instant> = None;
    let mut killed = false;
    loop {
        let left = match message_at {
            Some(at) if !killed => Some(grace.saturating_sub(at.elapsed())),
            _ => None,
        };
        if left == Some(Duration::ZERO) {
            let _ = rustix::process::kill_process(child, Signal::KILL);
            killed = true;
            continue;
        }
        let timeout = left.and_then(|left| Timespec::try_from(left).ok());
        let (pipe_ready, woken) = {
            let mut fds = [
                PollFd::new(pipe, PollFlags::IN),
                PollFd::new(pipe, PollFlags::IN),
            ];
            let polled = match signals {
                Some(signals) => {
                    fds[1] = PollFd::new(&signals.wake, PollFlags::IN);
                    &mut fds[..]
                }
                None => &mut fds[..1],
            };
            match rustix::event::poll(polled, timeout.as_ref()) {
                Ok(_) => (
                    !polled[0].revents().is_empty(),
                    polled.get(1).is_some_and(|fd| !fd.revents().is_empty()),
                ),
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return killed,
            }
        };
        if woken {
            if let Some(signals) = signals {
                signals.forward(child);
            }
        }
        if !pipe_ready {
            continue;
        }
        match rustix::io::read(pipe, &mut *buffer) {
            Ok(0) => return killed,
            Ok(n) => {
                let _ = filter.feed(&buffer[..n], out);
                if filter.held.is_some() && message_at.is_none() {
                    message_at = Some(Instant::now());
                }
            }
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(_) => return killed,
        }
    }
}

/// In the child, when its caller set `RUST_BACKTRACE` (which the child
/// runs without, see [`supervise`]): a panic prints its backtrace, as the
/// standard library's hook would have.
fn panic_backtraces() {
    let Some(style) = std::env::var_os(PANIC_BACKTRACE_ENV) else {
        return;
    };
    let full = style == "full";
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("<unnamed>");
        let message = info.payload_as_str().unwrap_or("Box<dyn Any>");
        let location = info.location().map(ToString::to_string);
        let backtrace = std::backtrace::Backtrace::force_capture();
        let mut stderr = io::stderr().lock();
        let _ = writeln!(
            stderr,
            "\nthread '{name}' panicked at {}:\n{message}",
            location.as_deref().unwrap_or("an unknown place")
        );
        let _ = if full {
            writeln!(stderr, "stack backtrace:\n{backtrace:#}")
        } else {
            writeln!(
                stderr,
                "stack backtrace:\n{}note: Some details are omitted, run with \
                 `RUST_BACKTRACE=full` for a verbose backtrace.",
                short_backtrace(&backtrace.to_string())
            )
        };
    }));
}

/// The frames of a printed backtrace between the panic machinery and the
/// start of the program or thread, numbered from 0, as the standard
/// library's short backtrace shows them.
fn short_backtrace(printed: &str) -> String {
    // A frame is its numbered line and the `at` lines that follow.
    let mut frames: Vec<Vec<&str>> = Vec::new();
    for line in printed.lines() {
        let numbered = line
            .trim_start()
            .split_once(": ")
            .is_some_and(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty());
        match frames.last_mut() {
            Some(frame) if !numbered => frame.push(line),
            _ => frames.push(vec![line]),
        }
    }
    let is = |frame: &[&str], marker: &str| frame.first().is_some_and(|l| l.contains(marker));
    let start = frames
        .iter()
        .position(|f| is(f, "__rust_end_short_backtrace"))
        .map_or(0, |i| i + 1);
    let end = frames
        .iter()
        .position(|f| is(f, "__rust_begin_short_backtrace"))
        .filter(|&end| end >= start)
        .unwrap_or(frames.len());
    let mut out = String::new();
    for (n, frame) in frames[start..end].iter().enumerate() {
        let (_, name) = frame[0].trim_start().split_once(": ").unwrap_or_default();
        out.push_str(&format!("{n:>4}: {name}\n"));
        for line in &frame[1..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// This process's end for the child's `status`, with the child's last
/// held-back standard error.
fn end(
    status: ExitStatus,
    killed_after_message: bool,
    filter: StderrFilter,
    stderr: &mut impl Write,
    stderr_terminal: bool,
    inputs: &[String],
) -> ExitCode {
    let aborted = status.signal() == Some(signal_hook::consts::SIGABRT) || killed_after_message;
    let after_status = filter.after_status;
    match filter.finish(aborted) {
        Finish::OutOfMemory(bytes) => {
            if after_status && stderr_terminal {
                // The status line of a large read is erased, as the child
                // would have.
                let _ = stderr.write_all(b"\x1b[2K");
            }
            let _ = writeln!(
                stderr,
                "memtool: {}",
                out_of_memory(inputs, Failed::Allocation(bytes))
            );
            let _ = stderr.flush();
            return ExitCode::from(2);
        }
        Finish::Rest(rest) => {
            let _ = stderr.write_all(&rest);
            let _ = stderr.flush();
        }
    }
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(2));
    }
    let signal = status.signal().unwrap_or(signal_hook::consts::SIGKILL);
    // Dies as the child did, so a shell or CI runner sees the signal.
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(2))
}

/// What ran out of memory.
enum Failed {
    /// The child, allocating this many bytes when known.
    Allocation(Option<u64>),
    /// Starting the child.
    Start,
}

/// The out-of-memory line: the inputs, the allocation that failed (when
/// known), and the limit that made it fail where there is one.
fn out_of_memory(inputs: &[String], failed: Failed) -> String {
    // File names may hold terminal escapes: shown as every message shows them.
    let visible = memtool_core::report::visible;
    let names = match inputs {
        [] => String::new(),
        [one] => format!("{}: ", visible(one)),
        [first, rest @ ..] => format!("{} and {} more: ", visible(first), rest.len()),
    };
    let limit = rustix::process::getrlimit(rustix::process::Resource::As).current;
    let why = match limit {
        Some(limit) => format!(
            "the address space is limited to {} (ulimit -v {})",
            memtool_core::report::units::bytes(limit),
            limit / 1024
        ),
        None => "a container's memory limit or the machine's memory".to_string(),
    };
    let needed = match failed {
        Failed::Allocation(Some(bytes)) => format!(
            "reading and analysing the input needed {} more in one allocation ({bytes} \
             bytes) than this process could get",
            memtool_core::report::units::bytes(bytes)
        ),
        Failed::Allocation(None) => {
            "reading and analysing the input needed more than this process could get".to_string()
        }
        Failed::Start => {
            "this process could not start the process that reads the input".to_string()
        }
    };
    format!("{names}out of memory: {needed}; {why}")
}

/// Standard error from the child on its way through: forwarded as it comes,
/// except from a line that starts as the standard library's message for a
/// failed allocation: that line and all after it (a backtrace under
/// `RUST_BACKTRACE`, the messages of other threads failing at the same
/// moment, interleaved) are held until the child has ended. A line starts
/// after `\n`, and after the `\r` that ends the child's status line.
struct StderrFilter {
    /// Nothing of the current line has been forwarded yet.
    at_line_start: bool,
    /// The last byte forwarded is the `\r` of a status line still shown.
    after_status: bool,
    /// The start of the current line, held while it agrees with the message.
    line: Option<Vec<u8>>,
    /// The message and everything after it.
    held: Option<Vec<u8>>,
}

impl Default for StderrFilter {
    fn default() -> Self {
        StderrFilter {
            at_line_start: true,
            after_status: false,
            line: None,
            held: None,
        }
    }
}

/// What is left when the child has ended.
enum Finish {
    /// The child aborted on a failed allocation (of this many bytes, when
    /// the message says).
    OutOfMemory(Option<u64>),
    /// Bytes still to forward.
    Rest(Vec<u8>),
}

impl StderrFilter {
    fn feed(&mut self, mut chunk: &[u8], out: &mut impl Write) -> io::Result<()> {
        while !chunk.is_empty() {
            if let Some(held) = &mut self.held {
                held.extend_from_slice(chunk);
                break;
            }
            let line_end = chunk
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .map_or(chunk.len(), |i| i + 1);
            let (part, rest) = chunk.split_at(line_end);
            chunk = rest;
            let complete = matches!(part.last(), Some(b'\n' | b'\r'));
            if self.line.is_none() && !self.at_line_start {
                self.forward(part, out)?;
                self.at_line_start = complete;
                continue;
            }
            let mut line = self.line.take().unwrap_or_default();
            line.extend_from_slice(part);
            self.at_line_start = false;
            if HELD.iter().any(|text| line.starts_with(text)) {
                self.held = Some(line);
            } else if HELD.iter().any(|text| agrees(&line, text)) && !complete {
                self.line = Some(line);
            } else {
                self.forward(&line, out)?;
                self.at_line_start = complete;
            }
        }
        out.flush()
    }

    fn forward(&mut self, bytes: &[u8], out: &mut impl Write) -> io::Result<()> {
        if let Some(&last) = bytes.last() {
            self.after_status = last == b'\r';
        }
        out.write_all(bytes)
    }

    fn finish(self, aborted: bool) -> Finish {
        match self.held {
            Some(held) if aborted && held.starts_with(ALLOC_FAILED) => {
                Finish::OutOfMemory(failed_size(&held))
            }
            Some(held) if aborted && glibc_out_of_memory(&held) => Finish::OutOfMemory(None),
            held => Finish::Rest(held.or(self.line).unwrap_or_default()),
        }
    }
}

/// Whether `line`, perhaps not complete yet, agrees with `text` as far as
/// both go.
fn agrees(line: &[u8], text: &[u8]) -> bool {
    let n = line.len().min(text.len());
    line[..n] == text[..n]
}

/// Whether held text is glibc's fatal error for running out of memory
/// (`Fatal glibc error: failed to register TLS destructor: out of memory`).
fn glibc_out_of_memory(held: &[u8]) -> bool {
    let first_line = held.split(|&b| b == b'\n').next().unwrap_or_default();
    first_line.starts_with(GLIBC_FATAL) && first_line.ends_with(b"out of memory")
}

/// The size in `memory allocation of N bytes failed`, when the message is
/// whole.
fn failed_size(message: &[u8]) -> Option<u64> {
    let size = message.strip_prefix(ALLOC_FAILED)?;
    let digits = size.iter().take_while(|b| b.is_ascii_digit()).count();
    if !size[digits..].starts_with(ALLOC_FAILED_END) {
        return None;
    }
    std::str::from_utf8(&size[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filtered(chunks: &[&[u8]], aborted: bool) -> (Vec<u8>, Option<Option<u64>>) {
        let mut filter = StderrFilter::default();
        let mut out = Vec::new();
        for chunk in chunks {
            filter.feed(chunk, &mut out).unwrap();
        }
        match filter.finish(aborted) {
            Finish::OutOfMemory(bytes) => (out, Some(bytes)),
            Finish::Rest(rest) => {
                out.extend_from_slice(&rest);
                (out, None)
            }
        }
    }

    /// Runs `script` as a supervised child would run, its standard error
    /// passed on with a grace of `grace`: what came through, whether it was
    /// killed, and how it ended.
    fn passed_on(script: &str, grace: Duration) -> (Vec<u8>, bool, ExitStatus, Duration) {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pipe = child.stderr.take().unwrap();
        let (mut filter, mut out) = (StderrFilter::default(), Vec::new());
        let start = Instant::now();
        let killed = pass_on(
            &pipe,
            Pid::from_child(&child),
            None,
            grace,
            &mut [0; 16],
            &mut filter,
            &mut out,
        );
        let status = child.wait().unwrap();
        (out, killed, status, start.elapsed())
    }

    #[test]
    fn a_child_that_hangs_after_the_message_is_killed_after_the_grace() {
        let grace = Duration::from_millis(200);
        let (out, killed, status, took) = passed_on(
            "echo before >&2; echo 'memory allocation of 8 bytes failed' >&2; exec sleep 30",
            grace,
        );
        assert_eq!(out, b"before\n");
        assert!(killed);
        assert_eq!(status.signal(), Some(signal_hook::consts::SIGKILL));
        assert!(took >= grace && took < Duration::from_secs(20), "{took:?}");
        // Without the message, however long the child takes.
        let (out, killed, status, took) =
            passed_on("echo slow >&2; sleep 0.5; echo done >&2", grace);
        assert_eq!(out, b"slow\ndone\n");
        assert!(!killed);
        assert_eq!(status.code(), Some(0));
        assert!(took >= Duration::from_millis(500), "{took:?}");
    }

    #[test]
    fn a_short_backtrace_keeps_the_frames_between_the_markers() {
        let printed = "   0: hook\n             at hook.rs:1:1\n   1: std::sys::backtrace::__rust_end_short_backtrace\n   2: core::panicking::panic_fmt\n             at panicking.rs:80:14\n   3: memtool::main\n   4: std::sys::backtrace::__rust_begin_short_backtrace\n   5: main\n";
        assert_eq!(
            short_backtrace(printed),
            "   0: core::panicking::panic_fmt\n             at panicking.rs:80:14\n   1: memtool::main\n"
        );
        // Without the markers (frames not symbolized), every frame.
        assert_eq!(short_backtrace("   0: a\n   1: b\n"), "   0: a\n   1: b\n");
    }

    #[test]
    fn glibcs_fatal_out_of_memory_is_recognised_and_its_other_errors_passed_on() {
        let text = b"memtool: parsing\rFatal glibc error: failed to register TLS destructor: out of memory\n";
        for split in 0..text.len() {
            let (out, oom) = filtered(&[&text[..split], &text[split..]], true);
            assert_eq!(out, b"memtool: parsing\r", "split at {split}");
            assert_eq!(oom, Some(None));
        }
        let other = b"Fatal glibc error: malloc assertion failure\n";
        assert_eq!(filtered(&[other], true), (other.to_vec(), None));
        let not_aborted = b"Fatal glibc error: failed to register TLS destructor: out of memory\n";
        assert_eq!(
            filtered(&[not_aborted], false),
            (not_aborted.to_vec(), None)
        );
    }

    #[test]
    fn the_allocation_failure_is_recognised_in_any_chunking() {
        let text = b"memtool: warning: x\nmemtool: parsing\rmemory allocation of 1234 bytes \
            failed\nstack backtrace:\n   0: main\n             at src/main.rs:1:2\nnote: Some details\n";
        for split in 0..text.len() {
            let (out, oom) = filtered(&[&text[..split], &text[split..]], true);
            assert_eq!(
                out, b"memtool: warning: x\nmemtool: parsing\r",
                "split at {split}"
            );
            assert_eq!(oom, Some(Some(1234)));
        }
        // Two threads failing at once.
        let text = b"memory allocation of memory allocation of 11 bytes failed\n8 bytes failed\n";
        assert_eq!(filtered(&[text], true), (Vec::new(), Some(None)));
    }

    #[test]
    fn everything_else_passes_byte_for_byte() {
        let text: &[u8] = b"memory allocation is fine\nmemory\rprogress\xff\nmemory allocation of \
            12 bytes failed\nmore\nmemory allocation of 9 bytes failed\nstack backtrace:\n";
        for split in 0..text.len() {
            // Not aborted: even the message itself is passed on.
            let (out, oom) = filtered(&[&text[..split], &text[split..]], false);
            assert_eq!(out, text, "split at {split}");
            assert_eq!(oom, None);
        }
    }

    #[test]
    fn a_line_is_forwarded_as_soon_as_it_cannot_be_the_message() {
        let mut filter = StderrFilter::default();
        let mut out = Vec::new();
        filter.feed(b"memtool: parsing 1 GiB", &mut out).unwrap();
        assert_eq!(out, b"memtool: parsing 1 GiB");
        filter.feed(b"\nmem", &mut out).unwrap();
        assert_eq!(out, b"memtool: parsing 1 GiB\n");
        filter.feed(b"x", &mut out).unwrap();
        assert_eq!(out, b"memtool: parsing 1 GiB\nmemx");
    }
}
