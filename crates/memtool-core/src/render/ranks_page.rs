//! The page of `memtool ranks --format html`: the fleet's figures, one strip
//! per rank (its live bytes over its recording, on the fleet's common
//! scale, the median rank's peak drawn across), the outliers first with the
//! first one's detail open (what it holds at its peak that the median rank
//! does not), and the out-of-memory order.
//!
//! The page is bounded whatever the rank count: a strip is at most
//! [`STRIP_COLUMNS`] columns; up to [`ALONE_UP_TO`] ranks each has its own,
//! beyond that the ranks that matter (outliers, the highest, the median,
//! the failing ones; at most [`SHOWN_ALONE`]) have theirs and every other
//! rank is in one of at most [`PEAK_GROUPS`] strips of ranks of neighbouring
//! peaks (their lowest to highest bytes per column, with their count).
//! Self-contained: inline CSS and SVG, no script, no request.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::analysis::ranks::{versus_median, RankSummary, RanksReport, STRIP_COLUMNS};
use crate::report::Report;
use crate::units;

use super::escape::xml;

/// Fleets of at most this many ranks get one strip per rank.
pub const ALONE_UP_TO: usize = 200;
/// In a larger fleet, the ranks drawn alone (outliers first, highest peak
/// first, then the highest, the median and failing ranks).
pub const SHOWN_ALONE: usize = 40;
/// In a larger fleet, the strips the other ranks are grouped into, by peak.
pub const PEAK_GROUPS: usize = 50;
/// Outliers whose detail (what they hold beyond the median rank) is on the
/// page; the first is open.
const DETAILED: usize = 8;
/// Rows of a detail.
const DETAIL_ROWS: usize = 12;
/// Rows of the out-of-memory table (failing ranks first).
const OOM_ROWS: usize = 24;
/// Names listed in one line (outliers, a group's ranks) before "and N more".
const NAMES: usize = 12;
/// The longest text of a label on this page, in characters.
const LABEL_CHARS: usize = 160;
/// Height of a strip's drawing, in its own units.
const HEIGHT: u64 = 100;

