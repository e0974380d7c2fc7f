use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Result};
use clap::Args;
use memtool_core::analysis::ranks::{self, FailedFile, RankSummary};

use crate::cli::{AnalysisArgs, CapacityArgs, FormatArg, InputArgs, OutputArgs};
use crate::output::Replaced;
use crate::{inputs, output, Outcome};

/// One row per rank of a job, then the fleet: median, max, imbalance,
/// outliers, out-of-memory order and what the highest rank holds.
///
/// Each file (a PyTorch snapshot per rank, an `.xplane.pb` per host, a pprof
/// per process) is read by a pool of --jobs threads, reduced to its rank's
/// figures and dropped before the next is taken: memory stays about that of
/// the largest files being read, however many ranks there are. A rank's
/// number comes from its file name (`rank3`, `rank_3`, `snapshot-3.pickle`);
/// a file of several devices gives a rank per device. An outlier's peak is
/// more than 10% above the median rank's, in a set of at most 10% of the
/// ranks whose peaks cluster (docs/json/ranks.md). Files that cannot be
/// read are named on stderr, one line each, and left out (--strict fails
/// instead). `--format html` writes a page of one strip per rank (its
/// memory over time), the outliers first with what the first holds beyond
/// the median rank open; past 200 ranks the others are grouped by peak, so
/// the page stays a few hundred KB.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool ranks snapshots/                      # every file in the folder
  memtool ranks 'snapshots/rank*.pickle' --jobs 4
  memtool ranks logdir/                         # one rank per host of the newest run
  memtool ranks oom_dumps/ --capacity 80GiB     # which rank failed first, how close the others were
  memtool ranks snapshots/ --format json | jq '.outliers'
  memtool ranks snapshots/ --format html -o fleet.html   # a strip per rank, opens on the outlier")]
#[command(mut_arg("files", |a| a
    .value_name("FILE|DIR|GLOB")
    .help("Rank files, folders of them (every file in the folder), run directories or \
           logdirs (a rank per host), or quoted glob patterns (`*`, `?` in the file name)")))]
pub struct RanksArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Fail (exit 2) when a file cannot be read, instead of naming it on
    /// stderr and reporting the rest.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub capacity: CapacityArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &RanksArgs) -> Result<Outcome> {
    let page = matches!(args.output.format, FormatArg::Html);
    if page {
        output::refuse_terminal(
            "ranks --format html",
            args.output.output.as_deref(),
            "an HTML page",
            "fleet.html",
        )?;
    }
    let mut files = Vec::new();
    for path in &args.input.files {
        files.extend(rank_files(path, &args.input)?);
    }
    if files.iter().filter(|f| *f == "-").count() > 1 {
        bail!("standard input (-) can be given only once");
    }
    let mut options = args.analysis.report_options(args.output.format);
    args.capacity.apply(&mut options);
    // Each file is one rank: its own hosts, if any, are not read in
    // parallel on top of the pool.
    let load_options = memtool_core::LoadOptions {
        jobs: 1,
        ..args.input.read.load_options()
    };
    let jobs = args.input.read.jobs.map_or(0, usize::from);
    let replaced = Replaced::of(args.output.output.as_deref());
    let progress = Progress::new(files.len());
    // A file that cannot be read is left out; running out of memory ends
    // the command, as in every other (one line, exit 2).
    let left_out = |file: &str, error: String| -> std::result::Result<Vec<RankSummary>, Failure> {
        progress.done();
        Err(Failure::LeftOut(FailedFile {
            error: error
                .strip_prefix(&format!("{file}: "))
                .unwrap_or(&error)
                .to_string(),
            file: file.to_string(),
        }))
    };
    let open = |file: String| match inputs::read_source(
        &file,
        replaced.as_ref(),
        load_options.decompressed_limit(),
    ) {
        Ok(source) => Ok((source, file)),
        Err(e) => Err(left_out(&file, e.to_string())),
    };
    // The profile (every event) is dropped when this returns, before the
    // worker takes its next file.
    let reduce =
        |file: String, profile: memtool_core::Result<memtool_core::model::Profile>| match profile {
            Err(e @ memtool_core::Error::OutOfMemory { .. }) => Err(Failure::Fatal(e)),
            Err(e) => left_out(&file, e.to_string()),
            Ok(profile) => match ranks::reduce(&profile, &file, &options) {
                s if s.is_empty() => {
                    left_out(&file, "no memory with a peak in this profile".to_string())
                }
                s => {
                    progress.done();
                    Ok(s)
                }
            },
        };
    let results: Vec<std::result::Result<Vec<RankSummary>, Failure>> =
        memtool_core::timings::time("read and reduce", || {
            memtool_core::load_each(
                files,
                jobs,
                memtool_core::Reading::Alone,
                &load_options,
                open,
                reduce,
            )
        });
    progress.finish();
    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for result in results {
        match result {
            Ok(s) => summaries.extend(s),
            Err(Failure::LeftOut(f)) => failed.push(f),
            Err(Failure::Fatal(e)) => return Err(e.into()),
        }
    }
    if let Some(first) = failed.first().filter(|_| args.strict) {
        bail!("{}: {} (--strict)", first.file, first.error);
    }
    if summaries.is_empty() {
        match failed.as_slice() {
            [] => bail!("no rank files given"),
            [only] => bail!("{}: {}", only.file, only.error),
            [first, ..] => bail!(
                "none of the {} files could be read (the first: {}: {})",
                failed.len(),
                first.file,
                first.error
            ),
        }
    }
    let lines: Vec<String> = failed
        .iter()
        .map(|f| format!("{}: {} (left out)", f.file, f.error))
        .collect();
    output::warn(&lines);
    let report = memtool_core::timings::time("fleet", || ranks::fleet(summaries, failed));
    if page {
        output::warn(&memtool_core::report::Report::warnings(&report));
        let html = memtool_core::render::ranks_html(&report);
        output::write_to(args.output.output.as_deref(), |out| {
            out.write_all(html.as_bytes())
        })?;
    } else {
        output::write(&report, &args.output, &args.analysis)?;
    }
    inputs::free_at_exit(report);
    Ok(Outcome::Success)
}

