use super::*;

#[test]
fn ranks_without_a_number_are_shown_by_their_file_name_without_extensions() {
    assert_eq!(file_stem("logdir/run/host0.xplane.pb"), "host0");
    assert_eq!(file_stem("capacity.pickle"), "capacity");
    assert_eq!(file_stem(".hidden"), ".hidden");
    assert_eq!(file_stem("noext"), "noext");
}

#[test]
fn rank_numbers_come_from_the_file_name() {
    for (file, want) in [
        ("run/rank3.pickle", Some(3)),
        ("run/RANK_12.pickle", Some(12)),
        ("snapshots/memory_rank-7_step100.pickle", Some(7)),
        ("snapshot-3.pickle", Some(3)),
        ("dir-9/worker_12.pt.trace.json", Some(12)),
        ("host0.xplane.pb", None),
        ("memory.prof", None),
        ("rank.pickle", None),
    ] {
        assert_eq!(rank_number(file), want, "{file}");
    }
}

/// A rank of `peak` bytes whose strip climbs to its peak at the middle.
pub(crate) fn rank(n: u64, peak: u64) -> RankSummary {
    RankSummary {
        rank: n.to_string(),
        rank_number: Some(n),
        file: format!("rank{n}.pickle"),
        memory: "cuda:0".into(),
        host: None,
        peak_bytes: peak,
        peak_at: 0,
        peak_label: String::new(),
        peak_step: None,
        peak_phase: None,
        reserved_bytes: None,
        capacity_bytes: None,
        final_bytes: 0,
        fragmentation_at_peak: None,
        oom: None,
        warnings: Vec::new(),
        by_user_frame: BTreeMap::new(),
        by_op: BTreeMap::new(),
        axis: Axis::TimeUs,
        strip: (0..STRIP_COLUMNS as u64)
            .map(|c| peak * (50 - c.abs_diff(50)) / 50)
            .collect(),
        program: None,
    }
}

#[test]
fn a_few_high_ranks_are_outliers_and_many_are_a_group() {
    // 20 ranks within 3% of each other, two 30% higher.
    let mut ranks: Vec<RankSummary> = (0..22).map(|n| rank(n, 1000 + n % 4 * 10)).collect();
    ranks[4].peak_bytes = 1300;
    ranks[9].peak_bytes = 1310;
    let report = fleet(ranks, Vec::new());
    assert_eq!(report.outliers, ["9", "4"]);
    assert_eq!(report.median_peak_bytes, 1020);
    assert_eq!(report.max_rank.as_deref(), Some("9"));
    assert!(report.stage_groups.is_empty());
    // Two pipeline stages of eight ranks: no outlier, two groups.
    let ranks: Vec<RankSummary> = (0..16)
        .map(|n| rank(n, if n < 8 { 2000 + n } else { 1000 + n }))
        .collect();
    let report = fleet(ranks, Vec::new());
    assert!(report.outliers.is_empty(), "{:?}", report.outliers);
    assert_eq!(report.stage_groups.len(), 2);
    assert_eq!(
        report.stage_groups[1].ranks,
        ["0", "1", "2", "3", "4", "5", "6", "7"]
    );
    // Peaks spread with no bulk around the median: no outlier.
    let ranks: Vec<RankSummary> = (0..20).map(|n| rank(n, 1000 << n)).collect();
    let report = fleet(ranks, Vec::new());
    assert!(report.outliers.is_empty(), "{:?}", report.outliers);
    assert_eq!(report.median_cluster_ranks, 1);
    // Two ranks, one 30% higher: that one.
    let report = fleet(vec![rank(0, 1000), rank(1, 1300)], Vec::new());
    assert_eq!(report.outliers, ["1"]);
    // One rank: its own median, no outlier, no comparison.
    let report = fleet(vec![rank(0, 5)], Vec::new());
    assert!(report.outliers.is_empty() && report.highest_vs_median.is_none());
    assert_eq!(report.imbalance, Some(1.0));
}
