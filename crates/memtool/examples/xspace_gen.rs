//! Builds a large XSpace from a real one, for benchmarks: the allocator
//! events (and `step_num` step events) of SOURCE's `/host:CPU` plane,
//! repeated until there are at least EVENTS allocator events, each copy
//! shifted in time and renumbered in steps. Allocation addresses repeat, as
//! they do in a real training loop.
//!
//!     cargo run --release --example xspace_gen -- SOURCE.xplane.pb OUT.xplane.pb 1000000
//!
//! Written field by field as `proto/xplane.proto` describes; the one line
//! is built in memory (a few hundred bytes per event) before it is written.

use std::fs::File;
use std::io::{BufWriter, Write};

use memtool_core::input::xspace::{planes, Stat, StatValue};

struct Copied<'a> {
    at: i64,
    duration: i64,
    metadata_id: i64,
    stats: Vec<Stat<'a>>,
    /// Index of the `step_num` stat, for step events.
    step_stat: Option<usize>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, source, out, events] = args.as_slice() else {
        return Err("usage: xspace_gen SOURCE.xplane.pb OUT.xplane.pb EVENTS".into());
    };
    let want: usize = events.parse()?;
    let bytes = std::fs::read(source)?;
    let plane = planes(&bytes)
        .filter_map(Result::ok)
        .find(|p| p.name == "/host:CPU")
        .ok_or("no /host:CPU plane")?;
    let meta = plane.metadata().map_err(|e| e.message)?;
    let alloc_ids: Vec<i64> = ["MemoryAllocation", "MemoryDeallocation"]
        .iter()
        .flat_map(|n| meta.event_ids(n))
        .collect();
    let step_num = meta
        .stats()
        .into_iter()
        .find(|(_, n)| *n == "step_num")
        .map(|(id, _)| id);
    let mut copied: Vec<Copied> = Vec::new();
    for line in plane.lines() {
        let line = line.map_err(|e| e.message)?;
        for event in line.events() {
            let event = event.map_err(|e| e.message)?;
            let stats: Vec<Stat> = event.stats().filter_map(Result::ok).collect();
            let step_stat = stats.iter().position(|s| Some(s.metadata_id) == step_num);
            if !alloc_ids.contains(&event.metadata_id) && step_stat.is_none() {
                continue;
            }
            copied.push(Copied {
                at: line.time_ps(&event).unwrap_or(0),
                duration: event.duration_ps,
                metadata_id: event.metadata_id,
                stats,
                step_stat,
            });
        }
    }
    copied.sort_by_key(|c| c.at);
    let per_copy = copied.iter().filter(|c| c.step_stat.is_none()).count();
    if per_copy == 0 {
        return Err("SOURCE has no allocator events".into());
    }
    let steps_per_copy = copied.iter().filter(|c| c.step_stat.is_some()).count() as i64;
    let first = copied.first().map_or(0, |c| c.at);
    let last = copied.iter().map(|c| c.at + c.duration).max().unwrap_or(0);
    let period = (last - first).max(1) + 1_000_000;
    let copies = want.div_ceil(per_copy);

    let mut line_body = Vec::new();
    field_varint(&mut line_body, 1, 1);
    field_bytes(&mut line_body, 2, b"generated");
    for k in 0..copies {
        for c in &copied {
            let mut event = Vec::new();
            field_varint(&mut event, 1, c.metadata_id as u64);
            field_varint(&mut event, 2, (c.at - first + k as i64 * period) as u64);
            if c.duration > 0 {
                field_varint(&mut event, 3, c.duration as u64);
            }
            for (i, s) in c.stats.iter().enumerate() {
                let mut value = s.value;
                if Some(i) == c.step_stat {
                    let n = value.as_i64().unwrap_or(0) + k as i64 * steps_per_copy;
                    value = StatValue::Int64(n);
                }
                field_bytes(&mut event, 4, &stat(s.metadata_id, value));
            }
            field_bytes(&mut line_body, 4, &event);
        }
    }
    let mut plane_head = Vec::new();
    field_varint(&mut plane_head, 1, 1);
    field_bytes(&mut plane_head, 2, b"/host:CPU");
    let mut plane_tail = Vec::new();
    for (map, entries) in [(4, meta.events()), (5, meta.stats())] {
        for (id, name) in entries {
            let mut m = Vec::new();
            field_varint(&mut m, 1, id as u64);
            field_bytes(&mut m, 2, name.as_bytes());
            let mut entry = Vec::new();
            field_varint(&mut entry, 1, id as u64);
            field_bytes(&mut entry, 2, &m);
            field_bytes(&mut plane_tail, map, &entry);
        }
    }
    let line_field_len = key_len(3) + varint_len(line_body.len() as u64) + line_body.len();
    let plane_len = plane_head.len() + line_field_len + plane_tail.len();
    let mut out = BufWriter::new(File::create(out)?);
    let mut head = Vec::new();
    varint(&mut head, (1 << 3) | 2);
    varint(&mut head, plane_len as u64);
    head.extend_from_slice(&plane_head);
    varint(&mut head, (3 << 3) | 2);
    varint(&mut head, line_body.len() as u64);
    out.write_all(&head)?;
    out.write_all(&line_body)?;
    out.write_all(&plane_tail)?;
    out.flush()?;
    eprintln!(
        "{} allocator events ({copies} copies of {per_copy}), {} bytes",
        copies * per_copy,
        head.len() + line_body.len() + plane_tail.len()
    );
    Ok(())
}

fn stat(metadata_id: i64, value: StatValue<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    field_varint(&mut out, 1, metadata_id as u64);
    match value {
        StatValue::Double(d) => {
            varint(&mut out, (2 << 3) | 1);
            out.extend_from_slice(&d.to_bits().to_le_bytes());
        }
        StatValue::Uint64(v) => field_varint(&mut out, 3, v),
        StatValue::Int64(v) => field_varint(&mut out, 4, v as u64),
        StatValue::Str(b) => field_bytes(&mut out, 5, b),
        StatValue::Bytes(b) => field_bytes(&mut out, 6, b),
        StatValue::Ref(v) => field_varint(&mut out, 7, v),
        StatValue::None => {}
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    let mut n = Vec::new();
    varint(&mut n, v);
    n.len()
}

fn key_len(number: u32) -> usize {
    varint_len(u64::from(number) << 3)
}

fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
