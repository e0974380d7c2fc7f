//! Turning bytes into a [`Profile`]: decompression, format detection, and one
//! reader per format. Readers never panic: any bytes give a profile (plus
//! warnings) or one [`Error`].

pub(crate) mod decompress;
pub(crate) mod detect;
mod pprof;
pub(crate) mod read_ahead;
pub(crate) mod source;
pub(crate) mod torch;
pub(crate) mod xla_dump;
pub(crate) mod xla_report;
pub(crate) mod xspace;

use crate::error::{Error, Result};
use crate::model::{Format, Profile};
use detect::Sniffed;
pub use source::ByteSource;

/// One input as the caller opened it: a display path and where its bytes are.
pub struct Source {
    /// The path as the user gave it; every message about the input names it.
    pub path: String,
    /// Where the input's bytes are read from.
    pub data: Box<dyn ByteSource>,
}

impl Source {
    /// An input read through `data` (an open file, say), pulled as needed.
    pub fn new(path: impl Into<String>, data: impl ByteSource + 'static) -> Source {
        Source {
            path: path.into(),
            data: Box::new(data),
        }
    }

    /// An input already in memory.
    pub fn from_bytes(path: impl Into<String>, bytes: Vec<u8>) -> Source {
        Source::new(path, bytes)
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("path", &self.path)
            .field("len", &self.data.len())
            .finish()
    }
}

/// How much of an input format detection looks at.
const SNIFF_BYTES: u64 = 64 << 10;

/// How many bytes of a stream (standard input, a FIFO, a device) a caller
/// reads before it asks [`check_stream_head`] whether the stream can be a
/// profile: what detection looks at.
pub const STREAM_HEAD_BYTES: usize = SNIFF_BYTES as usize;

/// Whether a stream whose first [`STREAM_HEAD_BYTES`] bytes are `head` (and
/// which goes on past them) can be a profile: the error [`crate::load`] would give
/// for an input that starts so, when the head alone decides it is none. A
/// caller reading a stream that has no end (`/dev/zero`, `yes`) or no
/// profile in it (random bytes) stops at once on this, rather than
/// reading it all first. A gzip'd head is inflated up to what detection
/// needs (what the compressed head holds of it); a head that cannot decide
/// (a protobuf whose first field runs past it, a gzip stream corrupt this
/// early, which [`crate::load`] reports in full) passes.
pub fn check_stream_head(path: &str, head: &[u8]) -> Result<()> {
    if !decompress::is_gzip(head) {
        judge_head(path, head)?;
        return judge_text_stream(path, head);
    }
    let mut inflated = Vec::new();
    let mut decoder = flate2::bufread::MultiGzDecoder::new(head);
    let mut chunk = [0u8; 8 << 10];
    while (inflated.len() as u64) < SNIFF_BYTES {
        match std::io::Read::read(&mut decoder, &mut chunk) {
            Ok(0) => break,
            Ok(n) => inflated.extend_from_slice(&chunk[..n]),
            // The compressed head ends mid-stream: judge what it held.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(_) => return Ok(()),
        }
    }
    inflated.truncate(SNIFF_BYTES as usize);
    if inflated.is_empty() {
        // Only the gzip header so far: nothing to judge.
        return Ok(());
    }
    judge_head(path, &inflated)?;
    judge_text_stream(path, &inflated)
}

/// A stream of text is read only when its head already shows an XLA
/// out-of-memory report: text is the one format with no magic bytes, and a
/// stream has no end to look for one at (`yes | memtool summary -` would be
/// spooled to the size cap). A file of text is searched whole.
fn judge_text_stream(path: &str, head: &[u8]) -> Result<()> {
    if detect::sniff(head) != Sniffed::Text || xla_report::mentions_report(head) {
        return Ok(());
    }
    Err(Error::UnknownFormat {
        path: path.to_string(),
        reason: format!(
            "not a memory profile memtool can read: text with no XLA out-of-memory report \
             in its first {} KiB (from a pipe, a log must show its report that early; \
             save a longer log to a file and give the file, which is searched whole)",
            head.len().min(STREAM_HEAD_BYTES) >> 10
        ),
    })
}

