//! XSpace with N allocator events: the allocator events of a real profile
//! (`MemoryAllocation` / `MemoryDeallocation` on the host plane) repeated,
//! each repetition shifted in time by the profile's span and in address by the
//! allocator's span, with the step markers (`step_num`) repeated alongside.
//!
//! The first repetition is the original plane verbatim (every thread's events),
//! later ones carry only allocator and step events, so size grows with N and
//! not with the unrelated TraceMe events. Lengths are computed in a first pass
//! and the file is written in a second, so memory stays that of the pattern
//! whatever N is (outputs over protobuf's 2 GiB message limit included).

use std::collections::HashMap;
use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};
use memtool_proto::wire::reader::{Fields, Value};

use memtool_proto::wire::writer::{len_field_size, put_len_prefix, put_varint_field};

const ALLOC: &str = "MemoryAllocation";
const DEALLOC: &str = "MemoryDeallocation";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Alloc,
    Dealloc,
    Step,
    Other,
}

struct Event<'a> {
    payload: &'a [u8],
    kind: Kind,
    /// Position among the pattern's allocator events in time order.
    ordinal: u64,
}

struct Line<'a> {
    /// Non-event fields with their position among the events, as
    /// (events before it, field number, value), so the order is kept.
    header: Vec<(usize, u32, Value<'a>)>,
    events: Vec<Event<'a>>,
}

/// Stat metadata ids whose values change from one repetition to the next.
#[derive(Default)]
struct StatIds {
    addr: Option<u64>,
    bytes_allocated: Option<u64>,
    bytes_available: Option<u64>,
    peak_bytes_in_use: Option<u64>,
    step_num: Option<u64>,
    allocation_bytes: Option<u64>,
}

/// How repetition `k` differs from the pattern.
struct Shift {
    period_ps: u64,
    addr_span: u64,
    /// Bytes left allocated by one repetition (a leaking pattern keeps leaking).
    net_growth: u64,
    steps_per_rep: u64,
}

struct HostPlane<'a> {
    /// The plane's fields in order; lines are replaced by index into `lines`.
    fields: Vec<PlaneField<'a>>,
    lines: Vec<Line<'a>>,
    stats: StatIds,
    per_rep: u64,
    shift: Shift,
}

enum PlaneField<'a> {
    Raw(u32, Value<'a>),
    Line(usize),
}

fn walk(buf: &[u8]) -> impl Iterator<Item = Result<(u32, Value<'_>)>> {
    Fields::new(buf).map(|f| {
        f.map(|(n, v, _)| (n, v))
            .map_err(|e| anyhow!("malformed protobuf at byte {}: {}", e.offset, e.message()))
    })
}

fn bytes_of(v: Value<'_>) -> Result<&[u8]> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => bail!("expected a length-delimited field"),
    }
}

