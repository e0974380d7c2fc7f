#!/usr/bin/env python3
"""Writes the small PyTorch snapshot pickles under tests/torch/, with the
numbers torch's own rules give for them (tests/torch/expected.json).

Standard library only (no torch): the snapshots are plain dicts and lists in
the schema of torch.cuda.memory._snapshot(), written with pickle protocols
2, 4 and 5 and gzip'd, plus an old-format one (a bare list of segments whose
blocks keep frames under `history`) and hostile pickles that must be refused.

The expected numbers follow ../shared/oracles/torch_reference.py:
`_memory_viz.segsum`'s rules for reserved / allocated / free bytes, a
replay of the trace that adds `alloc` sizes and subtracts `free_completed`,
and the peak and end of MemoryViz.js's "Active Memory Timeline".

usage: python3 scripts/make_torch_fixtures.py   (from the repository root)
"""
import collections
import fractions
import gzip
import json
import os
import pickle
import sys

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "torch")
KIB, MIB = 1024, 1024 * 1024

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_viz_reference import memory_viz_active_timeline  # noqa: E402


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


def snapshot():
    """A ring-buffer snapshot of one device.

    Frame lists are shared objects (as in PyTorch), so the pickle memo
    refers back to them. The trace starts after the program did: one
    `free_completed` has no `alloc`, and one live block was never allocated
    in the window. One block is freed but not yet reusable
    (`active_pending_free`). There is a second device with only a segment.
    """
    main = frame("<module>", "train.py", 40)
    step = frame("train_step", "train.py", 22)
    linear = frame("forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 125)
    weights_frames = [frame("__init__", "model.py", 10), main]
    act_frames = [linear, step, main]  # shared by several entries
    grad_frames = [frame("backward", "/venv/lib/python3.12/site-packages/torch/_tensor.py", 581), step, main]

    a = 0x7F00_0000_0000  # large segment, 2 MiB
    b = 0x7F00_1000_0000  # small segment, 1 MiB (allocated in the window)
    t0 = 1_700_000_000_000_000
    trace = [
        # freed in the window, allocated before it
        {"action": "free_requested", "addr": a + 1536 * KIB, "size": 100_000, "stream": 0, "time_us": t0, "frames": grad_frames},
        {"action": "free_completed", "addr": a + 1536 * KIB, "size": 100_000, "stream": 0, "time_us": t0 + 1, "frames": grad_frames},
        {"action": "segment_alloc", "addr": b, "size": 1 * MIB, "stream": 0, "time_us": t0 + 2, "frames": act_frames},
        {"action": "alloc", "addr": a + 1 * MIB, "size": 500_000, "stream": 0, "time_us": t0 + 3, "frames": act_frames},
        {"action": "alloc", "addr": b, "size": 300, "stream": 0, "time_us": t0 + 4, "frames": act_frames},
        {"action": "free_requested", "addr": b, "size": 300, "stream": 0, "time_us": t0 + 5, "frames": act_frames},
        {"action": "alloc", "addr": b + 512, "size": 2000, "stream": 0, "time_us": t0 + 6, "frames": grad_frames,
         "compile_context": "N/A", "user_metadata": "", "some_future_key": [1, 2, 3]},
        {"action": "free_requested", "addr": b + 512, "size": 2000, "stream": 0, "time_us": t0 + 7, "frames": grad_frames},
        {"action": "free_completed", "addr": b + 512, "size": 2000, "stream": 0, "time_us": t0 + 8, "frames": grad_frames},
        # an allocation that failed: `oom` keeps the device's free bytes, not an address
        {"action": "oom", "device_free": 3 * MIB, "size": 8 * MIB, "stream": 0, "time_us": t0 + 9, "frames": grad_frames},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t0 + 10, "frames": []},
    ]
    segments = [
        {
            "device": 0, "address": a, "total_size": 2 * MIB, "allocated_size": 1 * MIB + 512 * KIB,
            "active_size": 1 * MIB + 512 * KIB, "requested_size": 1_000_000 + 500_000, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": weights_frames,
            "blocks": [
                # live before the window
                {"address": a, "size": 1 * MIB, "requested_size": 1_000_000, "state": "active_allocated", "frames": weights_frames},
                # allocated in the window, still live
                {"address": a + 1 * MIB, "size": 512 * KIB, "requested_size": 500_000, "state": "active_allocated", "frames": act_frames},
                {"address": a + 1536 * KIB, "size": 512 * KIB, "requested_size": 100_000, "state": "inactive", "frames": []},
            ],
        },
        {
            "device": 0, "address": b, "total_size": 1 * MIB, "allocated_size": 512, "active_size": 512,
            "requested_size": 300, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": act_frames,
            "blocks": [
                {"address": b, "size": 512, "requested_size": 300, "state": "active_pending_free", "frames": act_frames},
                {"address": b + 512, "size": 1 * MIB - 512, "requested_size": 2000, "state": "inactive", "frames": []},
            ],
        },
        {
            "device": 1, "address": 0x7E00_0000_0000, "total_size": 2 * MIB, "allocated_size": 0,
            "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [{"address": 0x7E00_0000_0000, "size": 2 * MIB, "requested_size": 0, "state": "inactive", "frames": []}],
        },
    ]
    return {
        "segments": segments,
        "device_traces": [trace, []],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False},
        "external_annotations": [
            {"stage": "START", "name": "ProfilerStep#7", "device": 0, "time_us": t0 + 2},
            {"stage": "START", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": t0 + 3},
            {"stage": "END", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": t0 + 4},
            {"stage": "END", "name": "ProfilerStep#7", "device": 0, "time_us": t0 + 8},
        ],
    }


def legacy():
    """A PyTorch 1.x-era snapshot: a bare list of segments, no block
    addresses, frames and the request under `history`."""
    main = frame("<module>", "old.py", 3)
    return [
        {
            "device": 0, "address": 0x7000_0000, "total_size": 2 * MIB, "allocated_size": 1 * MIB,
            "active_size": 1 * MIB, "stream": 0, "segment_type": "large",
            "blocks": [
                {"size": 1 * MIB, "state": "active_allocated",
                 "history": [{"addr": 0x7000_0000, "real_size": 1_000_000, "frames": [main]}]},
                {"size": 1 * MIB, "state": "inactive", "history": []},
            ],
        }
    ]


def block_extra(b):
    # torch.cuda._memory_viz._block_extra
    if "frames" not in b:
        if "history" in b and b["history"]:
            return b["history"][0].get("frames", []), b["history"][0]["real_size"]
        return [], b.get("requested_size", b["size"])
    return b["frames"], b["requested_size"]


def reference(data):
    """The numbers ../shared/oracles/torch_reference.py computes."""
    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    devices = collections.defaultdict(lambda: {"reserved": 0, "allocated": 0, "free_external": 0,
                                               "free_internal": 0, "segments": 0})
    for seg in data["segments"]:
        d = devices[str(seg.get("device", 0))]
        d["segments"] += 1
        d["reserved"] += seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                _, a = block_extra(b)
                d["allocated"] += a
                d["free_internal"] += b["size"] - a
            else:
                d["free_external"] += b["size"]
    actions, replay = {}, {}
    for i, t in enumerate(data.get("device_traces", [])):
        if not t:
            continue
        actions[str(i)] = dict(collections.Counter(e["action"] for e in t))
        cur = mx = 0
        for e in t:
            if e["action"] == "alloc":
                cur += e["size"]
            elif e["action"] == "free_completed":
                cur -= e["size"]
            mx = max(mx, cur)
        replay[str(i)] = {"net_change": cur, "max_rise": mx}
    out = {"devices": devices, "trace_actions": actions, "trace_replay": replay}
    if data.get("device_traces"):
        # MemoryViz draws snapshots with traces (a bare list of segments has none).
        out["memory_viz_active"] = {d: memory_viz_active(data, int(d))
                                    for d in sorted(set(devices) | set(actions))}
    return out


def memory_viz_active(data, device):
    """MemoryViz.js's "Active Memory Timeline" peak and end, by the port in
    memory_viz_reference.py (the one the shared snapshots are checked by)."""
    full = memory_viz_active_timeline(data, device)
    return {"max_size": full["max_size"], "end": full["end"]}


def chrome_trace():
    """A Kineto-style trace: two ProfilerStep spans, nested cpu_ops on two
    threads, [memory] events with Addr and totals on the CPU and cuda:0. One
    CUDA buffer was allocated before profiling (its free is in the trace)
    and 1 MiB more was live and never freed (only `Total Allocated` tells)."""
    pid, main_tid, bwd_tid = 100, 100, 200
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "python"}}]

    def op(name, ts, dur, tid=main_tid, cat="cpu_op"):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                   "args": {"External id": len(ev), "Input Dims": [[8, 64], []]}})

    totals = collections.defaultdict(int)
    totals[(1, 0)] = 1 * MIB + 4096  # live before the trace on cuda:0
    reserved = {(0, -1): 0, (1, 0): 8 * MIB}

    def mem(ts, addr, nbytes, dev=(1, 0), tid=main_tid):
        totals[dev] += nbytes
        ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid, "tid": tid,
                   "ts": ts, "args": {"Total Reserved": reserved[dev], "Total Allocated": totals[dev],
                                      "Bytes": nbytes, "Addr": addr, "Device Id": dev[1], "Device Type": dev[0]}})

    op("ProfilerStep#0", 1000.0, 500.0, cat="user_annotation")
    op("aten::linear", 1010.0, 100.0)
    op("aten::addmm", 1020.5, 50.0)
    op("aten::empty", 1021.0, 2.0)  # allocates inside addmm inside linear
    mem(1021.5, 0xA000, 2 * MIB)
    mem(1090.0, 0xB000, 512 * KIB)  # after addmm ended (1070.5), still inside linear
    op("aten::relu", 1200.0, 30.0)
    mem(1210.0, 0xC000, 256 * KIB)
    mem(1300.0, 0x9000, -4096)  # allocated before the trace
    mem(1310.0, 0xC000, -256 * KIB)
    mem(1320.0, 0x1000, 64, dev=(0, -1))  # CPU, outside any op
    op("ProfilerStep#1", 2000.0, 500.0, cat="user_annotation")
    op("autograd::engine::evaluate_function: AddmmBackward0", 2010.0, 100.0, tid=bwd_tid)
    mem(2020.0, 0xD000, 1 * MIB, tid=bwd_tid)
    mem(2400.0, 0xA000, -2 * MIB)
    mem(2410.0, 0x1000, -64, dev=(0, -1))
    # The same events, as a PyTorch 1.9 trace would write them: no Addr, no totals.
    old = [dict(e, args={k: v for k, v in e["args"].items() if k in ("Bytes", "Device Id", "Device Type")})
           if e["name"] == "[memory]" else dict(e, cat="Operator") if e.get("cat") == "cpu_op" else e
           for e in ev]
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 16 * 1024 * MIB}],
             "traceEvents": ev, "traceName": "synthetic"}
    return trace, {"traceEvents": old}, dict(totals)