const STYLE: &str = "
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 6px}
.sub{color:#5b6478;margin:0 0 12px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:8px 0}
dt{color:#5b6478}dd{margin:0}
ul.notes{margin:6px 0 0;padding-left:20px}
.row{display:grid;grid-template-columns:11em 1fr 7em 9em;gap:10px;align-items:center;margin:1px 0}
.row .name{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;text-align:right}
.row svg{width:100%;height:26px;display:block;background:#f4f6fa}
.row .peak{font-variant-numeric:tabular-nums;text-align:right}
.row .tag{color:#b3261e;font-weight:600}
.row path{fill:#7d93b8}.row.out path{fill:#d9534f}.row.oom path{fill:#e08a1e}
.row.group path.high{fill:#c9d3e6}.row.group .name{color:#5b6478}
.row line{stroke:#1d2330;stroke-width:1;stroke-dasharray:3 3;vector-effect:non-scaling-stroke}
details{margin:2px 0 10px 11em;padding-left:10px;border-left:3px solid #d9534f}
summary{cursor:pointer;color:#5b6478}
table{border-collapse:collapse;margin:6px 0}
th,td{padding:2px 10px;text-align:left;border-bottom:1px solid #e3e7ef}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.key{max-width:60em;overflow-wrap:anywhere}
.legend{color:#5b6478;font-size:12px;margin:0 0 6px}
";

/// The page of a `ranks` report.
pub fn ranks_html(report: &RanksReport) -> String {
    let mut page = String::with_capacity(64 << 10);
    let title = format!(
        "memtool ranks: {}",
        units::count(report.ranks.len() as u64, "rank", "ranks")
    );
    let _ = write!(
        page,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        xml(&title),
        xml(&title)
    );
    figures(&mut page, report);
    let scale = report.max_peak_bytes.max(1);
    let median = report
        .median_rank
        .as_deref()
        .and_then(|m| report.ranks.iter().find(|r| r.rank == m));
    let outliers: Vec<&RankSummary> = report
        .outliers
        .iter()
        .filter_map(|o| report.ranks.iter().find(|r| &r.rank == o))
        .collect();
    page.push_str("<section id=\"ranks\">\n");
    let legend = format!(
        "<p class=\"legend\">Each strip is a rank's live bytes over its own recording \
         (columns of equal numbers of events), on one scale for every rank (0 to {}); the \
         dashed line is the median rank's peak.</p>\n",
        xml(&units::bytes(scale))
    );
    let mut alone: BTreeSet<&str> = BTreeSet::new();
    if !outliers.is_empty() {
        let _ = write!(
            page,
            "<h2 id=\"outliers\">Outliers ({})</h2>\n{legend}",
            outliers.len()
        );
        for (i, r) in outliers.iter().take(SHOWN_ALONE).enumerate() {
            strip_row(&mut page, report, r, scale, true);
            alone.insert(&r.rank);
            if let Some(m) = median.filter(|_| i < DETAILED) {
                detail(&mut page, r, m, i == 0);
            }
        }
        if outliers.len() > SHOWN_ALONE {
            let _ = writeln!(
                page,
                "<p class=\"sub\">and {} more outliers, in the groups below</p>",
                outliers.len() - SHOWN_ALONE
            );
        }
    } else if let (Some(h), Some(m)) = (report.highest_vs_median.as_ref(), median) {
        // No outlier: the page opens on the highest rank beside the median.
        if let Some(highest) = report.ranks.iter().find(|r| r.rank == h.highest) {
            let _ = write!(page, "<h2 id=\"highest\">Highest rank</h2>\n{legend}");
            strip_row(&mut page, report, highest, scale, true);
            alone.insert(&highest.rank);
            detail(&mut page, highest, m, true);
        }
    }
    oom_table(&mut page, report);
    if report.ranks.len() <= ALONE_UP_TO {
        let _ = write!(
            page,
            "<h2 id=\"every-rank\">Every rank, in rank order</h2>\n{legend}"
        );
        for r in &report.ranks {
            // A rank drawn above already has the element id.
            strip_row(
                &mut page,
                report,
                r,
                scale,
                !alone.contains(r.rank.as_str()),
            );
        }
    } else {
        grouped(&mut page, report, &legend, scale, alone);
    }
    page.push_str("</section>\n</body></html>\n");
    page
}

/// The fleet's figures, the report's notes and its unread files.
fn figures(page: &mut String, report: &RanksReport) {
    let mut dl = String::new();
    let mut fig = |k: &str, v: String| {
        let _ = write!(dl, "<dt>{}</dt><dd>{}</dd>", xml(k), xml(&v));
    };
    fig("ranks", report.ranks.len().to_string());
    let rank_of = |r: &Option<String>| {
        r.as_deref()
            .map_or(String::new(), |r| format!(" (rank {})", cut(r)))
    };
    fig(
        "median peak",
        format!(
            "{}{}",
            units::bytes(report.median_peak_bytes),
            rank_of(&report.median_rank)
        ),
    );
    fig(
        "max peak",
        format!(
            "{}{}",
            units::bytes(report.max_peak_bytes),
            rank_of(&report.max_rank)
        ),
    );
    if let Some(x) = report.imbalance {
        fig("max / median", format!("{x:.3}"));
    }
    fig(
        "outliers",
        if report.outliers.is_empty() {
            "none".to_string()
        } else {
            names(
                report.outliers.iter().map(String::as_str),
                report.outliers.len(),
            )
        },
    );
    if !report.stage_groups.is_empty() {
        let groups: Vec<String> = report
            .stage_groups
            .iter()
            .map(|g| {
                format!(
                    "{} ({}–{})",
                    units::count(g.ranks.len() as u64, "rank", "ranks"),
                    units::bytes(g.min_peak_bytes),
                    units::bytes(g.max_peak_bytes)
                )
            })
            .collect();
        fig("groups of peaks", groups.join(", "));
    }
    if !report.failed.is_empty() {
        let first = &report.failed[0];
        fig(
            "files not read",
            format!(
                "{} (the first: {}: {})",
                report.failed.len(),
                cut(&first.file),
                cut(&first.error)
            ),
        );
    }
    let _ = writeln!(page, "<dl>{dl}</dl>");
    let notes = report.notes();
    if !notes.is_empty() {
        page.push_str("<ul class=\"notes\">");
        for n in notes {
            let _ = write!(page, "<li>{}</li>", xml(&cut(&n)));
        }
        page.push_str("</ul>\n");
    }
}

/// One rank's strip; `with_id` gives it the element id `rank-NAME` (once
/// per page: an outlier's second strip, in rank order, has none).
fn strip_row(page: &mut String, report: &RanksReport, r: &RankSummary, scale: u64, with_id: bool) {
    let outlier = report.outliers.contains(&r.rank);
    let class = match (outlier, r.oom.is_some()) {
        (true, _) => "row out",
        (false, true) => "row oom",
        _ => "row",
    };
    let mut tag = String::new();
    if outlier && report.median_peak_bytes > 0 {
        let above = r.peak_bytes as f64 / report.median_peak_bytes as f64 - 1.0;
        tag = format!("outlier +{:.0}%", above * 100.0);
    }
    if r.oom.is_some() {
        tag = if tag.is_empty() {
            "out of memory".into()
        } else {
            format!("{tag}, OOM")
        };
    }
    if report.max_rank.as_deref() == Some(&r.rank) && tag.is_empty() {
        tag = "highest".into();
    }
    let mut tip = format!(
        "rank {}: peak {} at {}",
        r.rank,
        units::bytes(r.peak_bytes),
        r.peak_label
    );
    if let Some(step) = r.peak_step {
        let _ = write!(tip, " (step {step})");
    }
    let _ = write!(tip, " · {}", r.file);
    let columns = r.strip.len().max(1);
    let path = step_path(&r.strip, scale);
    let _ = writeln!(
        page,
        "<div class=\"{class}\"{id}><span class=\"name\" title=\"{name}\">{name}</span>\
         <svg viewBox=\"0 0 {columns} {HEIGHT}\" preserveAspectRatio=\"none\"><title>{tip}</title>\
         <path d=\"{path}\"/>{line}</svg><span class=\"peak\">{peak}</span><span class=\"tag\">{tag}</span></div>",
        id = if with_id {
            format!(" id=\"rank-{}\"", xml(&anchor(&r.rank)))
        } else {
            String::new()
        },
        name = xml(&cut(&r.rank)),
        tip = xml(&cut(&tip)),
        line = median_line(report, scale, columns),
        peak = xml(&units::bytes(r.peak_bytes)),
        tag = xml(&tag),
    );
}

/// The median rank's peak across a strip.
fn median_line(report: &RanksReport, scale: u64, columns: usize) -> String {
    let y = height_of(report.median_peak_bytes, scale);
    format!("<line x1=\"0\" x2=\"{columns}\" y1=\"{y}\" y2=\"{y}\"/>")
}

/// `bytes` as a y of a strip (0 at the top, [`HEIGHT`] at zero bytes).
fn height_of(bytes: u64, scale: u64) -> u64 {
    let share = (u128::from(bytes.min(scale)) * u128::from(HEIGHT) + u128::from(scale) / 2)
        / u128::from(scale);
    HEIGHT - share as u64
}

/// An SVG path of columns, one unit wide each, filled from zero bytes up
/// to `bytes`.
fn step_path(bytes: &[u64], scale: u64) -> String {
    let mut d = format!("M0 {HEIGHT}");
    let mut last = None;
    for (i, &v) in bytes.iter().enumerate() {
        let y = height_of(v, scale);
        if last != Some(y) {
            let _ = write!(d, "V{y}");
            last = Some(y);
        }
        let _ = write!(d, "H{}", i + 1);
    }
    let _ = write!(d, "V{HEIGHT}Z");
    d
}

/// What `rank` holds at its peak that the median rank does not, open for
/// the first.
fn detail(page: &mut String, rank: &RankSummary, median: &RankSummary, open: bool) {
    if rank.rank == median.rank {
        return;
    }
    let v = versus_median(rank, median);
    let _ =
        write!(
        page,
        "<details{}><summary>What rank {} holds at its peak that rank {} (median) does not, by {} \
         ({} more in all)</summary>",
        if open { " open" } else { "" },
        xml(&cut(&v.highest)),
        xml(&cut(&v.median)),
        xml(&v.by.name().replace('_', " ")),
        xml(&units::bytes(rank.peak_bytes.saturating_sub(median.peak_bytes)))
    );
    if v.rows.is_empty() {
        page.push_str("<p class=\"sub\">nothing: the two hold the same groups</p></details>\n");
        return;
    }
    page.push_str(
        "<table><tr><th>key</th><th class=\"n\">median rank</th><th class=\"n\">this rank</th>\
         <th class=\"n\">more</th></tr>",
    );
    for row in v.rows.iter().take(DETAIL_ROWS) {
        let _ = write!(
            page,
            "<tr><td class=\"key\" title=\"{k}\">{k}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            xml(&units::bytes(row.base_bytes)),
            xml(&units::bytes(row.new_bytes)),
            xml(&units::delta_bytes(row.delta_bytes)),
            k = xml(&cut(&row.key)),
        );
    }
    page.push_str("</table>");
    if v.rows.len() > DETAIL_ROWS {
        let _ = write!(
            page,
            "<p class=\"sub\">and {} more rows (memtool ranks --format json)</p>",
            v.rows.len() - DETAIL_ROWS
        );
    }
    page.push_str("</details>\n");
}

/// The out-of-memory order: failing ranks first, then the others closest
/// to their capacity first.
fn oom_table(page: &mut String, report: &RanksReport) {
    if report.oom.is_empty() {
        return;
    }
    page.push_str(
        "<h2 id=\"oom\">Out of memory: failing ranks first, then each rank's distance to its \
         capacity</h2>\n<table><tr><th>rank</th><th>failed</th><th>verdict</th>\
         <th class=\"n\">peak</th><th class=\"n\">capacity</th><th class=\"n\">headroom</th></tr>",
    );
    for r in report.oom.iter().take(OOM_ROWS) {
        let failed = match (r.failed, r.failure_order) {
            (true, Some(1)) => "first".to_string(),
            (true, Some(n)) => format!("#{n}"),
            (true, None) => "yes".to_string(),
            (false, _) => String::new(),
        };
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            xml(&cut(&r.rank)),
            xml(&failed),
            xml(r.verdict.map_or("", |v| v.name())),
            xml(&units::bytes(r.peak_bytes)),
            xml(&r.capacity_bytes.map_or(String::new(), units::bytes)),
            xml(&r.headroom_bytes.map_or(String::new(), units::delta_bytes)),
        );
    }
    page.push_str("</table>\n");
    if report.oom.len() > OOM_ROWS {
        let _ = writeln!(
            page,
            "<p class=\"sub\">and {} more ranks (memtool ranks --format csv)</p>",
            report.oom.len() - OOM_ROWS
        );
    }
}

/// A fleet past [`ALONE_UP_TO`] ranks: the ranks that matter alone, the
/// others in strips of neighbouring peaks.
fn grouped<'a>(
    page: &mut String,
    report: &'a RanksReport,
    legend: &str,
    scale: u64,
    mut alone: BTreeSet<&'a str>,
) {
    let mut also: Vec<&RankSummary> = Vec::new();
    let wanted = [report.max_rank.as_deref(), report.median_rank.as_deref()];
    let failing = report
        .oom
        .iter()
        .filter(|o| o.failed)
        .map(|o| Some(o.rank.as_str()));
    for name in wanted.into_iter().chain(failing).flatten() {
        if alone.len() >= SHOWN_ALONE {
            break;
        }
        if alone.insert(name) {
            also.extend(report.ranks.iter().find(|r| r.rank == name));
        }
    }
    if !also.is_empty() {
        let _ = write!(
            page,
            "<h2 id=\"marked\">The highest, the median and failing ranks</h2>\n{legend}"
        );
        for r in &also {
            strip_row(page, report, r, scale, true);
        }
    }
    let mut rest: Vec<&RankSummary> = report
        .ranks
        .iter()
        .filter(|r| !alone.contains(r.rank.as_str()))
        .collect();
    rest.sort_by_key(|r| std::cmp::Reverse(r.peak_bytes));
    let per = rest.len().div_ceil(PEAK_GROUPS).max(1);
    let _ = write!(
        page,
        "<h2 id=\"groups\">The other {} ranks by peak, highest first, in groups of {}</h2>\n\
         <p class=\"legend\">Each strip is a group's ranks on the scale above: in each column \
         the highest of their live bytes (light) over the lowest (dark).</p>\n",
        rest.len(),
        per
    );
    for group in rest.chunks(per) {
        group_row(page, report, group, scale);
    }
}

/// A strip of several ranks: per column, their highest bytes (light) over
/// their lowest (dark), so a group of alike ranks reads as one rank.
fn group_row(page: &mut String, report: &RanksReport, group: &[&RankSummary], scale: u64) {
    let mut high = vec![0u64; STRIP_COLUMNS];
    let mut low = vec![u64::MAX; STRIP_COLUMNS];
    for r in group {
        if r.strip.is_empty() {
            low.iter_mut().for_each(|l| *l = 0);
            continue;
        }
        for c in 0..STRIP_COLUMNS {
            let v = r.strip[c * r.strip.len() / STRIP_COLUMNS];
            high[c] = high[c].max(v);
            low[c] = low[c].min(v);
        }
    }
    low.iter_mut()
        .filter(|l| **l == u64::MAX)
        .for_each(|l| *l = 0);
    let min_peak = group.iter().map(|r| r.peak_bytes).min().unwrap_or(0);
    let max_peak = group.iter().map(|r| r.peak_bytes).max().unwrap_or(0);
    let mut members: Vec<&str> = group.iter().map(|r| r.rank.as_str()).collect();
    members.sort_by_key(|name| {
        let r = group.iter().find(|r| r.rank == *name);
        (
            r.and_then(|r| r.rank_number).is_none(),
            r.and_then(|r| r.rank_number),
            *name,
        )
    });
    let label = units::count(group.len() as u64, "rank", "ranks");
    let tip = format!(
        "{} ranks, peaks {} to {}: {}",
        group.len(),
        units::bytes(min_peak),
        units::bytes(max_peak),
        names(members.iter().copied(), members.len())
    );
    let _ = writeln!(
        page,
        "<div class=\"row group\"><span class=\"name\" title=\"{tip}\">{label}</span>\
         <svg viewBox=\"0 0 {STRIP_COLUMNS} {HEIGHT}\" preserveAspectRatio=\"none\"><title>{tip}</title>\
         <path class=\"high\" d=\"{high}\"/><path d=\"{low}\"/>{line}</svg><span class=\"peak\">{peak}</span>\
         <span class=\"tag\"></span></div>",
        tip = xml(&tip),
        label = xml(&label),
        high = step_path(&high, scale),
        low = step_path(&low, scale),
        line = median_line(report, scale, STRIP_COLUMNS),
        peak = xml(&units::bytes(max_peak)),
    );
}

/// Up to [`NAMES`] names, then how many more.
fn names<'a>(list: impl Iterator<Item = &'a str>, total: usize) -> String {
    let shown: Vec<String> = list.take(NAMES).map(cut).collect();
    match total.saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// `text` cut to [`LABEL_CHARS`] characters, with `…` where it was cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(LABEL_CHARS) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// A rank's name as an element id: characters other than letters, digits,
/// `-` and `_` become `_`.
fn anchor(rank: &str) -> String {
    cut(rank)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::ranks::{fleet, tests::rank};

    #[test]
    fn the_page_stays_small_whatever_the_rank_count() {
        for n in [64u64, ALONE_UP_TO as u64, 1_000, 10_000] {
            // One rank in twenty 30% higher (outliers: at most a tenth),
            // each with a long name and a detail of many frames.
            let ranks: Vec<RankSummary> = (0..n)
                .map(|i| {
                    let mut r = rank(i, if i % 20 == 3 { 1300 } else { 1000 + i % 7 });
                    r.file = format!("{}/rank{i}.pickle", "d".repeat(300));
                    for f in 0..40 {
                        r.by_user_frame.insert(
                            format!("{}frame{f}.py:{i}", "x".repeat(500)),
                            crate::analysis::group::Totals {
                                bytes: 10 + f,
                                requested_bytes: 10 + f,
                                count: 1,
                            },
                        );
                    }
                    r
                })
                .collect();
            let report = fleet(ranks, Vec::new());
            let page = ranks_html(&report);
            assert!(page.len() < 400_000, "{n} ranks: {} bytes", page.len());
            let strips = page.matches("<div class=\"row").count();
            if n as usize <= ALONE_UP_TO {
                // Every rank, and the outliers once more at the top.
                assert_eq!(strips, n as usize + report.outliers.len());
            } else {
                assert!(
                    strips <= SHOWN_ALONE + PEAK_GROUPS + 3,
                    "{n} ranks: {strips} strips"
                );
            }
            // Element ids are unique, an outlier drawn twice included.
            let ids: Vec<&str> = page
                .split(" id=\"")
                .skip(1)
                .map(|s| &s[..s.find('"').unwrap()])
                .collect();
            let distinct: BTreeSet<&str> = ids.iter().copied().collect();
            assert_eq!(ids.len(), distinct.len(), "{n} ranks");
            // The page opens on the first outlier's detail.
            let open = page.find("<details open>").expect("an open detail");
            let first = page
                .find(&format!("id=\"rank-{}\"", report.outliers[0]))
                .unwrap();
            assert!(first < open, "{n} ranks");
        }
    }

    #[test]
    fn names_from_files_are_escaped() {
        let mut r = rank(0, 100);
        r.rank = "<script>alert(1)</script>".into();
        let report = fleet(vec![r, rank(1, 200)], Vec::new());
        let page = ranks_html(&report);
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    #[test]
    fn strips_are_drawn_on_the_fleet_scale() {
        assert_eq!(height_of(0, 1000), HEIGHT);
        assert_eq!(height_of(1000, 1000), 0);
        assert_eq!(height_of(500, 1000), HEIGHT / 2);
        assert_eq!(step_path(&[0, 1000, 1000], 1000), "M0 100V100H1V0H2H3V100Z");
        assert_eq!(step_path(&[500, 250], 1000), "M0 100V50H1V75H2V100Z");
    }
}
