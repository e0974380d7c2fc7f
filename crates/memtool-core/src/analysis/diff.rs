//! `diff`: what changed between two profiles, per call stack (matched by the
//! frames' names, files and lines, never by ids or addresses), compared at
//! each memory's peak; and the CI gate on total growth.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde::Serialize;

use crate::model::{CategorySource, CategorySources, InputInfo, Profile, SiteId, Warning};
use crate::report::{units, Cell, Report, Table};

use super::gate::{percent_beside, GateResult};
use super::group::{self, GroupBy, Totals};
use super::{display_id, replay, Options, LISTED_MEMORIES};

/// The JSON schema name and version of `diff`'s document.
pub const SCHEMA: &str = "memtool/diff/v1";

/// What `diff` reports: the change per memory and per group between two profiles.
#[derive(Debug, Serialize)]
pub struct DiffReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// `[base, new]` inputs.
    pub inputs: Vec<InputInfo>,
    /// Both sides' warnings.
    pub warnings: Vec<Warning>,
    /// Live bytes at the peaks, all memories together.
    pub total: DeltaTotals,
    /// The change of each memory's peak.
    pub memories: Vec<MemoryDelta>,
    /// The change per group, largest change first.
    pub rows: Vec<DiffRow>,
    /// What rows are keyed by (`stack` unless `--by` says otherwise).
    pub by: GroupBy,
    /// With `--fail-on-growth`: whether total growth stayed within the bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateResult>,
}

/// Bytes of one side and the other, and the change.
#[derive(Debug, Default, Serialize)]
pub struct DeltaTotals {
    /// Bytes in the base profile.
    pub base_bytes: u64,
    /// Bytes in the new profile.
    pub new_bytes: u64,
    /// `new_bytes - base_bytes`.
    pub delta_bytes: i64,
    /// Growth relative to the base (`null` when the base is 0).
    pub delta_percent: Option<f64>,
}

/// `new - base` in bytes, capped to what an `i64` holds (sizes a file claims
/// can be anything up to `u64::MAX`).
fn delta(new: u64, base: u64) -> i64 {
    (i128::from(new) - i128::from(base)).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl DeltaTotals {
    pub(super) fn new(base_bytes: u64, new_bytes: u64) -> Self {
        let delta_bytes = delta(new_bytes, base_bytes);
        DeltaTotals {
            base_bytes,
            new_bytes,
            delta_bytes,
            delta_percent: percent(delta_bytes, base_bytes),
        }
    }
}

fn percent(delta: i64, base: u64) -> Option<f64> {
    (base > 0).then(|| (delta as f64 * 100.0 / base as f64 * 100.0).round() / 100.0)
}

/// One memory's peak in both profiles.
#[derive(Debug, Serialize)]
pub struct MemoryDelta {
    /// The memory's id; for a compiled program, its name without the
    /// compile counter (`jit_train_step`, `#2` for a second module of the
    /// name), which names it alike in every run (`program_match`).
    pub id: String,
    /// The memory's id in the base profile, where it differs from `id`
    /// (`jit_train_step(26)`); absent for a memory the base lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_id: Option<String>,
    /// The same in the new profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_id: Option<String>,
    /// Device, allocator or program memory space.
    pub kind: crate::model::MemoryKind,
    /// Its live bytes at the peak on each side.
    #[serde(flatten)]
    pub totals: DeltaTotals,
}

/// One group's live bytes at the peaks, on each side.
#[derive(Debug, Serialize)]
pub struct DiffRow {
    /// The group (a call stack, or what `--by` names).
    pub key: String,
    /// Bytes in the base profile.
    pub base_bytes: u64,
    /// Buffers in the base profile.
    pub base_count: u64,
    /// Bytes in the new profile.
    pub new_bytes: u64,
    /// Buffers in the new profile.
    pub new_count: u64,
    /// `new_bytes - base_bytes`.
    pub delta_bytes: i64,
    /// The change in percent of the base (`None` when the base is 0).
    pub delta_percent: Option<f64>,
    /// With `--by category`: who named the category (`profiler`,
    /// `inferred`, `user`; the new side's, else the base's). Absent
    /// otherwise and for `<none>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category_source: Option<CategorySource>,
}

/// A bound on total growth (`--fail-on-growth`): exit code 1 when it is
/// exceeded. `SteadyGroups` is not one `diff` takes.
pub use super::gate::Limit as GrowthLimit;

/// A memory and its live bytes at its peak.
type PeakBytes<'a> = (&'a crate::model::Memory, u64);

