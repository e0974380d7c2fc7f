//! `summary`'s tables: what [`SummaryReport`] shows as text, Markdown and
//! CSV (its JSON is the serialized report).

use super::*;
use crate::analysis::{
    beyond_label, beyond_note, beyond_total, oom, order_by_peak, streams, trivial_label,
    trivial_note, warning_notes, PeakOrder,
};

impl SummaryReport {
    /// The memories biggest peak first (ties by id), as the tables of
    /// every memory list them, like the Memories table.
    /// Per memory, whether the memories table folds it into its `+N more`
    /// row (past the [`crate::analysis::LISTED_MEMORIES`] largest).
    fn folded(&self) -> Vec<bool> {
        let mut folded = vec![false; self.memories.len()];
        for &i in self.order().listed().1 {
            folded[i] = true;
        }
        folded
    }

    /// The memories biggest peak first, past the
    /// [`crate::analysis::LISTED_MEMORIES`] largest (trivial ones aside)
    /// left out: the per-memory tables list what the memories table lists.
    fn biggest_first(&self) -> Vec<&MemorySummary> {
        let mut all: Vec<&MemorySummary> = self
            .memories
            .iter()
            .zip(self.folded())
            .filter(|(_, f)| !f)
            .map(|(m, _)| m)
            .collect();
        all.sort_by(|a, b| {
            b.peak
                .peak_bytes
                .cmp(&a.peak.peak_bytes)
                .then_with(|| a.header.id.cmp(&b.header.id))
        });
        all
    }

    /// The memories biggest peak first, those trivial beside the largest
    /// apart ([`order_by_peak`]).
    fn order(&self) -> PeakOrder {
        let peaks: Vec<(&str, u64)> = self
            .memories
            .iter()
            .map(|m| (m.header.id.as_str(), m.peak.peak_bytes))
            .collect();
        order_by_peak(&peaks)
    }

    /// One row per memory, biggest peak first; with `fold`, the memories
    /// trivial beside the largest are one row (CSV keeps every row).
    fn memories_table(&self, fold: bool) -> Table {
        // A memory timeline's rows are categories; CSV keeps its columns'
        // names whatever the file.
        let headers = self.memories.iter().map(|m| &m.header);
        let (counted, final_counted) = if fold {
            (
                MemoryHeader::count_column(headers.clone(), ["buffers", "categories"]),
                MemoryHeader::count_column(headers, ["final_buffers", "final_categories"]),
            )
        } else {
            ("buffers", "final_buffers")
        };
        let mut t = Table::new(
            "Memories",
            vec![
                "memory",
                "kind",
                "peak_bytes",
                counted,
                "peak_at",
                "final_bytes",
                final_counted,
            ],
        );
        let order = self.order();
        let (listed, beyond) = if fold {
            order.listed()
        } else {
            (order.main.as_slice(), &[][..])
        };
        let fold_trivial = fold && order.trivial.len() > 1;
        let row = |m: &MemorySummary| -> Vec<Cell> {
            vec![
                display_id(&m.header.id).into(),
                m.header.kind.name().into(),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Count(m.peak.buffers),
                m.peak.moment(),
                Cell::Bytes(m.final_bytes),
                Cell::Count(m.final_buffers),
            ]
        };
        for &i in listed {
            t.rows.push(row(&self.memories[i]));
        }
        // The totals of memories folded into one row under `label`.
        let folded_row = |label: String, folded: &[usize]| -> Vec<Cell> {
            let sum = |f: fn(&MemorySummary) -> u64| beyond_total(&self.memories, folded, f);
            vec![
                label.into(),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.peak.peak_bytes)),
                Cell::Count(sum(|m| m.peak.buffers)),
                Cell::Empty,
                Cell::Bytes(sum(|m| m.final_bytes)),
                Cell::Count(sum(|m| m.final_buffers)),
            ]
        };
        if !beyond.is_empty() {
            t.rows.push(folded_row(beyond_label(beyond.len()), beyond));
            t.notes.push(beyond_note(beyond.len()));
        }
        if fold_trivial {
            t.rows.push(folded_row(
                trivial_label(order.trivial.len()),
                &order.trivial,
            ));
        } else {
            for &i in &order.trivial {
                t.rows.push(row(&self.memories[i]));
            }
        }
        t
    }
}

