//! PyTorch profiler Chrome trace with N `[memory]` instant events: a real
//! trace kept whole once (metadata, ops and its memory events), then its
//! `[memory]` events repeated, shifted in `ts`, `Addr`, `Ev Idx` and the
//! running totals, written in Kineto's own layout one event at a time. With
//! `devices` > 0 every `[memory]` event (the first repetition's too) goes
//! to one of that many CUDA devices (`Device Type` 1, `Device Id` 0…)
//! chosen by its address, so an allocation and its free stay on one device,
//! with each device's own running totals: traces of many memories, a few
//! events each.

use std::io::Write;

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

struct Memory {
    ts: f64,
    pid: Value,
    tid: Value,
    cat: Value,
    bytes: i64,
    addr: i64,
    total_allocated: i64,
    total_reserved: i64,
    device_id: i64,
    device_type: i64,
    ev_idx: Option<i64>,
}

fn int(args: &Map<String, Value>, key: &str) -> i64 {
    args.get(key).and_then(Value::as_i64).unwrap_or(0)
}

pub fn generate(pattern: &[u8], n: u64, devices: u64, out: &mut dyn Write) -> Result<u64> {
    let json: Value = serde_json::from_slice(pattern).context("the pattern is not JSON")?;
    let Some(top) = json.as_object() else {
        bail!("the pattern is not a trace object");
    };
    let events = top
        .get("traceEvents")
        .and_then(Value::as_array)
        .context("the pattern has no traceEvents")?;
    let is_memory = |e: &Value| e.get("name").and_then(Value::as_str) == Some("[memory]");
    let memory: Vec<Memory> = events
        .iter()
        .filter(|e| is_memory(e))
        .map(|e| {
            let args = e
                .get("args")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            Memory {
                ts: e.get("ts").and_then(Value::as_f64).unwrap_or(0.0),
                pid: e.get("pid").cloned().unwrap_or(Value::from(0)),
                tid: e.get("tid").cloned().unwrap_or(Value::from(0)),
                cat: e
                    .get("cat")
                    .cloned()
                    .unwrap_or(Value::from("cpu_instant_event")),
                bytes: int(&args, "Bytes"),
                addr: int(&args, "Addr"),
                total_allocated: int(&args, "Total Allocated"),
                total_reserved: int(&args, "Total Reserved"),
                device_id: int(&args, "Device Id"),
                device_type: int(&args, "Device Type"),
                ev_idx: args.get("Ev Idx").and_then(Value::as_i64),
            }
        })
        .collect();
    if memory.is_empty() {
        bail!("the pattern has no [memory] events");
    }
    let per_rep = memory.len() as u64;
    let reps = n.div_ceil(per_rep).max(1);
    let (t_min, t_max) = memory.iter().fold((f64::MAX, f64::MIN), |(lo, hi), m| {
        (lo.min(m.ts), hi.max(m.ts))
    });
    let span = (t_max - t_min).max(1.0);
    let period = (span * 1.1).ceil();
    let (a_min, a_max) = memory.iter().fold((i64::MAX, i64::MIN), |(lo, hi), m| {
        (
            lo.min(m.addr),
            hi.max(m.addr.saturating_add(m.bytes.max(0))),
        )
    });
    let addr_span = ((a_max.saturating_sub(a_min)) >> 20).saturating_add(1) << 20;
    // What one repetition leaves allocated (the last total minus the first's base).
    let growth = memory
        .last()
        .map(|m| m.total_allocated - (memory[0].total_allocated - memory[0].bytes))
        .unwrap_or(0)
        .max(0);
    let idx_span = memory.iter().filter_map(|m| m.ev_idx).max().unwrap_or(0)
        - memory.iter().filter_map(|m| m.ev_idx).min().unwrap_or(0)
        + 1;

    let mut w = Counting { out, written: 0 };
    w.write_all(b"{\n")?;
    for (key, value) in top {
        if key != "traceEvents" {
            writeln!(w, "  {}: {},", Value::from(key.as_str()), value)?;
        }
    }
    w.write_all(b"  \"traceEvents\": [\n")?;
    let mut first = true;
    let mut emitted = 0u64;
    let mut sep = |w: &mut Counting| -> Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    // Repetition 0: the pattern as it is, memory events counted against N
    // (dealt to devices, they are written below like the others).
    for e in events {
        if is_memory(e) && devices > 0 {
            continue;
        }
        if is_memory(e) {
            if emitted == n {
                continue;
            }
            emitted += 1;
        }
        sep(&mut w)?;
        write!(w, "  {e}")?;
    }
    // Per device dealt to: (allocated, reserved) running totals.
    let mut totals: std::collections::HashMap<i64, (i64, i64)> = Default::default();
    let first_generated = if devices > 0 { 0 } else { 1 };
    for k in first_generated..reps {
        let kf = k as f64;
        let ki = k as i64;
        for m in &memory {
            if emitted == n {
                break;
            }
            emitted += 1;
            sep(&mut w)?;
            let addr = m.addr.saturating_add(addr_span.saturating_mul(ki));
            let (device_id, device_type, total_allocated, total_reserved) = match devices {
                0 => (
                    m.device_id,
                    m.device_type,
                    m.total_allocated.saturating_add(growth.saturating_mul(ki)),
                    // A CPU trace reports no reserved memory; it stays 0.
                    if m.total_reserved > 0 {
                        m.total_reserved.saturating_add(growth.saturating_mul(ki))
                    } else {
                        m.total_reserved
                    },
                ),
                d => {
                    let device = (mix(addr as u64) % d) as i64;
                    let (allocated, reserved) = totals.entry(device).or_default();
                    *allocated = allocated.saturating_add(m.bytes).max(0);
                    *reserved = (*reserved).max(*allocated);
                    (device, 1, *allocated, *reserved)
                }
            };
            write!(
                w,
                "  {{\n    \"ph\": \"i\", \"cat\": {}, \"s\": \"t\", \"name\": \"[memory]\", \
                 \"pid\": {}, \"tid\": {},\n    \"ts\": {:.3},\n    \"args\": {{\n      \
                 \"Total Reserved\": {}, \"Total Allocated\": {}, \"Bytes\": {}, \
                 \"Device Id\": {}, \"Device Type\": {}, \"Addr\": {}, \"finished\": false",
                m.cat,
                m.pid,
                m.tid,
                m.ts + period * kf,
                total_reserved,
                total_allocated,
                m.bytes,
                device_id,
                device_type,
                addr,
            )?;
            if let Some(idx) = m.ev_idx {
                write!(w, ", \"Ev Idx\": {}", idx + idx_span * ki)?;
            }
            w.write_all(b"\n    }\n  }")?;
        }
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()?;
    Ok(w.written)
}

/// SplitMix64's finalizer: addresses (aligned, so their low bits are
/// zero) spread evenly over the devices.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

struct Counting<'a> {
    out: &'a mut dyn Write,
    written: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
