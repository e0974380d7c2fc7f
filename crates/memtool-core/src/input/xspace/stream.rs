//! Walking an XSpace through its [`ByteSource`] without holding the file.
//!
//! A gigabyte XSpace is mostly events on a few lines. The planes and their
//! metadata are framed by reading only field headers (a key and a length,
//! then a jump over the payload), and a line's events are read front to back
//! through a reusable [`Window`]. Offsets stay absolute input offsets, so
//! errors name the same byte as a walk over the whole input in memory would.
//! An input already in memory (gunzipped, stdin, tests) is borrowed whole: the
//! same code, no copy.

use std::borrow::Cow;
use std::io;

use super::{as_i64, text, Plane, Slice};
use crate::error::Error;
use crate::input::source::ByteSource;
use memtool_proto::wire::reader::{past_the_end, Fields, Header, Value, WireError};

/// Why a walk stopped: damaged bytes, or an input that could not be read.
#[derive(Debug)]
pub(crate) enum StreamError {
    Wire(WireError),
    Io(io::Error),
    /// An allocator event longer than [`MAX_EVENT_BYTES`], at this offset.
    OversizedEvent {
        at: u64,
        len: u64,
    },
}

/// Allocator events are a few hundred bytes (an id, a time and a few
/// stats). One that claims more is damage, refused before it is read; other
/// events that large are stepped over unread.
pub(crate) const MAX_EVENT_BYTES: u64 = 1 << 20;

impl From<WireError> for StreamError {
    fn from(e: WireError) -> Self {
        StreamError::Wire(e)
    }
}

impl From<io::Error> for StreamError {
    fn from(e: io::Error) -> Self {
        StreamError::Io(e)
    }
}

impl StreamError {
    pub(crate) fn into_error(self, path: &str) -> Error {
        match self {
            StreamError::Wire(e) => super::corrupt(path, e),
            StreamError::Io(e) => crate::input::read_error(path, &e),
            StreamError::OversizedEvent { at, len } => Error::Corrupt {
                path: path.to_string(),
                format: "XSpace",
                message: format!(
                    "an allocator event claims {len} bytes; allocator events are a few \
                     hundred bytes, and memtool reads none over {MAX_EVENT_BYTES}"
                ),
                offset: Some(at),
            },
        }
    }
}

/// A field header is at most a 10-byte key and a 10-byte length (or an 8-byte
/// fixed value): this many bytes always hold one whole.
pub(crate) const HEADER_BYTES: usize = 32;

/// Part of the input in memory: the bytes from `start`, refilled on demand.
pub(crate) struct Window<'s> {
    source: &'s dyn ByteSource,
    /// The whole input, when the source holds it in memory.
    memory: Option<&'s [u8]>,
    buf: Vec<u8>,
    filled: usize,
    start: u64,
    /// How much to read at a time.
    chunk: usize,
}

