//! PyTorch `_dump_snapshot` pickle with N trace entries: a real snapshot's
//! `device_traces` repeated, each repetition shifted in `time_us` and `addr`.
//!
//! Sharing follows PyTorch: frame dicts are one object each across the whole
//! trace (memo references after the first), while each repetition gets its own
//! `frames` lists, shared only between the entries that share them in the
//! pattern (an alloc's free_requested and free_completed). Entries are written
//! as they are made, so memory stays that of the pattern.

use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

use anyhow::{bail, Context, Result};

use crate::pickle::{Val, Writer};

pub fn generate(pattern: &[u8], n: u64, out: &mut dyn Write) -> Result<u64> {
    let root = crate::pickle::load(pattern).context("reading the pattern pickle")?;
    let Val::Dict(top) = &root else {
        bail!("the pattern is not a snapshot dict");
    };
    let Some(Val::List(traces)) = root.get("device_traces") else {
        bail!("the pattern has no device_traces list");
    };
    let traces = traces.borrow().clone();
    let (device, entries) = traces
        .iter()
        .enumerate()
        .find_map(|(i, t)| match t {
            Val::List(l) if !l.borrow().is_empty() => Some((i, l.borrow().clone())),
            _ => None,
        })
        .context("the pattern's device_traces are all empty")?;

    let (addr_min, addr_max) = entries
        .iter()
        .filter_map(|e| Some((e.get("addr")?.as_int()?, e.get("size")?.as_int()?)))
        .fold((i64::MAX, i64::MIN), |(lo, hi), (a, s)| {
            (lo.min(a), hi.max(a.saturating_add(s)))
        });
    // CUDA segments come in 2 MiB pages.
    let page = 2i64 << 20;
    let addr_span = if addr_min <= addr_max {
        (addr_max.saturating_sub(addr_min) / page + 1) * page
    } else {
        0
    };
    let (t_min, t_max) = entries
        .iter()
        .filter_map(|e| e.get("time_us")?.as_int())
        .fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let period_us = if t_min <= t_max {
        let span = t_max - t_min;
        span + span / 10 + 1
    } else {
        0
    };

    let per_rep = entries.len() as u64;
    let reps = n.div_ceil(per_rep).max(1);
    let mut w = Writer::new(out)?;
    w.op(b"}");
    w.memoize();
    w.mark();
    for (key, value) in top.borrow().iter() {
        w.val(key)?;
        if key.as_str() != Some("device_traces") {
            w.val(value)?;
            continue;
        }
        w.op(b"]");
        w.memoize();
        w.mark();
        for (i, trace) in traces.iter().enumerate() {
            if i != device {
                w.val(trace)?;
                continue;
            }
            w.op(b"]");
            w.memoize();
            let mut in_batch = 0;
            let mut written = 0u64;
            for k in 0..reps {
                // This repetition's frames lists, by the pattern list they copy.
                let mut lists: HashMap<usize, u64> = HashMap::new();
                for entry in &entries {
                    if written == n {
                        break;
                    }
                    if in_batch == 0 {
                        w.mark();
                    }
                    write_entry(&mut w, entry, k, addr_span, period_us, &mut lists)?;
                    written += 1;
                    in_batch += 1;
                    if in_batch == 1000 {
                        w.op(b"e");
                        in_batch = 0;
                    }
                    w.commit()?;
                }
            }
            if in_batch > 0 {
                w.op(b"e");
            }
        }
        w.op(b"e");
    }
    w.op(b"u");
    w.finish()
}

fn write_entry<W: Write>(
    w: &mut Writer<W>,
    entry: &Val,
    k: u64,
    addr_span: i64,
    period_us: i64,
    lists: &mut HashMap<usize, u64>,
) -> Result<()> {
    let Val::Dict(fields) = entry else {
        return w.val(entry);
    };
    let k = k as i64;
    w.op(b"}");
    w.memoize();
    w.mark();
    for (key, value) in fields.borrow().iter() {
        w.val(key)?;
        match (key.as_str(), value) {
            (Some("addr"), Val::Int(a)) => w.int(a.saturating_add(addr_span.saturating_mul(k))),
            (Some("time_us"), Val::Int(t)) => w.int(t.saturating_add(period_us.saturating_mul(k))),
            (Some("frames"), Val::List(frames)) => {
                let id = Rc::as_ptr(frames) as usize;
                if let Some(&index) = lists.get(&id) {
                    w.get(index);
                } else {
                    w.op(b"]");
                    let index = w.memoize();
                    lists.insert(id, index);
                    let frames = frames.borrow().clone();
                    for chunk in frames.chunks(1000) {
                        if chunk.len() > 1 {
                            w.mark();
                        }
                        for f in chunk {
                            w.val(f)?;
                        }
                        w.op(if chunk.len() > 1 { b"e" } else { b"a" });
                    }
                }
            }
            _ => w.val(value)?,
        }
    }
    w.op(b"u");
    Ok(())
}
