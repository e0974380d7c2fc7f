//! Turning bytes into a [`Profile`]: decompression, format detection, and one
//! reader per format. Readers never panic: any bytes give a profile (plus
//! warnings) or one [`Error`].

pub mod decompress;
pub mod detect;
mod hlo;
mod pprof;
pub mod torch;
pub mod wire;
pub mod xspace;

use crate::error::{Error, Result};
use crate::model::{Format, Profile};
use detect::Sniffed;

/// One input as the caller read it: a display path and its raw bytes.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Limits and choices for reading inputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// Cap on the decompressed size of one input; `None` for the default
    /// ([`decompress::default_limit`]).
    pub max_decompressed: Option<u64>,
}

/// Reads one or more inputs into one profile. Several inputs form a series
/// (pprof snapshots in command-line order) and must share a format.
pub fn load(sources: Vec<Source>, options: &LoadOptions) -> Result<Profile> {
    let mut profile = Profile::default();
    for source in sources {
        load_into(&mut profile, source, options)?;
    }
    ensure_memories(&profile)?;
    Ok(profile)
}

/// A profile with no memory at all gives the commands nothing to say: fail
/// with what the readers found instead. A pprof snapshot without samples is
/// the exception: "nothing was live" is a valid answer there.
fn ensure_memories(profile: &Profile) -> Result<()> {
    if !profile.memories.is_empty() || profile.inputs.iter().any(|i| i.format == Format::Pprof) {
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

fn load_into(profile: &mut Profile, source: Source, options: &LoadOptions) -> Result<()> {
    let Source { path, bytes } = source;
    let bytes = if decompress::is_gzip(&bytes) {
        let _span = crate::timings::span("gunzip");
        let limit = options
            .max_decompressed
            .unwrap_or_else(|| decompress::default_limit(bytes.len()));
        decompress::gunzip(&path, &bytes, limit)?
    } else {
        bytes
    };
    let sniffed = detect::sniff(&bytes);
    let format = match sniffed {
        Sniffed::Pprof => Format::Pprof,
        Sniffed::XSpace => Format::XSpace,
        Sniffed::Pickle => Format::TorchSnapshot,
        Sniffed::Json => torch::json::classify(&bytes),
        Sniffed::Empty => {
            return Err(Error::NoData {
                path,
                message: "file is empty (a profile that was never written, or cut off)".into(),
            })
        }
        Sniffed::Unknown => {
            return Err(Error::UnknownFormat {
                path,
                reason: "not a memory profile memtool can read (expected pprof, XSpace \
                         .xplane.pb, a PyTorch snapshot pickle, or a PyTorch trace JSON)"
                    .into(),
            })
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
        Format::Pprof => pprof::read(profile, &path, &bytes),
        Format::XSpace => {
            // One XSpace holds both: allocator events and compiled programs.
            xspace::read(profile, &path, &bytes)?;
            hlo::read(profile, &path, &bytes)
        }
        Format::TorchSnapshot => torch::snapshot::read(profile, &path, &bytes),
        Format::TorchTrace | Format::TorchMemoryTimeline => {
            torch::json::read(profile, &path, &bytes, format)
        }
    }
}
