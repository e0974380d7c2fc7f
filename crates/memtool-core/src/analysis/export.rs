//! `export`: the model as two tables for query engines (DuckDB, pandas,
//! Polars, Spark, BigQuery) — one row per allocation and one row per memory.
//!
//! The rows are built here, column by column, in batches of a fixed number
//! of rows, and handed to a sink as each batch fills, so a profile of 10^7
//! events never becomes a table in memory. Writing them (Parquet) is the
//! binary's work: the core does no I/O. Allocations come from
//! [`replay::for_each_lifespan`], the peak from [`PeakFacts`], the user's
//! frame from [`FrameFilter`], labels from [`group::label`]: the figures are
//! those every other command reports.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{AllocId, Memory, Profile, SiteId, StrId};

use super::group::{self, GroupBy};
use super::{replay, FrameFilter, Options, PeakFacts};

/// The schema name and version the binary records in each file's metadata.
pub const SCHEMA: &str = "memtool/export/v1";

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// A signed 64-bit integer (sizes past `i64::MAX` are capped there).
    Int64,
    /// UTF-8 text.
    Text,
    /// True or false.
    Bool,
}

/// A column of a table: its name, what it holds, and whether it can be null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    /// The column's name.
    pub name: &'static str,
    /// What it holds.
    pub kind: ColumnKind,
    /// Whether a row may have no value.
    pub nullable: bool,
}

const fn column(name: &'static str, kind: ColumnKind, nullable: bool) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable,
    }
}

use ColumnKind::{Bool, Int64, Text};

/// The allocations table, one row per interval an allocation was live (an
/// allocation freed and made again is two rows), or per allocation of each
/// snapshot. `docs/export.md` says what each column means.
pub const ALLOCATION_COLUMNS: &[ColumnSpec] = &[
    column("input", Text, false),
    column("host", Text, true),
    column("memory", Text, false),
    column("axis", Text, false),
    column("bytes", Int64, false),
    column("requested", Int64, false),
    column("buffers", Int64, false),
    column("address", Int64, true),
    column("alloc_at", Int64, true),
    column("free_at", Int64, true),
    column("alloc_event", Int64, true),
    column("free_event", Int64, true),
    column("snapshot", Text, true),
    column("live_at_peak", Bool, false),
    column("op", Text, true),
    column("shape", Text, true),
    column("dtype", Text, true),
    column("category", Text, true),
    column("step", Int64, true),
    column("phase", Text, true),
    column("stack", Text, true),
    column("user_frame", Text, true),
];

/// The memories table, one row per memory of each input: the figures
/// `summary` reports for it.
pub const MEMORY_COLUMNS: &[ColumnSpec] = &[
    column("input", Text, false),
    column("host", Text, true),
    column("memory", Text, false),
    column("kind", Text, false),
    column("axis", Text, false),
    column("module", Text, true),
    column("memory_space", Int64, true),
    column("capacity_bytes", Int64, true),
    column("peak_bytes", Int64, false),
    column("peak_live_bytes", Int64, false),
    column("peak_requested_bytes", Int64, false),
    column("peak_buffers", Int64, false),
    column("peak_at", Int64, false),
    column("peak_label", Text, false),
    column("peak_step", Int64, true),
    column("final_bytes", Int64, false),
    column("final_buffers", Int64, false),
    column("allocation_events", Int64, false),
    column("free_events", Int64, false),
    column("rows", Int64, false),
];

/// One column's values in a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Integers.
    Int64(Vec<i64>),
    /// Ids of texts in the table's [`Labels`].
    Text(Vec<u32>),
    /// Booleans.
    Bool(Vec<bool>),
}

/// One column of a batch: the values of the rows that have one, and for
/// each row whether it has one (1) or is null (0), as Parquet's definition
/// levels say it.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Which column.
    pub spec: ColumnSpec,
    /// The values present, in row order.
    pub values: Values,
    /// One per row: 1 when the row has a value, 0 when it is null.
    pub defined: Vec<i16>,
}

impl Column {
    fn new(spec: ColumnSpec, capacity: usize) -> Column {
        let values = match spec.kind {
            Int64 => Values::Int64(Vec::with_capacity(capacity)),
            Text => Values::Text(Vec::with_capacity(capacity)),
            Bool => Values::Bool(Vec::with_capacity(capacity)),
        };
        Column {
            spec,
            values,
            defined: Vec::with_capacity(capacity),
        }
    }

