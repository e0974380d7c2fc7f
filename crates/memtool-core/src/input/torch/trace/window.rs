//! The fast pass over a trace read from a file. serde_json reads a `Read`
//! one byte at a time, which costs twice its parse of bytes in memory; so
//! this pass reads the file in large blocks, finds where each element of
//! `traceEvents` (and each other top-level value) ends with a scan that only
//! tracks strings and nesting, and hands serde each element as a slice. serde
//! still checks every element; the scan checks the punctuation between them.
//! Whatever this pass does not expect it leaves to serde's streaming reader.

use std::borrow::Cow;
use std::io::Read;

use serde::de::{DeserializeSeed, IgnoredAny};
use serde::Deserialize;

use super::deserialize::{DeviceProperty, EventSeed, RawEvent};
use super::TraceState;
use crate::input::source::{ByteSource, SourceReader};

/// Bytes read from the input at a time.
pub(crate) const BLOCK: usize = 1 << 20;

/// Parses the trace, or gives up (`None`) at anything unexpected.
pub(super) fn parse(data: &dyn ByteSource) -> Option<TraceState> {
    let mut input = Window {
        reader: SourceReader::new(data),
        buf: Vec::new(),
        pos: 0,
        eof: false,
    };
    let mut state = TraceState::default();
    match input.peek()? {
        b'{' => {
            input.pos += 1;
            if input.peek()? == b'}' {
                return Some(state);
            }
            loop {
                let key: Cow<'_, str> = parse_slice(input.value()?)?;
                let is_events = key == "traceEvents";
                let is_devices = key == "deviceProperties";
                if input.peek()? != b':' {
                    return None;
                }
                input.pos += 1;
                if is_events {
                    events(&mut input, &mut state)?;
                } else if is_devices {
                    let devices: Option<Vec<DeviceProperty>> = parse_slice(input.value()?)?;
                    state.device_properties = devices.unwrap_or_default();
                } else {
                    parse_slice::<IgnoredAny>(input.value()?)?;
                }
                match input.peek()? {
                    b',' => input.pos += 1,
                    b'}' => return Some(state),
                    _ => return None,
                }
            }
        }
        b'[' => {
            events(&mut input, &mut state)?;
            Some(state)
        }
        _ => None,
    }
}

/// The `traceEvents` array, one element at a time.
fn events(input: &mut Window<'_>, state: &mut TraceState) -> Option<()> {
    if input.peek()? != b'[' {
        return None;
    }
    input.pos += 1;
    if input.peek()? == b']' {
        input.pos += 1;
        return Some(());
    }
    let mut event = RawEvent::default();
    let mut filled = false;
    loop {
        let element = input.value()?;
        let mut de = serde_json::Deserializer::from_slice(element);
        EventSeed {
            event: &mut event,
            filled: &mut filled,
        }
        .deserialize(&mut de)
        .ok()?;
        de.end().ok()?;
        if filled {
            state.event::<serde_json::Error>(&event).ok()?;
        }
        match input.peek()? {
            b',' => input.pos += 1,
            b']' => {
                input.pos += 1;
                return Some(());
            }
            _ => return None,
        }
    }
}

fn parse_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = T::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// The input as a sliding window of whole values.
struct Window<'a> {
    pub(super) reader: SourceReader<'a>,
    /// Bytes read and not yet dropped; `buf[pos..]` is unread.
    pub(super) buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

impl Window<'_> {
    /// Drops the bytes read past (the value being scanned starts at `pos`,
    /// which becomes 0) and reads more input; false at the end of the
    /// input (or a read error, which serde's pass will report).
    fn more(&mut self) -> bool {
        self.buf.drain(..self.pos);
        self.pos = 0;
        if self.eof {
            return false;
        }
        let kept = self.buf.len();
        // At least double, so a value longer than a block is read in a
        // number of steps logarithmic in its length.
        self.buf.resize(kept + BLOCK.max(kept), 0);
        let mut filled = kept;
        while let Some(spare) = self.buf.get_mut(filled..).filter(|s| !s.is_empty()) {
            match self.reader.read(spare) {
                Ok(0) | Err(_) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
            }
        }
        self.buf.truncate(filled);
        filled > kept
    }

    /// The next byte that is not JSON whitespace, left unread.
    fn peek(&mut self) -> Option<u8> {
        loop {
            match self.buf.get(self.pos..)?.iter().position(|&b| !is_space(b)) {
                Some(skip) => {
                    self.pos += skip;
                    return self.buf.get(self.pos).copied();
                }
                None => {
                    self.pos = self.buf.len();
                    if !self.more() {
                        return None;
                    }
                }
            }
        }
    }

    /// The bytes of the next JSON value, read past. Only where it ends is
    /// found here; whether it is valid is for serde.
    fn value(&mut self) -> Option<&[u8]> {
        let first = self.peek()?;
        // `buf[pos..end]` is scanned.
        let mut end = self.pos + 1;
        match first {
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => loop {
                match self
                    .buf
                    .get(end..)?
                    .iter()
                    .position(|&b| ENDS_SCALAR[usize::from(b)])
                {
                    Some(n) => {
                        end += n;
                        break;
                    }
                    None => {
                        end -= self.pos;
                        // A scalar may end the input.
                        if !self.more() {
                            end = self.buf.len();
                            break;
                        }
                    }
                }
            },
            b'"' | b'{' | b'[' => {
                let mut depth = usize::from(first != b'"');
                let mut in_string = first == b'"';
                loop {
                    let special = if in_string { &IN_STRING } else { &STRUCTURE };
                    let found = self
                        .buf
                        .get(end..)?
                        .iter()
                        .position(|&b| special[usize::from(b)]);
                    let Some(b) = found.and_then(|n| {
                        end += n;
                        self.buf.get(end).copied()
                    }) else {
                        end -= self.pos;
                        if !self.more() {
                            return None;
                        }
                        continue;
                    };
                    match b {
                        b'\\' => {
                            // The escaped byte may be in the next block.
                            if end + 1 >= self.buf.len() {
                                end -= self.pos;
                                if !self.more() {
                                    return None;
                                }
                                continue;
                            }
                            end += 2;
                        }
                        b'"' => {
                            in_string = !in_string;
                            end += 1;
                            if !in_string && depth == 0 {
                                break;
                            }
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            end += 1;
                        }
                        _ => {
                            depth = depth.saturating_sub(1);
                            end += 1;
                            if depth == 0 {
                                break;
                            }
                        }
                    }
                }
            }
            _ => return None,
        }
        let start = self.pos;
        self.pos = end;
        self.buf.get(start..end)
    }
}

pub(super) const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        set[bytes[i] as usize] = true;
        i += 1;
    }
    set
}

/// Bytes that end a number or `true`/`false`/`null`.
const ENDS_SCALAR: [bool; 256] = byte_set(b" \n\t\r,]}");
/// Bytes that matter inside a string.
const IN_STRING: [bool; 256] = byte_set(b"\"\\");
/// Bytes that matter outside strings, inside an object or array.
const STRUCTURE: [bool; 256] = byte_set(b"\"{}[]");

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}
