//! What an XLA report's post-mortem adds to an `oom` entry, and its tables:
//! the report's usage breakdowns, its allocations with their layouts, the
//! BFC allocator's state. A leaf below both `oom` (whose entries carry it)
//! and `xla_report` (which fills it in), so the two depend one way.

use serde::Serialize;

use crate::model::{BfcDump, XlaReportKind};

use super::program_peak::BufferAtPeak;
use crate::report::{Cell, Table};

/// What an XLA report's post-mortem adds to an `oom` entry.
#[derive(Debug, Serialize)]
pub struct XlaReportFacts {
    /// Always `xla_report`: the entry comes from a log, not a profile.
    pub source: &'static str,
    /// Which of XLA's messages it was read from.
    pub report_kind: XlaReportKind,
    /// The line of the input it starts on.
    pub line: u64,
    /// Later lines that repeat it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeated_at_lines: Vec<u64>,
    /// The memory space (`hbm`, `vmem`) or allocator (`GPU_0_bfc`) as the
    /// report names it (`memory_space`, a number, is a profile's).
    pub space: Option<String>,
    /// What the program needed, as reported (`Used …`).
    pub used_bytes: Option<u64>,
    /// `Total … usage`: reserved, program, arguments, output.
    pub usage: Vec<UsageRow>,
    /// `Program … requirement`: global, scoped, HLO temp.
    pub program_requirement: Vec<UsageRow>,
    /// The allocations the report lists, with their layouts.
    pub allocations: Vec<AllocationRow>,
    /// What would make it fit, in sentences with the figures.
    pub would_fit: Vec<String>,
    /// The GPU allocator's state, when the log holds its dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bfc: Option<BfcDump>,
    /// Whether an XLA dump was given to find the listed `#allocationN` in.
    #[serde(skip)]
    pub dump_searched: bool,
}

