//! The pickle's bytes, pulled from the source through a buffer, optionally
//! read ahead on a thread of their own.

use std::sync::mpsc::{Receiver, SyncSender};

use crate::input::source::ByteSource;

/// Bytes read from the source at a time; an opcode whose argument is longer
/// (a huge string) grows the buffer to fit it, once its length is known to be
/// really there.
pub(super) const CHUNK: usize = 1 << 20;

/// Room left before each chunk read ahead, for the bytes of the chunk before
/// it not yet taken: a refill comes when fewer than this remain (the
/// records fast path refills 64 KiB ahead), so the new chunk is used where
/// it lies, with no copy of it.
pub(super) const HEAD: usize = 1 << 16;

/// The pickle's bytes, pulled from the source a chunk at a time.
pub(super) struct Input<'s> {
    pub(super) source: &'s dyn ByteSource,
    pub(super) len: u64,
    buf: Vec<u8>,
    /// Offset in the source of `buf[0]`, modulo 2^64: a chunk read ahead
    /// keeps [`HEAD`] bytes of room before it, so for the first chunk this
    /// is "−HEAD" (only `base + pos` is ever an offset).
    base: u64,
    pub(super) pos: usize,
    end: usize,
    /// The chunks a [`ReadAhead`] thread reads, in order, when there is one.
    ahead: Option<Ahead>,
}

/// The decoder's end of a [`ReadAhead`].
struct Ahead {
    chunks: Receiver<std::io::Result<Vec<u8>>>,
    /// Buffers done with, handed back to be filled again (no fresh pages
    /// to fault in for every chunk).
    spare: SyncSender<Vec<u8>>,
    /// The room before each chunk's bytes ([`HEAD`]).
    head: usize,
}

/// Reads a source's bytes in order, a chunk at a time, on a thread of its
/// own, at most a few chunks ahead of the decoder: the copies out of the
/// page cache (system time, a tenth of a snapshot's decode) then overlap
/// the decode instead of coming before each chunk of it.
pub(super) struct ReadAhead {
    chunk: usize,
    head: usize,
    chunks: SyncSender<std::io::Result<Vec<u8>>>,
    spare: Receiver<Vec<u8>>,
}

/// Chunks read ahead and not yet taken (each [`CHUNK`] bytes plus room).
const CHUNKS_AHEAD: usize = 1;

impl ReadAhead {
    /// The reader and the [`Input`] that takes its chunks, `chunk` bytes at
    /// a time with `head` bytes of room before each (tests use tiny ones).
    pub(super) fn new(
        source: &dyn ByteSource,
        chunk: usize,
        head: usize,
    ) -> (ReadAhead, Input<'_>) {
        let (chunks_tx, chunks_rx) = std::sync::mpsc::sync_channel(CHUNKS_AHEAD);
        let (spare_tx, spare_rx) = std::sync::mpsc::sync_channel(CHUNKS_AHEAD + 1);
        let mut input = Input::new(source);
        input.ahead = Some(Ahead {
            chunks: chunks_rx,
            spare: spare_tx,
            head,
        });
        let reader = ReadAhead {
            chunk: chunk.max(1),
            head,
            chunks: chunks_tx,
            spare: spare_rx,
        };
        (reader, input)
    }

    /// Reads `source` (the one given to [`ReadAhead::new`]) to its end, or
    /// until the [`Input`] is dropped or a read fails (the error is the
    /// last chunk sent).
    pub(super) fn run(self, source: &dyn ByteSource) {
        let len = source.len();
        let mut at = 0u64;
        while at < len {
            let n = usize::try_from(len - at).map_or(self.chunk, |left| left.min(self.chunk));
            let mut buf = self.spare.try_recv().unwrap_or_default();
            // A buffer handed back is a chunk's size already: no bytes
            // written twice (the read overwrites them all).
            buf.resize(self.head + n, 0);
            let read = source.read_exact_at(at, &mut buf[self.head..]);
            let failed = read.is_err();
            if self.chunks.send(read.map(|()| buf)).is_err() || failed {
                return;
            }
            at += n as u64;
        }
    }
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
    pub(super) fn new(source: &'s dyn ByteSource) -> Input<'s> {
        Input {
            source,
            len: source.len(),
            buf: Vec::new(),
            base: 0,
            pos: 0,
            end: 0,
            ahead: None,
        }
    }

    #[inline]
    pub(super) fn offset(&self) -> u64 {
        self.base.wrapping_add(self.pos as u64)
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
        if self.ahead.is_some() {
            return self.refill_ahead(n);
        }
        self.buf.copy_within(self.pos..self.end, 0);
        self.base = self.offset();
        self.end -= self.pos;
        self.pos = 0;
        let want = n.max(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let unread = self.len - self.base.wrapping_add(self.end as u64);
        let fill = usize::try_from(unread)
            .unwrap_or(usize::MAX)
            .min(self.buf.len() - self.end);
        let at = self.base.wrapping_add(self.end as u64);
        self.source
            .read_exact_at(at, &mut self.buf[self.end..self.end + fill])
            .map_err(TakeError::Io)?;
        self.end += fill;
        Ok(())
    }

    /// [`Input::refill`] from the chunks read ahead: the next chunk becomes
    /// the buffer, the bytes not yet taken copied into the room before it
    /// (or, past that room, both copied into a new buffer), and further
    /// chunks appended until `n` bytes are there. `n` is at most the bytes
    /// left in the source, so the reader has them to send.
    fn refill_ahead(&mut self, n: usize) -> std::result::Result<(), TakeError> {
        let Some(ahead) = &self.ahead else {
            return Ok(());
        };
        let offset = self.offset();
        let next = |ahead: &Ahead| match ahead.chunks.recv() {
            Ok(chunk) => chunk.map_err(TakeError::Io),
            // The reader stopped before the end: the source shrank.
            Err(_) => Err(TakeError::Io(std::io::ErrorKind::UnexpectedEof.into())),
        };
        let mut chunk = next(ahead)?;
        let head = ahead.head;
        let tail = self.end - self.pos;
        let old = if tail <= head {
            chunk[head - tail..head].copy_from_slice(&self.buf[self.pos..self.end]);
            self.pos = head - tail;
            std::mem::replace(&mut self.buf, chunk)
        } else {
            let mut joined = Vec::with_capacity(tail + chunk.len() - head);
            joined.extend_from_slice(&self.buf[self.pos..self.end]);
            joined.extend_from_slice(&chunk[head..]);
            self.pos = 0;
            let _ = ahead.spare.try_send(chunk);
            std::mem::replace(&mut self.buf, joined)
        };
        let _ = ahead.spare.try_send(old);
        self.end = self.buf.len();
        self.base = offset.wrapping_sub(self.pos as u64);
        while self.end - self.pos < n {
            let chunk = next(ahead)?;
            self.buf.extend_from_slice(&chunk[ahead.head..]);
            self.end = self.buf.len();
            let _ = ahead.spare.try_send(chunk);
        }
        Ok(())
    }
}
