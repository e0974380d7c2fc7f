//! The pickle's bytes, pulled from the source through a buffer.

use crate::input::read_ahead::Sequential;

/// Bytes read from the source at a time; an opcode whose argument is longer
/// (a huge string) grows the buffer to fit it, once its length is known to be
/// really there.
pub(super) const CHUNK: usize = 1 << 20;

/// The pickle's bytes, pulled from the source a chunk at a time.
pub(super) struct Input<'s> {
    source: Sequential<'s>,
    pub(super) len: u64,
    buf: Vec<u8>,
    /// Offset in the source of `buf[0]`.
    base: u64,
    pub(super) pos: usize,
    end: usize,
}

/// Why [`Input::take`] failed.
pub(super) enum TakeError {
    /// The opcode needs more bytes than remain.
    Short {
        remaining: u64,
    },
    Io(std::io::Error),
}

impl<'s> Input<'s> {
    pub(super) fn new(source: Sequential<'s>) -> Input<'s> {
        Input {
            len: source.len(),
            source,
            buf: Vec::new(),
            base: 0,
            pos: 0,
            end: 0,
        }
    }

    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The next byte when it is buffered (the common case; see [`Input::take`]).
    #[inline]
    pub(super) fn next_byte(&mut self) -> Option<u8> {
        let b = *self.buf[..self.end].get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// The next `N` bytes when they are buffered.
    #[inline]
    pub(super) fn next_array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes: [u8; N] = self.buf[..self.end]
            .get(self.pos..self.pos + N)?
            .try_into()
            .ok()?;
        self.pos += N;
        Some(bytes)
    }

    /// The bytes read from the source but not yet taken.
    pub(super) fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos == self.end && self.offset() >= self.len
    }

    #[inline]
    pub(super) fn take(&mut self, n: u64) -> std::result::Result<&[u8], TakeError> {
        if n <= (self.end - self.pos) as u64 {
            let start = self.pos;
            self.pos += n as usize;
            return Ok(&self.buf[start..self.pos]);
        }
        self.refill(n)?;
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    /// Makes at least `n` bytes available at `pos`, after checking they are
    /// really in the source (so `n` never sizes an allocation by itself).
    #[cold]
    pub(super) fn refill(&mut self, n: u64) -> std::result::Result<(), TakeError> {
        let remaining = self.len.saturating_sub(self.offset());
        let n = match usize::try_from(n) {
            Ok(n) if n as u64 <= remaining => n,
            _ => return Err(TakeError::Short { remaining }),
        };
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        let want = n.max(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let unread = self.len - (self.base + self.end as u64);
        let fill = usize::try_from(unread)
            .unwrap_or(usize::MAX)
            .min(self.buf.len() - self.end);
        let at = self.base + self.end as u64;
        self.source
            .read_exact_at(at, &mut self.buf[self.end..self.end + fill])
            .map_err(TakeError::Io)?;
        self.end += fill;
        Ok(())
    }
}
