//! Typed errors of the core. Every message names the input and the problem in
//! one line; the binary maps all of them to exit code 2.

use std::fmt;

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a profile format memtool knows.
    #[error("{path}: {reason}")]
    UnknownFormat {
        /// The input.
        path: String,
        /// What memtool expected instead.
        reason: String,
    },

    /// The file claims to be a known format but is corrupt or truncated.
    #[error("{path}: invalid {format}: {message}{}", Offset(*offset))]
    Corrupt {
        /// The input.
        path: String,
        /// The format it claims to be (`pprof`, `XSpace`, `pickle`, ...).
        format: &'static str,
        /// What is wrong, in a few words.
        message: String,
        /// Byte offset of the problem in the (decompressed) input, when known.
        offset: Option<u64>,
    },

    /// A limit that protects the machine was reached.
    #[error("{path}: {what} exceeds the limit of {limit}; {hint}")]
    Limit {
        /// The input.
        path: String,
        /// What outgrew the limit (`decompressed size`, ...).
        what: &'static str,
        /// The limit, in readable units.
        limit: String,
        /// How to raise it, when the user may.
        hint: &'static str,
    },

    /// Memory ran out while the input was read: the process could not get
    /// what the input needs (an address-space limit, `ulimit -v`, a
    /// container's limit, or the machine's memory).
    #[error(
        "{path}: out of memory: {what} needed more{}; this process could get no more \
         (ulimit -v, a container's memory limit, or the machine's memory)",
        have.as_ref().map(|h| format!(" than {h}")).unwrap_or_default()
    )]
    OutOfMemory {
        /// The input.
        path: String,
        /// What needed the memory (`the decompressed input`, ...).
        what: &'static str,
        /// How much it had when it ran out, in readable units, when known.
        have: Option<String>,
    },

    /// A well-formed input that holds nothing the command can use.
    #[error("{path}: {message}")]
    NoData {
        /// The input.
        path: String,
        /// What the readers found instead.
        message: String,
    },

    /// The input could not be read (an I/O failure, or a file that changed
    /// while it was read).
    #[error("{path}: cannot read: {message}")]
    Read {
        /// The input.
        path: String,
        /// The I/O error, in words.
        message: String,
    },

    /// Inputs that cannot be analysed together.
    #[error("{0}")]
    Usage(String),
}

struct Offset(Option<u64>);

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(offset) => write!(f, " (at byte {offset})"),
            None => Ok(()),
        }
    }
}

/// The core's result type: a value or one [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
