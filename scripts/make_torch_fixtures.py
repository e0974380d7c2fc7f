#!/usr/bin/env python3
"""Writes the small PyTorch snapshot pickles under tests/torch/, with the
numbers torch's own rules give for them (tests/torch/expected.json).

Standard library only (no torch): the snapshots are plain dicts and lists in
the schema of torch.cuda.memory._snapshot(), written with pickle protocols
2, 4 and 5 and gzip'd, plus an old-format one (a bare list of segments whose
blocks keep frames under `history`) and hostile pickles that must be refused.

The expected numbers follow ../shared/oracles/torch_reference.py:
`_memory_viz.segsum`'s rules for reserved / allocated / free bytes, and a
replay of the trace that adds `alloc` sizes and subtracts `free_completed`.

usage: python3 scripts/make_torch_fixtures.py   (from the repository root)
"""
import collections
import fractions
import gzip
import json
import os
import pickle

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "torch")
KIB, MIB = 1024, 1024 * 1024


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
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t0 + 9, "frames": []},
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
        "external_annotations": [{"stage": "START", "name": "step", "device": 0, "time_us": t0}],
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
    return {"devices": devices, "trace_actions": actions, "trace_replay": replay}


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
    expected = {
        "snapshot": reference(snap),
        "legacy": reference(legacy()),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
