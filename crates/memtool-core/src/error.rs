//! Typed errors of the core. Every message names the input and the problem in
//! one line; the binary maps all of them to exit code 2.

use std::fmt;

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a profile format memtool knows.
    #[error("{path}: {reason}")]
    UnknownFormat { path: String, reason: String },

    /// The file claims to be a known format but is corrupt or truncated.
    #[error("{path}: invalid {format}: {message}{}", Offset(*offset))]
    Corrupt {
        path: String,
        format: &'static str,
        message: String,
        /// Byte offset of the problem in the (decompressed) input, when known.
        offset: Option<u64>,
    },

    /// A limit that protects the machine was reached.
    #[error("{path}: {what} exceeds the limit of {limit}; {hint}")]
    Limit {
        path: String,
        what: &'static str,
        limit: String,
        hint: &'static str,
    },

    /// A well-formed input that holds nothing the command can use.
    #[error("{path}: {message}")]
    NoData { path: String, message: String },

    /// The input could not be read (an I/O failure, or a file that changed
    /// while it was read).
    #[error("{path}: cannot read: {message}")]
    Read { path: String, message: String },

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

pub type Result<T, E = Error> = std::result::Result<T, E>;
