//! Reading the files named on the command line. This is the only place that
//! touches input files; the core gets bytes.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use memtool_core::model::Profile;
use memtool_core::report::visible;
use memtool_core::Source;

use memtool_core::analysis::annotation_group;
use memtool_core::analysis::category::{CategoryRule, Inference};
use memtool_core::analysis::group::GroupBy;

use crate::cli::{check_selection, AnalysisArgs, InputArgs, ReadArgs};
use crate::output::Replaced;

/// Opens one input: a file path, or `-` for standard input. Files are not
/// read here: the core pulls what it needs, so a gigabyte profile is never
/// copied into memory whole. A stream (standard input, a FIFO, a device)
/// is read as [`read_stream`] says. `replaced` is the file `-o` would
/// replace: an input that is that file is refused before anything is read.
pub fn read_source(path: &str, replaced: Option<&Replaced>, limit: u64) -> Result<Source> {
    let root = root();
    if path == "-" {
        if let Some(root) = &root {
            bail!(
                "-: standard input is the MCP channel; give a file under {}",
                root.display()
            );
        }
        if let Some(replaced) = replaced {
            let stat = rustix::fs::fstat(std::io::stdin())
                .map_err(|e| anyhow::anyhow!("<stdin>: cannot read standard input: {e}"))?;
            replaced.check("<stdin>", stat.st_dev, stat.st_ino)?;
        }
        return read_stream("<stdin>", std::io::stdin().lock(), limit);
    }
    let p = Path::new(path);
    if let Some(root) = &root {
        check_inside(root, path, None)?;
    }
    if p.is_dir() {
        bail!("{path}: is a directory, not a profile file, run directory or TensorBoard logdir (no .xplane.pb in it)");
    }
    let file =
        std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{path}: {}", describe_io(&e)))?;
    if let Some(root) = &root {
        // The file opened, not the name checked above: a link swapped in
        // between is caught here.
        check_inside(root, path, Some(&file))?;
    }
    let meta = file
        .metadata()
        .map_err(|e| anyhow::anyhow!("{path}: {}", describe_io(&e)))?;
    if let Some(replaced) = replaced {
        replaced.check(path, meta.dev(), meta.ino())?;
    }
    if !meta.is_file() {
        return read_stream(path, file, limit);
    }
    Ok(Source::new(path, file))
}

/// A stream has no size and no random access, and may have no end
/// (`/dev/zero`, `yes`): its head, what format detection looks at, is read
/// first and judged by the core, so bytes that are no profile are refused
/// at once ("not a memory profile"), whatever follows. A stream that ends
/// within its head is that head, in memory; a longer one is spooled to an
/// anonymous temporary file and read from there as a file is, so a profile
/// piped in takes the memory it takes from a file. A stream longer than
/// `limit` (`--max-decompressed`) is refused: one that starts as a profile
/// and never ends stops there, not when the disk is full.
fn read_stream(path: &str, mut stream: impl Read, limit: u64) -> Result<Source> {
    let cannot_read = |e: std::io::Error| anyhow::anyhow!("{path}: {}", describe_io(&e));
    let head_len = memtool_core::STREAM_HEAD_BYTES;
    let mut head = Vec::with_capacity(head_len);
    (&mut stream)
        .take(head_len as u64)
        .read_to_end(&mut head)
        .map_err(cannot_read)?;
    if head.len() < head_len {
        return Ok(Source::from_bytes(path, head));
    }
    memtool_core::check_stream_head(path, &head)?;
    let dir = std::env::temp_dir();
    let cannot_spool = |e: std::io::Error| {
        anyhow::anyhow!(
            "{path}: cannot keep the stream in a temporary file in {} (TMPDIR): {e}",
            dir.display()
        )
    };
    let mut file = crate::output::temporary_file(&dir).map_err(cannot_spool)?;
    file.write_all(&head).map_err(cannot_spool)?;
    let mut chunk = head;
    chunk.resize(head_len, 0);
    let mut spooled = head_len as u64;
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot_read(e)),
        };
        spooled += n as u64;
        if spooled > limit {
            bail!(
                "{path}: the stream is longer than the limit of {} (--max-decompressed); \
                 raise it with --max-decompressed BYTES if the input is trusted",
                memtool_core::report::units::bytes(limit)
            );
        }
        file.write_all(&chunk[..n]).map_err(cannot_spool)?;
    }
    Ok(Source::new(path, file))
}

