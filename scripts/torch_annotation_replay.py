"""Independent reference for memtool's annotation stages on PyTorch
`_dump_snapshot` pickles (Python stdlib only: plain `pickle.load`).

For each entry of `external_annotations` (`{stage, name, device, time_us}`)
prints the live bytes at that moment: the trace of its device replayed up to
the entries recorded before `time_us` (for an END, at it too; `alloc` adds
the entry's size,
`free_completed` subtracts it), plus what was live before the recording, by
MemoryViz's rules: a `free_completed` of an address the trace never
allocated was live at the start (at the free's size), and so is an
`active_*` block of the end-state segments that no `alloc` made (at its
`requested_size`).

usage: python3 scripts/torch_annotation_replay.py SNAPSHOT.pickle...
prints per annotation: file, device, name, stage, time_us, live bytes.

       python3 scripts/torch_annotation_replay.py SNAPSHOT.pickle --at-us US --at-entry N
prints the live bytes of device 0 (the check of `peak --at`): US
microseconds after its first trace entry (every entry up to then
replayed), and after its first N `alloc`/`free_completed` entries.

       python3 scripts/torch_annotation_replay.py SNAPSHOT.pickle --by-annotation
prints the bytes live at device 0's first peak by the innermost annotated
range (the START/END pair that started last among those open, START and
END included) each live block was allocated in (the check of `peak --by
annotation`); blocks allocated outside every range, or before the
recording, are `<outside any annotation>`.

       python3 scripts/torch_annotation_replay.py TRACE.pt.trace.json.gz --trace-at TS
the same for a profiler trace's CPU memory (`Device Type` 0) at trace time
TS (microseconds, as `peak --at ... --format json` gives `peak_at`): its
`[memory]` events replayed by address up to TS, each live one by the
innermost CPU `user_annotation` span (other than `ProfilerStep#N`) it was
made in; memory live before the trace's first event is not counted.
"""
import gzip
import json
import pickle
import sys


def live_before_recording(data, device):
    """What was live before the trace's first entry, by MemoryViz's rules."""
    trace = data["device_traces"][device]
    allocated, freed_unseen = set(), 0
    for e in trace:
        if e["action"] == "alloc":
            allocated.add(e["addr"])
        elif e["action"] == "free_completed" and e["addr"] not in allocated:
            freed_unseen += e["size"]
            allocated.add(e["addr"])
    made = {e["addr"] for e in trace if e["action"] == "alloc"}
    still_live = sum(
        b["requested_size"]
        for s in data["segments"]
        if s.get("device", 0) == device
        for addr, b in block_addrs(s)
        if b["state"].startswith("active") and addr not in made
    )
    return freed_unseen + still_live


def change(e):
    return {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)


def at_moments(path, at_us, at_entry):
    data = pickle.load(open(path, "rb"))
    trace = data["device_traces"][0]
    start = live_before_recording(data, 0)
    until = trace[0]["time_us"] + at_us
    by_time = start + sum(change(e) for e in trace if e["time_us"] <= until)
    events = [e for e in trace if e["action"] in ("alloc", "free_completed")]
    by_entry = start + sum(change(e) for e in events[:at_entry])
    return by_time, by_entry


def annotations(path):
    data = pickle.load(open(path, "rb"))
    rows = []
    for a in data.get("external_annotations") or []:
        device = a.get("device", 0)
        trace = data["device_traces"][device]
        live = live_before_recording(data, device)
        for e in trace:
            # A START is the state before the entries at its time, an END
            # the state after them.
            if e["time_us"] > a["time_us"] or (
                e["time_us"] == a["time_us"] and a["stage"] == "START"
            ):
                break
            if e["action"] == "alloc":
                live += e["size"]
            elif e["action"] == "free_completed":
                live -= e["size"]
        rows.append((device, a["name"], a["stage"], a["time_us"], live))
    return rows


def by_annotation(path):
    data = pickle.load(open(path, "rb"))
    trace = data["device_traces"][0]
    ranges, opened = [], {}
    for a in data.get("external_annotations") or []:
        if a.get("device", 0) != 0 or a["name"].startswith("ProfilerStep#"):
            continue
        if a["stage"] == "START":
            opened.setdefault(a["name"], []).append(a["time_us"])
        elif opened.get(a["name"]):
            ranges.append((opened[a["name"]].pop(), a["time_us"], a["name"]))
    # Replay to the first peak, keeping what is live and where it was made.
    live_bytes = peak = live_before_recording(data, 0)
    live, at_peak = {}, {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e["time_us"])
            live_bytes += e["size"]
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
            live_bytes -= e["size"]
        else:
            continue
        if live_bytes > peak:
            peak, at_peak = live_bytes, dict(live)
    sums = {}
    for size, made in at_peak.values():
        inside = [r for r in ranges if r[0] <= made <= r[1]]
        name = max(inside)[2] if inside else "<outside any annotation>"
        sums[name] = sums.get(name, 0) + size
    outside = peak - sum(sums.values())
    sums["<outside any annotation>"] = sums.get("<outside any annotation>", 0) + outside
    return peak, sums


def trace_by_annotation(path, at):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ranges = [
        (e["ts"], e["ts"] + e["dur"], e["name"])
        for e in events
        if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")
    ]
    memory = sorted(
        (e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0),
        key=lambda e: e["ts"],
    )
    live = {}
    for e in memory:
        if e["ts"] > at:
            break
        size, addr = e["args"]["Bytes"], e["args"]["Addr"]
        if size > 0:
            live[addr] = (size, e["ts"])
        else:
            live.pop(addr, None)
    sums = {}
    for size, made in live.values():
        inside = [r for r in ranges if r[0] <= made <= r[1]]
        name = max(inside)[2] if inside else "<outside any annotation>"
        sums[name] = sums.get(name, 0) + size
    return sums


def block_addrs(segment):
    addr = segment["address"]
    for b in segment["blocks"]:
        yield addr, b
        addr += b["size"]


if __name__ == "__main__":
    if "--at-us" in sys.argv:
        path = sys.argv[1]
        at_us = int(sys.argv[sys.argv.index("--at-us") + 1])
        at_entry = int(sys.argv[sys.argv.index("--at-entry") + 1])
        by_time, by_entry = at_moments(path, at_us, at_entry)
        print(f"t+{at_us}us\t{by_time}\nentry {at_entry}\t{by_entry}")
        sys.exit(0)
    if "--trace-at" in sys.argv:
        at = float(sys.argv[sys.argv.index("--trace-at") + 1])
        for name, size in sorted(trace_by_annotation(sys.argv[1], at).items()):
            print(f"{name}\t{size}")
        sys.exit(0)
    if "--by-annotation" in sys.argv:
        peak, sums = by_annotation(sys.argv[1])
        print(f"peak\t{peak}")
        for name, size in sorted(sums.items(), key=lambda kv: -kv[1]):
            print(f"{name}\t{size}")
        sys.exit(0)
    for path in sys.argv[1:]:
        for device, name, stage, time_us, live in annotations(path):
            print(f"{path}\t{device}\t{name}\t{stage}\t{time_us}\t{live}")
