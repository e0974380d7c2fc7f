//! Reading a source front to back with its next chunks read ahead by a
//! thread of their own, for a decoder that reads in order and is the
//! longest path of a run (a snapshot's pickle).
//!
//! Copying a file's bytes out of the page cache (`pread`) was 11 % of the
//! thread that decodes a 1.04M-entry snapshot (`perf record`: the kernel's
//! copy and its page cache lookups), time the other core spent mostly
//! idle; a chunk already read is a plain copy from memory (BENCHMARKS.md
//! Run AA-compare). The reader thread stays at most [`IN_FLIGHT`] chunks
//! ahead, so memory stays a few chunks whatever the file's size.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use super::source::ByteSource;

/// Chunks read but not yet taken, at most.
const IN_FLIGHT: usize = 2;

/// A source read in order: from chunks read ahead where it has them, from
/// the source itself otherwise (one job, a source already in memory, a
/// thread that could not be started, a read out of order).
pub(crate) struct Sequential<'s> {
    source: &'s dyn ByteSource,
    /// The source's length, asked once: the reader thread reads to it.
    len: u64,
    ahead: Option<Ahead>,
}

/// What the reader thread has sent, and where it is taken from.
struct Ahead {
    chunks: Receiver<io::Result<Vec<u8>>>,
    /// Chunks taken, handed back to be read into again.
    spare: Sender<Vec<u8>>,
    current: Vec<u8>,
    /// How much of `current` is taken.
    taken: usize,
    /// The source's offset of `current[taken]`.
    next: u64,
}

impl Sequential<'_> {
    /// The source's length when reading began.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Fills `buf` with the bytes at `offset`, as
    /// [`ByteSource::read_exact_at`] does.
    pub(crate) fn read_exact_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let Some(ahead) = self.ahead.as_mut().filter(|a| a.next == offset) else {
            // Out of order: the chunks ahead are not these bytes.
            self.ahead = None;
            return self.source.read_exact_at(offset, buf);
        };
        let mut filled = 0;
        while filled < buf.len() {
            if ahead.taken == ahead.current.len() {
                match ahead.chunks.recv() {
                    Ok(Ok(chunk)) => {
                        let taken = std::mem::replace(&mut ahead.current, chunk);
                        // The reader may be done: nobody takes it then.
                        let _ = ahead.spare.send(taken);
                        ahead.taken = 0;
                    }
                    Ok(Err(e)) => {
                        self.ahead = None;
                        return Err(e);
                    }
                    // The reader reached the source's end (as its length
                    // was at the start): what is past it is the source's
                    // to refuse.
                    Err(mpsc::RecvError) => {
                        let at = offset + filled as u64;
                        self.ahead = None;
                        return self.source.read_exact_at(at, &mut buf[filled..]);
                    }
                }
                continue;
            }
            let n = (buf.len() - filled).min(ahead.current.len() - ahead.taken);
            buf[filled..filled + n].copy_from_slice(&ahead.current[ahead.taken..ahead.taken + n]);
            ahead.taken += n;
            filled += n;
        }
        ahead.next += buf.len() as u64;
        Ok(())
    }
}