    fn clear(&mut self) {
        match &mut self.values {
            Values::Int64(v) => v.clear(),
            Values::Text(v) => v.clear(),
            Values::Bool(v) => v.clear(),
        }
        self.defined.clear();
    }
}

/// The texts of a batch, each stored once and named by an id; a text
/// column holds ids. They are emptied with the batch's rows, so that a
/// column of many distinct texts (a million pprof stacks) is held one batch
/// at a time, never whole.
#[derive(Debug, Default)]
pub struct Labels {
    texts: Vec<Arc<str>>,
    ids: FxHashMap<Arc<str>, u32>,
}

impl Labels {
    /// The id of `text`, stored on first use.
    pub fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        let text: Arc<str> = text.into();
        self.texts.push(text.clone());
        self.ids.insert(text, id);
        id
    }

    /// The text with this id.
    pub fn get(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }

    /// How many texts there are (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Rows of one table being filled, column by column.
#[derive(Debug)]
pub struct Batch {
    /// The columns, in the table's order.
    pub columns: Vec<Column>,
    /// The texts its text columns name.
    pub labels: Labels,
    rows: usize,
    capacity: usize,
}

/// A value for one cell, as rows are pushed.
enum Cell<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
    Label(Option<u32>),
    Bool(bool),
}

/// A size or position as a Parquet integer: capped at `i64::MAX`.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Batch {
    fn new(specs: &[ColumnSpec], capacity: usize) -> Batch {
        // Room for the first rows only: a batch grows to its capacity as
        // rows come, so a large one asked for is not allocated up front.
        let reserve = capacity.min(1 << 16);
        Batch {
            columns: specs.iter().map(|&s| Column::new(s, reserve)).collect(),
            labels: Labels::default(),
            rows: 0,
            capacity,
        }
    }

    /// How many rows it holds.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn is_full(&self) -> bool {
        self.rows >= self.capacity
    }

    fn clear(&mut self) {
        for c in &mut self.columns {
            c.clear();
        }
        self.labels = Labels::default();
        self.rows = 0;
    }

    fn push(&mut self, cells: &[Cell<'_>]) {
        debug_assert_eq!(cells.len(), self.columns.len());
        for (column, cell) in self.columns.iter_mut().zip(cells) {
            let present = match (cell, &mut column.values) {
                (Cell::Int(v), Values::Int64(values)) => v.inspect(|&v| values.push(v)).is_some(),
                (Cell::Text(t), Values::Text(values)) => match t {
                    Some(t) => {
                        values.push(self.labels.intern(t));
                        true
                    }
                    None => false,
                },
                (Cell::Label(id), Values::Text(values)) => {
                    id.inspect(|&id| values.push(id)).is_some()
                }
                (Cell::Bool(b), Values::Bool(values)) => {
                    values.push(*b);
                    true
                }
                _ => unreachable!("a cell of the column's kind"),
            };
            column.defined.push(i16::from(present));
        }
        self.rows += 1;
    }
}

/// The allocations table of any number of profiles, filled one profile at
/// a time and handed to a sink a batch at a time.
pub struct AllocationTable {
    batch: Batch,
    rows_total: u64,
}

/// The labels of a site's fields, as ids in the batch's [`Labels`].
#[derive(Clone, Copy)]
struct SiteLabels {
    op: Option<u32>,
    shape: Option<u32>,
    dtype: Option<u32>,
    category: Option<u32>,
    stack: Option<u32>,
    user_frame: Option<u32>,
}

impl AllocationTable {
    /// A table handed over `rows_per_batch` rows at a time (at least one).
    pub fn new(rows_per_batch: usize) -> AllocationTable {
        AllocationTable {
            batch: Batch::new(ALLOCATION_COLUMNS, rows_per_batch.max(1)),
            rows_total: 0,
        }
    }

    /// Rows added so far.
    pub fn rows(&self) -> u64 {
        self.rows_total
    }

