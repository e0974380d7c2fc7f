//! XSpace with one compiled program of N buffers (Memory Viewer input): the
//! biggest module of a real JAX profile, its temporary buffers repeated.
//!
//! The module's longest heap simulator trace (the one the Memory Viewer
//! replays) is the pattern: repetition `k` adds a copy of every logical
//! buffer the trace touches, with ids shifted past the module's own, assigned
//! at the same offsets of the same temporary allocation, and appends the
//! trace's events on those copies. Each repetition allocates and frees what
//! the original does, so the heap timeline is the original's, repeated, and
//! the peak stays the module's (a program that loops over the same layers).
//!
//! Everything is copied field by field on the wire: fields memtool does not
//! read (instruction details, computation names) stay as XLA wrote them, so
//! XProf's own converter sees a complete `HloProto`. The copies point at the
//! original instructions; buffer names repeat from one repetition to the next.

use std::collections::BTreeSet;
use std::io::Write;

use anyhow::{anyhow, bail, Result};
use memtool_proto::wire::reader::{Fields, Value};
use memtool_proto::xla::HloProto;
use prost::Message;

use memtool_proto::wire::writer::{put_bytes_field, put_key, put_varint, put_varint_field};

const METADATA_PLANE: &str = "/host:metadata";
const HLO_PROTO_STAT: &str = "Hlo Proto";

/// `HeapSimulatorTrace.Event.kind` of a buffer that shares another's memory.
const SHARE_WITH: i32 = 2;

/// One compiled program found in the pattern.
struct Module<'a> {
    /// The `XEventMetadata` message that carries it.
    metadata: &'a [u8],
    hlo: &'a [u8],
    /// Bytes of all its buffer allocations: the pattern is the biggest
    /// program (a training step), not the one with the longest trace.
    total_bytes: i64,
}

fn fields(buf: &[u8]) -> impl Iterator<Item = Result<(u32, Value<'_>)>> {
    Fields::new(buf).map(|f| {
        f.map(|(n, v, _)| (n, v))
            .map_err(|e| anyhow!("pattern: {} at byte {}", e.message(), e.offset))
    })
}

fn bytes_of(value: Value<'_>) -> Option<&[u8]> {
    match value {
        Value::Bytes(b) => Some(b),
        _ => None,
    }
}