impl<'s> Window<'s> {
    pub(crate) fn new(source: &'s dyn ByteSource, chunk: usize) -> Window<'s> {
        Window {
            source,
            memory: source.as_bytes(),
            buf: Vec::new(),
            filled: 0,
            start: 0,
            chunk: chunk.max(HEADER_BYTES),
        }
    }

    /// The bytes from `offset` towards `end` that the window holds, at least
    /// `min` of them (fewer only where `end` comes first). `end` must be
    /// within the input: every end comes from a length already checked
    /// against its enclosing message, and the outermost is the input's size.
    /// The buffer never grows past `end - offset`, bytes really there.
    pub(crate) fn span(&mut self, offset: u64, end: u64, min: usize) -> io::Result<&[u8]> {
        if let Some(memory) = self.memory {
            let range = usize::try_from(offset).ok().zip(usize::try_from(end).ok());
            return range
                .and_then(|(from, to)| memory.get(from..to))
                .ok_or_else(|| io::ErrorKind::UnexpectedEof.into());
        }
        let wanted_end = end.min(offset.saturating_add(min as u64));
        let held_end = self.start + self.filled as u64;
        if offset < self.start || wanted_end > held_end {
            let len = end.saturating_sub(offset).min(self.chunk.max(min) as u64) as usize;
            if self.buf.len() < len {
                self.buf.resize(len, 0);
            }
            self.source.read_exact_at(offset, &mut self.buf[..len])?;
            self.start = offset;
            self.filled = len;
        }
        let from = (offset - self.start) as usize;
        let to = (end.min(self.start + self.filled as u64) - self.start) as usize;
        Ok(&self.buf[from..to])
    }

    /// The bytes from `offset` towards `end` that the window holds, having
    /// read at most `max` of them if it held too few: a look at bytes that
    /// may turn out to be part of something stepped over unread.
    pub(crate) fn peek(&mut self, offset: u64, end: u64, max: usize) -> io::Result<&[u8]> {
        let held_end = self.start + self.filled as u64;
        let wanted_end = end.min(offset.saturating_add(max as u64));
        if self.memory.is_none() && (offset < self.start || wanted_end > held_end) {
            let len = end.saturating_sub(offset).min(max as u64) as usize;
            if self.buf.len() < len {
                self.buf.resize(len, 0);
            }
            self.source.read_exact_at(offset, &mut self.buf[..len])?;
            self.start = offset;
            self.filled = len;
        }
        self.span(offset, end, 0)
    }

    /// The bytes `[offset, offset + len)` whole.
    pub(crate) fn bytes(&mut self, offset: u64, len: u64) -> io::Result<&[u8]> {
        let end = offset.saturating_add(len);
        let min = usize::try_from(len).unwrap_or(usize::MAX);
        self.span(offset, end, min)
    }

    /// The bytes `[offset, offset + len)`, borrowed when the input is in
    /// memory, else read (a plane the walker hands to slice readers).
    pub(crate) fn read_owned(&self, offset: u64, len: u64) -> io::Result<Cow<'s, [u8]>> {
        if let Some(memory) = self.memory {
            let range = usize::try_from(offset).ok().zip(usize::try_from(len).ok());
            return range
                .and_then(|(from, len)| memory.get(from..from.checked_add(len)?))
                .map(Cow::Borrowed)
                .ok_or_else(|| io::ErrorKind::UnexpectedEof.into());
        }
        let len = usize::try_from(len).map_err(|_| io::Error::other("input too large"))?;
        let mut out = vec![0u8; len];
        self.source.read_exact_at(offset, &mut out)?;
        Ok(Cow::Owned(out))
    }

    pub(crate) fn source_len(&self) -> u64 {
        self.source.len()
    }
}

/// The fields of one message `[pos, end)` of the input, as headers: payloads
/// are skipped, not read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Skim {
    pub pos: u64,
    pub end: u64,
}

impl Skim {
    pub(crate) fn new(start: u64, end: u64) -> Skim {
        Skim { pos: start, end }
    }

    /// The next field: number, header, absolute offset of the value.
    pub(crate) fn next(
        &mut self,
        window: &mut Window<'_>,
    ) -> Result<Option<(u32, Header, u64)>, StreamError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let bytes = window.span(self.pos, self.end, HEADER_BYTES)?;
        let mut fields = Fields::at(bytes, self.pos as usize);
        let Some((number, header, value_at)) = fields.next_header()? else {
            return Ok(None);
        };
        let value_at = value_at as u64;
        self.pos = match header {
            Header::Len(len) => {
                if len > self.end - value_at {
                    return Err(past_the_end(value_at as usize).into());
                }
                value_at + len
            }
            Header::Scalar(_) => fields.offset() as u64,
        };
        Ok(Some((number, header, value_at)))
    }
}

/// One field of a message read through a window: a scalar (whose value no
/// reader of lines needs), or where its payload is (which the window holds until it is next moved).
#[derive(Clone, Copy, Debug)]
pub(crate) enum FieldAt {
    Scalar,
    Bytes { at: u64, len: u64 },
}

/// The fields of one message `[pos, end)` with their payloads, read through a
/// window that moves along (a line's events).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    pub pos: u64,
    pub end: u64,
}

impl Stream {
    pub(crate) fn new(start: u64, end: u64) -> Stream {
        Stream { pos: start, end }
    }