/// Live bytes per group at the peak of each memory of a profile, and who
/// named the categories of its memories.
fn peak_groups<'a>(
    profile: &'a Profile,
    options: &'a Options,
    by: GroupBy,
) -> (
    BTreeMap<String, Totals>,
    Vec<PeakBytes<'a>>,
    CategorySources,
) {
    let mut groups: BTreeMap<String, Totals> = BTreeMap::new();
    let mut memories = Vec::new();
    let mut sources = CategorySources::new();
    let mut labels = SiteLabels::default();
    for memory in options.selected(profile) {
        for (name, &source) in &memory.category_sources {
            sources.entry(name.clone()).or_insert(source);
        }
        let Some(peak) = memory_peak_groups(profile, memory, options, by, &mut labels, &mut groups)
        else {
            continue;
        };
        memories.push((memory, peak));
    }
    (groups, memories, sources)
}

/// The group label of each site met so far, made once per site: the
/// memories of a profile share its sites (the devices of a trace, the
/// ranks of a job), and a stack's label costs a string per frame. Valid for
/// one profile, one `by` and one frame filter.
#[derive(Debug, Default)]
pub struct SiteLabels(HashMap<SiteId, String>);

/// Adds the live bytes per group at `memory`'s peak to `groups` (what
/// `diff` compares, and `ranks` between two ranks); the peak's bytes, or
/// `None` for a memory with no peak. `labels` keeps the labels of the
/// sites of `profile` grouped by `by` from one memory to the next.
pub fn memory_peak_groups(
    profile: &Profile,
    memory: &crate::model::Memory,
    options: &Options,
    by: GroupBy,
    labels: &mut SiteLabels,
    groups: &mut BTreeMap<String, Totals>,
) -> Option<u64> {
    let peak = replay::reported_peak(memory, options.ties)?;
    let live = replay::live_at(memory, peak.point.index);
    let by_site = group::totals_by_site(memory, &live);
    for (site, totals) in by_site.iter() {
        let label = labels.0.entry(site).or_insert_with(|| {
            if by == GroupBy::Stack {
                // Stackless sites (XSpace allocations) by op and shape.
                group::stack_or_op_shape(&profile.names, site, &options.frames)
            } else {
                group::label(&profile.names, site, by, &options.frames)
            }
        });
        match groups.get_mut(label.as_str()) {
            Some(group) => group.add(totals),
            None => {
                groups.insert(label.clone(), totals);
            }
        }
    }
    Some(peak.bytes)
}