/// `read` given `source` as a [`Sequential`] (which it may keep until it is
/// done); with a `chunk` size (not 0) and a source not already in memory,
/// its chunks of that size are read from the start on a thread of their
/// own while `read` goes on.
pub(crate) fn with_read_ahead<T>(
    source: &dyn ByteSource,
    chunk: Option<usize>,
    read: impl FnOnce(Sequential<'_>) -> T,
) -> T {
    let len = source.len();
    let chunk = match chunk {
        Some(chunk) if chunk > 0 && source.as_bytes().is_none() && len > chunk as u64 => chunk,
        _ => {
            return read(Sequential {
                source,
                len,
                ahead: None,
            })
        }
    };
    std::thread::scope(|scope| {
        let (sender, chunks) = mpsc::sync_channel(IN_FLIGHT);
        let (spare, spares) = mpsc::channel();
        let reader = std::thread::Builder::new()
            .name("read-ahead".into())
            .spawn_scoped(scope, move || {
                read_chunks(source, len, chunk, &sender, &spares)
            });
        let sequential = Sequential {
            source,
            len,
            ahead: reader.is_ok().then(|| Ahead {
                chunks,
                spare,
                current: Vec::new(),
                taken: 0,
                next: 0,
            }),
        };
        // The reader stops at its next chunk once `sequential` (its
        // receiver) is dropped, when `read` is done or gives up early.
        read(sequential)
    })
}

/// The reader thread: `source`'s `len` bytes in order, a chunk at a time,
/// until the end, an error, or the receiver is gone.
fn read_chunks(
    source: &dyn ByteSource,
    len: u64,
    chunk: usize,
    sender: &SyncSender<io::Result<Vec<u8>>>,
    spares: &Receiver<Vec<u8>>,
) {
    let mut offset = 0u64;
    while offset < len {
        let n = usize::try_from(len - offset).map_or(chunk, |left| left.min(chunk));
        let mut buf = spares.try_recv().unwrap_or_default();
        buf.resize(n, 0);
        let read = source.read_exact_at(offset, &mut buf).map(|()| buf);
        let failed = read.is_err();
        if sender.send(read).is_err() || failed {
            return;
        }
        offset += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes numbered by their offset.
    fn numbered(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// A file of `bytes`, deleted when dropped: read ahead (a `Vec` is read
    /// in place).
    struct TempFile(std::path::PathBuf, std::fs::File);

    impl TempFile {
        fn new(name: &str, bytes: &[u8]) -> TempFile {
            let path = std::env::temp_dir()
                .join(format!("memtool-read-ahead-{}-{name}", std::process::id()));
            std::fs::write(&path, bytes).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            TempFile(path, file)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Reads of every size, in order, across chunk edges, give the source's
    /// bytes, and a read past the end is the source's error.
    #[test]
    fn reads_in_order_are_the_sources_bytes() {
        let bytes = numbered(10_000);
        let file = TempFile::new("order", &bytes);
        for chunk in [None, Some(64)] {
            with_read_ahead(&file.1, chunk, |mut s| {
                let mut at = 0usize;
                for step in (1..200).cycle() {
                    let n = step.min(bytes.len() - at);
                    let mut buf = vec![0; n];
                    s.read_exact_at(at as u64, &mut buf).unwrap();
                    assert_eq!(buf, &bytes[at..at + n], "at {at}, {n} bytes");
                    at += n;
                    if at == bytes.len() {
                        break;
                    }
                }
                let mut past = [0u8; 1];
                let err = s.read_exact_at(at as u64, &mut past).unwrap_err();
                assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
            });
        }
    }

    /// A read out of order stops the reading ahead and is still right, as
    /// are the reads after it.
    #[test]
    fn a_read_out_of_order_reads_the_source() {
        let bytes = numbered(1000);
        let file = TempFile::new("jump", &bytes);
        with_read_ahead(&file.1, Some(100), |mut s| {
            let mut buf = [0u8; 50];
            s.read_exact_at(0, &mut buf).unwrap();
            assert_eq!(buf, bytes[..50]);
            s.read_exact_at(500, &mut buf).unwrap();
            assert_eq!(buf, bytes[500..550]);
            assert!(s.ahead.is_none());
            s.read_exact_at(550, &mut buf).unwrap();
            assert_eq!(buf, bytes[550..600]);
        });
    }

    /// A reader that gives up early (a corrupt pickle) does not wait for the
    /// rest of the file to be read.
    #[test]
    fn giving_up_early_ends_the_reader() {
        let bytes = numbered(1 << 20);
        let file = TempFile::new("early", &bytes);
        let first = with_read_ahead(&file.1, Some(4096), |mut s| {
            let mut buf = [0u8; 10];
            s.read_exact_at(0, &mut buf).map(|()| buf)
        });
        assert_eq!(first.unwrap(), bytes[..10]);
    }
}