/// The environment variable that confines reading to one folder:
/// `memtool mcp --root DIR` sets it (canonical) for the child that runs each
/// tool call, so every file opened and every folder searched for runs is
/// checked where it is opened, the run a logdir names included.
pub const ROOT_VAR: &str = "MEMTOOL_ROOT";

/// Fails when reading is confined to a folder (`memtool mcp --root`) and
/// `path` lies outside it: for the folders a command lists itself (`ranks`'s
/// patterns), whose file names would otherwise be told.
pub fn check_confined(path: &str) -> Result<()> {
    match root() {
        Some(root) => check_inside(&root, path, None),
        None => Ok(()),
    }
}

/// The folder reading is confined to, when [`ROOT_VAR`] is set.
fn root() -> Option<PathBuf> {
    std::env::var_os(ROOT_VAR).map(PathBuf::from)
}

/// Fails unless `path` (the file `opened` from it, when given: the path the
/// kernel resolved, links and all) lies under `root`. A path that does not
/// resolve is judged by its name with `.` and `..` taken away, so a missing
/// file outside the root is refused as outside, not reported missing.
fn check_inside(root: &Path, path: &str, opened: Option<&std::fs::File>) -> Result<()> {
    use std::os::fd::AsRawFd;
    let real = match opened {
        Some(file) => std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .or_else(|_| std::fs::canonicalize(path)),
        None => std::fs::canonicalize(path),
    };
    let inside = match real {
        Ok(real) => real.starts_with(root),
        Err(_) => {
            let mut lexical = std::env::current_dir().unwrap_or_default();
            for part in Path::new(path).components() {
                match part {
                    std::path::Component::ParentDir => {
                        lexical.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => lexical.push(other),
                }
            }
            lexical.starts_with(root)
        }
    };
    if !inside {
        bail!(
            "{path}: outside {}, the only folder this server reads (memtool mcp --root)",
            root.display()
        );
    }
    Ok(())
}

fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (cannot read the file)".to_string()
        }
        _ => format!("cannot read: {e}"),
    }
}

/// Reads the inputs of one command into one profile (a series when
/// several). Fails when `output` (`-o`) is one of them, or a `--memory` of
/// `analysis` names no memory there.
pub fn load(input: &InputArgs, analysis: &AnalysisArgs, output: Option<&Path>) -> Result<Profile> {
    let mut profiles = load_several(&[&input.files], &input.read, output)?;
    let mut profile = profiles.remove(0);
    check_selection(&[&profile], &analysis.options())?;
    categorize(&mut profile, analysis, &input.read)?;
    Ok(profile)
}

/// Fails, in one line (exit 2, as for any input with no memory), when
/// `profile` holds only XLA out-of-memory reports read from logs: a log has
/// no timeline for `command` (`peak`, `leaks`, `frag`) to read, and an
/// empty table under a note would say so less plainly.
pub fn require_timeline(profile: &Profile, command: &str) -> Result<()> {
    if !profile.memories.is_empty() || profile.xla_reports.is_empty() {
        return Ok(());
    }
    let path = profile.inputs.first().map_or("-", |i| i.path.as_str());
    let n = profile.xla_reports.len();
    Err(memtool_core::Error::NoData {
        path: path.to_string(),
        message: format!(
            "a log holds no memory timeline for `{command}`, only {n} XLA out-of-memory \
             report{}: `memtool oom {path}` gives the post-mortem",
            if n == 1 { "" } else { "s" }
        ),
    }
    .into())
}

/// Gives every allocation its category: the user's rules (`--category`,
/// then `--categories FILE`), else the file's, else inferred. One profile
/// read whole: inferring may take the read's `--jobs`.
pub fn categorize(profile: &mut Profile, analysis: &AnalysisArgs, read: &ReadArgs) -> Result<()> {
    let rules = category_rules(analysis)?;
    let jobs = read.load_options().jobs;
    memtool_core::analysis::category::assign_on(profile, &rules, Inference::WhereMissing, jobs);
    Ok(())
}