/// The change of each group from `base` to `new`, largest change first
/// (growth before shrinkage of the same size, then by key).
pub fn compare_groups(
    base: &BTreeMap<String, Totals>,
    new: &BTreeMap<String, Totals>,
) -> Vec<DiffRow> {
    let mut keys: Vec<&String> = base.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<DiffRow> = keys
        .into_iter()
        .map(|key| {
            let b = base.get(key).copied().unwrap_or_default();
            let n = new.get(key).copied().unwrap_or_default();
            let delta = delta(n.bytes, b.bytes);
            DiffRow {
                key: key.clone(),
                base_bytes: b.bytes,
                base_count: b.count,
                new_bytes: n.bytes,
                new_count: n.count,
                delta_bytes: delta,
                delta_percent: percent(delta, b.bytes),
                category_source: None,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then(b.delta_bytes.cmp(&a.delta_bytes))
            .then_with(|| a.key.cmp(&b.key))
    });
    rows
}

/// Compares the peaks of `base` and `new`, per memory and per call stack.
pub fn diff(
    base: &Profile,
    new: &Profile,
    options: &Options,
    limit: Option<GrowthLimit>,
) -> DiffReport {
    diff_by(base, new, options, limit, GroupBy::Stack)
}

/// [`diff`] with rows keyed by `by` instead of the call stack (`op` compares
/// two compiles of a program op by op).
pub fn diff_by(
    base: &Profile,
    new: &Profile,
    options: &Options,
    limit: Option<GrowthLimit>,
    by: GroupBy,
) -> DiffReport {
    let (base_groups, base_memories, base_sources) = peak_groups(base, options, by);
    let (new_groups, new_memories, new_sources) = peak_groups(new, options, by);
    let mut rows = compare_groups(&base_groups, &new_groups);
    if by == GroupBy::Category {
        for row in &mut rows {
            row.category_source = new_sources
                .get(&row.key)
                .or(base_sources.get(&row.key))
                .copied();
        }
    }

    // Programs pair by what they are, not by their compile counters.
    let base_sides: Vec<&crate::model::Memory> = base_memories.iter().map(|m| m.0).collect();
    let new_sides: Vec<&crate::model::Memory> = new_memories.iter().map(|m| m.0).collect();
    // Each memory's peak found by its address, hashed, so 10^5 devices are
    // not 10^10 comparisons.
    let peaks_of =
        |list: &[PeakBytes<'_>]| -> std::collections::HashMap<*const crate::model::Memory, u64> {
            list.iter()
                .map(|(m, bytes)| (std::ptr::from_ref(*m), *bytes))
                .collect()
        };
    let (base_peaks, new_peaks) = (peaks_of(&base_memories), peaks_of(&new_memories));
    let bytes_of = |peaks: &std::collections::HashMap<*const crate::model::Memory, u64>,
                    memory: Option<&crate::model::Memory>| {
        memory.map_or(0, |m| {
            peaks.get(&std::ptr::from_ref(m)).copied().unwrap_or(0)
        })
    };
    let memories: Vec<MemoryDelta> = super::program_match::pair(&base_sides, &new_sides)
        .into_iter()
        .map(|p| {
            let id_if_other = |m: Option<&crate::model::Memory>| {
                m.map(|m| m.id.clone()).filter(|id| *id != p.key)
            };
            MemoryDelta {
                totals: DeltaTotals::new(
                    bytes_of(&base_peaks, p.base),
                    bytes_of(&new_peaks, p.new),
                ),
                kind: p
                    .base
                    .or(p.new)
                    .map_or(crate::model::MemoryKind::Device, |m| m.kind),
                base_id: id_if_other(p.base),
                new_id: id_if_other(p.new),
                id: p.key,
            }
        })
        .collect();
    let total = DeltaTotals::new(
        memories
            .iter()
            .fold(0u64, |t, m| t.saturating_add(m.totals.base_bytes)),
        memories
            .iter()
            .fold(0u64, |t, m| t.saturating_add(m.totals.new_bytes)),
    );
    let gate = limit.map(|limit| growth_gate(&total, limit, "total growth"));
    let mut warnings = base.warnings.clone();
    warnings.extend(new.warnings.iter().cloned());
    DiffReport {
        schema: SCHEMA,
        inputs: base.inputs.iter().chain(&new.inputs).cloned().collect(),
        warnings,
        total,
        memories,
        rows,
        by,
        gate,
    }
}

/// The growth gate on `total`, the growth of what `subject` names (`total
/// growth`, `category activation growth`).
pub(super) fn growth_gate(total: &DeltaTotals, limit: GrowthLimit, subject: &str) -> GateResult {
    let growth = total.delta_bytes;
    // Unrounded: `delta_percent` is rounded to two decimals for display, and
    // 1.004% must fail a 1% limit.
    let exact_percent =
        (total.base_bytes > 0).then(|| i128::from(growth) as f64 * 100.0 / total.base_bytes as f64);
    let passed = match limit {
        GrowthLimit::Bytes(b) => i128::from(growth) <= i128::from(b),
        GrowthLimit::Percent(p) => match exact_percent {
            // growth / base <= p / 100, in integers where p is whole.
            Some(_) if p.fract() == 0.0 && p < 1e15 => {
                i128::from(growth) * 100 <= p as i128 * i128::from(total.base_bytes)
            }
            Some(actual) => actual <= p,
            None => growth <= 0,
        },
        GrowthLimit::SteadyGroups(_) => true,
    };
    let shown = match exact_percent {
        Some(actual) => format!(
            "{}, {} of the base {},",
            units::exact_delta_bytes(growth),
            match limit {
                GrowthLimit::Percent(p) => percent_beside(actual, p),
                _ => format!("{actual:+.2}%"),
            },
            units::exact_bytes(total.base_bytes)
        ),
        None => format!("{} (the base is 0 B)", units::exact_delta_bytes(growth)),
    };
    let message = if passed {
        format!(
            "growth gate passed: {subject} {shown} is within the limit {}",
            limit.describe()
        )
    } else {
        format!(
            "growth gate FAILED: {subject} {shown} exceeds the limit {}",
            limit.describe()
        )
    };
    GateResult {
        gate: "fail_on_growth",
        passed,
        limit,
        measured_bytes: growth,
        measured_percent: match limit {
            GrowthLimit::Percent(_) => exact_percent,
            _ => None,
        },
        failed_memories: Vec::new(),
        group: None,
        message,
    }
}

impl DiffReport {
    /// Whether a CI gate was given and failed.
    pub fn gate_failed(&self) -> bool {
        self.gate.as_ref().is_some_and(|g| !g.passed)
    }

    /// Every change, largest first.
    fn rows_table(&self) -> Table {
        let mut t = Table::ranked(
            format!(
                "Change per {} (at each memory's peak)",
                self.by.name().replace('_', " ")
            ),
            vec![
                self.by.name(),
                "base_bytes",
                "new_bytes",
                "delta_bytes",
                "delta_percent",
                "base_count",
                "new_count",
            ],
        );
        // Categories memtool or the user named are said to be so.
        let sourced = self.rows.iter().any(|r| {
            r.category_source
                .is_some_and(|s| s != CategorySource::Profiler)
        });
        if sourced {
            t.columns.push("source");
        }
        for r in &self.rows {
            let mut row = vec![
                r.key.clone().into(),
                Cell::Bytes(r.base_bytes),
                Cell::Bytes(r.new_bytes),
                Cell::DeltaBytes(r.delta_bytes),
                Cell::Percent(r.delta_percent),
                Cell::Count(r.base_count),
                Cell::Count(r.new_count),
            ];
            if sourced {
                row.push(match r.category_source {
                    Some(source) => source.name().into(),
                    None => Cell::Empty,
                });
            }
            t.rows.push(row);
        }
        t
    }
}

impl DiffReport {
    /// The memories the Totals table lists a row each, in the report's
    /// order, and those it folds into one `+N more (totals)` row: past
    /// [`LISTED_MEMORIES`], the largest changes are listed (then the
    /// largest peak of either side, then the first), so 10^5 devices print a
    /// table, not a book. Indices into `memories`.
    fn listed_memories(&self) -> (Vec<usize>, Vec<usize>) {
        let all = 0..self.memories.len();
        if self.memories.len() <= LISTED_MEMORIES {
            return (all.collect(), Vec::new());
        }
        let mut order: Vec<usize> = all.collect();
        let key = |i: usize| {
            let t = &self.memories[i].totals;
            (t.delta_bytes.unsigned_abs(), t.base_bytes.max(t.new_bytes))
        };
        order.sort_by(|&a, &b| key(b).cmp(&key(a)).then(a.cmp(&b)));
        let mut beyond = order.split_off(LISTED_MEMORIES);
        order.sort_unstable();
        beyond.sort_unstable();
        (order, beyond)
    }
}

impl MemoryDelta {
    /// The memory as the table names it: its id, with the ids it has in
    /// each profile where they differ (`jit_train_step (26 → 30)`: the
    /// compile counters, shown though never used to pair).
    pub fn label(&self) -> String {
        let id = display_id(&self.id);
        let counter = |other: &Option<String>| {
            other.as_deref().map(|o| {
                let o = display_id(o);
                match o.strip_prefix(self.id.split('#').next().unwrap_or(&self.id)) {
                    Some(rest) if !rest.is_empty() => rest
                        .trim_start_matches('(')
                        .trim_end_matches(')')
                        .to_string(),
                    _ => o,
                }
            })
        };
        match (counter(&self.base_id), counter(&self.new_id)) {
            (None, None) => id,
            (Some(b), Some(n)) => format!("{id} ({b} → {n})"),
            (Some(b), None) => format!("{id} ({b})"),
            (None, Some(n)) => format!("{id} ({n})"),
        }
    }
}

impl Report for DiffReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut totals = Table::new(
            "Totals",
            vec![
                "memory",
                "base_bytes",
                "new_bytes",
                "delta_bytes",
                "delta_percent",
            ],
        );
        let row = |label: String, t: &DeltaTotals| {
            vec![
                label.into(),
                Cell::Bytes(t.base_bytes),
                Cell::Bytes(t.new_bytes),
                Cell::DeltaBytes(t.delta_bytes),
                Cell::Percent(t.delta_percent),
            ]
        };
        let (listed, beyond) = self.listed_memories();
        for &i in &listed {
            let m = &self.memories[i];
            totals.rows.push(row(m.label(), &m.totals));
        }
        if !beyond.is_empty() {
            let sum = |side: fn(&DeltaTotals) -> u64| {
                super::beyond_total(&self.memories, &beyond, |m| side(&m.totals))
            };
            let folded = DeltaTotals::new(sum(|t| t.base_bytes), sum(|t| t.new_bytes));
            totals
                .rows
                .push(row(super::beyond_label(beyond.len()), &folded));
            totals.notes.push(format!(
                "+{} more: memories past the {LISTED_MEMORIES} largest changes (then peaks), \
                 one row with their count and totals (JSON lists every memory)",
                beyond.len()
            ));
        }
        totals.rows.push(row("total".into(), &self.total));
        let mut rows = self.rows_table();
        rows.rows.retain(|r| r[3] != Cell::DeltaBytes(0));
        // Counts stay in CSV and JSON; the terminal has room for sizes (and
        // who named a category) only.
        rows.columns.drain(5..7);
        for r in &mut rows.rows {
            r.drain(5..7);
        }
        vec![totals, rows]
    }

    fn csv_table(&self) -> Table {
        self.rows_table()
    }

    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.warnings)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let unchanged = self.rows.iter().filter(|r| r.delta_bytes == 0).count();
        if unchanged > 0 {
            let noun = match self.by {
                GroupBy::Category => "category".to_string(),
                by => by.name().replace('_', " "),
            };
            let plural = match (unchanged, self.by) {
                (1, _) => noun,
                (_, GroupBy::Category) => "categories".to_string(),
                _ => format!("{noun}s"),
            };
            notes.push(format!("{unchanged} {plural} unchanged (not shown)"));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(total: &DeltaTotals, limit: GrowthLimit) -> GateResult {
        growth_gate(total, limit, "total growth")
    }

    #[test]
    fn the_gate_compares_total_growth() {
        let t = DeltaTotals::new(1000, 1060);
        assert!(!gate(&t, GrowthLimit::Percent(5.0)).passed);
        assert!(gate(&t, GrowthLimit::Percent(6.0)).passed);
        assert!(gate(&t, GrowthLimit::Bytes(60)).passed);
        assert!(!gate(&t, GrowthLimit::Bytes(59)).passed);
        assert!(!gate(&DeltaTotals::new(0, 1), GrowthLimit::Percent(50.0)).passed);
        assert!(gate(&DeltaTotals::new(100, 10), GrowthLimit::Bytes(0)).passed);
    }

    #[test]
    fn the_gate_compares_unrounded_growth_and_says_so() {
        // +1.004%: rounds to 1.00% for display, and still exceeds 1%.
        let over = gate(
            &DeltaTotals::new(100_000, 101_004),
            GrowthLimit::Percent(1.0),
        );
        assert!(!over.passed);
        assert!(over.message.contains("+1.004%"), "{}", over.message);
        assert_eq!(over.measured_percent, Some(1.004));
        // +0.97% passes a 1% limit and does not read as 1.0%.
        let within = gate(
            &DeltaTotals::new(100_000, 100_970),
            GrowthLimit::Percent(1.0),
        );
        assert!(within.passed);
        assert!(
            within
                .message
                .contains("+0.97% of the base 97.66 KiB (100000 B),"),
            "{}",
            within.message
        );
        assert!(
            within.message.ends_with("within the limit 1%"),
            "{}",
            within.message
        );
        assert_eq!(within.measured_bytes, 970);
    }
}