def main():
    os.makedirs(OUT, exist_ok=True)
    snap = snapshot()
    for proto in (2, 4, 5):
        with open(os.path.join(OUT, f"snapshot.p{proto}.pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    with gzip.GzipFile(os.path.join(OUT, "snapshot.p4.pickle.gz"), "wb", mtime=0) as f:
        pickle.dump(snap, f, protocol=4)
    with open(os.path.join(OUT, "legacy.p2.pickle"), "wb") as f:
        pickle.dump(legacy(), f, protocol=2)
    # Hostile: objects that unpickling would import and call.
    with open(os.path.join(OUT, "hostile_reduce.p2.pickle"), "wb") as f:
        pickle.dump({"segments": [fractions.Fraction(1, 3)]}, f, protocol=2)
    with open(os.path.join(OUT, "hostile_stack_global.p4.pickle"), "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[fractions.Fraction(1, 3)]]}, f, protocol=4)
    trace, old_trace, _ = chrome_trace()
    with gzip.GzipFile(os.path.join(OUT, "synthetic.pt.trace.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(trace).encode())
    with open(os.path.join(OUT, "synthetic_v19.pt.trace.json"), "w") as f:
        json.dump(old_trace, f)
    mem = [e for e in trace["traceEvents"] if e["name"] == "[memory]"]
    peaks = {}
    for e in mem:
        a = e["args"]
        key = "cpu" if a["Device Type"] == 0 else f"cuda:{a['Device Id']}"
        peaks[key] = max(peaks.get(key, 0), a["Total Allocated"])
    # export_memory_timeline: [times, sizes] (column 0 unused, then the 8
    # categories), and the raw form [t_ns, action, bytes, category index].
    times = [10, 20, 30, 40]
    sizes = [[0, 100, 0, 0, 0, 0, 0, 0, 0],
             [0, 100, 200, 0, 0, 50, 0, 0, 0],
             [0, 100, 200, 0, 0, 50, 100, 0, 1],
             [0, 100, 200, 0, 0, 0, 100, 0, 1]]
    with open(os.path.join(OUT, "synthetic.memory_timeline.json"), "w") as f:
        json.dump([times, sizes], f)
    raw = [[-1, 1, 100, 0], [20000, 2, 200, 1], [20000, 2, 50, 4], [30000, 2, 100, 5],
           [30000, 2, 1, 7], [35000, 3, -100, 5], [35000, 3, 100, 5], [40000, 4, -50, 4]]
    with gzip.GzipFile(os.path.join(OUT, "synthetic.memory_timeline.raw.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(raw).encode())
    # The raw form replayed row by row; the peak is taken between timestamps.
    raw_total = sum(r[2] for r in raw if r[0] < 0)
    raw_peak = raw_total
    for t in sorted({r[0] for r in raw if r[0] >= 0}):
        raw_total += sum(r[2] for r in raw if r[0] == t)
        raw_peak = max(raw_peak, raw_total)
    # Each allocation's innermost enclosing op on its thread.
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    attributions = {}
    for e in mem:
        if e["args"]["Bytes"] <= 0:
            continue
        inside = [o for o in ops if o["tid"] == e["tid"] and o["ts"] <= e["ts"] <= o["ts"] + o["dur"]]
        inner = max(inside, key=lambda o: o["ts"], default=None)
        attributions[str(e["args"]["Addr"])] = inner["name"] if inner else None
    expected = {
        "snapshot": reference(snap),
        "legacy": reference(legacy()),
        "trace_peak_total_allocated": peaks,
        "timeline_peak": max(sum(r) for r in sizes),
        "timeline_final": sum(sizes[-1]),
        "raw_timeline_peak": raw_peak,
        "raw_timeline_final": raw_total,
        "alloc_ops": attributions,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