/// The refusal of an input whose (decompressed) first bytes are `head`,
/// unless the head cannot decide: a protobuf whose first fields run past
/// it may still be a profile. The one judgement for gzip'd heads and
/// streams.
fn judge_head(path: &str, head: &[u8]) -> Result<()> {
    let sniffed = detect::sniff(head);
    if sniffed == Sniffed::Unknown && detect::runs_past(head) {
        return Ok(());
    }
    refusal(path, sniffed).map_or(Ok(()), Err)
}

/// Limits and choices for reading inputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// Cap on the decompressed size of one input; `None` for the default,
    /// 4 GiB whatever the compressed size.
    pub max_decompressed: Option<u64>,
    /// Read every input through the readers' general paths only, never their
    /// fast paths (pprof's one walk, XSpace's merged walk with its fast event
    /// decoding, the pickle
    /// records fast path, the Chrome trace window). For the tests and the fuzz
    /// target that check both paths give one profile.
    #[doc(hidden)]
    pub force_general_path: bool,
    /// Threads that read the hosts of one run at once, or one XSpace's
    /// allocator events (each host's reader also builds on a thread of its
    /// own), or walk a pprof profile's samples ahead of its reader; 0 for
    /// every core ([`crate::parallel::default_jobs`]). A run of 64 hosts
    /// read with 2 jobs holds two hosts' events at a time, not 64.
    pub jobs: usize,
    /// How many bytes of input one thread decodes at a time: of an XSpace
    /// line's events, of a pprof profile's samples (0: the defaults, 256
    /// KiB each); and how many a snapshot's pickle is read ahead by (0: its
    /// default, 1 MiB). Tiny runs, for the tests that check that decoding in runs
    /// on many threads gives the profile decoding on one does, even on
    /// small files.
    #[doc(hidden)]
    pub run_bytes: u64,
}

impl LoadOptions {
    /// The cap on an input's decompressed size: `max_decompressed`, else
    /// the default (4 GiB). The binary holds a stream (standard input, a
    /// FIFO) to it too, so one that never ends stops there.
    pub fn decompressed_limit(&self) -> u64 {
        self.max_decompressed.unwrap_or(decompress::DEFAULT_LIMIT)
    }
}

/// Reads one or more inputs into one profile. Several inputs form a series
/// (pprof snapshots in command-line order) and must share a format. The
/// loader only reads: [`crate::load`] adds the warnings that weigh what was
/// read as a whole (sizes past 64 bits, a misordered series, figures that
/// contradict each other).
pub(crate) fn load(sources: Vec<Source>, options: &LoadOptions) -> Result<Profile> {
    let profile = read(sources, options)?;
    ensure_memories(&profile)?;
    Ok(profile)
}

/// One input read as a part of several whose profile is never made whole
/// ([`crate::load_each`]): [`load`] without the judgement of the whole
/// (no memory at all is an error only of all the parts together).
pub(crate) fn load_part(source: Source, options: &LoadOptions) -> Result<Profile> {
    read(vec![source], options)
}

/// The inputs read into one profile, each memory's phases and steps found.
fn read(sources: Vec<Source>, options: &LoadOptions) -> Result<Profile> {
    let mut profile = if sources.len() > 1 && sources.iter().all(is_plain_xspace) {
        load_hosts(sources, options)?
    } else {
        let mut profile = Profile::default();
        for source in sources {
            let (input, first) = (profile.inputs.len(), profile.memories.len());
            load_into(&mut profile, source, options)?;
            for memory in &mut profile.memories[first..] {
                memory.input = input;
            }
        }
        profile
    };
    let Profile {
        names, memories, ..
    } = &mut profile;
    for memory in memories {
        memory.find_phases(names);
        memory.steps_from_phase_cycles();
    }
    Ok(profile)
}

/// The sizes a memory's allocations claim, summed past 64 bits: what
/// [`warn_of_impossible_sizes`] weighs of it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClaimedSizes {
    /// The allocations' bytes together.
    bytes: u128,
    /// Their requested bytes together.
    requested: u128,
}

