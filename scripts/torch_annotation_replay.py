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
"""
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
    for path in sys.argv[1:]:
        for device, name, stage, time_us, live in annotations(path):
            print(f"{path}\t{device}\t{name}\t{stage}\t{time_us}\t{live}")