    /// The next field. A `Bytes` payload that the window held with its
    /// header is in `window` afterwards (read it with [`Window::bytes`],
    /// which then reads nothing); a longer one is only located, and read by
    /// the caller if it wants it.
    pub(crate) fn next(
        &mut self,
        window: &mut Window<'_>,
    ) -> Result<Option<(u32, FieldAt)>, StreamError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let bytes = window.span(self.pos, self.end, HEADER_BYTES)?;
        let held_to_end = self.pos + bytes.len() as u64 >= self.end;
        let mut fields = Fields::at(bytes, self.pos as usize);
        match fields.next_field() {
            Ok(Some((number, value, value_at))) => {
                let field = match value {
                    Value::Bytes(b) => FieldAt::Bytes {
                        at: value_at as u64,
                        len: b.len() as u64,
                    },
                    Value::Varint(_) | Value::Fixed64(_) | Value::Fixed32(_) => FieldAt::Scalar,
                };
                self.pos = fields.offset() as u64;
                Ok(Some((number, field)))
            }
            Ok(None) => Ok(None),
            Err(e) if !held_to_end && e.kind.is_truncation() => {
                // The field runs past the window, not past its message: its
                // place, once its claimed size is known to fit.
                let mut header = Fields::at(bytes, self.pos as usize);
                let Some((number, Header::Len(len), value_at)) = header.next_header()? else {
                    return Err(e.into());
                };
                let value_at = value_at as u64;
                if len > self.end - value_at {
                    return Err(past_the_end(value_at as usize).into());
                }
                self.pos = value_at + len;
                Ok(Some((number, FieldAt::Bytes { at: value_at, len })))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The metadata id (field 1) of the event `[at, at + len)`, read by its
/// field headers only: for an event too large to read whole.
pub(crate) fn event_metadata_id(
    window: &mut Window<'_>,
    at: u64,
    len: u64,
) -> Result<Option<i64>, StreamError> {
    let mut fields = Skim::new(at, at + len);
    while let Some((number, header, _)) = fields.next(window)? {
        if number == 1 {
            return Ok(header_i64(header));
        }
    }
    Ok(None)
}

/// A plane's place in the input, framed as [`Plane`] frames it.
#[derive(Clone, Debug)]
pub(crate) struct PlaneAt {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

impl PlaneAt {
    /// The plane's bytes in memory, for the slice walker (small planes:
    /// `Task Environment`, `/host:metadata`).
    pub(crate) fn load<'s>(&self, window: &Window<'s>) -> Result<Cow<'s, [u8]>, StreamError> {
        Ok(window.read_owned(self.start, self.end - self.start)?)
    }

    /// The slice walker's view of a plane loaded with [`PlaneAt::load`].
    pub(crate) fn parse<'a>(&self, bytes: &'a [u8]) -> Result<Plane<'a>, WireError> {
        Plane::parse(Slice {
            bytes,
            base: self.start as usize,
        })
    }
}

/// The planes of an XSpace, in file order.
pub(crate) struct Planes {
    top: Skim,
}

impl Planes {
    pub(crate) fn new(window: &Window<'_>) -> Planes {
        Planes {
            top: Skim::new(0, window.source_len()),
        }
    }

    /// The next plane, its own fields framed (errors as [`super::planes`]).
    pub(crate) fn next(&mut self, window: &mut Window<'_>) -> Result<Option<PlaneAt>, StreamError> {
        while let Some((number, header, at)) = self.top.next(window)? {
            let (1, Header::Len(len)) = (number, header) else {
                continue;
            };
            let mut plane = PlaneAt {
                name: String::new(),
                start: at,
                end: at + len,
            };
            let mut fields = Skim::new(plane.start, plane.end);
            while let Some((number, header, at)) = fields.next(window)? {
                if let (2, Header::Len(len)) = (number, header) {
                    plane.name = text(window.bytes(at, len)?).into_owned();
                }
            }
            return Ok(Some(plane));
        }
        Ok(None)
    }
}

/// A `Header` scalar as a protobuf `int64`.
/// The XSpace's `hostnames` (field 4): the hosts its planes were recorded
/// on, as the profiler names them (`worker-0`, `10.0.0.2:6009`).
pub(crate) fn hostnames(window: &mut Window<'_>) -> Result<Vec<String>, StreamError> {
    let mut top = Skim::new(0, window.source_len());
    let mut names = Vec::new();
    while let Some((number, header, at)) = top.next(window)? {
        if let (4, Header::Len(len)) = (number, header) {
            // A name is a few bytes; more is damage, not a host.
            if len <= 1024 {
                names.push(text(window.bytes(at, len)?).into_owned());
            }
        }
    }
    Ok(names)
}

