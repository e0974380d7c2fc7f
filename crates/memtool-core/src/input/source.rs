//! Where an input's bytes come from.
//!
//! The core never opens files: the caller hands it a [`ByteSource`] (a file it
//! opened, or bytes it read from a pipe). Readers of big formats pull only
//! what they need through it — a window of a gigabyte XSpace, a buffered
//! stream of a pickle — so memory follows what an analysis keeps, not the
//! file size. Small or compressed inputs are simply read whole.

use std::io::{self, Read};

/// Random access to an input's bytes.
pub trait ByteSource: Send + Sync {
    /// The input's size in bytes.
    fn len(&self) -> u64;

    /// Fills `buf` with the bytes at `offset`. Reading past the end is an
    /// error (`UnexpectedEof`), never a short read.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Whether the input has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in memory, when the source already holds them (no copy).
    fn as_bytes(&self) -> Option<&[u8]> {
        None
    }
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| self.get(start..end))
        {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

#[cfg(unix)]
impl ByteSource for std::fs::File {
    fn len(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

#[cfg(windows)]
impl ByteSource for std::fs::File {
    fn len(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }

    fn read_exact_at(&self, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
        use std::os::windows::fs::FileExt;
        while !buf.is_empty() {
            match self.seek_read(buf, offset)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

/// A source without its first bytes (a byte order mark): offsets count from
/// the byte after them.
pub(crate) struct Tail {
    inner: Box<dyn ByteSource>,
    skip: u64,
}

impl Tail {
    pub(crate) fn new(inner: Box<dyn ByteSource>, skip: u64) -> Tail {
        Tail {
            skip: skip.min(inner.len()),
            inner,
        }
    }
}

impl ByteSource for Tail {
    fn len(&self) -> u64 {
        self.inner.len() - self.skip
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let offset = offset
            .checked_add(self.skip)
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        self.inner.read_exact_at(offset, buf)
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        self.inner.as_bytes()?.get(self.skip as usize..)
    }
}

/// A sequential reader over a [`ByteSource`], for formats read front to back
/// (pickle, JSON). Wrap it in a `BufReader` for small reads.
pub(crate) struct SourceReader<'a> {
    source: &'a dyn ByteSource,
    offset: u64,
    len: u64,
}

impl<'a> SourceReader<'a> {
    /// A reader of `source` from its first byte.
    pub(crate) fn new(source: &'a dyn ByteSource) -> SourceReader<'a> {
        SourceReader {
            source,
            offset: 0,
            len: source.len(),
        }
    }
}

impl Read for SourceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.offset);
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.source.read_exact_at(self.offset, &mut buf[..n])?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Reads a whole source into memory (small and compressed inputs). The size
/// comes from the source itself, so it is what is really there.
pub(crate) fn read_all(source: &dyn ByteSource) -> io::Result<Vec<u8>> {
    if let Some(bytes) = source.as_bytes() {
        return Ok(bytes.to_vec());
    }
    let len = usize::try_from(source.len()).map_err(|_| io::Error::other("input too large"))?;
    let mut out = Vec::new();
    // Grows as bytes arrive, so a file that shrinks while read never makes
    // us allocate for bytes that are gone.
    SourceReader::new(source)
        .take(len as u64)
        .read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_reads_exact_ranges_and_refuses_past_the_end() {
        let bytes = b"hello world".to_vec();
        let mut buf = [0u8; 5];
        bytes.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        let err = bytes.read_exact_at(7, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let err = bytes.read_exact_at(u64::MAX, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn reader_streams_the_whole_source() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut out = Vec::new();
        let mut reader = SourceReader::new(&bytes);
        let mut chunk = [0u8; 333];
        loop {
            let n = reader.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(out, bytes);
        assert_eq!(reader.offset, 10_000);
    }
}
