"""Independent reference for memtool's annotation stages on PyTorch
`_dump_snapshot` pickles (Python stdlib only: plain `pickle.load`).

For each entry of `external_annotations` (`{stage, name, device, time_us}`)
prints the live bytes at that moment: the trace of its device replayed up to
the entries recorded before `time_us` (`alloc` adds the entry's size,
`free_completed` subtracts it), plus what was live before the recording, by
MemoryViz's rules: a `free_completed` of an address the trace never
allocated was live at the start (at the free's size), and so is an
`active_*` block of the end-state segments that no `alloc` made (at its
`requested_size`).

usage: python3 scripts/torch_annotation_replay.py SNAPSHOT.pickle...
prints per annotation: file, device, name, stage, time_us, live bytes.
"""
import pickle
import sys


def annotations(path):
    data = pickle.load(open(path, "rb"))
    rows = []
    for a in data.get("external_annotations") or []:
        device = a.get("device", 0)
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
        live = freed_unseen + still_live
        for e in trace:
            if e["time_us"] >= a["time_us"]:
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
    for path in sys.argv[1:]:
        for device, name, stage, time_us, live in annotations(path):
            print(f"{path}\t{device}\t{name}\t{stage}\t{time_us}\t{live}")