/// Why a rank file gave no rank.
enum Failure {
    /// The file cannot be read: it is named and left out of the report.
    LeftOut(FailedFile),
    /// Out of memory: the command fails.
    Fatal(memtool_core::Error),
}

/// The files a command-line path stands for: a run directory or logdir's
/// hosts (as every command reads them), every file of any other folder, the
/// files a pattern with `*` or `?` in its file name matches, else the path.
fn rank_files(path: &str, input: &InputArgs) -> Result<Vec<String>> {
    let p = Path::new(path);
    if p.is_dir() {
        let hosts = inputs::expand(path, &input.read)?;
        if hosts.len() != 1 || hosts[0] != path {
            return Ok(hosts);
        }
        let files = files_in(p, |_| true);
        if files.is_empty() {
            bail!("{path}: no files in this folder");
        }
        return Ok(files);
    }
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
    match name.filter(|n| !p.exists() && n.contains(['*', '?'])) {
        Some(pattern) => {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            let dir = dir.unwrap_or(Path::new("."));
            inputs::check_confined(&dir.to_string_lossy())?;
            let files = files_in(dir, |name| matches(&pattern, name));
            if files.is_empty() {
                bail!("{path}: no file matches this pattern");
            }
            Ok(files)
        }
        None => Ok(vec![path.to_string()]),
    }
}

/// The regular files of `dir` (not hidden) whose name `keep` accepts, in
/// name order.
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            !name.starts_with('.') && keep(&name) && e.path().is_file()
        })
        .map(|e| e.path().to_string_lossy().into_owned())
        .collect();
    files.sort();
    files
}

/// Whether `name` matches `pattern`: `*` any run of characters, `?` one.
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with one backtrack point per `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// `memtool: ranks: 12 of 64 files…` on stderr while files are read, only
/// when stderr is a terminal.
struct Progress {
    total: usize,
    done: AtomicUsize,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: AtomicUsize::new(0),
            shown: total > 1 && crate::supervise::stderr_is_terminal(),
        }
    }

    fn done(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.shown {
            let mut err = std::io::stderr().lock();
            // The `\r` ends the line for the supervisor (see inputs.rs).
            let _ = write!(
                err,
                "memtool: ranks: {done} of {} files read…\r",
                self.total
            );
            let _ = err.flush();
            drop(err);
            crate::supervise::stderr_written();
        }
    }

    fn finish(self) {
        if self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            crate::supervise::stderr_written();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_match_file_names() {
        use super::matches;
        assert!(matches("rank*.pickle", "rank12.pickle"));
        assert!(matches("rank?.pickle", "rank1.pickle"));
        assert!(!matches("rank?.pickle", "rank12.pickle"));
        assert!(matches("*", "anything"));
        assert!(matches("*-*.pb", "host-3.xplane.pb"));
        assert!(!matches("*.prof", "memory.prof.gz"));
    }
}