impl SummaryReport {
    /// Compiled programs, one row per module and memory space, biggest peak
    /// first.
    fn programs_table(&self) -> Option<Table> {
        let mut programs: Vec<(&MemorySummary, &ProgramSizes)> = self
            .memories
            .iter()
            .filter_map(|m| m.program.as_ref().map(|p| (m, p)))
            .collect();
        if programs.is_empty() {
            return None;
        }
        programs.sort_by(|a, b| {
            b.0.peak
                .peak_bytes
                .cmp(&a.0.peak.peak_bytes)
                .then_with(|| a.0.header.id.cmp(&b.0.header.id))
        });
        let mut t = Table::new(
            "Compiled programs (biggest peak first)",
            vec![
                "module",
                "memory_space",
                "peak_bytes",
                "parameter_bytes",
                "output_bytes",
                "temporary_bytes",
                "total_allocation_bytes",
            ],
        );
        for (m, p) in programs {
            t.rows.push(vec![
                m.header.module.clone().unwrap_or_default().into(),
                Cell::Int(m.header.memory_space.unwrap_or(0)),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Bytes(p.parameter_bytes),
                Cell::Bytes(p.output_bytes),
                Cell::Bytes(p.temporary_bytes),
                Cell::Bytes(p.total_allocation_bytes),
            ]);
        }
        Some(t)
    }
}

impl Report for SummaryReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        self.tables_shown(None)
    }

    /// The steps tables hold the rows `top` shows (at least one, so a table
    /// shown empty stays a table of rows left out), the others counted in
    /// `omitted`: 660,000 XSpace events have 30,000 steps, whose rows were
    /// made, and freed, for the ten a terminal shows.
    fn tables_shown(&self, top: Option<usize>) -> Vec<Table> {
        if self.stages_only {
            return self
                .biggest_first()
                .into_iter()
                .filter(|m| !m.annotation_stages.is_empty())
                .flat_map(|m| stages::tables(&m.header.id, &m.annotation_stages))
                .collect();
        }
        let mut tables: Vec<Table> = self.oom.iter().flat_map(oom::PostMortem::tables).collect();
        tables.push(self.memories_table(true));
        if let Some(t) = self.programs_table() {
            tables.push(t);
        }
        let series = self.memories.iter().any(|m| m.snapshots.len() > 1);
        if series {
            let mut t = Table::new("Snapshots", vec!["snapshot", "memory", "bytes", "buffers"]);
            for (m, _) in self.memories.iter().zip(self.folded()).filter(|(_, f)| !f) {
                for s in &m.snapshots {
                    t.rows.push(vec![
                        s.label.clone().into(),
                        display_id(&m.header.id).into(),
                        Cell::Bytes(s.bytes),
                        Cell::Count(s.buffers),
                    ]);
                }
            }
            tables.push(t);
        }
        if self
            .memories
            .iter()
            .any(|m| m.reserved_bytes.is_some() || !m.events_by_action.is_empty())
        {
            let mut t = Table::new(
                "Allocator (as the profile records it)",
                vec!["memory", "reserved", "allocated", "events by kind"],
            );
            for m in self.biggest_first() {
                let events: Vec<String> = m
                    .events_by_action
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let bytes = |b: Option<u64>| b.map_or(Cell::Empty, Cell::Bytes);
                t.rows.push(vec![
                    display_id(&m.header.id).into(),
                    bytes(m.reserved_bytes),
                    bytes(m.allocated_bytes),
                    Cell::Text(events.join(", ")),
                ]);
            }
            tables.push(t);
        }
        let allocators: Vec<&MemorySummary> = self
            .biggest_first()
            .into_iter()
            // A compiled program's memory space has events (its heap
            // simulator trace) but no allocator: its figures are in the
            // programs table.
            .filter(|m| m.program.is_none())
            .filter(|m| m.lifetime_peak_bytes.is_some() || m.deallocations.is_some())
            .collect();
        if !allocators.is_empty() {
            let mut t = Table::new(
                "Allocators",
                vec![
                    "memory",
                    "peak_bytes",
                    "lifetime_peak",
                    "capacity",
                    "fragmentation_at_peak",
                    "allocations",
                    "frees",
                    "live_at_end",
                ],
            );
            for m in allocators {
                t.rows.push(vec![
                    display_id(&m.header.id).into(),
                    Cell::Bytes(m.peak.peak_bytes),
                    m.lifetime_peak_bytes
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                    m.header
                        .capacity_bytes
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                    Cell::Fraction(m.fragmentation_at_peak),
                    Cell::Count(m.allocations as u64),
                    Cell::Count(m.deallocations.unwrap_or(0) as u64),
                    m.live_bytes_at_end
                        .map_or(Cell::Text("n/a".into()), Cell::Bytes),
                ]);
            }
            tables.push(t);
        }
        for m in self
            .biggest_first()
            .into_iter()
            .filter(|m| !m.steps.is_empty())
        {
            let mut t = Table::ranked(
                if m.steps_from_phases {
                    format!(
                        "Steps — {} (the file marks none: each is a forward → backward cycle of the phases)",
                        display_id(&m.header.id)
                    )
                } else {
                    format!("Steps — {}", display_id(&m.header.id))
                },
                vec![
                    "step",
                    "peak_bytes",
                    "allocations",
                    "frees",
                    "allocated",
                    "freed",
                    "in_use_at_end",
                ],
            );
            let made = top.map_or(m.steps.len(), |top| top.max(1).min(m.steps.len()));
            t.omitted = m.steps.len() - made;
            for s in &m.steps[..made] {
                t.rows.push(vec![
                    Cell::Int(s.step),
                    Cell::Bytes(s.peak_bytes),
                    Cell::Count(s.allocations),
                    Cell::Count(s.deallocations),
                    Cell::Bytes(s.allocated_bytes),
                    Cell::Bytes(s.freed_bytes),
                    Cell::Bytes(s.end_bytes),
                ]);
            }
            tables.push(t);
        }
        for m in self
            .biggest_first()
            .into_iter()
            .filter(|m| !m.annotation_stages.is_empty())
        {
            tables.extend(stages::tables(&m.header.id, &m.annotation_stages));
        }
        for m in self.biggest_first() {
            tables.extend(streams::streams_table(&m.header.id, &m.streams));
        }
        // As every per-memory table: the memories the Memories table lists.
        for m in self.order().listed().0.iter().map(|&i| &self.memories[i]) {
            if let Some(t) = timeline_table(m) {
                tables.push(t);
            }
        }
        let exes: Vec<_> = self
            .provenance
            .inputs
            .iter()
            .filter_map(|i| i.executables.map(|e| (i, e)))
            .collect();
        if !exes.is_empty() {
            let mut t = Table::new(
                "Executables (compiled programs, not counted in buffers)",
                vec!["input", "count", "bytes"],
            );
            for (input, e) in exes {
                t.rows.push(vec![
                    input.path.clone().into(),
                    Cell::Count(e.count),
                    Cell::Int(e.bytes),
                ]);
            }
            tables.push(t);
        }
        // Biggest peak first; a trivial memory's stacks say nothing.
        for m in self.order().listed().0.iter().map(|&i| &self.memories[i]) {
            if m.omitted_stacks == 0 && group::says_nothing(m.top_stacks.iter().map(|g| &*g.key)) {
                continue;
            }
            let mut t = Table::ranked(
                format!(
                    "Top stacks at peak — {} ({})",
                    display_id(&m.header.id),
                    m.peak.peak_label
                ),
                vec!["stack", "bytes", "buffers"],
            );
            for g in m.top_stacks.iter() {
                t.rows.push(vec![
                    (&*g.key).into(),
                    Cell::Bytes(g.totals.bytes),
                    Cell::Count(g.totals.count),
                ]);
            }
            t.omitted = m.omitted_stacks;
            tables.push(t);
        }
        tables
    }

    fn csv_table(&self) -> Table {
        if self.stages_only {
            return stages::csv_table(
                self.memories
                    .iter()
                    .map(|m| (m.header.id.as_str(), m.annotation_stages.as_slice())),
            );
        }
        self.memories_table(false)
    }

    fn warnings(&self) -> Vec<String> {
        warning_notes(&self.provenance.warnings)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.oom.iter().map(oom::PostMortem::note).collect();
        let trivial: Vec<&str> = self
            .order()
            .trivial
            .iter()
            .map(|&i| self.memories[i].header.id.as_str())
            .collect();
        notes.extend(trivial_note(&trivial));
        if let Some(biggest) = self.memories.iter().max_by_key(|m| m.peak.peak_bytes) {
            if self.memories.len() > 1 {
                notes.push(format!(
                    "largest peak: {} with {} at {}",
                    display_id(&biggest.header.id),
                    crate::report::units::bytes(biggest.peak.peak_bytes),
                    biggest.peak.peak_label
                ));
            }
        }
        notes
    }
}

