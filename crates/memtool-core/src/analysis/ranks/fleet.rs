//! The fleet figures of `ranks`: median and max peak, imbalance, outliers,
//! groups of ranks whose peaks cluster (pipeline stages), the order of
//! out-of-memory failures with every rank's distance to its capacity, and
//! what the highest rank holds that the median rank does not.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use super::{RankSummary, SCHEMA};
use crate::analysis::diff::{compare_groups, DiffRow};
use crate::analysis::group::{GroupBy, Totals, NO_STACK_LABEL};
use crate::model::Axis;
use crate::report::{units, Cell, Report, Table};

/// A rank is an outlier when its peak is more than this share above the
/// median rank's peak, the median rank's cluster ([`CLUSTER_GAP`]) holds at
/// least half of the ranks ...
pub const OUTLIER_ABOVE_MEDIAN: f64 = 0.10;
/// ... and the ranks whose peaks cluster with it ([`CLUSTER_GAP`]) are at
/// most this share of the fleet (at least one rank): a larger set of high
/// ranks is a group of its own (a pipeline stage), not an outlier.
pub const OUTLIER_SHARE: f64 = 0.10;
/// Peaks sorted in order cluster while each is within this share above the
/// one before it; a larger step starts a new cluster.
pub const CLUSTER_GAP: f64 = 0.10;

/// What `ranks` reports.
#[derive(Debug, Serialize)]
pub struct RanksReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// One entry per rank, in rank order (number, then file, then memory).
    pub ranks: Vec<RankSummary>,
    /// The files that could not be read, each with why (`--strict` fails
    /// instead).
    pub failed: Vec<FailedFile>,
    /// The median rank's peak: the middle rank by peak (the lower of the
    /// two middle ones for an even count), so it is a rank's own figure.
    pub median_peak_bytes: u64,
    /// The median rank.
    pub median_rank: Option<String>,
    /// The highest peak.
    pub max_peak_bytes: u64,
    /// The rank with the highest peak (the first in rank order of equals).
    pub max_rank: Option<String>,
    /// `max_peak_bytes / median_peak_bytes` (`null` when the median is 0).
    pub imbalance: Option<f64>,
    /// The ranks in the median rank's cluster ([`CLUSTER_GAP`]): outliers
    /// are named only when they are at least half of the ranks.
    pub median_cluster_ranks: usize,
    /// The outlier ranks, highest peak first (rule: [`OUTLIER_ABOVE_MEDIAN`],
    /// [`OUTLIER_SHARE`], [`CLUSTER_GAP`]; docs/json/ranks.md).
    pub outliers: Vec<String>,
    /// Groups of ranks whose peaks cluster, lowest first, when the fleet
    /// splits plainly into several (pipeline stages); empty otherwise.
    pub stage_groups: Vec<StageGroup>,
    /// For a set with out-of-memory failures: the failing ranks, the first
    /// to fail first, then every other rank, closest to its capacity first.
    pub oom: Vec<OomRank>,
    /// What the highest rank held at its peak that the median rank did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highest_vs_median: Option<HighestVsMedian>,
    /// Every rank's warnings, each message once with the files it concerns.
    pub warnings: Vec<FleetWarning>,
}

/// A file `ranks` could not read.
#[derive(Clone, Debug, Serialize)]
pub struct FailedFile {
    /// The file, as given.
    pub file: String,
    /// Why, in one line.
    pub error: String,
}

/// A warning several ranks' files share.
#[derive(Clone, Debug, Serialize)]
pub struct FleetWarning {
    /// The message.
    pub message: String,
    /// Whether it is a note (what a reader assumed) rather than a warning.
    pub note: bool,
    /// The files it concerns.
    pub files: Vec<String>,
}

/// Ranks whose peaks cluster.
#[derive(Clone, Debug, Serialize)]
pub struct StageGroup {
    /// The ranks, in rank order.
    pub ranks: Vec<String>,
    /// The lowest peak among them.
    pub min_peak_bytes: u64,
    /// The highest peak among them.
    pub max_peak_bytes: u64,
}