impl ClaimedSizes {
    /// The sums of `memory`'s allocations.
    pub(crate) fn of(memory: &crate::model::Memory) -> ClaimedSizes {
        memory
            .allocations
            .iter()
            .fold(ClaimedSizes::default(), |s, a| ClaimedSizes {
                bytes: s.bytes.saturating_add(u128::from(a.bytes)),
                requested: s.requested.saturating_add(u128::from(a.requested)),
            })
    }

    /// Whether either sum is past what 64 bits hold.
    fn overflows(self) -> bool {
        self.bytes > u128::from(u64::MAX) || self.requested > u128::from(u64::MAX)
    }
}

/// Warns, per memory, when the sizes the file claims add up to more than 64
/// bits hold: the analyses cap their sums there instead of wrapping, so the
/// figures of that memory are lower bounds. When every memory fits but all
/// of them together do not, one warning says the totals over memories are.
/// `memories` are the memories' ids and sizes, in profile order; the
/// warnings name the first input.
pub(crate) fn impossible_sizes<'a>(
    inputs: &[crate::model::InputInfo],
    memories: impl Iterator<Item = (&'a str, ClaimedSizes)>,
) -> Vec<crate::model::Warning> {
    let Some(path) = inputs.first().map(|i| i.path.as_str()) else {
        return Vec::new();
    };
    let warning = |message: String| crate::model::Warning {
        path: path.to_string(),
        message,
        note: false,
    };
    let mut warnings = Vec::new();
    let mut total = ClaimedSizes::default();
    for (id, sizes) in memories {
        if sizes.overflows() {
            warnings.push(warning(format!(
                "{id}: the allocation sizes the file claims add up to more than 16 EiB \
                 (2^64 bytes); sums are capped there, so this memory's figures are lower \
                 bounds"
            )));
        }
        total.bytes = total.bytes.saturating_add(sizes.bytes);
        total.requested = total.requested.saturating_add(sizes.requested);
    }
    // Totals across memories (a snapshot's devices together, diff's totals)
    // can overflow though no memory does on its own.
    if warnings.is_empty() && total.overflows() {
        warnings.push(warning(
            "the allocation sizes the file claims add up to more than 16 EiB (2^64 bytes) \
             across its memories; totals over memories are capped there, so they are lower \
             bounds"
                .to_string(),
        ));
    }
    warnings
}

/// The last component of `path` (either separator): how a series labels
/// the file it read.
pub(crate) fn file_name(path: &str) -> String {
    path.rsplit(['/', '\\']).next().unwrap_or(path).to_string()
}

/// The id of the memory that the file at `path` records for `device`,
/// where files each record a device whole (PyTorch snapshots): a second
/// snapshot of the same device (several files) stays apart, a part of one
/// series with the first. Every part is labelled with its file, the first
/// included (it is relabelled here: it was bare until a second file
/// recorded the same device), by the file's name, or its path where two
/// files share a name. The one rule of a profile read whole and of a
/// summary of many files read one at a time.
pub(crate) fn series_part_id(profile: &mut Profile, device: &str, path: &str) -> String {
    let recorded = |m: &crate::model::Memory| {
        m.id == device || m.series.as_ref().is_some_and(|p| p.device == device)
    };
    if !profile.memories.iter().any(recorded) {
        return device.to_string();
    }
    for first in profile.memories.iter_mut().filter(|m| m.id == device) {
        if let Some(part) = &first.series {
            first.id = format!("{device} ({})", part.file);
        }
    }
    let named = format!("{device} ({})", file_name(path));
    if profile.memories.iter().any(|m| m.id == named) {
        format!("{device} ({path})")
    } else {
        named
    }
}

/// An uncompressed PyTorch snapshot pickle: a file that records its
/// devices whole, so a series of them can be read a file at a time
/// (the per-file summary reduction above the loader reads them so).
pub(crate) fn is_plain_snapshot(source: &Source) -> bool {
    head(&source.path, &*source.data).is_ok_and(|h| detect::sniff(&h) == Sniffed::Pickle)
}

/// An uncompressed XSpace: one host of a run, readable on its own.
fn is_plain_xspace(source: &Source) -> bool {
    head(&source.path, &*source.data).is_ok_and(|h| detect::sniff(&h) == Sniffed::XSpace)
}