    /// Adds the rows of the memories `options` selects in `profile`, read
    /// from `input`; each batch that fills goes to `sink` and is then
    /// emptied. Returns the rows of each memory added, in the order of
    /// [`Options::selected`].
    pub fn add<E>(
        &mut self,
        profile: &Profile,
        input: &str,
        options: &Options,
        sink: &mut dyn FnMut(&Batch) -> Result<(), E>,
    ) -> Result<Vec<u64>, E> {
        let mut counts = Vec::new();
        for memory in options.selected(profile) {
            let before = self.rows_total;
            let peak = PeakFacts::of(memory, options.ties).map(|f| f.point().index);
            let mut rows = MemoryRows {
                profile,
                memory,
                frames: &options.frames,
                input,
                interned: Interned::default(),
                table: self,
                sink,
            };
            rows.add_all(peak)?;
            counts.push(self.rows_total - before);
        }
        Ok(counts)
    }

    /// Hands the last rows, if any, to `sink`.
    pub fn finish<E>(&mut self, sink: &mut dyn FnMut(&Batch) -> Result<(), E>) -> Result<(), E> {
        if self.batch.rows() > 0 {
            sink(&self.batch)?;
            self.batch.clear();
        }
        Ok(())
    }
}

/// The rows of one memory on their way into the table.
struct MemoryRows<'a, 's, E> {
    profile: &'a Profile,
    memory: &'a Memory,
    frames: &'a FrameFilter,
    input: &'a str,
    /// Ids of the texts in the current batch's labels.
    interned: Interned,
    table: &'a mut AllocationTable,
    sink: &'s mut dyn FnMut(&Batch) -> Result<(), E>,
}

/// The label ids a memory's rows repeat, made once per batch (a new batch
/// has new labels).
#[derive(Default)]
struct Interned {
    /// input, host, memory id, axis.
    memory: Option<(u32, Option<u32>, u32, u32)>,
    /// The snapshot being exported (index) and its label.
    snapshot: Option<(usize, u32)>,
    sites: FxHashMap<SiteId, SiteLabels>,
}

impl<E> MemoryRows<'_, '_, E> {
    /// Every row of the memory; `peak` is the point of its peak.
    fn add_all(&mut self, peak: Option<usize>) -> Result<(), E> {
        let memory = self.memory;
        if replay::uses_instants(memory) {
            for (index, instant) in memory.instants.iter().enumerate() {
                for &alloc in &instant.live {
                    let live_at_peak = peak == Some(index);
                    self.row(alloc, None, None, Some(index), live_at_peak)?;
                }
            }
            return Ok(());
        }
        let mut result = Ok(());
        replay::for_each_lifespan(memory, |span| {
            if result.is_ok() {
                let live_at_peak = peak.is_some_and(|p| span.live_at(p));
                result = self.row(span.alloc, span.made, span.freed, None, live_at_peak);
            }
        });
        result
    }

    fn row(
        &mut self,
        alloc: AllocId,
        made: Option<usize>,
        freed: Option<usize>,
        snapshot: Option<usize>,
        live_at_peak: bool,
    ) -> Result<(), E> {
        let memory = self.memory;
        let a = memory.allocation(alloc);
        let site = self.site(a.site);
        let labels = &mut self.table.batch.labels;
        let (input, host, id, axis) = *self.interned.memory.get_or_insert_with(|| {
            (
                labels.intern(self.input),
                memory.host.as_deref().map(|h| labels.intern(h)),
                labels.intern(&memory.id),
                labels.intern(memory.axis.name()),
            )
        });
        let snapshot = snapshot.map(|index| match self.interned.snapshot {
            Some((i, label)) if i == index => label,
            _ => {
                let label = labels.intern(&memory.instants[index].label);
                self.interned.snapshot = Some((index, label));
                label
            }
        });
        let at = |event: Option<usize>| event.and_then(|i| memory.events.get(i)).map(|e| e.at);
        let alloc_at = at(made);
        let step = alloc_at.and_then(|at| memory.step_at(at)).map(|s| s.id);
        let phase = self
            .profile
            .names
            .site_of(a.site)
            .phase
            .map(|p| self.table.batch.labels.intern(p.name()));
        let event = |e: Option<usize>| e.map(|i| int(i as u64));
        self.table.batch.push(&[
            Cell::Label(Some(input)),
            Cell::Label(host),
            Cell::Label(Some(id)),
            Cell::Label(Some(axis)),
            Cell::Int(Some(int(a.bytes))),
            Cell::Int(Some(int(a.requested))),
            Cell::Int(Some(int(u64::from(a.count)))),
            // An address past `i64::MAX` is not capped: a wrong address is
            // worse than none.
            Cell::Int(a.address().and_then(|v| i64::try_from(v).ok())),
            Cell::Int(alloc_at),
            Cell::Int(at(freed)),
            Cell::Int(event(made)),
            Cell::Int(event(freed)),
            Cell::Label(snapshot),
            Cell::Bool(live_at_peak),
            Cell::Label(site.op),
            Cell::Label(site.shape),
            Cell::Label(site.dtype),
            Cell::Label(site.category),
            Cell::Int(step),
            Cell::Label(phase),
            Cell::Label(site.stack),
            Cell::Label(site.user_frame),
        ]);
        self.table.rows_total += 1;
        if self.table.batch.is_full() {
            (self.sink)(&self.table.batch)?;
            self.table.batch.clear();
            self.interned = Interned::default();
        }
        Ok(())
    }