/// "What the timeline shows": a few lines of a memory's landmarks — its
/// steps with their spans, the largest allocation, the highest spike, the
/// first step's cliffs, recomputation waves, the optimizer state and the
/// floor. JSON has them all (of a memory of many
/// steps, those of the steps `landmarks` chose, and counts of the rest).
fn timeline_table(m: &MemorySummary) -> Option<Table> {
    if m.landmarks.is_empty() {
        return None;
    }
    let mut t = Table::new(
        format!("What the timeline shows — {}", display_id(&m.header.id)),
        vec!["landmark", "at", "bytes", "what"],
    );
    let of = |kind: LandmarkKind| m.landmarks.iter().filter(move |l| l.kind == kind);
    let first_step = of(LandmarkKind::Step).next().and_then(|l| l.step);
    let steps: Vec<&Landmark> = of(LandmarkKind::Step).collect();
    // Steps whose landmarks were left out (a memory of many steps) are
    // among the rest; their landmarks kept the first steps after the
    // listed ones, the last and the highest, which the row names.
    let omitted_steps = m
        .landmarks_omitted
        .get(&LandmarkKind::Step)
        .copied()
        .unwrap_or(0);
    // One step past the listed is listed too: a row standing for it alone
    // read "+1 more steps … steps 5–5".
    let listed_steps = if steps.len() == LISTED_STEPS + 1 && omitted_steps == 0 {
        steps.len()
    } else {
        steps.len().min(LISTED_STEPS)
    };
    let mut rows: Vec<&Landmark> = Vec::new();
    rows.extend(steps.iter().take(listed_steps));
    rows.extend(of(LandmarkKind::LargestAllocation).take(1));
    rows.extend(of(LandmarkKind::Spike).max_by_key(|l| (l.bytes, std::cmp::Reverse(l.start))));
    rows.extend(of(LandmarkKind::Cliff).filter(|l| l.step == first_step));
    let waves: Vec<&Landmark> = of(LandmarkKind::Recompute)
        .filter(|l| l.step == first_step)
        .collect();
    rows.extend(of(LandmarkKind::OptimizerState));
    rows.extend(of(LandmarkKind::Floor));
    // Each step's spans, gathered in one pass: a profile of 30,000 steps
    // must not scan every landmark once per step.
    let mut spans_of: HashMap<Option<i64>, Vec<&Landmark>> = HashMap::new();
    if !steps.is_empty() {
        for l in m.landmarks.iter().filter(|l| l.kind.is_phase()) {
            spans_of.entry(l.step).or_default().push(l);
        }
    }
    for (i, l) in rows.into_iter().enumerate() {
        if i == listed_steps && steps.len() > listed_steps {
            t.rows
                .push(more_steps_row(&steps[listed_steps..], omitted_steps));
        }
        // The label's name before its first colon is the row's name, the
        // rest what it says (the `what` column has the room).
        let (name, what) = match l.kind {
            LandmarkKind::Step => (
                format!("step {}", l.step.unwrap_or_default()),
                step_phases(spans_of.get(&l.step).map(Vec::as_slice).unwrap_or_default()),
            ),
            LandmarkKind::LargestAllocation => ("largest allocation".into(), l.label.clone()),
            _ => match l.label.split_once(": ") {
                Some((name, what)) => (name.to_string(), what.to_string()),
                None => (l.kind.name().replace('_', " "), l.label.clone()),
            },
        };
        t.rows.push(landmark_row(l, name, what));
    }
    if let (Some(first), Some(step)) = (waves.first(), first_step) {
        let bytes: u64 = waves.iter().map(|w| w.bytes).sum();
        t.rows.push(landmark_row(
            first,
            format!("recompute in step {step}"),
            format!(
                "{} waves in the backward pass (activation checkpointing)",
                waves.len()
            ),
        ));
        if let Some(row) = t.rows.last_mut() {
            row[2] = Cell::Bytes(bytes);
        }
    }
    Some(t)
}