/// The hosts of one run (an XSpace each) hold nothing in common: each is read
/// by a pool of `options.jobs` threads into a profile of its own, and the profiles are
/// appended in argument order, which gives the profile reading them one after
/// another would. The first error in argument order is the one reported.
fn load_hosts(sources: Vec<Source>, options: &LoadOptions) -> Result<Profile> {
    // The jobs are shared out among the hosts read at once, so each host's
    // own decoding threads do not multiply them.
    let jobs = crate::parallel::threads(options.jobs);
    let per_host = LoadOptions {
        jobs: (jobs / sources.len().max(1)).max(1),
        ..*options
    };
    let read = |source: Source| {
        let mut profile = Profile::default();
        load_into(&mut profile, source, &per_host).map(|()| profile)
    };
    let hosts = crate::parallel::map_bounded(sources, options.jobs, read);
    let mut profile = Profile::default();
    for host in hosts {
        xspace::append_host(&mut profile, host?);
    }
    Ok(profile)
}

/// A profile with no memory at all gives the commands nothing to say: fail
/// with what the readers found instead. A pprof snapshot without samples is
/// the exception: "nothing was live" is a valid answer there.
fn ensure_memories(profile: &Profile) -> Result<()> {
    if !profile.memories.is_empty()
        || !profile.xla_reports.is_empty()
        || profile.inputs.iter().any(|i| i.format == Format::Pprof)
    {
        return Ok(());
    }
    let Some(first) = profile.inputs.first() else {
        return Ok(());
    };
    let found: Vec<&str> = profile
        .warnings
        .iter()
        .map(|w| w.message.as_str())
        .collect();
    Err(Error::NoData {
        path: first.path.clone(),
        message: if found.is_empty() {
            "no memory data in this profile".to_string()
        } else {
            found.join("; ")
        },
    })
}

/// The error for an input that could not be read (a file that shrank or
/// vanished while being read, an I/O failure).
pub(crate) fn read_error(path: &str, e: &std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::OutOfMemory {
        return Error::OutOfMemory {
            path: path.to_string(),
            what: "reading the input into memory",
            have: None,
        };
    }
    Error::Read {
        path: path.to_string(),
        message: match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                "the file ended early (it changed while being read?)".to_string()
            }
            _ => e.to_string(),
        },
    }
}

/// The first bytes of an input, for format detection.
fn head(path: &str, data: &dyn ByteSource) -> Result<Vec<u8>> {
    let mut head = vec![0u8; data.len().min(SNIFF_BYTES) as usize];
    data.read_exact_at(0, &mut head)
        .map_err(|e| read_error(path, &e))?;
    Ok(head)
}

/// The error for an input detection finds no profile in, if it is one.
fn refusal(path: &str, sniffed: Sniffed) -> Option<Error> {
    matches!(
        sniffed,
        Sniffed::Empty | Sniffed::OldPickle | Sniffed::Unknown | Sniffed::ProtobufGroup
    )
    .then(|| no_profile(path, sniffed))
}

/// The error for an input that detection finds to be empty, a pickle of
/// protocol 0 or 1, or no profile.
pub(crate) fn no_profile(path: &str, sniffed: Sniffed) -> Error {
    let path = path.to_string();
    match sniffed {
        Sniffed::Empty => Error::NoData {
            path,
            message: "file is empty (a profile that was never written, or cut off)".into(),
        },
        Sniffed::OldPickle => Error::UnknownFormat {
            path,
            reason: "a Python pickle of protocol 0 or 1, which memtool does not read; \
                     write it with protocol 2 or higher (torch.cuda.memory._dump_snapshot \
                     does, with pickle's default, 4)"
                .into(),
        },
        Sniffed::ProtobufGroup => Error::UnknownFormat {
            path,
            reason: "protobuf whose first field is a group (wire type 3, deprecated), which \
                     neither pprof nor XSpace uses; not a memory profile memtool can read"
                .into(),
        },
        _ => Error::UnknownFormat {
            path,
            reason: "not a memory profile memtool can read (expected pprof, XSpace \
                     .xplane.pb, a PyTorch snapshot pickle, a PyTorch trace JSON, or a log \
                     holding an XLA out-of-memory report)"
                .into(),
        },
    }
}

