//! Just enough of Python's pickle to read a PyTorch `_dump_snapshot` file as
//! a pattern and to write protocol-4 pickles the way CPython's pickler does:
//! framed, with every str, list, dict and tuple memoized and each object seen
//! again written as a memo reference (so shared frames stay shared).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

use anyhow::{bail, Context, Result};

pub type List = Rc<RefCell<Vec<Val>>>;
pub type Dict = Rc<RefCell<Vec<(Val, Val)>>>;

#[derive(Clone, Debug)]
pub enum Val {
    None,
    Bool(bool),
    Int(i64),
    /// An integer too wide for i64, as LONG1's little-endian two's complement.
    BigInt(Rc<[u8]>),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    List(List),
    Dict(Dict),
    Tuple(Rc<Vec<Val>>),
}

impl Val {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The value stored under string key `key` of a dict.
    pub fn get(&self, key: &str) -> Option<Val> {
        match self {
            Val::Dict(d) => d
                .borrow()
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    /// Identity of a shared object, as CPython's memo keys it.
    fn identity(&self) -> Option<usize> {
        match self {
            Val::Str(s) => Some(Rc::as_ptr(s) as *const u8 as usize),
            Val::List(l) => Some(Rc::as_ptr(l) as usize),
            Val::Dict(d) => Some(Rc::as_ptr(d) as usize),
            Val::Tuple(t) if !t.is_empty() => Some(Rc::as_ptr(t) as usize),
            _ => None,
        }
    }
}

enum Slot {
    Val(Val),
    Mark,
}

/// Loads a pickle made of plain containers, strings and numbers.
pub fn load(data: &[u8]) -> Result<Val> {
    let mut stack: Vec<Slot> = Vec::new();
    let mut memo: HashMap<u64, Val> = HashMap::new();
    let mut pos = 0usize;
    let take = |pos: &mut usize, n: usize| -> Result<&[u8]> {
        let end = pos.checked_add(n).context("pickle length overflows")?;
        let b = data.get(*pos..end).context("pickle is truncated")?;
        *pos = end;
        Ok(b)
    };
    let le = |b: &[u8]| {
        b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
    };
    fn pop(stack: &mut Vec<Slot>) -> Result<Val> {
        match stack.pop() {
            Some(Slot::Val(v)) => Ok(v),
            _ => bail!("pickle stack underflow"),
        }
    }
    fn since_mark(stack: &mut Vec<Slot>) -> Result<Vec<Val>> {
        let mark = stack
            .iter()
            .rposition(|s| matches!(s, Slot::Mark))
            .context("pickle MARK missing")?;
        let items = stack
            .drain(mark..)
            .skip(1)
            .map(|s| match s {
                Slot::Val(v) => v,
                Slot::Mark => Val::None,
            })
            .collect();
        Ok(items)
    }
    fn top(stack: &mut [Slot]) -> Result<&Val> {
        match stack.last() {
            Some(Slot::Val(v)) => Ok(v),
            _ => bail!("pickle stack underflow"),
        }
    }
    loop {
        let op = *take(&mut pos, 1)?.first().context("empty")?;
        match op {
            0x80 => {
                take(&mut pos, 1)?;
            }
            0x95 => {
                take(&mut pos, 8)?;
            }
            b'.' => return pop(&mut stack),
            b'(' => stack.push(Slot::Mark),
            b'}' => stack.push(Slot::Val(Val::Dict(Rc::default()))),
            b']' => stack.push(Slot::Val(Val::List(Rc::default()))),
            b')' => stack.push(Slot::Val(Val::Tuple(Rc::default()))),
            b'N' => stack.push(Slot::Val(Val::None)),
            0x88 => stack.push(Slot::Val(Val::Bool(true))),
            0x89 => stack.push(Slot::Val(Val::Bool(false))),
            b'K' => {
                let v = le(take(&mut pos, 1)?);
                stack.push(Slot::Val(Val::Int(v as i64)));
            }
            b'M' => {
                let v = le(take(&mut pos, 2)?);
                stack.push(Slot::Val(Val::Int(v as i64)));
            }
            b'J' => {
                let v = le(take(&mut pos, 4)?) as u32 as i32;
                stack.push(Slot::Val(Val::Int(i64::from(v))));
            }
            0x8a => {
                let n = usize::from(take(&mut pos, 1)?[0]);
                let b = take(&mut pos, n)?;
                let v = if n == 0 {
                    Val::Int(0)
                } else if n <= 8 {
                    let negative = b[n - 1] & 0x80 != 0;
                    let mut raw = [if negative { 0xff } else { 0 }; 8];
                    raw[..n].copy_from_slice(b);
                    Val::Int(i64::from_le_bytes(raw))
                } else {
                    Val::BigInt(b.into())
                };
                stack.push(Slot::Val(v));
            }
            b'G' => {
                let b: [u8; 8] = take(&mut pos, 8)?.try_into()?;
                stack.push(Slot::Val(Val::Float(f64::from_be_bytes(b))));
            }
            0x8c | b'X' | 0x8d | b'C' | b'B' => {
                let width = match op {
                    0x8c | b'C' => 1,
                    b'X' | b'B' => 4,
                    _ => 8,
                };
                let n = usize::try_from(le(take(&mut pos, width)?))?;
                let b = take(&mut pos, n)?;
                let v = if matches!(op, b'C' | b'B') {
                    Val::Bytes(b.into())
                } else {
                    Val::Str(std::str::from_utf8(b)?.into())
                };
                stack.push(Slot::Val(v));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    bail!("pickle stack underflow");
                }
                let items = stack
                    .split_off(stack.len() - n)
                    .into_iter()
                    .map(|s| match s {
                        Slot::Val(v) => v,
                        Slot::Mark => Val::None,
                    })
                    .collect();
                stack.push(Slot::Val(Val::Tuple(Rc::new(items))));
            }
            b't' => {
                let items = since_mark(&mut stack)?;
                stack.push(Slot::Val(Val::Tuple(Rc::new(items))));
            }
            0x94 => {
                let v = top(&mut stack)?.clone();
                let index = memo.len() as u64;
                memo.insert(index, v);
            }
            b'q' | b'r' => {
                let index = le(take(&mut pos, if op == b'q' { 1 } else { 4 })?);
                let v = top(&mut stack)?.clone();
                memo.insert(index, v);
            }
            b'h' | b'j' => {
                let index = le(take(&mut pos, if op == b'h' { 1 } else { 4 })?);
                let v = memo.get(&index).context("pickle memo miss")?.clone();
                stack.push(Slot::Val(v));
            }
            b'a' | b'e' => {
                let items = if op == b'a' {
                    vec![pop(&mut stack)?]
                } else {
                    since_mark(&mut stack)?
                };
                match top(&mut stack)? {
                    Val::List(l) => l.borrow_mut().extend(items),
                    _ => bail!("APPEND to a non-list"),
                }
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = pop(&mut stack)?;
                    let k = pop(&mut stack)?;
                    vec![k, v]
                } else {
                    since_mark(&mut stack)?
                };
                match top(&mut stack)? {
                    Val::Dict(d) => {
                        let mut d = d.borrow_mut();
                        let mut it = items.into_iter();
                        while let (Some(k), Some(v)) = (it.next(), it.next()) {
                            d.push((k, v));
                        }
                    }
                    _ => bail!("SETITEM on a non-dict"),
                }
            }
            other => bail!(
                "unsupported pickle opcode 0x{other:02x} at byte {}",
                pos - 1
            ),
        }
    }
}