/// Writes one field as it was read, with its number.
fn put_value(out: &mut Vec<u8>, number: u32, value: Value<'_>) {
    match value {
        Value::Varint(v) => put_varint_field(out, number, v),
        Value::Bytes(b) => put_bytes_field(out, number, b),
        Value::Fixed64(v) => {
            put_key(out, number, 1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Fixed32(v) => {
            put_key(out, number, 5);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// A copy of `msg` with the varint fields `numbers` shifted by `by` (buffer
/// ids of a repetition).
fn shifted(msg: &[u8], numbers: &[u32], by: u64) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(msg.len() + 4);
    for f in fields(msg) {
        let (n, v) = f?;
        match v {
            Value::Varint(id) if numbers.contains(&n) => put_varint_field(&mut out, n, id + by),
            v => put_value(&mut out, n, v),
        }
    }
    Ok(out)
}

fn varint_of(msg: &[u8], number: u32) -> Result<Option<u64>> {
    for f in fields(msg) {
        if let (n, Value::Varint(v)) = f? {
            if n == number {
                return Ok(Some(v));
            }
        }
    }
    Ok(None)
}

/// The modules of the pattern's `/host:metadata` plane.
fn modules(space: &[u8]) -> Result<Vec<Module<'_>>> {
    let mut out = Vec::new();
    for f in fields(space) {
        let (1, Value::Bytes(plane)) = f? else {
            continue;
        };
        let mut name = None;
        let mut hlo_stat = None;
        let mut metadata = Vec::new();
        for g in fields(plane) {
            match g? {
                (2, Value::Bytes(n)) => name = Some(n),
                (4, Value::Bytes(entry)) => {
                    for h in fields(entry) {
                        if let (2, Value::Bytes(m)) = h? {
                            metadata.push(m);
                        }
                    }
                }
                (5, Value::Bytes(entry)) => {
                    for h in fields(entry) {
                        if let (2, Value::Bytes(m)) = h? {
                            let id = varint_of(m, 1)?;
                            let is_hlo = fields(m).any(|x| {
                                matches!(x, Ok((2, Value::Bytes(n)))
                                    if n == HLO_PROTO_STAT.as_bytes())
                            });
                            if is_hlo {
                                hlo_stat = id;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if name != Some(METADATA_PLANE.as_bytes()) {
            continue;
        }
        let Some(hlo_stat) = hlo_stat else {
            continue;
        };
        for m in metadata {
            for g in fields(m) {
                let (5, Value::Bytes(stat)) = g? else {
                    continue;
                };
                if varint_of(stat, 1)? != Some(hlo_stat) {
                    continue;
                }
                let hlo = fields(stat)
                    .filter_map(|x| x.ok())
                    .find_map(|(n, v)| (n == 6).then_some(v).and_then(bytes_of));
                if let Some(hlo) = hlo {
                    let proto = HloProto::decode(hlo)
                        .map_err(|e| anyhow!("pattern: a module is not an HloProto: {e}"))?;
                    let total_bytes = proto
                        .buffer_assignment
                        .iter()
                        .flat_map(|a| &a.buffer_allocations)
                        .map(|a| a.size)
                        .sum();
                    let has_trace = proto
                        .buffer_assignment
                        .iter()
                        .any(|a| !a.heap_simulator_traces.is_empty());
                    if has_trace {
                        out.push(Module {
                            metadata: m,
                            hlo,
                            total_bytes,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// What the chosen trace touches, and how copies are numbered.
struct Plan {
    /// Index of the trace among `heap_simulator_traces`.
    trace: usize,
    /// Index of the allocation among `buffer_allocations` that holds it.
    allocation: usize,
    /// Logical buffer ids the trace names.
    buffers: BTreeSet<u64>,
    /// Shift of buffer ids from one repetition to the next.
    stride: u64,
}

fn plan(hlo: &[u8]) -> Result<Plan> {
    let proto = HloProto::decode(hlo).map_err(|e| anyhow!("pattern: {e}"))?;
    let assignment = proto
        .buffer_assignment
        .ok_or_else(|| anyhow!("pattern: the module has no buffer assignment"))?;
    let (trace, longest) = assignment
        .heap_simulator_traces
        .iter()
        .enumerate()
        .max_by_key(|(i, t)| (t.events.len(), std::cmp::Reverse(*i)))
        .ok_or_else(|| anyhow!("pattern: the module has no heap simulator trace"))?;
    let mut buffers = BTreeSet::new();
    for e in &longest.events {
        buffers.insert(e.buffer_id as u64);
        if e.kind == SHARE_WITH {
            buffers.insert(e.share_with_canonical_id as u64);
        }
    }
    let first = longest.events.first().map(|e| e.buffer_id);
    let allocation = assignment
        .buffer_allocations
        .iter()
        .position(|a| {
            a.assigned
                .iter()
                .any(|x| Some(x.logical_buffer_id) == first)
        })
        .ok_or_else(|| anyhow!("pattern: the trace's buffers are in no allocation"))?;
    let max_id = assignment
        .logical_buffers
        .iter()
        .map(|b| b.id.max(0) as u64)
        .max()
        .unwrap_or(0);
    Ok(Plan {
        trace,
        allocation,
        buffers,
        stride: max_id + 1,
    })
}

/// The pattern module's `HloProto` with `reps` repetitions of its trace.
fn scaled_hlo(hlo: &[u8], plan: &Plan, reps: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for f in fields(hlo) {
        match f? {
            (3, Value::Bytes(assignment)) => {
                let body = scaled_assignment(assignment, plan, reps)?;
                put_bytes_field(&mut out, 3, &body);
            }
            (n, v) => put_value(&mut out, n, v),
        }
    }
    Ok(out)
}

fn scaled_assignment(assignment: &[u8], plan: &Plan, reps: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let (mut allocation, mut trace) = (0usize, 0usize);
    let mut copies = Vec::new();
    for f in fields(assignment) {
        match f? {
            (1, Value::Bytes(buffer)) => {
                put_bytes_field(&mut out, 1, buffer);
                if varint_of(buffer, 1)?.is_some_and(|id| plan.buffers.contains(&id)) {
                    copies.push(buffer);
                }
            }
            (3, Value::Bytes(a)) => {
                if allocation == plan.allocation {
                    let mut body = a.to_vec();
                    for k in 1..reps {
                        for g in fields(a) {
                            let (9, Value::Bytes(assigned)) = g? else {
                                continue;
                            };
                            if varint_of(assigned, 1)?.is_some_and(|id| plan.buffers.contains(&id))
                            {
                                put_bytes_field(
                                    &mut body,
                                    9,
                                    &shifted(assigned, &[1], k * plan.stride)?,
                                );
                            }
                        }
                    }
                    put_bytes_field(&mut out, 3, &body);
                } else {
                    put_bytes_field(&mut out, 3, a);
                }
                allocation += 1;
            }
            (4, Value::Bytes(t)) => {
                if trace == plan.trace {
                    let mut body = Vec::new();
                    let mut events = Vec::new();
                    for g in fields(t) {
                        match g? {
                            (1, Value::Bytes(e)) => events.push(e),
                            (n, v) => put_value(&mut body, n, v),
                        }
                    }
                    for k in 0..reps {
                        for e in &events {
                            put_bytes_field(&mut body, 1, &shifted(e, &[2, 5], k * plan.stride)?);
                        }
                    }
                    put_bytes_field(&mut out, 4, &body);
                } else {
                    put_bytes_field(&mut out, 4, t);
                }
                trace += 1;
            }
            (n, v) => put_value(&mut out, n, v),
        }
    }
    for k in 1..reps {
        for buffer in &copies {
            put_bytes_field(&mut out, 1, &shifted(buffer, &[1], k * plan.stride)?);
        }
    }
    Ok(out)
}

/// Writes an XSpace holding the pattern's biggest module scaled to about
/// `buffers` logical buffers in its replayed trace (whole repetitions, at
/// least one). Returns the bytes written.
pub fn generate(pattern: &[u8], buffers: u64, out: &mut dyn Write) -> Result<u64> {
    let modules = modules(pattern)?;
    let Some(module) = modules.iter().max_by_key(|m| m.total_bytes) else {
        bail!("pattern: no compiled program (HloProto on /host:metadata)");
    };
    let plan = plan(module.hlo)?;
    let per_rep = plan.buffers.len().max(1) as u64;
    let reps = buffers.div_ceil(per_rep).max(1);
    let hlo = scaled_hlo(module.hlo, &plan, reps)?;

    // The module's event metadata with its HloProto replaced; other stats
    // (program id) kept.
    let mut metadata = Vec::new();
    for f in fields(module.metadata) {
        match f? {
            (5, Value::Bytes(stat)) if fields(stat).any(|x| matches!(x, Ok((6, _)))) => {
                let mut body = Vec::new();
                for g in fields(stat) {
                    match g? {
                        (6, _) => put_bytes_field(&mut body, 6, &hlo),
                        (n, v) => put_value(&mut body, n, v),
                    }
                }
                put_bytes_field(&mut metadata, 5, &body);
            }
            (n, v) => put_value(&mut metadata, n, v),
        }
    }
    drop(hlo);
    let id = varint_of(module.metadata, 1)?.unwrap_or(1);
    let mut plane = Vec::new();
    put_varint_field(&mut plane, 1, 1);
    put_bytes_field(&mut plane, 2, METADATA_PLANE.as_bytes());
    let mut entry = Vec::new();
    put_varint_field(&mut entry, 1, id);
    put_bytes_field(&mut entry, 2, &metadata);
    put_bytes_field(&mut plane, 4, &entry);
    // Stat names the module's stats use, copied from the pattern plane.
    for (stat_id, name) in stat_names(pattern)? {
        let mut meta = Vec::new();
        put_varint_field(&mut meta, 1, stat_id);
        put_bytes_field(&mut meta, 2, &name);
        let mut entry = Vec::new();
        put_varint_field(&mut entry, 1, stat_id);
        put_bytes_field(&mut entry, 2, &meta);
        put_bytes_field(&mut plane, 5, &entry);
    }
    let mut head = Vec::new();
    put_key(&mut head, 1, 2);
    put_varint(&mut head, plane.len() as u64);
    out.write_all(&head)?;
    out.write_all(&plane)?;
    Ok((head.len() + plane.len()) as u64)
}

/// `(id, name)` of the stat metadata of the pattern's `/host:metadata` plane.
fn stat_names(space: &[u8]) -> Result<Vec<(u64, Vec<u8>)>> {
    let mut out = Vec::new();
    for f in fields(space) {
        let (1, Value::Bytes(plane)) = f? else {
            continue;
        };
        let is_metadata = fields(plane)
            .any(|g| matches!(g, Ok((2, Value::Bytes(n))) if n == METADATA_PLANE.as_bytes()));
        if !is_metadata {
            continue;
        }
        for g in fields(plane) {
            let (5, Value::Bytes(entry)) = g? else {
                continue;
            };
            for h in fields(entry) {
                if let (2, Value::Bytes(m)) = h? {
                    let name = fields(m)
                        .filter_map(|x| x.ok())
                        .find_map(|(n, v)| (n == 2).then_some(v).and_then(bytes_of));
                    if let (Some(id), Some(name)) = (varint_of(m, 1)?, name) {
                        out.push((id, name.to_vec()));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Logical buffers one repetition adds (for tests and the driver).
#[cfg(test)]
pub fn buffers_per_repetition(pattern: &[u8]) -> Result<u64> {
    let modules = modules(pattern)?;
    let module = modules
        .iter()
        .max_by_key(|m| m.total_bytes)
        .ok_or_else(|| anyhow!("no module"))?;
    Ok(plan(module.hlo)?.buffers.len() as u64)
}
