#!/usr/bin/env python3
"""`memtool export` read by DuckDB (run by .ci/run in a throwaway virtualenv
with `pip install duckdb`).

1. Every kind of input in tests/ is exported; DuckDB reads the Parquet and
   finds the numbers `memtool summary --format json` reports: one row per
   allocation, the live set's bytes at the peak, the final bytes.
2. The JAX leak series tests/pprof/leak1..4.prof is exported as a directory of
   runs, and the query of docs/export.md (taken from the page itself) names
   the op whose peak grew most: it must be the group `memtool leaks` finds
   growing, with the same first and last bytes.
3. The shared PyTorch snapshots are exported as the ranks of one job into
   hive-style `rank=N/` folders, and docs/export.md's ranks query gives each
   rank the peak `memtool summary` reports for its file.

Usage: export_duckdb_check.py MEMTOOL
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import duckdb

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXTURES = [
    "tests/pprof/training.prof",
    "tests/pprof/sharded.prof",
    "tests/xspace/jax_mlp.xplane.pb",
    "tests/torch/snapshot.p4.pickle",
    "tests/torch/synthetic.pt.trace.json.gz",
    "tests/torch/synthetic.memory_timeline.json",
]

LEAK_SERIES = [f"tests/pprof/leak{i}.prof" for i in range(1, 5)]


def memtool(binary, *args):
    out = subprocess.run(
        [binary, *args], cwd=REPO, check=True, capture_output=True
    )
    return out.stdout


def check_fixture(binary, fixture, work):
    allocations = os.path.join(work, "allocations.parquet")
    memories = os.path.join(work, "memories.parquet")
    memtool(binary, "export", fixture, "-o", allocations, "--memories", memories)
    summary = json.loads(memtool(binary, "summary", fixture, "--format", "json"))
    checked = 0
    for m in summary["memories"]:
        where = f"{fixture} {m['id']}"
        rows, made, at_peak, at_end = duckdb.execute(
            """SELECT count(*),
                      count(alloc_event),
                      coalesce(sum(bytes) FILTER (WHERE live_at_peak), 0),
                      coalesce(sum(bytes) FILTER (WHERE free_event IS NULL), 0)
               FROM read_parquet(?) WHERE input = ? AND memory = ?""",
            [allocations, fixture, m["id"]],
        ).fetchone()
        live_at_peak = sum(g["bytes"] for g in m["top_stacks"])
        assert at_peak == live_at_peak, (where, at_peak, live_at_peak)
        if m.get("snapshots"):
            assert rows == m["allocations"], (where, rows, m["allocations"])
        else:
            assert at_end == m["final_bytes"], (where, at_end, m["final_bytes"])
            expected = rows if m["events"] == 0 else made
            assert expected == m["allocations"], (where, expected, m["allocations"])
        (peak,) = duckdb.execute(
            "SELECT peak_bytes FROM read_parquet(?) WHERE input = ? AND memory = ?",
            [memories, fixture, m["id"]],
        ).fetchone()
        assert peak == m["peak_bytes"], (where, peak, m["peak_bytes"])
        checked += 1
    assert checked > 0, fixture
    return checked


def docs_query():
    """The first ```sql block of docs/export.md's section on runs."""
    text = open(os.path.join(REPO, "docs", "export.md"), encoding="utf-8").read()
    section = text.split("## The op whose peak grew most", 1)[1]
    match = re.search(r"```sql\n(.*?)```", section, re.S)
    return match.group(1)


def ranks_query():
    """The ```sql block of docs/export.md's section on ranks."""
    text = open(os.path.join(REPO, "docs", "export.md"), encoding="utf-8").read()
    section = text.split("## Many ranks on one machine", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def check_ranks_query(binary, work):
    """The shared PyTorch snapshots as the ranks of one job, exported into
    `rank=N/` folders: docs/export.md's query gives each rank the peak
    `memtool summary` reports for its file."""
    snapshots = sorted(glob.glob(os.path.join(REPO, "..", "shared", "fixtures", "torch", "*.pickle")))
    assert len(snapshots) >= 3, "the shared PyTorch snapshots are missing"
    expected = {}
    for rank, snapshot in enumerate(snapshots):
        folder = os.path.join(work, "exports", f"rank={rank}")
        os.makedirs(folder)
        memtool(binary, "export", snapshot, "-o", os.path.join(folder, "allocations.parquet"))
        summary = json.loads(memtool(binary, "summary", snapshot, "--format", "json"))
        expected[rank] = max(m["peak_bytes"] for m in summary["memories"])
    os.chdir(work)
    rows = duckdb.execute(ranks_query()).fetchall()
    got = {rank: peak for rank, peak, _ in rows}
    assert got == expected, (got, expected)
    median = sorted(expected.values())[len(expected) // 2]
    for rank, peak, over in rows:
        assert abs(over - peak / median) < 1e-9, (rank, over)
    return len(rows)


def check_growth_query(binary, work):
    exports = os.path.join(work, "exports")
    os.makedirs(exports)
    for run in LEAK_SERIES:
        name = os.path.basename(run).replace(".prof", ".parquet")
        memtool(binary, "export", run, "-o", os.path.join(exports, name))
    os.chdir(work)
    memory, op, first, last, growth = duckdb.execute(docs_query()).fetchone()
    leaks = json.loads(memtool(binary, "leaks", *LEAK_SERIES, "--format", "json"))
    finding = leaks["memories"][0]["findings"][0]
    # `leaks` keys groups by their shown stack; the query by op or, where
    # there is none (pprof), your own frame: the stack's first frame.
    expected = finding["key"].split(" <- ")[0]
    assert (memory, op) == (leaks["memories"][0]["id"], expected), (memory, op, expected)
    assert (first, last) == (finding["bytes"][0], finding["bytes"][-1]), (first, last)
    assert growth == finding["growth_bytes"], (growth, finding["growth_bytes"])
    return op, growth


def main():
    binary = os.path.abspath(sys.argv[1])
    memories = 0
    with tempfile.TemporaryDirectory() as work:
        for fixture in FIXTURES:
            memories += check_fixture(binary, fixture, work)
        op, growth = check_growth_query(binary, work)
    with tempfile.TemporaryDirectory() as work:
        ranks = check_ranks_query(binary, work)
    print(f"export: DuckDB {duckdb.__version__} read {len(FIXTURES)} exports "
          f"({memories} memories) as summary reports them; docs/export.md's "
          f"query names {op} (+{growth} bytes), as memtool leaks does; its ranks "
          f"query gives {ranks} ranks the peaks summary reports")


if __name__ == "__main__":
    main()
