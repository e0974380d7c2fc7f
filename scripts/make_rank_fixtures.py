#!/usr/bin/env python3
"""Writes a job's worth of per-rank PyTorch snapshots for `memtool ranks`,
derived from real snapshots (standard library only; nothing is committed:
the tests run this into a temporary folder).

Two sets:

- `fleet` (default 64 ranks, `rank_<r>.pickle`): every rank is the shared
  CUDA snapshot bcrafton_memory_snapshot.pickle with one allocation added
  before its trace, live to the end, so every point of the rank's timeline
  is that much higher and its peak is the source's peak plus it:
  - every rank holds a small per-rank buffer, (r mod 8) x 0.25 % of the
    source's peak (`rank_buffers` at train.py:40), so no two neighbours are
    alike;
  - the outlier ranks (default 5, 17 and 42) also hold 30 % of the source's
    peak under a frame no other rank has (`cache_activations` at
    train.py:88): 30 % higher than the others, and what the highest rank
    holds that the median rank does not.
- `oom` (default 8 ranks, `snapshot-<r>.pickle`): the derived out-of-memory
  snapshot crates/memtool/tests/data/oom/capacity.pickle (a 48 MiB request
  on a 64 MiB device, see its README) for the failing rank (default 5); the
  others are the same run with the failure's `oom` entry taken out of the
  trace and a per-rank buffer of r x 512 KiB added, so each stands at its
  own distance from the 64 MiB device.

The added allocation is a trace `alloc` entry before the first one and a
segment holding it as an active block (so the allocator's end state agrees
with the trace). The source's peak is worked out here, independently of
memtool, with MemoryViz's rules (blocks freed in the window but never
allocated there, and blocks active at the end never allocated there, were
live from the start).

usage: python3 scripts/make_rank_fixtures.py fleet OUTDIR [--ranks N] [--outliers 5,17,42] [--from SNAPSHOT]
       python3 scripts/make_rank_fixtures.py oom OUTDIR [--ranks N] [--failing R] [--from SNAPSHOT]
  (from the repository root)
"""
import argparse
import os
import pickle

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FLEET_SOURCE = os.path.join(ROOT, "..", "shared", "fixtures", "torch", "bcrafton_memory_snapshot.pickle")
OOM_SOURCE = os.path.join(ROOT, "crates", "memtool", "tests", "data", "oom", "capacity.pickle")
BLOCK = 512  # the caching allocator's size rounding
KIB, MIB = 1024, 1024 * 1024


def load(path):
    # The sources are this repository's own fixture and a shared fixture
    # whose hash ../shared/fixtures/THIRD_PARTY.sha256 pins: plain dicts and
    # lists, trusted input.
    with open(path, "rb") as f:
        return pickle.load(f)


def round_up(n):
    return max(BLOCK, (n + BLOCK - 1) // BLOCK * BLOCK)


def memory_viz_peak(snapshot):
    """The peak of device 0's Active Memory Timeline as MemoryViz draws it."""
    trace = snapshot["device_traces"][0]
    allocated = set()
    before = 0
    for e in trace:
        if e["action"] == "alloc":
            allocated.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in allocated:
            before += e["size"]
    for seg in snapshot.get("segments", []):
        if seg.get("device", 0) != 0:
            continue
        addr = seg["address"]
        for b in seg.get("blocks", []):
            a = b.get("address", addr)
            if b["state"] == "active_allocated" and a not in allocated:
                before += b.get("requested_size", b["size"])
            addr = a + b["size"]
    live = peak = before
    for e in trace:
        if e["action"] == "alloc":
            live += e["size"]
        elif e["action"] == "free_completed":
            live -= e["size"]
        peak = max(peak, live)
    return peak


def top_address(snapshot):
    top = 0
    for seg in snapshot.get("segments", []):
        top = max(top, seg["address"] + seg["total_size"])
    for e in snapshot["device_traces"][0]:
        if "addr" in e and e["action"] != "oom":
            top = max(top, e["addr"] + e.get("size", 0))
    return top


def frame(name, line):
    return {"name": name, "filename": "train.py", "line": line}


def with_buffers(snapshot, buffers):
    """`snapshot` with each (size, frames) of `buffers` allocated before its
    trace and live to the end; the source is left as it was."""
    trace = snapshot["device_traces"][0]
    first = next((e for e in trace if "time_us" in e), None)
    address = (top_address(snapshot) + 2 * MIB) // (2 * MIB) * (2 * MIB)
    added, segments = [], []
    for size, frames in buffers:
        entry = {"action": "alloc", "addr": address, "size": size, "stream": 0, "frames": frames}
        if first is not None:
            entry["time_us"] = first["time_us"] - 1
        added.append(entry)
        segments.append({
            "device": 0, "address": address, "total_size": size, "allocated_size": size,
            "active_size": size, "requested_size": size, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [{"address": address, "size": size, "requested_size": size,
                        "state": "active_allocated", "frames": frames}],
        })
        address += (size + 2 * MIB) // (2 * MIB) * (2 * MIB)
    out = dict(snapshot)
    out["device_traces"] = [added + list(trace)] + list(snapshot["device_traces"][1:])
    out["segments"] = list(snapshot.get("segments", [])) + segments
    return out


def write(path, snapshot):
    with open(path, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)


def fleet(args):
    source = load(args.source or FLEET_SOURCE)
    peak = memory_viz_peak(source)
    outliers = {int(r) for r in args.outliers.split(",") if r}
    for r in range(args.ranks):
        buffers = []
        jitter = round_up((r % 8) * peak // 400) if r % 8 else 0
        if jitter:
            buffers.append((jitter, [frame("rank_buffers", 40), frame("<module>", 120)]))
        if r in outliers:
            buffers.append((round_up(peak * 3 // 10), [frame("cache_activations", 88), frame("<module>", 121)]))
        write(os.path.join(args.out, f"rank_{r}.pickle"), with_buffers(source, buffers))


def oom(args):
    source = load(args.source or OOM_SOURCE)
    trace = source["device_traces"][0]
    for r in range(args.ranks):
        if r == args.failing:
            snapshot = source
        else:
            ok = dict(source)
            ok["device_traces"] = [[e for e in trace if e["action"] != "oom"]] + list(source["device_traces"][1:])
            snapshot = with_buffers(ok, [(r * 512 * KIB, [frame("rank_buffers", 40), frame("<module>", 120)])] if r else [])
        write(os.path.join(args.out, f"snapshot-{r}.pickle"), snapshot)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", choices=["fleet", "oom"])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int)
    parser.add_argument("--outliers", default="5,17,42")
    parser.add_argument("--failing", type=int, default=5)
    parser.add_argument("--from", dest="source")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.set == "fleet":
        args.ranks = args.ranks or 64
        fleet(args)
    else:
        args.ranks = args.ranks or 8
        oom(args)


if __name__ == "__main__":
    main()