    /// The labels of `site`, made once per site and batch.
    fn site(&mut self, id: SiteId) -> SiteLabels {
        if let Some(&labels) = self.interned.sites.get(&id) {
            return labels;
        }
        let names = &self.profile.names;
        let site = *names.site_of(id);
        let labels = &mut self.table.batch.labels;
        let mut text = |s: Option<StrId>| s.map(|s| labels.intern(names.str(s)));
        let (op, shape, dtype, category) = (
            text(site.op),
            text(site.shape),
            text(site.dtype),
            text(site.category),
        );
        let has_stack = names.frames_of(site.stack).next().is_some();
        let stack = has_stack
            .then(|| group::label(names, id, GroupBy::Stack, &FrameFilter::All))
            .map(|s| labels.intern(&s));
        let user_frame = has_stack
            .then(|| group::label(names, id, GroupBy::UserFrame, self.frames))
            .map(|s| labels.intern(&s));
        let out = SiteLabels {
            op,
            shape,
            dtype,
            category,
            stack,
            user_frame,
        };
        self.interned.sites.insert(id, out);
        out
    }
}

/// The memories table of any number of profiles: small (a row per
/// memory), so it is kept whole and written at the end.
pub struct MemoryTable {
    batch: Batch,
}

impl Default for MemoryTable {
    fn default() -> Self {
        MemoryTable {
            batch: Batch::new(MEMORY_COLUMNS, 0),
        }
    }
}