pub(crate) fn header_i64(header: Header) -> Option<i64> {
    match header {
        Header::Scalar(v) => as_i64(v),
        Header::Len(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that is not in memory, so every read goes through the window.
    struct File(Vec<u8>);

    impl ByteSource for File {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }

        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.0.read_exact_at(offset, buf)
        }
    }

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Fields of every size around a small window: payloads of 0 to 300
    /// bytes, and varints, so fields straddle every window boundary.
    fn message() -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..300u64 {
            if i % 3 == 0 {
                varint(&mut out, 1 << 3);
                varint(&mut out, i << 40);
            } else {
                varint(&mut out, (4 << 3) | 2);
                varint(&mut out, i);
                out.extend((0..i).map(|b| b as u8));
            }
        }
        out
    }

    fn walk(source: &dyn ByteSource, chunk: usize) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let mut window = Window::new(source, chunk);
        let mut stream = Stream::new(0, source.len());
        let mut out = Vec::new();
        loop {
            match stream.next(&mut window) {
                Ok(Some((n, FieldAt::Bytes { at, len }))) => {
                    out.push((n, window.bytes(at, len).unwrap().to_vec()))
                }
                Ok(Some((n, FieldAt::Scalar))) => out.push((n, Vec::new())),
                Ok(None) => return Ok(out),
                Err(StreamError::Wire(e)) => {
                    return Err(format!("{} at {}", e.message(), e.offset))
                }
                Err(e) => return Err(e.into_error("t").to_string()),
            }
        }
    }

    fn walk_in_memory(bytes: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let mut out = Vec::new();
        for field in Fields::new(bytes) {
            match field {
                Ok((n, Value::Bytes(b), _)) => out.push((n, b.to_vec())),
                Ok((n, _, _)) => out.push((n, Vec::new())),
                Err(e) => return Err(format!("{} at {}", e.message(), e.offset)),
            }
        }
        Ok(out)
    }

    #[test]
    fn a_window_reads_what_memory_reads_whatever_its_size() {
        let bytes = message();
        let expected = walk_in_memory(&bytes).unwrap();
        assert_eq!(expected.len(), 300);
        for chunk in [32, 33, 100, 257, 4096, 1 << 20] {
            assert_eq!(
                walk(&File(bytes.clone()), chunk).unwrap(),
                expected,
                "{chunk}"
            );
        }
        assert_eq!(walk(&bytes, 32).unwrap(), expected);
    }

    #[test]
    fn a_window_reports_damage_where_memory_does() {
        let bytes = message();
        for cut in (1..bytes.len()).step_by(97) {
            let expected = walk_in_memory(&bytes[..cut]);
            for chunk in [32, 100] {
                assert_eq!(walk(&File(bytes[..cut].to_vec()), chunk), expected, "{cut}");
            }
        }
        // A length claimed far past the end is refused, not allocated.
        let mut huge = Vec::new();
        varint(&mut huge, (4 << 3) | 2);
        varint(&mut huge, 1 << 60);
        huge.extend([0u8; 64]);
        let expected = walk_in_memory(&huge);
        assert!(expected.is_err());
        assert_eq!(walk(&File(huge), 32), expected);
    }

    #[test]
    fn a_skim_frames_like_the_whole_message() {
        let bytes = message();
        for cut in (1..bytes.len()).step_by(89) {
            let expected = walk_in_memory(&bytes[..cut]).map(|f| f.len());
            let source = File(bytes[..cut].to_vec());
            let mut window = Window::new(&source, 32);
            let mut skim = Skim::new(0, cut as u64);
            let mut n = 0;
            let got = loop {
                match skim.next(&mut window) {
                    Ok(Some(_)) => n += 1,
                    Ok(None) => break Ok(n),
                    Err(StreamError::Wire(e)) => {
                        break Err(format!("{} at {}", e.message(), e.offset))
                    }
                    Err(e) => break Err(e.into_error("t").to_string()),
                }
            };
            assert_eq!(got, expected, "{cut}");
        }
    }
}