/// `(key, value message)` of a protobuf map entry.
fn map_entry(buf: &[u8]) -> Result<(u64, &[u8])> {
    let (mut key, mut value) = (0, &[][..]);
    for f in walk(buf) {
        match f? {
            (1, Value::Varint(k)) => key = k,
            (2, Value::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn name_of(message: &[u8]) -> Result<String> {
    for f in walk(message) {
        if let (2, Value::Bytes(b)) = f? {
            return Ok(String::from_utf8_lossy(b).into_owned());
        }
    }
    Ok(String::new())
}

fn plane_name(plane: &[u8]) -> Result<String> {
    name_of(plane)
}

/// A stat's metadata id and its integer value when it has one.
fn stat_int(stat: &[u8]) -> Result<(u64, Option<u64>)> {
    let (mut id, mut value) = (0, None);
    for f in walk(stat) {
        match f? {
            (1, Value::Varint(v)) => id = v,
            (3 | 4, Value::Varint(v)) => value = Some(v),
            _ => {}
        }
    }
    Ok((id, value))
}

impl<'a> HostPlane<'a> {
    /// `None` when the plane has no allocator events.
    fn parse(plane: &'a [u8]) -> Result<Option<Self>> {
        let mut event_names: HashMap<u64, String> = HashMap::new();
        let mut stat_names: HashMap<u64, String> = HashMap::new();
        for f in walk(plane) {
            match f? {
                (4, v) => {
                    let (id, md) = map_entry(bytes_of(v)?)?;
                    event_names.insert(id, name_of(md)?);
                }
                (5, v) => {
                    let (id, md) = map_entry(bytes_of(v)?)?;
                    stat_names.insert(id, name_of(md)?);
                }
                _ => {}
            }
        }
        let stat_id = |name: &str| {
            stat_names
                .iter()
                .filter(|(_, n)| n.as_str() == name)
                .map(|(&id, _)| id)
                .min()
        };
        let stats = StatIds {
            addr: stat_id("addr"),
            bytes_allocated: stat_id("bytes_allocated"),
            bytes_available: stat_id("bytes_available"),
            peak_bytes_in_use: stat_id("peak_bytes_in_use"),
            step_num: stat_id("step_num"),
            allocation_bytes: stat_id("allocation_bytes"),
        };

        let mut fields = Vec::new();
        let mut lines = Vec::new();
        // (absolute time ps, line, index) of every allocator event.
        let mut order: Vec<(i128, usize, usize)> = Vec::new();
        let (mut t_min, mut t_max) = (i128::MAX, i128::MIN);
        let (mut addr_min, mut addr_max) = (u64::MAX, 0u64);
        let (mut allocated, mut freed) = (0u64, 0u64);
        let (mut step_min, mut step_max) = (u64::MAX, 0u64);
        for f in walk(plane) {
            let (number, value) = f?;
            if number != 3 {
                fields.push(PlaneField::Raw(number, value));
                continue;
            }
            let mut line = Line {
                header: Vec::new(),
                events: Vec::new(),
            };
            let mut timestamp_ns = 0i128;
            for lf in walk(bytes_of(value)?) {
                let (n, v) = lf?;
                if n != 4 {
                    if let (3, Value::Varint(ts)) = (n, v) {
                        timestamp_ns = i128::from(ts as i64);
                    }
                    line.header.push((line.events.len(), n, v));
                    continue;
                }
                let payload = bytes_of(v)?;
                let (mut md, mut offset, mut duration) = (0u64, 0i128, 0i128);
                let (mut addr, mut size, mut step) = (None, None, None);
                for ef in walk(payload) {
                    match ef? {
                        (1, Value::Varint(x)) => md = x,
                        (2, Value::Varint(x)) => offset = i128::from(x as i64),
                        (3, Value::Varint(x)) => duration = i128::from(x as i64),
                        (4, Value::Bytes(s)) => {
                            let (id, value) = stat_int(s)?;
                            if Some(id) == stats.addr {
                                addr = value;
                            } else if Some(id) == stats.allocation_bytes {
                                size = value;
                            } else if Some(id) == stats.step_num {
                                step = value;
                            }
                        }
                        _ => {}
                    }
                }
                let kind = match event_names.get(&md).map(String::as_str) {
                    Some(ALLOC) => Kind::Alloc,
                    Some(DEALLOC) => Kind::Dealloc,
                    _ if step.is_some() => Kind::Step,
                    _ => Kind::Other,
                };
                let start = timestamp_ns * 1000 + offset;
                t_min = t_min.min(start);
                t_max = t_max.max(start + duration.max(0));
                match kind {
                    Kind::Alloc | Kind::Dealloc => {
                        order.push((start, lines.len(), line.events.len()));
                        if let Some(a) = addr {
                            addr_min = addr_min.min(a);
                            addr_max = addr_max.max(a.saturating_add(size.unwrap_or(0)));
                        }
                        let bytes = size.unwrap_or(0);
                        if kind == Kind::Alloc {
                            allocated = allocated.saturating_add(bytes);
                        } else {
                            freed = freed.saturating_add(bytes);
                        }
                    }
                    Kind::Step => {
                        let s = step.unwrap_or(0);
                        step_min = step_min.min(s);
                        step_max = step_max.max(s);
                    }
                    Kind::Other => {}
                }
                line.events.push(Event {
                    payload,
                    kind,
                    ordinal: 0,
                });
            }
            fields.push(PlaneField::Line(lines.len()));
            lines.push(line);
        }
        if order.is_empty() {
            return Ok(None);
        }
        order.sort();
        for (ordinal, &(_, l, e)) in order.iter().enumerate() {
            lines[l].events[e].ordinal = ordinal as u64;
        }
        let span = u64::try_from(t_max - t_min).unwrap_or(0).max(1);
        // A tenth of the span between repetitions, rounded to a millisecond.
        let ms = 1_000_000_000u64;
        let period_ps = (span + span / 10).div_ceil(ms) * ms;
        let mib = 1u64 << 20;
        let addr_span = if addr_min <= addr_max {
            (addr_max - addr_min).div_ceil(mib).max(1) * mib
        } else {
            0
        };
        let steps_per_rep = if step_min <= step_max {
            step_max - step_min + 1
        } else {
            0
        };
        Ok(Some(HostPlane {
            fields,
            lines,
            stats,
            per_rep: order.len() as u64,
            shift: Shift {
                period_ps,
                addr_span,
                net_growth: allocated.saturating_sub(freed),
                steps_per_rep,
            },
        }))
    }

    fn reps(&self, n: u64) -> u64 {
        n.div_ceil(self.per_rep).max(1)
    }

    /// Emits line `l`'s events for every repetition, each as a whole field.
    fn emit_line(
        &self,
        l: usize,
        n: u64,
        scratch: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let line = &self.lines[l];
        let mut field = Vec::new();
        let mut header = line.header.iter().peekable();
        let mut header_before = |events_done: usize, sink: &mut dyn FnMut(&[u8]) -> Result<()>| {
            while let Some(&&(_, number, value)) = header.peek().filter(|h| h.0 <= events_done) {
                header.next();
                let mut field = Vec::new();
                put_field(&mut field, number, value);
                sink(&field)?;
            }
            Ok::<(), anyhow::Error>(())
        };
        for k in 0..self.reps(n) {
            for (i, event) in line.events.iter().enumerate() {
                if k == 0 {
                    header_before(i, sink)?;
                }
                let keep = match event.kind {
                    Kind::Alloc | Kind::Dealloc => k * self.per_rep + event.ordinal < n,
                    Kind::Step => true,
                    Kind::Other => k == 0,
                };
                if !keep {
                    continue;
                }
                scratch.clear();
                if k == 0 {
                    scratch.extend_from_slice(event.payload);
                } else {
                    self.shift_event(event.payload, k, scratch)?;
                }
                field.clear();
                put_len_prefix(&mut field, 4, scratch.len() as u64);
                field.extend_from_slice(scratch);
                sink(&field)?;
            }
        }
        header_before(usize::MAX, sink)?;
        Ok(())
    }

    fn shift_event(&self, payload: &[u8], k: u64, out: &mut Vec<u8>) -> Result<()> {
        let s = &self.shift;
        let overflow = || anyhow!("{k} repetitions overflow the event timestamps");
        let dt = s.period_ps.checked_mul(k).ok_or_else(overflow)?;
        let mut stat = Vec::new();
        for f in walk(payload) {
            match f? {
                (2, Value::Varint(offset)) => {
                    let shifted = (offset as i64)
                        .checked_add(i64::try_from(dt).map_err(|_| overflow())?)
                        .ok_or_else(overflow)?;
                    put_varint_field(out, 2, shifted as u64);
                }
                (4, Value::Bytes(b)) => {
                    stat.clear();
                    self.shift_stat(b, k, &mut stat)?;
                    put_len_prefix(out, 4, stat.len() as u64);
                    out.extend_from_slice(&stat);
                }
                (n, v) => put_field(out, n, v),
            }
        }
        Ok(())
    }

    fn shift_stat(&self, stat: &[u8], k: u64, out: &mut Vec<u8>) -> Result<()> {
        let (id, _) = stat_int(stat)?;
        let (s, ids) = (&self.shift, &self.stats);
        let id = Some(id);
        let growth = s.net_growth.wrapping_mul(k);
        let shifted = |v: u64| -> u64 {
            if id == ids.addr {
                v.wrapping_add(s.addr_span.wrapping_mul(k))
            } else if id == ids.bytes_allocated || id == ids.peak_bytes_in_use {
                v.wrapping_add(growth)
            } else if id == ids.bytes_available {
                v.saturating_sub(growth)
            } else if id == ids.step_num {
                v.wrapping_add(s.steps_per_rep.wrapping_mul(k))
            } else {
                v
            }
        };
        for f in walk(stat) {
            match f? {
                (n @ (3 | 4), Value::Varint(v)) => put_varint_field(out, n, shifted(v)),
                (n, v) => put_field(out, n, v),
            }
        }
        Ok(())
    }
}

fn put_field(out: &mut Vec<u8>, number: u32, value: Value<'_>) {
    match value {
        Value::Varint(v) => put_varint_field(out, number, v),
        Value::Fixed64(v) => {
            memtool_proto::wire::writer::put_key(out, number, 1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Fixed32(v) => {
            memtool_proto::wire::writer::put_key(out, number, 5);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Bytes(b) => memtool_proto::wire::writer::put_bytes_field(out, number, b),
    }
}

/// The `Task Environment` plane with `profile_stop_time` moved by `extra_ns`.
fn task_environment(plane: &[u8], extra_ns: u64) -> Result<Vec<u8>> {
    let mut stop_id = None;
    for f in walk(plane) {
        if let (5, v) = f? {
            let (id, md) = map_entry(bytes_of(v)?)?;
            if name_of(md)? == "profile_stop_time" {
                stop_id = Some(id);
            }
        }
    }
    let mut out = Vec::with_capacity(plane.len());
    for f in walk(plane) {
        match f? {
            (6, Value::Bytes(stat))
                if stop_id.is_some() && stat_int(stat)?.0 == stop_id.unwrap_or(0) =>
            {
                let mut shifted = Vec::new();
                for sf in walk(stat) {
                    match sf? {
                        (n @ (3 | 4), Value::Varint(v)) => {
                            put_varint_field(&mut shifted, n, v.wrapping_add(extra_ns))
                        }
                        (n, v) => put_field(&mut shifted, n, v),
                    }
                }
                memtool_proto::wire::writer::put_bytes_field(&mut out, 6, &shifted);
            }
            (n, v) => put_field(&mut out, n, v),
        }
    }
    Ok(out)
}

/// Writes an XSpace with `n` allocator events built from `pattern`. Returns
/// the number of bytes written.
pub fn generate(pattern: &[u8], n: u64, out: &mut dyn Write) -> Result<u64> {
    let mut host = None;
    for f in walk(pattern) {
        if let (1, Value::Bytes(plane)) = f? {
            if host.is_none() {
                host = HostPlane::parse(plane)?;
            }
        }
    }
    let host = host.context("the pattern has no MemoryAllocation/MemoryDeallocation events")?;
    let extra_ns = (host.reps(n) - 1).saturating_mul(host.shift.period_ps) / 1000;

    // First pass: each generated line's length, then the plane's.
    let mut scratch = Vec::new();
    let mut line_len = vec![0u64; host.lines.len()];
    for (l, len) in line_len.iter_mut().enumerate() {
        host.emit_line(l, n, &mut scratch, &mut |b| {
            *len += b.len() as u64;
            Ok(())
        })?;
    }
    let mut field = Vec::new();
    let mut plane_len = 0u64;
    for pf in &host.fields {
        plane_len += match *pf {
            PlaneField::Raw(number, value) => {
                field.clear();
                put_field(&mut field, number, value);
                field.len() as u64
            }
            PlaneField::Line(l) => len_field_size(3, line_len[l]),
        };
    }

    let mut written = 0u64;
    let mut emit = |b: &[u8]| -> Result<()> {
        out.write_all(b)?;
        written += b.len() as u64;
        Ok(())
    };
    let mut host_done = false;
    for f in walk(pattern) {
        let (number, value) = f?;
        field.clear();
        match (number, value) {
            (1, Value::Bytes(plane)) if !host_done && HostPlane::parse(plane)?.is_some() => {
                host_done = true;
                put_len_prefix(&mut field, 1, plane_len);
                emit(&field)?;
                for pf in &host.fields {
                    match *pf {
                        PlaneField::Raw(number, value) => {
                            field.clear();
                            put_field(&mut field, number, value);
                            emit(&field)?;
                        }
                        PlaneField::Line(l) => {
                            field.clear();
                            put_len_prefix(&mut field, 3, line_len[l]);
                            emit(&field)?;
                            host.emit_line(l, n, &mut scratch, &mut emit)?;
                        }
                    }
                }
            }
            (1, Value::Bytes(plane)) if plane_name(plane)? == "Task Environment" => {
                let shifted = task_environment(plane, extra_ns)?;
                memtool_proto::wire::writer::put_bytes_field(&mut field, 1, &shifted);
                emit(&field)?;
            }
            (n, v) => {
                put_field(&mut field, n, v);
                emit(&field)?;
            }
        }
    }
    Ok(written)
}