impl MemoryTable {
    /// The rows so far.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// Adds a row for each memory `options` selects in `profile`, read from
    /// `input`: the figures `summary` reports for it, with `rows`, the
    /// allocation rows [`AllocationTable::add`] gave each.
    pub fn add(&mut self, profile: &Profile, input: &str, options: &Options, rows: &[u64]) {
        let batch = &mut self.batch;
        for (i, memory) in options.selected(profile).enumerate() {
            let facts = PeakFacts::of(memory, options.ties);
            let last = replay::last(memory);
            let (allocs, frees) = replay::event_counts(memory).unwrap_or((0, 0));
            let header = facts
                .as_ref()
                .map_or_else(|| super::MemoryHeader::of(memory), |f| f.header.clone());
            let figures = facts.as_ref().map(PeakFacts::figures);
            let peak = facts.as_ref().map(|f| f.point());
            batch.push(&[
                Cell::Text(Some(input)),
                Cell::Text(memory.host.as_deref()),
                Cell::Text(Some(&memory.id)),
                Cell::Text(Some(memory.kind.name())),
                Cell::Text(Some(memory.axis.name())),
                Cell::Text(header.module.as_deref()),
                Cell::Int(header.memory_space),
                Cell::Int(header.capacity_bytes.map(int)),
                Cell::Int(Some(figures.as_ref().map_or(0, |f| int(f.peak_bytes)))),
                Cell::Int(Some(peak.map_or(0, |p| int(p.bytes)))),
                Cell::Int(Some(peak.map_or(0, |p| int(p.requested)))),
                Cell::Int(Some(peak.map_or(0, |p| int(p.buffers)))),
                Cell::Int(Some(peak.map_or(0, |p| p.at))),
                Cell::Text(Some(figures.as_ref().map_or("", |f| f.peak_label.as_str()))),
                Cell::Int(facts.as_ref().and_then(|f| f.step)),
                Cell::Int(Some(last.map_or(0, |p| int(p.bytes)))),
                Cell::Int(Some(last.map_or(0, |p| int(p.buffers)))),
                Cell::Int(Some(int(allocs as u64))),
                Cell::Int(Some(int(frees as u64))),
                Cell::Int(Some(int(rows.get(i).copied().unwrap_or(0)))),
            ]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Allocation, Axis, Event, EventKind, Frame, Instant, MemoryKind, Site, Step,
    };

    /// A memory with one allocation live at the start and freed, one made
    /// and freed, one made and still live: the peak is after event 1.
    fn profile() -> Profile {
        let mut profile = Profile::default();
        let frame = Frame {
            function: profile.names.string("train_step"),
            file: profile.names.string("/home/me/train.py"),
            line: 3,
        };
        let frame = profile.names.frame(frame);
        let stack = profile.names.stack_leaf_first(&[frame]);
        let op = profile.names.string("matmul");
        let site = profile.names.site(Site {
            stack,
            op: Some(op),
            ..Site::default()
        });
        let memory = profile.memory_mut("cuda:0", MemoryKind::Allocator, Axis::TimeUs);
        for (bytes, address) in [(100, Some(16)), (50, Some(u64::MAX)), (70, None)] {
            memory.push_allocation(Allocation {
                bytes,
                requested: bytes - 1,
                count: 1,
                address: address.and_then(crate::model::Address::new),
                site,
            });
        }
        memory.live_at_start = vec![AllocId(0)];
        let ev = |at, kind, a| Event::new(at, kind, AllocId(a));
        memory.events = vec![
            ev(10, EventKind::Alloc, 1),
            ev(20, EventKind::Alloc, 2),
            ev(30, EventKind::Free, 0),
            ev(40, EventKind::Free, 1),
        ];
        memory.steps = vec![Step {
            id: 7,
            start: 15,
            end: 50,
        }];
        profile
    }

    fn ints(batch: &Batch, name: &str) -> Vec<Option<i64>> {
        let column = batch.columns.iter().find(|c| c.spec.name == name).unwrap();
        let Values::Int64(values) = &column.values else {
            panic!("{name} holds integers");
        };
        let mut values = values.iter();
        column
            .defined
            .iter()
            .map(|&d| (d == 1).then(|| *values.next().unwrap()))
            .collect()
    }

    fn texts(batch: &Batch, name: &str) -> Vec<Option<String>> {
        let column = batch.columns.iter().find(|c| c.spec.name == name).unwrap();
        let Values::Text(values) = &column.values else {
            panic!("{name} holds text");
        };
        let mut values = values.iter();
        column
            .defined
            .iter()
            .map(|&d| (d == 1).then(|| batch.labels.get(*values.next().unwrap()).to_string()))
            .collect()
    }

    fn bools(batch: &Batch, name: &str) -> Vec<bool> {
        let column = batch.columns.iter().find(|c| c.spec.name == name).unwrap();
        let Values::Bool(values) = &column.values else {
            panic!("{name} holds booleans");
        };
        values.clone()
    }

    /// Collects every batch the table hands over, as owned copies.
    fn export(profile: &Profile, rows_per_batch: usize) -> (Vec<Batch>, Vec<u64>) {
        let mut table = AllocationTable::new(rows_per_batch);
        let mut batches = Vec::new();
        let mut sink = |b: &Batch| -> Result<(), ()> {
            let mut copy = Batch::new(ALLOCATION_COLUMNS, 1);
            copy.columns = b.columns.clone();
            copy.rows = b.rows;
            for id in 0..b.labels.len() {
                copy.labels.intern(b.labels.get(id as u32));
            }
            batches.push(copy);
            Ok(())
        };
        let counts = table
            .add(profile, "run.pickle", &Options::default(), &mut sink)
            .unwrap();
        table.finish(&mut sink).unwrap();
        (batches, counts)
    }

    #[test]
    fn one_row_per_lifespan_with_its_events_and_the_peak() {
        let profile = profile();
        let (batches, counts) = export(&profile, 100);
        assert_eq!(counts, [3]);
        let [batch] = &batches[..] else {
            panic!("one batch");
        };
        // Rows come in the order of the frees, then what is still live.
        assert_eq!(ints(batch, "bytes"), [Some(100), Some(50), Some(70)]);
        assert_eq!(ints(batch, "requested"), [Some(99), Some(49), Some(69)]);
        assert_eq!(ints(batch, "alloc_at"), [None, Some(10), Some(20)]);
        assert_eq!(ints(batch, "free_at"), [Some(30), Some(40), None]);
        assert_eq!(ints(batch, "alloc_event"), [None, Some(0), Some(1)]);
        assert_eq!(ints(batch, "free_event"), [Some(2), Some(3), None]);
        // The peak: 220 bytes after event 1, every allocation live.
        assert_eq!(bools(batch, "live_at_peak"), [true, true, true]);
        // An address past i64::MAX is left out rather than wrapped.
        assert_eq!(ints(batch, "address"), [Some(16), None, None]);
        assert_eq!(ints(batch, "step"), [None, Some(7), Some(7)]);
        let all = |v: &str| vec![Some(v.to_string()); 3];
        assert_eq!(texts(batch, "input"), all("run.pickle"));
        assert_eq!(texts(batch, "memory"), all("cuda:0"));
        assert_eq!(texts(batch, "axis"), all("time_us"));
        assert_eq!(texts(batch, "op"), all("matmul"));
        assert_eq!(
            texts(batch, "user_frame"),
            all("train_step /home/me/train.py:3")
        );
        assert_eq!(texts(batch, "stack"), all("train_step /home/me/train.py:3"));
        assert_eq!(texts(batch, "shape"), vec![None; 3]);
        assert_eq!(texts(batch, "host"), vec![None; 3]);

        let mut table = MemoryTable::default();
        table.add(&profile, "run.pickle", &Options::default(), &counts);
        let memories = table.batch();
        assert_eq!(memories.rows(), 1);
        assert_eq!(ints(memories, "peak_bytes"), [Some(220)]);
        assert_eq!(ints(memories, "peak_live_bytes"), [Some(220)]);
        assert_eq!(ints(memories, "final_bytes"), [Some(70)]);
        assert_eq!(ints(memories, "allocation_events"), [Some(2)]);
        assert_eq!(ints(memories, "free_events"), [Some(2)]);
        assert_eq!(ints(memories, "rows"), [Some(3)]);
        assert_eq!(ints(memories, "peak_step"), [Some(7)]);
        assert_eq!(texts(memories, "kind"), [Some("allocator".to_string())]);
    }

    /// The `axis` column says what JSON says.
    #[test]
    fn axis_names_are_those_of_json() {
        for axis in [
            Axis::TimePs,
            Axis::TimeUs,
            Axis::EventIndex,
            Axis::Snapshot,
            Axis::ProgramOrder,
        ] {
            assert_eq!(serde_json::to_value(axis).unwrap(), axis.name());
        }
    }

    #[test]
    fn batches_hand_over_every_row_once() {
        let profile = profile();
        let (batches, _) = export(&profile, 2);
        let sizes: Vec<usize> = batches.iter().map(Batch::rows).collect();
        assert_eq!(sizes, [2, 1]);
        let bytes: Vec<Option<i64>> = batches.iter().flat_map(|b| ints(b, "bytes")).collect();
        assert_eq!(bytes, [Some(100), Some(50), Some(70)]);
        for batch in &batches {
            for column in &batch.columns {
                assert_eq!(column.defined.len(), batch.rows(), "{}", column.spec.name);
            }
            // Each batch names its texts afresh: only its own are kept.
            let frame = Some("train_step /home/me/train.py:3".to_string());
            assert_eq!(texts(batch, "user_frame"), vec![frame; batch.rows()]);
            assert_eq!(
                texts(batch, "memory"),
                vec![Some("cuda:0".into()); batch.rows()]
            );
            assert!(batch.labels.len() <= 5, "{:?}", batch.labels);
        }
    }

    #[test]
    fn snapshots_give_a_row_per_allocation_of_each() {
        let mut profile = profile();
        let memory = &mut profile.memories[0];
        memory.events.clear();
        memory.instants = vec![
            Instant {
                label: "memory1.prof".into(),
                at: 1,
                live: vec![AllocId(0)],
            },
            Instant {
                label: "memory2.prof".into(),
                at: 2,
                live: vec![AllocId(0), AllocId(2)],
            },
        ];
        let (batches, counts) = export(&profile, 100);
        assert_eq!(counts, [3]);
        let batch = &batches[0];
        let snapshot = |s: &str| Some(s.to_string());
        assert_eq!(
            texts(batch, "snapshot"),
            [
                snapshot("memory1.prof"),
                snapshot("memory2.prof"),
                snapshot("memory2.prof")
            ]
        );
        assert_eq!(bools(batch, "live_at_peak"), [false, true, true]);
        assert_eq!(ints(batch, "alloc_at"), [None, None, None]);
    }
}