/// The user's category rules: `--category`, then `--categories FILE`.
fn category_rules(analysis: &AnalysisArgs) -> Result<Vec<CategoryRule>> {
    let mut rules = analysis.category_rules.clone();
    if let Some(path) = &analysis.categories_file {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{shown}: {}", describe_io(&e)))?;
        rules.extend(CategoryRule::parse_file(&shown, &text).map_err(anyhow::Error::msg)?);
    }
    Ok(rules)
}

/// The inputs of `input` opened in order, as [`load`] reads them (folders
/// and logdirs expanded, `--sort` applied); none of them read yet.
pub fn open(input: &InputArgs, output: Option<&Path>) -> Result<Vec<Source>> {
    let mut groups = open_groups(&[&input.files], &input.read, output)?;
    Ok(groups.remove(0))
}

/// Each of `sources` read on its own as a part of one profile
/// ([`memtool_core::Reading::Part`]), its allocations categorized as
/// [`categorize`] does, and reduced by `reduce` on a pool of `--jobs`
/// threads, its events dropped before the next is read
/// ([`memtool_core::load_each`]). The first error in input order fails.
pub fn reduce_each<R: Send>(
    sources: Vec<Source>,
    read: &ReadArgs,
    analysis: &AnalysisArgs,
    reduce: impl Fn(&Profile) -> R + Sync,
) -> Result<Vec<R>> {
    let rules = category_rules(analysis)?;
    // Each file is one part: its own hosts, if any, are not read in
    // parallel on top of the pool.
    let options = memtool_core::LoadOptions {
        jobs: 1,
        ..read.load_options()
    };
    let jobs = read.jobs.map_or(0, usize::from);
    let total: u64 = sources.iter().map(|s| s.data.len()).sum();
    let progress = Progress::start(total, sources.len());
    let results = memtool_core::timings::time("parse and reduce", || {
        memtool_core::load_each(
            sources,
            jobs,
            memtool_core::Reading::Part,
            &options,
            |source| Ok((source, ())),
            |(), profile| {
                profile.map(|mut profile| {
                    memtool_core::analysis::category::assign(
                        &mut profile,
                        &rules,
                        Inference::WhereMissing,
                    );
                    reduce(&profile)
                })
            },
        )
    });
    progress.finish();
    Ok(results.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// For `--by annotation` (`by`): gives each allocation the innermost
/// annotated range it was made in, with a note when no memory records one
/// (every allocation is then outside any). Other groupings need nothing.
pub fn group_by(profile: &mut Profile, by: Option<GroupBy>) {
    if by != Some(GroupBy::Annotation) {
        return;
    }
    if !annotation_group::has_annotations(profile) {
        let path = profile.inputs.first().map_or("-", |i| i.path.as_str());
        profile.warnings.push(memtool_core::model::Warning {
            path: path.to_string(),
            message: format!(
                "no annotated ranges (record_function, user annotations) are recorded, so \
                 every allocation is {}",
                annotation_group::OUTSIDE_LABEL
            ),
            note: true,
        });
    }
    annotation_group::assign(profile);
}

/// Reads the two sides of a comparison, the first file and the rest, in
/// parallel. Fails when `output` (`-o`) is one of them, or a `--memory` of
/// `analysis` names no memory on either side.
pub fn load_pair(
    input: &InputArgs,
    analysis: &AnalysisArgs,
    output: Option<&Path>,
) -> Result<(Profile, Profile)> {
    let (base, new) = input.files.split_at(1.min(input.files.len()));
    let mut both = load_several(&[base, new], &input.read, output)?.into_iter();
    let (Some(mut base), Some(mut new)) = (both.next(), both.next()) else {
        bail!("internal error: two profiles expected");
    };
    check_selection(&[&base, &new], &analysis.options())?;
    categorize(&mut base, analysis, &input.read)?;
    categorize(&mut new, analysis, &input.read)?;
    Ok((base, new))
}

/// Reads independent profiles (diff's base and new), each from its own
/// paths, one thread per profile so both cores parse. Errors are reported in
/// argument order, whichever thread finished first. Fails when `output`
/// (`-o`) is one of the files.
pub fn load_several(
    groups: &[&[String]],
    args: &ReadArgs,
    output: Option<&Path>,
) -> Result<Vec<Profile>> {
    let sources = open_groups(groups, args, output)?;
    let options = args.load_options();
    let total: u64 = sources.iter().flatten().map(|s| s.data.len()).sum();
    let files = sources.iter().map(Vec::len).sum();
    let progress = Progress::start(total, files);
    let results = memtool_core::timings::time("parse", || {
        memtool_core::parallel::map_in_order(sources, |group| memtool_core::load(group, &options))
    });
    progress.finish();
    Ok(results.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// The inputs of each group of paths opened, in order (folders and
/// logdirs expanded, `--sort` applied). Fails when `output` (`-o`) is one
/// of them, or standard input is given twice.
fn open_groups(
    groups: &[&[String]],
    args: &ReadArgs,
    output: Option<&Path>,
) -> Result<Vec<Vec<Source>>> {
    let replaced = Replaced::of(output);
    let stdin_uses = groups
        .iter()
        .flat_map(|paths| paths.iter())
        .filter(|p| *p == "-")
        .count();
    if stdin_uses > 1 {
        bail!("standard input (-) can be given only once");
    }
    let options = args.load_options();
    let read = memtool_core::timings::span("read files");
    let mut sources = Vec::new();
    for paths in groups {
        let mut files = Vec::new();
        for path in paths.iter() {
            files.extend(expand(path, args)?);
        }
        if args.sort == Some(crate::cli::SortArg::Natural) {
            files.sort_by(|a, b| memtool_core::natural_cmp(a, b));
        }
        let group = files
            .iter()
            .map(|p| read_source(p, replaced.as_ref(), options.decompressed_limit()))
            .collect::<Result<Vec<_>>>()?;
        sources.push(group);
    }
    drop(read);
    Ok(sources)
}

/// A one-line status on stderr while large inputs are parsed, only when
/// stderr is a terminal (never in CI logs or pipes).
struct Progress {
    shown: bool,
}

impl Progress {
    const THRESHOLD: u64 = 32 << 20;

    fn start(bytes: u64, files: usize) -> Progress {
        let shown = bytes >= Self::THRESHOLD && crate::supervise::stderr_is_terminal();
        if shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                // The `\r` ends the line for the supervisor, which then
                // recognises an out-of-memory abort after it.
                "memtool: parsing {} in {files} file(s)…\r",
                memtool_core::report::units::bytes(bytes)
            );
            let _ = err.flush();
            drop(err);
            crate::supervise::stderr_written();
        }
        Progress { shown }
    }

    fn finish(self) {
        if self.shown {
            // Erase the status line.
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            crate::supervise::stderr_written();
        }
    }
}

const XSPACE_SUFFIX: &str = ".xplane.pb";

/// The profile files a command-line path stands for: the path itself, or for
/// a directory the `.xplane.pb` files of a run directory, or of one run of a
/// TensorBoard logdir (see [`runs`]): the newest, or the one `--run` names;
/// or the `*after_optimizations.hlo.pb` modules of an XLA dump folder
/// (`--xla_dump_to` with `--xla_dump_hlo_as_proto`), else its
/// `*after_optimizations-buffer-assignment.txt` (dumped without protos).
/// The run chosen from a logdir is said on stderr. `--host` keeps only that
/// host's file.
pub fn expand(path: &str, args: &ReadArgs) -> Result<Vec<String>> {
    let dir = Path::new(path);
    if path == "-" || !dir.is_dir() {
        return Ok(vec![path.to_string()]);
    }
    if let Some(root) = root() {
        check_inside(&root, path, None)?;
    }
    let mut dumped = files_ending(dir, HLO_DUMP_SUFFIX);
    if dumped.is_empty() {
        // Dumped without protos: the text buffer assignments.
        dumped = files_ending(dir, BUFFER_ASSIGNMENT_SUFFIX);
    }
    if !dumped.is_empty() && !has_xspace(dir) {
        // An XLA dump folder: its optimized modules, each a program.
        return Ok(dumped
            .into_iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect());
    }
    let run = if has_xspace(dir) {
        dir.to_path_buf()
    } else {
        let runs = runs(dir);
        if runs.is_empty() {
            // read_source explains what a directory must hold.
            return Ok(vec![path.to_string()]);
        }
        let chosen = choose_run(path, &runs, args.run.as_deref())?;
        let mut note = format!("memtool: {path}: reading run {}", chosen.name);
        if runs.len() > 1 && args.run.is_none() {
            note.push_str(&format!(
                " (the newest of {}; --run NAME picks another, --list-runs lists them)",
                runs.len()
            ));
        }
        // Run and folder names come from the logdir: shown as the tables
        // show names, escapes neutralised.
        eprintln!("{}", visible(&note));
        crate::supervise::stderr_written();
        chosen.dir.clone()
    };
    let mut files = xspace_files(&run);
    if let Some(host) = args.host.as_deref() {
        files.retain(|f| host_of(f) == host);
        if files.is_empty() {
            let hosts: Vec<String> = xspace_files(&run).iter().map(|f| host_of(f)).collect();
            bail!(
                "{}: no host `{host}` (hosts: {})",
                run.display(),
                hosts.join(", ")
            );
        }
    }
    Ok(files
        .into_iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect())
}

/// A profiling run of a TensorBoard logdir: a folder of `.xplane.pb`, one per
/// host.
pub struct Run {
    /// As TensorBoard's profile plugin names it: the run folder's name,
    /// behind the folder between the logdir and `plugins/profile` when there
    /// is one (`train/2024_05_01_12_30_00`, as Keras's TensorBoard callback
    /// writes).
    pub name: String,
    /// The run's folder.
    pub dir: PathBuf,
    /// The run's folder name read as the timestamp profilers give it
    /// (`2024_05_01_12_30_00`), when it is one.
    stamp: Option<Vec<u64>>,
    /// When the run's newest file was last written.
    modified: std::time::SystemTime,
}

/// The runs under `logdir`, oldest first: `logdir/plugins/profile/<run>`,
/// `logdir/<tag>/plugins/profile/<run>` (Keras writes `train/` and
/// `validation/`), and `logdir/<run>` for the `plugins/profile` folder
/// itself. The newest is the last by timestamp name when every run has one,
/// else by modification time.
pub fn runs(logdir: &Path) -> Vec<Run> {
    let mut roots: Vec<(String, PathBuf)> = vec![
        (String::new(), logdir.join("plugins").join("profile")),
        (String::new(), logdir.to_path_buf()),
    ];
    for tag in subdirs(logdir) {
        let name = tag.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| n != "plugins") {
            roots.push((format!("{name}/"), tag.join("plugins").join("profile")));
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    // A run reached from two roots (`logdir` is itself `plugins/profile`)
    // is listed once; a set, so 30,000 runs are not compared pairwise.
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for (prefix, root) in roots {
        for dir in subdirs(&root) {
            if seen.contains(&dir) {
                continue;
            }
            let files = xspace_files(&dir);
            if files.is_empty() {
                continue;
            }
            seen.insert(dir.clone());
            let folder = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let modified = files
                .iter()
                .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
                .max()
                .unwrap_or(std::time::UNIX_EPOCH);
            runs.push(Run {
                name: format!("{prefix}{folder}"),
                stamp: timestamp(&folder),
                dir,
                modified,
            });
        }
    }
    if runs.iter().all(|r| r.stamp.is_some()) {
        runs.sort_by(|a, b| (&a.stamp, &a.name).cmp(&(&b.stamp, &b.name)));
    } else {
        runs.sort_by(|a, b| (a.modified, &a.name).cmp(&(b.modified, &b.name)));
    }
    runs
}

/// `2024_05_01_12_30_00` (TensorFlow, JAX and PyTorch's profilers name runs
/// so) as its numbers; None for any other name.
fn timestamp(name: &str) -> Option<Vec<u64>> {
    let parts: Vec<u64> = name
        .split(['_', '-', '.'])
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    (parts.len() >= 3 && parts[0] >= 1970).then_some(parts)
}

/// Runs named in the error for a `--run` that names none, newest first.
const RUNS_NAMED: usize = 20;

/// The run `wanted` names (its full name or its folder's), else the newest.
fn choose_run<'r>(logdir: &str, runs: &'r [Run], wanted: Option<&str>) -> Result<&'r Run> {
    let Some(wanted) = wanted else {
        return runs.last().context("no runs");
    };
    let matches: Vec<&Run> = runs
        .iter()
        .filter(|r| r.name == wanted || r.name.rsplit('/').next() == Some(wanted))
        .collect();
    // The newest few, oldest first: a logdir of thousands of runs makes no
    // readable line.
    let names = || {
        let older = runs.len().saturating_sub(RUNS_NAMED);
        let newest: Vec<&str> = runs[older..].iter().map(|r| r.name.as_str()).collect();
        match older {
            0 => newest.join(", "),
            more => format!(
                "{more} older, then {}; --list-runs lists them all",
                newest.join(", ")
            ),
        }
    };
    match matches.as_slice() {
        [run] => Ok(run),
        [] => bail!("{logdir}: no run `{wanted}` (runs: {})", names()),
        several => bail!(
            "{logdir}: `{wanted}` names {} runs ({}); give the full name",
            several.len(),
            several
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `memtool … LOGDIR --list-runs`: the runs of each directory given, newest
/// last, with their hosts, to stdout.
pub fn list_runs(input: &InputArgs) -> Result<crate::Outcome> {
    let mut text = String::new();
    for path in &input.files {
        let dir = Path::new(path);
        let runs = if dir.is_dir() && !has_xspace(dir) {
            runs(dir)
        } else if dir.is_dir() {
            Vec::new()
        } else {
            bail!("{path}: --list-runs takes a TensorBoard logdir, not a file");
        };
        if runs.is_empty() {
            let what = if has_xspace(dir) {
                "is a run directory itself"
            } else {
                "holds no runs"
            };
            text.push_str(&format!("{}: {what}\n", visible(path)));
            continue;
        }
        text.push_str(&format!(
            "{}: {} run(s), newest last\n",
            visible(path),
            runs.len()
        ));
        for run in &runs {
            let hosts: Vec<String> = xspace_files(&run.dir).iter().map(|f| host_of(f)).collect();
            // Run and host names are folder and file names: escapes in them
            // are shown, not sent to the terminal.
            let line = format!("{}  hosts: {}", run.name, hosts.join(", "));
            text.push_str(&format!("  {}\n", visible(&line)));
        }
    }
    crate::output::write_to(None, |out| out.write_all(text.as_bytes()))?;
    Ok(crate::Outcome::Success)
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn xspace_files(dir: &Path) -> Vec<PathBuf> {
    files_ending(dir, XSPACE_SUFFIX)
}

/// The files of `dir` whose names end in `suffix`, in name order.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// What XLA names a compiled module in a `--xla_dump_to` folder dumped with
/// `--xla_dump_hlo_as_proto` (`module_0004.jit_f.cpu_after_optimizations.hlo.pb`):
/// the modules with their buffer assignment.
const HLO_DUMP_SUFFIX: &str = "after_optimizations.hlo.pb";

/// What XLA names a module's text buffer assignment in a `--xla_dump_to`
/// folder dumped without protos.
const BUFFER_ASSIGNMENT_SUFFIX: &str = "after_optimizations-buffer-assignment.txt";

fn has_xspace(dir: &Path) -> bool {
    !xspace_files(dir).is_empty()
}

/// `host` of `.../host.xplane.pb`.
fn host_of(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(XSPACE_SUFFIX)
        .unwrap_or(&name)
        .to_string()
}

/// Leaves a profile or report to the operating system, which takes back a
/// process's memory at once when it exits: freeing ten million allocations
/// and labels one by one would take a second of the user's time for nothing.
/// Only for values that live until the command ends.
pub fn free_at_exit<T>(value: T) {
    std::mem::forget(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_is_not_there_names_the_newest_runs_only() {
        let runs: Vec<Run> = (0..25)
            .map(|i| Run {
                name: format!("2026_01_01_00_{i:02}_00"),
                dir: PathBuf::from(format!("logdir/{i}")),
                stamp: timestamp(&format!("2026_01_01_00_{i:02}_00")),
                modified: std::time::UNIX_EPOCH,
            })
            .collect();
        let err = choose_run("logdir", &runs, Some("2027_01_01_00_00_00"))
            .err()
            .unwrap()
            .to_string();
        // 25 runs: the 5 oldest counted, the newest 20 named, oldest first.
        assert!(
            err.starts_with(
                "logdir: no run `2027_01_01_00_00_00` (runs: 5 older, then 2026_01_01_00_05_00, "
            ),
            "{err}"
        );
        assert!(
            err.ends_with("2026_01_01_00_24_00; --list-runs lists them all)"),
            "{err}"
        );
        assert!(!err.contains("2026_01_01_00_04_00"), "{err}");
        let chosen = choose_run("logdir", &runs, Some("2026_01_01_00_03_00")).unwrap();
        assert_eq!(chosen.dir, PathBuf::from("logdir/3"));
    }
}