fn landmark_row(l: &Landmark, name: String, what: String) -> Vec<Cell> {
    vec![
        name.into(),
        Cell::Figure {
            value: Some(l.start),
            label: l.start_label.clone(),
        },
        Cell::Bytes(l.bytes),
        Cell::Text(what),
    ]
}

/// A step's spans in order, each with where it starts: the position
/// without the step and phase its label adds in parentheses (`t+21.11 ms`,
/// not `t+21.11 ms (step 0, loss)`): the row is the step, the word before
/// it the phase.
fn step_phases(spans: &[&Landmark]) -> String {
    let mut spans = spans.to_vec();
    spans.sort_by_key(|l| l.start);
    let parts: Vec<String> = spans
        .iter()
        .map(|l| {
            let at = l.start_label.split(" (").next().unwrap_or_default();
            format!("{} {at}", l.kind.name())
        })
        .collect();
    parts.join(", ")
}

/// Steps listed one per row in "What the timeline shows"; the rest are one
/// row (the table is a few lines; JSON's `landmarks[]` lists every step of
/// up to [`landmarks::KEPT_STEPS`]).
const LISTED_STEPS: usize = 5;

/// The row standing for the steps past [`LISTED_STEPS`]: the highest of
/// them (where it starts, its bytes) and the range they cover. `rest` are
/// those with landmarks, `omitted` how many more there are without (the
/// landmarks keep the first of the rest, the last and the highest).
fn more_steps_row(rest: &[&Landmark], omitted: usize) -> Vec<Cell> {
    let (first, last) = (rest[0], rest[rest.len() - 1]);
    let highest = rest
        .iter()
        .copied()
        .max_by_key(|l| (l.bytes, std::cmp::Reverse(l.start)))
        .unwrap_or(first);
    let row = landmark_row(
        highest,
        format!("+{} more steps", rest.len() + omitted),
        format!(
            "steps {}–{}, the highest shown",
            first.step.unwrap_or_default(),
            last.step.unwrap_or_default(),
        ),
    );
    row
}