/// One rank of a set with out-of-memory failures.
#[derive(Clone, Debug, Serialize)]
pub struct OomRank {
    /// The rank.
    pub rank: String,
    /// Whether this rank failed.
    pub failed: bool,
    /// 1 for the first to fail, 2 for the next…, by the failures' times when
    /// every failing rank is on a time axis; `null` for a rank that did not
    /// fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_order: Option<usize>,
    /// The rank's peak.
    pub peak_bytes: u64,
    /// The capacity the rank is measured against.
    pub capacity_bytes: Option<u64>,
    /// Where that capacity comes from: `rank` (`--capacity` or the rank's
    /// profile), `failure` (the rank's own failure's), `failing_rank`
    /// (none of its own: the first failing rank's, the same job's device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_from: Option<&'static str>,
    /// `capacity_bytes − peak_bytes`: how far the rank was from its
    /// capacity at its peak (negative past it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<i64>,
    /// The failure's verdict, for a rank that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::analysis::oom::Verdict>,
    /// What the failing request lacked, for a rank that failed (its
    /// headroom at its peak, before the request, can be large).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shortfall_bytes: Option<u64>,
}

/// The highest rank beside the median rank, as `diff` compares two
/// profiles.
#[derive(Debug, Serialize)]
pub struct HighestVsMedian {
    /// The highest rank (diff's new side).
    pub highest: String,
    /// The median rank (diff's base side).
    pub median: String,
    /// What rows are keyed by: `user_frame`, else `op` when either rank's
    /// allocations carry no stacks.
    pub by: GroupBy,
    /// The groups the highest rank holds more of, most first (diff's rows
    /// with a positive change).
    pub rows: Vec<DiffRow>,
}

