"""Independent reference for memtool's reserved-but-unused figures over time on
PyTorch `_dump_snapshot` pickles (Python stdlib only: plain `pickle.load`).

Reserved: the end-state segments' total with the trace's segment events
(`segment_alloc`/`segment_map` +size, `segment_free`/`segment_unmap` -size)
undone, then replayed forward. Live: requested sizes of `alloc` and
`free_completed` entries; frees of allocations the trace never made were live
at the start. Evaluated at the start and after every `alloc`/`free_completed`
entry; a segment event counts from the next of those on, and every one counts
at the end. Blocks of the end state that the trace never allocated are left
out: use it on snapshots that have none.

usage: python3 scripts/torch_segment_replay.py SNAPSHOT.pickle...
prints per file: points, most unused, mean unused, unused at the (first)
peak of live bytes, unused at the end.
"""
import pickle
import sys


def replay(path):
    data = pickle.load(open(path, "rb"))
    trace = data["device_traces"][0]
    sign = lambda e: e["size"] if e["action"] in ("segment_alloc", "segment_map") else -e["size"]
    reserved = sum(s["total_size"] for s in data["segments"])
    reserved -= sum(sign(e) for e in trace if e["action"].startswith("segment_"))
    seen, live = set(), 0
    for e in trace:
        if e["action"] == "alloc":
            seen.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in seen:
            live += e["size"]
            seen.add(e["addr"])
    points, pending = [(reserved, live)], 0
    for e in trace:
        action = e["action"]
        if action.startswith("segment_"):
            pending += sign(e)
        elif action in ("alloc", "free_completed"):
            reserved, pending = reserved + pending, 0
            live += e["size"] if action == "alloc" else -e["size"]
            points.append((reserved, live))
    points[-1] = (points[-1][0] + pending, points[-1][1])
    unused = [r - l for r, l in points]
    peak = max(range(len(points)), key=lambda i: (points[i][1], -i))
    return len(points), max(unused), sum(unused) // len(unused), unused[peak], unused[-1]


for path in sys.argv[1:]:
    print(path, *replay(path))