fn load_into(profile: &mut Profile, source: Source, options: &LoadOptions) -> Result<()> {
    let Source { path, data } = source;
    let mut head = head(&path, &*data)?;
    let mut data: Box<dyn ByteSource> = if decompress::is_gzip(&head) {
        let compressed = source::read_all(&*data).map_err(|e| read_error(&path, &e))?;
        let _span = crate::timings::span("gunzip");
        let limit = options.decompressed_limit();
        // A head that decides the input is no profile ends the inflating.
        let judge = |head: &[u8]| judge_head(&path, head);
        let gunzipped = decompress::gunzip(&path, &compressed, limit, SNIFF_BYTES, &judge)?;
        drop(compressed);
        if let Some(warning) = gunzipped.warning {
            profile.warn(&path, warning);
        }
        let data = Box::new(gunzipped.bytes);
        head = self::head(&path, &*data)?;
        data
    } else {
        data
    };
    let sniffed = detect::sniff_source(&*data, &head).map_err(|e| read_error(&path, &e))?;
    drop(head);
    // Readers that walk the input in place get the source; the others read
    // it whole.
    let whole = |data: &dyn ByteSource| -> Result<Vec<u8>> {
        let _span = crate::timings::span("read input");
        source::read_all(data).map_err(|e| read_error(&path, &e))
    };
    let format = match sniffed {
        Sniffed::Pprof => Format::Pprof,
        Sniffed::XSpace => Format::XSpace,
        Sniffed::Pickle => Format::TorchSnapshot,
        Sniffed::Json => detect::classify(&*data).map_err(|e| read_error(&path, &e))?,
        Sniffed::JsonAfterBom => {
            data = Box::new(source::Tail::new(data, detect::UTF8_BOM.len() as u64));
            detect::classify(&*data).map_err(|e| read_error(&path, &e))?
        }
        Sniffed::Text => Format::XlaReport,
        Sniffed::HloProto => Format::HloProto,
        Sniffed::BufferAssignmentText => Format::BufferAssignmentText,
        Sniffed::Empty | Sniffed::OldPickle | Sniffed::Unknown | Sniffed::ProtobufGroup => {
            return Err(no_profile(&path, sniffed))
        }
    };
    if let Some(first) = profile.inputs.first() {
        if first.format != format {
            return Err(Error::Usage(format!(
                "{path} is {} but {} is {}; a series must be one format",
                format.name(),
                first.path,
                first.format.name()
            )));
        }
    }
    match format {
        Format::Pprof => {
            let walk = pprof::Walk::new(options.jobs, options.run_bytes);
            let general = options.force_general_path;
            match data.as_bytes() {
                // Gunzipped: already in memory, read in place rather than copied.
                Some(bytes) => pprof::read(profile, &path, bytes, general, walk),
                None => pprof::read(profile, &path, &whole(&*data)?, general, walk),
            }
        }
        Format::XSpace => xspace::read(
            profile,
            &path,
            &*data,
            options.force_general_path,
            options.jobs,
            options.run_bytes,
        ),
        Format::TorchSnapshot => {
            let paths = if options.force_general_path {
                torch::pickle::Paths::GeneralOnly
            } else {
                torch::pickle::Paths::Fast
            };
            let jobs = crate::parallel::threads(options.jobs);
            torch::snapshot::read_with_jobs(profile, &path, &*data, paths, jobs, options.run_bytes)
        }
        Format::TorchTrace => {
            torch::trace::read(profile, &path, &*data, options.force_general_path)
        }
        Format::TorchMemoryTimeline => torch::memory_timeline::read(profile, &path, &*data),
        Format::XlaReport => match xla_report::read(profile, &path, &*data)? {
            0 => Err(no_profile(&path, Sniffed::Unknown)),
            _ => Ok(()),
        },
        Format::HloProto => xla_dump::read(profile, &path, &*data),
        Format::BufferAssignmentText => xla_dump::buffer_assignment::read(profile, &path, &*data),
    }
}