/// One line of a usage breakdown.
#[derive(Debug, Serialize)]
pub struct UsageRow {
    /// What it counts.
    pub name: String,
    /// Its bytes (as printed, rounded); `None` for `unknown size`.
    pub bytes: Option<u64>,
    /// What the report says after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One allocation the report lists.
#[derive(Debug, Serialize)]
pub struct AllocationRow {
    /// Rank in the report (1 = largest).
    pub rank: Option<u32>,
    /// XLA's allocation name (`#allocation7`).
    pub allocation: Option<String>,
    /// Its size with padding: memtool's from the layout where that agrees
    /// with the report's figure, else the report's.
    pub bytes: u64,
    /// Its size without padding, likewise.
    pub unpadded_bytes: u64,
    /// `bytes - unpadded_bytes`.
    pub padding_bytes: u64,
    /// The shape with its layout.
    pub shape: Option<String>,
    /// The layout in words, with memtool's sizes.
    pub layout: Option<String>,
    /// Whether memtool's padded size (and unpadded, where stated) of the
    /// shape prints as the report's; `None` when the shape did not parse or
    /// the report states no size.
    pub agrees_with_report: Option<bool>,
    /// The framework op (`op_name`, else `op_type`).
    pub op: Option<String>,
    /// The source line.
    pub source: Option<String>,
    /// The HLO instruction and its opcode.
    pub instruction: Option<String>,
    /// What the instruction does.
    pub opcode: Option<String>,
    /// `HLO temp`, `Parameter`, …, or the one-line report's tag.
    pub allocation_type: Option<String>,
    /// The allocation in the XLA dump given with the report (`oom LOG
    /// --dump DIR`) that its `#allocationN` names; absent without a dump
    /// or a match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_dump: Option<DumpMatch>,
}

/// A reported `#allocationN` found in an XLA dump: the program allocation
/// of that index and size, with its largest buffer.
#[derive(Debug, Serialize)]
pub struct DumpMatch {
    /// The program (`jit_f(4)`) and its memory space.
    pub module: String,
    /// XLA's index of the allocation.
    pub allocation_index: i64,
    /// The allocation's size in the dump.
    pub bytes: u64,
    /// Its largest buffer: instruction, op, shape, source line.
    pub buffer: BufferAtPeak,
    /// Other programs of the dump with an allocation of that index and
    /// size (the report names no program); the first is shown.
    pub other_programs: usize,
}

impl XlaReportFacts {
    /// The report's own tables, after the post-mortem's figures.
    pub fn tables(&self, id: &str) -> Vec<Table> {
        let mut tables = Vec::new();
        for (title, rows) in [
            ("Usage as reported", &self.usage),
            ("Program requirement as reported", &self.program_requirement),
        ] {
            if rows.is_empty() {
                continue;
            }
            let mut t = Table::new(format!("{title} — {id}"), vec!["part", "bytes", "detail"]);
            for r in rows {
                t.rows.push(vec![
                    r.name.clone().into(),
                    r.bytes.map_or_else(|| "unknown".into(), Cell::Bytes),
                    r.detail.clone().unwrap_or_default().into(),
                ]);
            }
            tables.push(t);
        }
        let explained: Vec<&AllocationRow> = self
            .allocations
            .iter()
            .filter(|a| a.layout.is_some())
            .collect();
        if !explained.is_empty() {
            let mut t = Table::ranked(
                format!("Layouts of the listed allocations — {id}"),
                vec!["shape", "bytes", "unpadded", "padding", "as reported"],
            );
            for a in &explained {
                t.rows.push(vec![
                    a.shape.clone().unwrap_or_default().into(),
                    Cell::Bytes(a.bytes),
                    Cell::Bytes(a.unpadded_bytes),
                    Cell::Bytes(a.padding_bytes),
                    match a.agrees_with_report {
                        Some(true) => "agrees",
                        Some(false) => "differs",
                        None => "-",
                    }
                    .into(),
                ]);
                if let (Some(shape), Some(layout)) = (&a.shape, &a.layout) {
                    t.notes.push(format!("{shape}: {layout}"));
                }
            }
            tables.push(t);
        }
        if self.dump_searched {
            tables.push(self.dump_table(id));
        }
        if let Some(b) = &self.bfc {
            let mut t = Table::new(
                format!(
                    "The allocator at the failure — {id}: {}",
                    b.allocator.as_deref().unwrap_or("BFC allocator")
                ),
                vec!["figure", "bytes"],
            );
            for (name, v) in [
                ("limit", b.limit_bytes),
                ("in use", b.in_use_bytes),
                ("max in use", b.max_in_use_bytes),
                ("in its regions", b.pool_bytes),
                ("still available to it", b.available_bytes),
                ("largest allocation made", b.max_alloc_size_bytes),
                ("free in chunks", Some(b.free_chunk_bytes)),
                ("largest free chunk", Some(b.largest_free_chunk_bytes)),
            ] {
                if let Some(v) = v {
                    t.rows.push(vec![name.into(), Cell::Bytes(v)]);
                }
            }
            tables.push(t);
            if !b.in_use_by_size.is_empty() {
                let mut t = Table::ranked(
                    format!("Chunks in use by size — {id}"),
                    vec!["chunk size", "chunks", "bytes"],
                );
                let mut rows: Vec<(u64, u64)> = b
                    .in_use_by_size
                    .iter()
                    .map(|c| (c.chunk_bytes, c.chunks))
                    .collect();
                rows.sort_by_key(|&(s, n)| std::cmp::Reverse(s.saturating_mul(n)));
                for (s, n) in rows.into_iter().take(10) {
                    t.rows.push(vec![
                        Cell::Bytes(s),
                        Cell::Count(n),
                        Cell::Bytes(s.saturating_mul(n)),
                    ]);
                }
                tables.push(t);
            }
        }
        // Sentences read whole as notes under the report's last table.
        let fit = self.would_fit.iter().map(|w| format!("would fit: {w}"));
        match tables.last_mut() {
            Some(last) => last.notes.extend(fit),
            None if !self.would_fit.is_empty() => {
                let mut t = Table::new(format!("What would fit — {id}"), vec!["change"]);
                for w in &self.would_fit {
                    t.rows.push(vec![w.clone().into()]);
                }
                tables.push(t);
            }
            None => {}
        }
        tables
    }

    /// Each listed `#allocationN` with its buffer in the dump, or why none.
    fn dump_table(&self, id: &str) -> Table {
        let mut t = Table::new(
            format!("Listed allocations in the XLA dump — {id}"),
            vec![
                "allocation",
                "program",
                "bytes",
                "instruction",
                "op",
                "shape",
                "source",
            ],
        );
        for a in self.allocations.iter().filter(|a| a.allocation.is_some()) {
            let name = a.allocation.clone().unwrap_or_default();
            match &a.in_dump {
                Some(m) => {
                    let b = &m.buffer;
                    let text = |s: &Option<String>| s.clone().unwrap_or_default().into();
                    t.rows.push(vec![
                        name.into(),
                        m.module.clone().into(),
                        Cell::Bytes(m.bytes),
                        b.instruction.clone().into(),
                        text(&b.op_name),
                        text(&b.shape),
                        text(&b.source),
                    ]);
                    if m.other_programs > 0 {
                        t.notes.push(format!(
                            "{}: {} other program{} of the dump {} an allocation of that index \
                             and size; the report names no program",
                            a.allocation.as_deref().unwrap_or(""),
                            m.other_programs,
                            if m.other_programs == 1 { "" } else { "s" },
                            if m.other_programs == 1 { "has" } else { "have" },
                        ));
                    }
                }
                None => {
                    t.notes.push(format!(
                        "{name}: no program of the dump has an allocation of that index and \
                         size (a dump of another run or compile?)"
                    ));
                    let mut row = vec![name.into(), "not in the dump".into()];
                    row.resize(7, Cell::Empty);
                    t.rows.push(row);
                }
            }
        }
        t
    }
}