/// Batch size of APPENDS/SETITEMS, as CPython's pickler uses.
const BATCH: usize = 1000;
/// Protocol-4 frames hold about 64 KiB of opcodes.
const FRAME_TARGET: usize = 64 * 1024;

/// A protocol-4 pickler that streams framed output.
pub struct Writer<W: Write> {
    out: W,
    frame: Vec<u8>,
    memo_len: u64,
    memo: HashMap<usize, u64>,
    /// Keeps memoized objects alive so their addresses are not reused.
    pinned: Vec<Val>,
    written: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Result<Self> {
        let mut w = Writer {
            out,
            frame: Vec::with_capacity(FRAME_TARGET + 1024),
            memo_len: 0,
            memo: HashMap::new(),
            pinned: Vec::new(),
            written: 0,
        };
        w.out.write_all(&[0x80, 4])?;
        w.written += 2;
        Ok(w)
    }

    pub fn op(&mut self, bytes: &[u8]) {
        self.frame.extend_from_slice(bytes);
    }

    /// Ends the current frame when it is full; call between opcodes.
    pub fn commit(&mut self) -> Result<()> {
        if self.frame.len() >= FRAME_TARGET {
            self.flush_frame()?;
        }
        Ok(())
    }

    fn flush_frame(&mut self) -> Result<()> {
        if self.frame.is_empty() {
            return Ok(());
        }
        let mut header = [0u8; 9];
        header[0] = 0x95;
        header[1..].copy_from_slice(&(self.frame.len() as u64).to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(&self.frame)?;
        self.written += 9 + self.frame.len() as u64;
        self.frame.clear();
        Ok(())
    }

    /// MEMOIZE the object on top of the stack; returns its memo index.
    pub fn memoize(&mut self) -> u64 {
        self.op(&[0x94]);
        self.memo_len += 1;
        self.memo_len - 1
    }

    pub fn get(&mut self, index: u64) {
        if index < 256 {
            self.op(&[b'h', index as u8]);
        } else {
            let mut b = [b'j', 0, 0, 0, 0];
            b[1..].copy_from_slice(&(index as u32).to_le_bytes());
            self.op(&b);
        }
    }

    pub fn int(&mut self, v: i64) {
        if (0..256).contains(&v) {
            self.op(&[b'K', v as u8]);
        } else if (0..65536).contains(&v) {
            let b = (v as u16).to_le_bytes();
            self.op(&[b'M', b[0], b[1]]);
        } else if let Ok(v) = i32::try_from(v) {
            let b = v.to_le_bytes();
            self.op(&[b'J', b[0], b[1], b[2], b[3]]);
        } else {
            let b = v.to_le_bytes();
            // Shortest two's complement that keeps the sign.
            let mut n = 8;
            while n > 1 {
                let (last, prev) = (b[n - 1], b[n - 2]);
                if (last == 0 && prev & 0x80 == 0) || (last == 0xff && prev & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.op(&[0x8a, n as u8]);
            self.frame.extend_from_slice(&b[..n]);
        }
    }

    pub fn mark(&mut self) {
        self.op(b"(");
    }

    /// Writes `v`, or a memo reference when the same object was written before.
    pub fn val(&mut self, v: &Val) -> Result<()> {
        if let Some(id) = v.identity() {
            if let Some(&index) = self.memo.get(&id) {
                self.get(index);
                return Ok(());
            }
        }
        match v {
            Val::None => self.op(b"N"),
            Val::Bool(b) => self.op(&[if *b { 0x88 } else { 0x89 }]),
            Val::Int(i) => self.int(*i),
            Val::BigInt(b) => {
                self.op(&[0x8a, b.len() as u8]);
                self.frame.extend_from_slice(b);
            }
            Val::Float(f) => {
                self.op(b"G");
                self.frame.extend_from_slice(&f.to_be_bytes());
            }
            Val::Str(s) => {
                self.str_op(s);
                self.remember(v);
            }
            Val::Bytes(b) => {
                if b.len() < 256 {
                    self.op(&[b'C', b.len() as u8]);
                } else {
                    self.op(b"B");
                    self.frame
                        .extend_from_slice(&(b.len() as u32).to_le_bytes());
                }
                self.frame.extend_from_slice(b);
            }
            Val::List(l) => {
                self.op(b"]");
                self.remember(v);
                let items = l.borrow().clone();
                self.batched(&items, 1, |w, chunk| {
                    for item in chunk {
                        w.val(item)?;
                    }
                    Ok(())
                })?;
            }
            Val::Dict(d) => {
                self.op(b"}");
                self.remember(v);
                let items = d.borrow().clone();
                let flat: Vec<Val> = items.into_iter().flat_map(|(k, v)| [k, v]).collect();
                self.batched(&flat, 2, |w, chunk| {
                    for item in chunk {
                        w.val(item)?;
                    }
                    Ok(())
                })?;
            }
            Val::Tuple(t) => {
                if t.is_empty() {
                    self.op(b")");
                } else {
                    if t.len() > 3 {
                        self.mark();
                    }
                    for item in t.iter() {
                        self.val(item)?;
                    }
                    match t.len() {
                        1..=3 => self.op(&[0x84 + t.len() as u8]),
                        _ => self.op(b"t"),
                    }
                    self.remember(v);
                }
            }
        }
        self.commit()
    }

    fn str_op(&mut self, s: &str) {
        if s.len() < 256 {
            self.op(&[0x8c, s.len() as u8]);
        } else {
            self.op(b"X");
            self.frame
                .extend_from_slice(&(s.len() as u32).to_le_bytes());
        }
        self.frame.extend_from_slice(s.as_bytes());
    }

    fn remember(&mut self, v: &Val) {
        let index = self.memoize();
        if let Some(id) = v.identity() {
            self.memo.insert(id, index);
            self.pinned.push(v.clone());
        }
    }

    /// APPENDS/SETITEMS in batches of [`BATCH`] items, the single-item forms
    /// for a batch of one; `width` values make one item.
    fn batched(
        &mut self,
        flat: &[Val],
        width: usize,
        mut each: impl FnMut(&mut Self, &[Val]) -> Result<()>,
    ) -> Result<()> {
        let (single, many) = if width == 1 {
            (b'a', b'e')
        } else {
            (b's', b'u')
        };
        for chunk in flat.chunks(BATCH * width) {
            if chunk.len() == width {
                each(self, chunk)?;
                self.op(&[single]);
            } else {
                self.mark();
                each(self, chunk)?;
                self.op(&[many]);
            }
        }
        Ok(())
    }

    /// Ends the pickle: STOP, the last frame, and the byte count.
    pub fn finish(mut self) -> Result<u64> {
        self.op(b".");
        self.flush_frame()?;
        self.out.flush()?;
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_values_load_back_with_sharing() {
        let shared: Val = Val::Dict(Rc::new(RefCell::new(vec![(
            Val::Str("name".into()),
            Val::Str("f".into()),
        )])));
        let list = Val::List(Rc::new(RefCell::new(vec![
            shared.clone(),
            shared.clone(),
            Val::Int(-5),
            Val::Int(1 << 40),
            Val::Int(70000),
            Val::Float(0.5),
            Val::None,
            Val::Bool(true),
            Val::Tuple(Rc::new(vec![Val::Int(0), Val::Int(0)])),
        ])));
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out).unwrap();
        w.val(&list).unwrap();
        w.finish().unwrap();
        let back = load(&out).unwrap();
        let Val::List(items) = back else { panic!() };
        let items = items.borrow();
        let (Val::Dict(a), Val::Dict(b)) = (&items[0], &items[1]) else {
            panic!()
        };
        assert!(
            Rc::ptr_eq(a, b),
            "the frame dict is shared through the memo"
        );
        assert_eq!(items[2].as_int(), Some(-5));
        assert_eq!(items[3].as_int(), Some(1 << 40));
        assert_eq!(items[4].as_int(), Some(70000));
        assert_eq!(items[0].get("name").unwrap().as_str(), Some("f"));
    }
}
