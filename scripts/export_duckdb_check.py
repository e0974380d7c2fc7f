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

Usage: export_duckdb_check.py MEMTOOL
"""

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
    print(f"export: DuckDB {duckdb.__version__} read {len(FIXTURES)} exports "
          f"({memories} memories) as summary reports them; docs/export.md's "
          f"query names {op} (+{growth} bytes), as memtool leaks does")


if __name__ == "__main__":
    main()
