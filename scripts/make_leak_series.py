#!/usr/bin/env python3
"""Writes series of PyTorch snapshot pickles under tests/torch/series/, one
file per step as `torch.cuda.memory._dump_snapshot` writes them when called
once per step, for `memtool leaks` on a series of snapshot files.

Standard library only (no torch): the schema of
torch.cuda.memory._snapshot(), as in make_torch_fixtures.py. Each file's
`segments` hold every block live at the dump; its trace holds the step's
allocations (the blocks live before it are the ones it never allocated).

- `leak_step{1..4}.pickle` (cuda:0): 4 MiB of weights live throughout; 2 MiB
  of optimizer state made in step 2 and kept (grew once); a history list
  that keeps 64 KiB more every step (steady growth: a leak of 192 KiB from
  the end of step 1 to the end of step 4); 1 MiB of activations made and
  freed in every step.
- `moved_step{1..3}.pickle` (cuda:0 and cuda:1): in step 2 a 1 MiB buffer
  made under a library stack (site-packages) is freed and made again under
  the user's stack, and each device keeps 10 KiB more; step 3 changes
  nothing. The buffer moved: only the 10 KiB is growth, and only once.

usage: python3 scripts/make_leak_series.py   (from the repository root)
"""
import os
import pickle

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "torch", "series")
KIB, MIB = 1024, 1024 * 1024
T0 = 1_700_000_000_000_000


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


MAIN = frame("<module>", "train.py", 50)
LOOP = frame("train_step", "train.py", 30)
LIB = frame("forward", "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 125)
STACKS = {
    "weights": [frame("__init__", "model.py", 10), MAIN],
    "optimizer": [frame("step", "optim.py", 74), LOOP, MAIN],
    "history": [frame("keep_history", "train.py", 41), LOOP, MAIN],
    "activations": [LIB, frame("forward", "model.py", 20), LOOP, MAIN],
    "library": [LIB, frame("forward", "model.py", 22), LOOP, MAIN],
    "user": [frame("cache_output", "train.py", 44), LOOP, MAIN],
    "kept": [frame("log_metrics", "train.py", 47), LOOP, MAIN],
}


def snapshot(devices, step):
    """`devices`: {device: (live, made, freed)} where `live` is the blocks
    live at the dump, `made` the blocks (of `live` or freed) allocated in
    this step and `freed` those freed in it; a block is (address, size,
    stack name)."""
    segments, traces = [], []
    for device, (live, made, freed) in sorted(devices.items()):
        base = 0x7F00_0000_0000 + device * 0x100_0000_0000
        blocks, used = [], 0
        for addr, size, stack in sorted(live):
            blocks.append({"address": base + addr, "size": size, "requested_size": size,
                           "state": "active_allocated", "frames": STACKS[stack]})
            used += size
        total = 64 * MIB
        end = max((a + s for a, s, _ in live), default=0)
        blocks.append({"address": base + end, "size": total - end, "requested_size": 0,
                       "state": "inactive", "frames": []})
        segments.append({
            "device": device, "address": base, "total_size": total, "allocated_size": used,
            "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks,
        })
        t = T0 + step * 1_000_000
        trace = []
        for addr, size, stack in made:
            t += 10
            trace.append({"action": "alloc", "addr": base + addr, "size": size, "stream": 0,
                          "time_us": t, "frames": STACKS[stack]})
        for addr, size, stack in freed:
            t += 10
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": base + addr, "size": size, "stream": 0,
                              "time_us": t, "frames": STACKS[stack]})
        traces.append(trace)
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
    }


def leak_series():
    weights = (0, 4 * MIB, "weights")
    optimizer = (4 * MIB, 2 * MIB, "optimizer")
    activations = (40 * MIB, 1 * MIB, "activations")
    files = []
    for step in range(1, 5):
        history = [(8 * MIB + i * 64 * KIB, 64 * KIB, "history") for i in range(step)]
        live = [weights] + history + ([optimizer] if step >= 2 else [])
        made = [activations, history[-1]] + ([optimizer] if step == 2 else [])
        files.append(snapshot({0: (live, made, [activations])}, step))
    return files


def moved_series():
    files = []
    for step in range(1, 4):
        devices = {}
        for device in (0, 1):
            buffer_at = (0, MIB, "library") if step == 1 else (2 * MIB, MIB, "user")
            kept = (4 * MIB, 100 * KIB if step == 1 else 110 * KIB, "kept")
            live = [buffer_at, kept]
            if step == 2:
                devices[device] = (live, [buffer_at, kept], [(0, MIB, "library"), (4 * MIB, 100 * KIB, "kept")])
            else:
                devices[device] = (live, [], [])
        files.append(snapshot(devices, step))
    return files


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, series in (("leak_step", leak_series()), ("moved_step", moved_series())):
        for i, snap in enumerate(series, 1):
            with open(os.path.join(OUT, f"{name}{i}.pickle"), "wb") as f:
                pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