/// Weighs the ranks' summaries against each other. `failed` are the files
/// that could not be read.
pub fn fleet(mut ranks: Vec<RankSummary>, failed: Vec<FailedFile>) -> RanksReport {
    ranks.sort_by(|a, b| {
        (a.rank_number.is_none(), a.rank_number, &a.file).cmp(&(
            b.rank_number.is_none(),
            b.rank_number,
            &b.file,
        ))
    });
    // Programs labelled by what they are, then in label order within a
    // file, so the same program sorts alike in every rank.
    super::label_programs(&mut ranks);
    ranks.sort_by(|a, b| {
        (a.rank_number.is_none(), a.rank_number, &a.file, &a.rank).cmp(&(
            b.rank_number.is_none(),
            b.rank_number,
            &b.file,
            &b.rank,
        ))
    });
    tell_apart(&mut ranks);
    // Ranks by peak, ties in rank order.
    let mut by_peak: Vec<usize> = (0..ranks.len()).collect();
    by_peak.sort_by(|&a, &b| {
        ranks[a]
            .peak_bytes
            .cmp(&ranks[b].peak_bytes)
            .then(a.cmp(&b))
    });
    let median = by_peak.get(by_peak.len().saturating_sub(1) / 2).copied();
    let max = by_peak
        .iter()
        .copied()
        .filter(|&i| Some(ranks[i].peak_bytes) == by_peak.last().map(|&l| ranks[l].peak_bytes))
        .min();
    let median_peak = median.map_or(0, |i| ranks[i].peak_bytes);
    let max_peak = max.map_or(0, |i| ranks[i].peak_bytes);
    let clusters = clusters(&ranks, &by_peak);
    let largest_outlier_set = ((ranks.len() as f64 * OUTLIER_SHARE).floor() as usize).max(1);
    // A rank stands out only from a bulk: the median rank's cluster must
    // hold at least half the ranks. Peaks spread with no bulk (ranks of
    // unrelated runs) have no outlier.
    let bulk = median
        .and_then(|m| clusters.iter().find(|c| c.contains(&m)))
        .map_or(0, Vec::len);
    let has_bulk = bulk * 2 >= ranks.len();
    let mut outliers: Vec<usize> = clusters
        .iter()
        .filter(|c| has_bulk && c.len() <= largest_outlier_set)
        .flatten()
        .copied()
        .filter(|&i| ranks[i].peak_bytes as f64 > median_peak as f64 * (1.0 + OUTLIER_ABOVE_MEDIAN))
        .collect();
    outliers.sort_by(|&a, &b| {
        ranks[b]
            .peak_bytes
            .cmp(&ranks[a].peak_bytes)
            .then(a.cmp(&b))
    });
    // Stages are plain when every cluster is one (more than the outlier
    // share of the fleet, at least two ranks).
    let stage_groups = if clusters.len() > 1
        && clusters
            .iter()
            .all(|c| c.len() > largest_outlier_set && c.len() >= 2)
    {
        clusters
            .iter()
            .map(|c| {
                let mut members = c.clone();
                members.sort_unstable();
                StageGroup {
                    ranks: members.iter().map(|&i| ranks[i].rank.clone()).collect(),
                    min_peak_bytes: c.iter().map(|&i| ranks[i].peak_bytes).min().unwrap_or(0),
                    max_peak_bytes: c.iter().map(|&i| ranks[i].peak_bytes).max().unwrap_or(0),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let highest_vs_median = match (max, median) {
        (Some(h), Some(m)) if h != m && ranks[h].peak_bytes > ranks[m].peak_bytes => {
            Some(versus_median(&ranks[h], &ranks[m]))
        }
        _ => None,
    };
    RanksReport {
        schema: SCHEMA,
        median_cluster_ranks: bulk,
        oom: oom_ranks(&ranks),
        warnings: fleet_warnings(&ranks),
        median_rank: median.map(|i| ranks[i].rank.clone()),
        max_rank: max.map(|i| ranks[i].rank.clone()),
        imbalance: (median_peak > 0)
            .then(|| (max_peak as f64 / median_peak as f64 * 1000.0).round() / 1000.0),
        median_peak_bytes: median_peak,
        max_peak_bytes: max_peak,
        outliers: outliers.iter().map(|&i| ranks[i].rank.clone()).collect(),
        stage_groups,
        highest_vs_median,
        failed,
        ranks,
    }
}

/// Ranks two files give the same label (the same number in two folders,
/// or a number that is no rank's) are shown by file name without
/// extensions instead, and by the file as given where those collide too.
fn tell_apart(ranks: &mut [RankSummary]) {
    // The memory's part of the label (its program's key) stays.
    let device = |r: &RankSummary, base: String| match r.rank.split_once('/') {
        Some((_, memory)) => format!("{base}/{memory}"),
        None => base,
    };
    let relabel = |ranks: &mut [RankSummary], name: &dyn Fn(&RankSummary) -> String| {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for r in ranks.iter() {
            *seen.entry(r.rank.clone()).or_default() += 1;
        }
        for r in ranks.iter_mut() {
            if seen.get(&r.rank).is_some_and(|&n| n > 1) {
                r.rank = device(r, name(r));
            }
        }
    };
    relabel(ranks, &|r| super::file_stem(&r.file));
    relabel(ranks, &|r| r.file.clone());
}

/// The ranks (indices, `by_peak` sorted by peak) cut into clusters wherever
/// a peak is more than [`CLUSTER_GAP`] above the one before it.
fn clusters(ranks: &[RankSummary], by_peak: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut previous: Option<u64> = None;
    for &i in by_peak {
        let peak = ranks[i].peak_bytes;
        match (previous, out.last_mut()) {
            (Some(p), Some(last)) if peak as f64 <= p as f64 * (1.0 + CLUSTER_GAP) => last.push(i),
            _ => out.push(vec![i]),
        }
        previous = Some(peak);
    }
    out
}

/// A rank's live groups at its peak beside the median rank's (`highest` is
/// that rank): by user frame where both have frames of the program's, else
/// by op. The report compares the highest rank; the page each outlier.
pub fn versus_median(highest: &RankSummary, median: &RankSummary) -> HighestVsMedian {
    // Placeholders (`<no stack>`, `<before recording: still live>`) are no
    // frame of the program's.
    let has_frames =
        |g: &BTreeMap<String, Totals>| g.keys().any(|k| k != NO_STACK_LABEL && !k.starts_with('<'));
    let by = if has_frames(&highest.by_user_frame) && has_frames(&median.by_user_frame) {
        GroupBy::UserFrame
    } else {
        GroupBy::Op
    };
    let (base, new) = match by {
        GroupBy::UserFrame => (&median.by_user_frame, &highest.by_user_frame),
        _ => (&median.by_op, &highest.by_op),
    };
    let rows = compare_groups(base, new)
        .into_iter()
        .filter(|r| r.delta_bytes > 0)
        .collect();
    HighestVsMedian {
        highest: highest.rank.clone(),
        median: median.rank.clone(),
        by,
        rows,
    }
}

/// The ranks of a set with failures: the failing ones in failure order,
/// then the others closest to their capacity first. Empty when no rank
/// failed.
fn oom_ranks(ranks: &[RankSummary]) -> Vec<OomRank> {
    let mut failing: Vec<usize> = (0..ranks.len())
        .filter(|&i| ranks[i].oom.is_some())
        .collect();
    if failing.is_empty() {
        return Vec::new();
    }
    // Failure times compare across ranks only on one clock (µs since the
    // epoch of PyTorch snapshots, say).
    let timed = failing.iter().all(|&i| {
        ranks[i].axis == Axis::TimeUs && ranks[i].oom.as_ref().is_some_and(|o| o.at.is_some())
    });
    if timed {
        failing.sort_by_key(|&i| (ranks[i].oom.as_ref().and_then(|o| o.at), i));
    }
    let first_capacity = failing
        .first()
        .and_then(|&i| ranks[i].oom.as_ref())
        .map(|o| o.capacity_bytes);
    let row = |i: usize, order: Option<usize>| {
        let r = &ranks[i];
        let (capacity, from) = match (r.capacity_bytes, &r.oom, first_capacity) {
            (Some(c), _, _) => (Some(c), Some("rank")),
            (None, Some(o), _) => (Some(o.capacity_bytes), Some("failure")),
            (None, None, Some(c)) => (Some(c), Some("failing_rank")),
            (None, None, None) => (None, None),
        };
        OomRank {
            rank: r.rank.clone(),
            failed: r.oom.is_some(),
            failure_order: order,
            peak_bytes: r.peak_bytes,
            capacity_bytes: capacity,
            capacity_from: from,
            headroom_bytes: capacity.map(|c| {
                (i128::from(c) - i128::from(r.peak_bytes))
                    .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
            }),
            verdict: r.oom.as_ref().map(|o| o.verdict),
            shortfall_bytes: r.oom.as_ref().map(|o| o.shortfall_bytes),
        }
    };
    let mut out: Vec<OomRank> = failing
        .iter()
        .enumerate()
        .map(|(n, &i)| row(i, timed.then_some(n + 1)))
        .collect();
    let mut others: Vec<OomRank> = (0..ranks.len())
        .filter(|&i| ranks[i].oom.is_none())
        .map(|i| row(i, None))
        .collect();
    // Closest to its capacity first; ranks without one last, in rank order.
    others.sort_by_key(|r| (r.headroom_bytes.is_none(), r.headroom_bytes));
    out.extend(others);
    out
}

/// The items of `row` whose index `keep` accepts.
fn select<T>(row: Vec<T>, keep: impl Fn(usize) -> bool) -> Vec<T> {
    row.into_iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, x)| x)
        .collect()
}

/// Each warning message once, with the files it concerns.
fn fleet_warnings(ranks: &[RankSummary]) -> Vec<FleetWarning> {
    let mut out: Vec<FleetWarning> = Vec::new();
    for w in ranks.iter().flat_map(|r| &r.warnings) {
        match out.iter_mut().find(|f| f.message == w.message) {
            Some(f) if f.files.contains(&w.path) => {}
            Some(f) => f.files.push(w.path.clone()),
            None => out.push(FleetWarning {
                message: w.message.clone(),
                note: w.note,
                files: vec![w.path.clone()],
            }),
        }
    }
    out
}

impl RanksReport {
    /// Every rank, highest peak first. CSV's has every column; the
    /// terminal's keeps what a rank is told apart by (capacity is in the
    /// OOM table, final bytes and the file in CSV and JSON, the phase in
    /// the peak's label), so the rank column is never cut.
    fn ranks_table(&self, csv: bool) -> Table {
        let mut t = Table::ranked(
            "Ranks (highest peak first)",
            vec![
                "rank",
                "peak_bytes",
                "reserved_bytes",
                "capacity_bytes",
                "final_bytes",
                "fragmentation_at_peak",
                "oom",
                "peak_at",
                "peak_step",
                "peak_phase",
                "file",
            ],
        );
        // Columns of the terminal's table, by index.
        const SHOWN: [usize; 6] = [0, 1, 2, 5, 6, 7];
        let keep = |i: usize| csv || SHOWN.contains(&i);
        let mut order: Vec<&RankSummary> = self.ranks.iter().collect();
        order.sort_by_key(|r| std::cmp::Reverse(r.peak_bytes));
        let opt_bytes = |b: Option<u64>| b.map_or(Cell::Empty, Cell::Bytes);
        for r in order {
            t.rows.push(vec![
                r.rank.clone().into(),
                Cell::Bytes(r.peak_bytes),
                opt_bytes(r.reserved_bytes),
                opt_bytes(r.capacity_bytes),
                Cell::Bytes(r.final_bytes),
                r.fragmentation_at_peak
                    .map_or(Cell::Empty, |f| Cell::Fraction(Some(f))),
                r.oom
                    .as_ref()
                    .map_or(Cell::Empty, |o| o.verdict.name().into()),
                Cell::Figure {
                    value: Some(r.peak_at),
                    label: r.peak_label.clone(),
                },
                r.peak_step.map_or(Cell::Empty, Cell::Int),
                r.peak_phase.map_or(Cell::Empty, |p| p.name().into()),
                r.file.clone().into(),
            ]);
        }
        if !csv {
            t.columns = select(std::mem::take(&mut t.columns), keep);
            t.rows = std::mem::take(&mut t.rows)
                .into_iter()
                .map(|row| select(row, keep))
                .collect();
        }
        t
    }

    fn fleet_table(&self) -> Table {
        let mut t = Table::new("Fleet", vec!["figure", "value"]);
        let mut row = |k: &str, v: Cell| t.rows.push(vec![k.into(), v]);
        row("ranks", Cell::Count(self.ranks.len() as u64));
        row(
            "median peak",
            format!(
                "{} (rank {})",
                units::bytes(self.median_peak_bytes),
                self.median_rank.as_deref().unwrap_or("-")
            )
            .into(),
        );
        row(
            "max peak",
            format!(
                "{} (rank {})",
                units::bytes(self.max_peak_bytes),
                self.max_rank.as_deref().unwrap_or("-")
            )
            .into(),
        );
        row(
            "max / median",
            self.imbalance
                .map_or(Cell::Empty, |x| format!("{x:.3}").into()),
        );
        row(
            "outliers",
            if self.outliers.is_empty() {
                "none".into()
            } else {
                self.outliers.join(", ").into()
            },
        );
        t
    }

    fn stages_table(&self) -> Option<Table> {
        if self.stage_groups.is_empty() {
            return None;
        }
        let mut t = Table::new(
            "Groups of ranks whose peaks cluster (pipeline stages?)",
            vec!["ranks", "count", "min_peak_bytes", "max_peak_bytes"],
        );
        for g in &self.stage_groups {
            t.rows.push(vec![
                g.ranks.join(", ").into(),
                Cell::Count(g.ranks.len() as u64),
                Cell::Bytes(g.min_peak_bytes),
                Cell::Bytes(g.max_peak_bytes),
            ]);
        }
        Some(t)
    }

    fn oom_table(&self) -> Option<Table> {
        if self.oom.is_empty() {
            return None;
        }
        let mut t = Table::new(
            "Out of memory: failing ranks first, then each rank's distance to its capacity",
            vec![
                "rank",
                "failed",
                "verdict",
                "shortfall_bytes",
                "peak_bytes",
                "capacity_bytes",
                "headroom_bytes",
            ],
        );
        for r in &self.oom {
            t.rows.push(vec![
                r.rank.clone().into(),
                match (r.failed, r.failure_order) {
                    (true, Some(1)) => "first".into(),
                    (true, Some(n)) => format!("#{n}").into(),
                    (true, None) => "yes".into(),
                    (false, _) => Cell::Empty,
                },
                r.verdict.map_or(Cell::Empty, |v| v.name().into()),
                r.shortfall_bytes.map_or(Cell::Empty, Cell::Bytes),
                Cell::Bytes(r.peak_bytes),
                r.capacity_bytes.map_or(Cell::Empty, Cell::Bytes),
                r.headroom_bytes.map_or(Cell::Empty, Cell::DeltaBytes),
            ]);
        }
        Some(t)
    }

    fn highest_table(&self) -> Option<Table> {
        let h = self.highest_vs_median.as_ref()?;
        let mut t = Table::ranked(
            format!(
                "What rank {} (highest) holds at its peak that rank {} (median) does not, by {}",
                h.highest,
                h.median,
                h.by.name().replace('_', " ")
            ),
            vec!["key", "median_bytes", "highest_bytes", "delta_bytes"],
        );
        for r in &h.rows {
            t.rows.push(vec![
                r.key.clone().into(),
                Cell::Bytes(r.base_bytes),
                Cell::Bytes(r.new_bytes),
                Cell::DeltaBytes(r.delta_bytes),
            ]);
        }
        Some(t)
    }
}

impl Report for RanksReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = vec![self.ranks_table(false), self.fleet_table()];
        tables.extend(self.stages_table());
        tables.extend(self.oom_table());
        tables.extend(self.highest_table());
        tables
    }

    fn csv_table(&self) -> Table {
        self.ranks_table(true)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.outliers.is_empty() {
            notes.push(format!(
                "outliers: rank {} (peak more than {:.0}% above the median {}, and too few to be a group of their own)",
                self.outliers.join(", "),
                OUTLIER_ABOVE_MEDIAN * 100.0,
                units::bytes(self.median_peak_bytes)
            ));
        } else if self.median_cluster_ranks * 2 < self.ranks.len() {
            notes.push(format!(
                "no outlier named: only {} of the {} ranks peak within {:.0}% steps of the median \
                 rank, so there is no bulk for a rank to stand out from",
                self.median_cluster_ranks,
                self.ranks.len(),
                CLUSTER_GAP * 100.0
            ));
        }
        if let Some(first) = self.oom.iter().find(|r| r.failure_order == Some(1)) {
            notes.push(format!("rank {} ran out of memory first", first.rank));
        }
        let borrowed = self
            .oom
            .iter()
            .filter(|r| r.capacity_from == Some("failing_rank"))
            .count();
        if let Some(first) = self.oom.iter().find(|r| r.failed).filter(|_| borrowed > 0) {
            notes.push(format!(
                "{borrowed} rank(s) record no capacity: measured against rank {}'s at its \
                 failure (give the device's with --capacity)",
                first.rank
            ));
        }
        if let Some(top) = self
            .highest_vs_median
            .as_ref()
            .and_then(|h| h.rows.first().map(|r| (h, r)))
        {
            let (h, r) = top;
            notes.push(format!(
                "rank {} holds {} more than rank {} at its peak, most under {}",
                h.highest,
                units::bytes(self.max_peak_bytes.saturating_sub(self.median_peak_bytes)),
                h.median,
                r.key
            ));
        }
        if !self.failed.is_empty() {
            notes.push(format!(
                "{} file(s) could not be read and are left out (named on stderr)",
                self.failed.len()
            ));
        }
        notes
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings
            .iter()
            .map(|w| {
                let kind = if w.note { "note" } else { "warning" };
                match w.files.as_slice() {
                    [file] => format!("{kind}: {file}: {}", w.message),
                    files => format!("{kind}: {} ({} files)", w.message, files.len()),
                }
            })
            .collect()
    }
}
