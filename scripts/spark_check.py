#!/usr/bin/env python3
"""scripts/spark_ranks.py run in PySpark local mode, checked against the
memtool command (run by .ci/run in a throwaway virtualenv holding the wheel,
pyspark, pyarrow and pandas; Java from the distribution's packages).

The shared PyTorch snapshots (../shared/fixtures/torch/*.pickle) stand for
the ranks of one job, linked as rank0.pickle, rank1.pickle, ... . The job
must give:

1. each rank's peak, replayed in Spark SQL from the allocations table, equal
   to the peak the command reports for that file alone, and the bytes it
   marks live at the peak equal to what the command breaks down there;
2. the fleet figures (median, max, imbalance, outliers) those peaks give,
   computed here independently;
3. its table in the hive layout (`rank=N/`) that docs/export.md describes,
   readable without Spark (pyarrow's dataset reader), row for row what
   `memtool export` writes for each file.

Usage: spark_check.py MEMTOOL   (the command installed with the wheel)
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

import memtool
import pyarrow.dataset as ds
import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(REPO, "scripts", "spark_ranks.py")
SHARED = os.path.join(REPO, "..", "shared", "fixtures", "torch")
OUTLIER_RATIO = 1.10


def run_memtool(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True).stdout


def reference_peaks(binary, files):
    """{(rank, memory): (peak_bytes, bytes live at the peak)} as the command
    reports them, each file read alone. (`memtool ranks DIR --format json`,
    whose per-rank peak is this same figure, can take its place: its
    `ranks[]` carry `rank` and `peak_bytes`.)"""
    peaks = {}
    for rank, path in files.items():
        doc = json.loads(run_memtool(binary, "summary", path, "--format", "json"))
        for m in doc["memories"]:
            at_peak = sum(g["bytes"] for g in m["top_stacks"])
            peaks[(rank, m["id"])] = (m["peak_bytes"], at_peak)
    return peaks


def main():
    binary = sys.argv[1]
    fixtures = sorted(glob.glob(os.path.join(SHARED, "*.pickle")))
    assert len(fixtures) >= 3, f"shared snapshots missing under {SHARED}"
    with tempfile.TemporaryDirectory() as work:
        ranks_dir = os.path.join(work, "ranks")
        os.mkdir(ranks_dir)
        files = {}
        for rank, fixture in enumerate(fixtures):
            path = os.path.join(ranks_dir, f"rank{rank}.pickle")
            os.symlink(os.path.abspath(fixture), path)
            files[rank] = path
        out = os.path.join(work, "out")
        run = subprocess.run(
            [sys.executable, JOB, os.path.join(ranks_dir, "*.pickle"), "--out", out],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            sys.exit(f"spark_ranks.py failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
        with open(os.path.join(out, "ranks.json")) as f:
            report = json.load(f)

        # 1. Each rank's peak, as the command reports it.
        expected = reference_peaks(binary, files)
        got = {
            (r["rank"], r["memory"]): (r["peak_bytes"], r["live_at_peak_bytes"])
            for r in report["ranks"]
        }
        assert got == expected, (got, expected)
        # The same peaks as `memtool ranks` gives over the folder.
        doc = json.loads(run_memtool(binary, "ranks", ranks_dir, "--format", "json"))
        by_ranks = {(r["rank_number"], r["memory"]): r["peak_bytes"] for r in doc["ranks"]}
        # One rank rule: the job numbers files by `memtool.rank_of`, the
        # command by the same Rust function.
        for r in doc["ranks"]:
            assert memtool.rank_of(r["file"]) == r["rank_number"], r
            assert memtool.rank_of("file:" + r["file"]) == r["rank_number"], r
        spark_peaks = {key: peak for key, (peak, _) in got.items()}
        assert by_ranks == spark_peaks, (by_ranks, spark_peaks)
        for r in report["ranks"]:
            assert r["input"] == "file:" + files[r["rank"]], r

        # 2. The fleet figures those peaks give.
        per_rank = {}
        for (rank, _), (peak, _) in expected.items():
            per_rank[rank] = max(peak, per_rank.get(rank, 0))
        median = statistics.median(per_rank.values())
        highest = max(per_rank, key=lambda r: (per_rank[r], -r))
        assert report["median_bytes"] == median, (report["median_bytes"], median)
        assert report["max_bytes"] == per_rank[highest], report["max_bytes"]
        assert report["highest_rank"] == highest, report["highest_rank"]
        assert abs(report["imbalance"] - per_rank[highest] / median) < 1e-9, report["imbalance"]
        outliers = sorted(r for r, p in per_rank.items() if p > OUTLIER_RATIO * median)
        assert report["outliers"] == outliers, (report["outliers"], outliers)
        difference = report["highest_over_median"]
        assert difference and difference[0]["more_bytes"] > 0, difference

        # 3. The hive layout, read without Spark: the rows `memtool export`
        # writes for each file, under rank=N/.
        table = ds.dataset(
            os.path.join(out, "allocations"), format="parquet", partitioning="hive"
        ).to_table()
        for rank, path in files.items():
            exported = os.path.join(work, f"rank{rank}.parquet")
            run_memtool(binary, "export", path, "-o", exported)
            want = pq.read_table(exported)
            mine = table.filter(ds.field("rank") == rank)
            assert mine.num_rows == want.num_rows, (rank, mine.num_rows, want.num_rows)
            for column in ("bytes", "alloc_event", "free_event", "live_at_peak", "user_frame"):
                a = sorted(mine.column(column).to_pylist(), key=repr)
                b = sorted(want.column(column).to_pylist(), key=repr)
                assert a == b, (rank, column)
            assert os.path.isdir(os.path.join(out, "allocations", f"rank={rank}")), rank
    print(
        f"spark_check: {len(files)} ranks: peaks equal memtool's, median {median:,.0f} B, "
        f"imbalance {per_rank[highest] / median:.3f}, outliers {outliers}"
    )


if __name__ == "__main__":
    main()
