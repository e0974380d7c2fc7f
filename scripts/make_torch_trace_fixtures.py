#!/usr/bin/env python3
"""Writes two small PyTorch Chrome traces under
crates/memtool/tests/data/torch_trace/, in the layout recent PyTorch
profilers write, and the figures they should give (expected.json there),
computed here from the events alone.

- steps_cpu_gpu.pt.trace.json: two training steps, each annotated twice as
  recent PyTorch does: `ProfilerStep#N` on the CPU (`user_annotation`) and
  its copy on the GPU's stream (`gpu_user_annotation`), which spans the
  step's kernels and so starts and ends at other times. Memory events carry
  CPU times; each step's last events (its frees, an allocation) come after
  the GPU copy has ended, inside the CPU span.
- rocm.pt.trace.json: the same events recorded by PyTorch built for ROCm:
  `[memory]` events of `Device Type: 6` (HIP) with `Total Reserved`, and
  `deviceProperties` with `totalGlobalMem`, beside CPU events (`Device
  Type: 0`).

No GPU is needed: the events are written as the profiler writes them.

usage: python3 scripts/make_torch_trace_fixtures.py   (from the repository root)
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "crates", "memtool", "tests", "data", "torch_trace")
MIB = 1 << 20
CPU_PID, CPU_TID = 100, 100
GPU_PID, GPU_TID = 0, 7
CAPACITY = 64 * 1024 ** 3
RESERVED = 96 * MIB

# Each step: (start, duration) of its CPU span; the GPU copy runs from 30 µs
# after the CPU start to 60% of the CPU span (kernels launched early finish
# before the CPU side ends: the optimizer's frees, the next batch).
STEPS = [(1000.0, 1000.0), (2500.0, 1000.0)]


def gpu_copy(start, dur):
    return start + 30.0, dur * 0.6 - 30.0


def memory_events(device_type, device_id):
    """Allocations and frees of two steps: activations made early and freed
    late in the step (after the GPU copy's end), a gradient buffer freed at
    the next step's start, and one tensor made at the very end of step 1
    that stays live."""
    events = []  # (ts, bytes, addr)
    base = 0x7F0000000000
    for n, (start, dur) in enumerate(STEPS):
        acts = [base + n * 0x10000000 + i * 0x1000000 for i in range(3)]
        for i, a in enumerate(acts):
            events.append((start + 50.0 + 10 * i, 4 * MIB * (i + 1), a))
        grad = base + 0x0F000000 + n * 0x100000
        events.append((start + 200.0, 2 * MIB, grad))
        # After the GPU copy has ended: the activations are freed.
        for i, a in enumerate(acts):
            events.append((start + dur * 0.8 + 10 * i, -4 * MIB * (i + 1), a))
        if n == 0:
            events.append((start + dur * 0.9, 1 * MIB, base + 0x0E000000))
        # The gradient buffer goes at the next step's start (or the end).
        events.append((start + dur * 0.95, -2 * MIB, grad))
    events.sort()
    out = []
    total = 0
    for ts, b, a in events:
        total += b
        args = {"Addr": a, "Bytes": b, "Total Allocated": total, "Device Id": device_id,
                "Device Type": device_type}
        args["Total Reserved"] = RESERVED if device_type != 0 else 0
        out.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": CPU_PID, "tid": CPU_TID, "ts": ts, "args": args})
    return out


def step_figures(events):
    """Per CPU step: allocations, frees and the bytes in use after its last
    event, from the events alone."""
    out = []
    for n, (start, dur) in enumerate(STEPS):
        inside = [e for e in events if start <= e["ts"] <= start + dur]
        allocs = sum(1 for e in inside if e["args"]["Bytes"] > 0)
        frees = sum(1 for e in inside if e["args"]["Bytes"] < 0)
        end_bytes = sum(e["args"]["Bytes"] for e in events if e["ts"] <= start + dur)
        out.append({"step": n, "start": int(start), "end": int(start + dur), "allocations": allocs,
                    "deallocations": frees, "end_bytes": end_bytes})
    return out


def annotations():
    out = []
    for n, (start, dur) in enumerate(STEPS):
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                    "pid": CPU_PID, "tid": CPU_TID, "ts": start, "dur": dur, "args": {}})
        gs, gd = gpu_copy(start, dur)
        out.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{n}",
                    "pid": GPU_PID, "tid": GPU_TID, "ts": gs, "dur": gd, "args": {}})
    return out


def trace(events, props):
    return {"schemaVersion": 1, "deviceProperties": props,
            "traceEvents": sorted(annotations() + events, key=lambda e: e["ts"]),
            "traceName": "made by scripts/make_torch_trace_fixtures.py"}


def main():
    os.makedirs(OUT, exist_ok=True)
    props = [{"id": 0, "name": "Fake GPU", "totalGlobalMem": CAPACITY}]
    cuda = memory_events(1, 0)
    write("steps_cpu_gpu", trace(cuda, props))
    hip = memory_events(6, 0)
    cpu = [dict(e, args=dict(e["args"], **{"Device Type": 0, "Device Id": -1}))
           for e in memory_events(0, -1)[:4]]
    rocm_props = [{"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": CAPACITY}]
    write("rocm", trace(hip + cpu, rocm_props))
    expected = {
        "steps": step_figures(cuda),
        "gpu_steps": [{"step": n, "start": gpu_copy(s, d)[0], "end": sum(gpu_copy(s, d))}
                      for n, (s, d) in enumerate(STEPS)],
        "capacity_bytes": CAPACITY,
        "reserved_bytes": RESERVED,
        "peak_bytes": max(e["args"]["Total Allocated"] for e in hip),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def write(name, doc):
    with open(os.path.join(OUT, f"{name}.pt.trace.json"), "w") as f:
        json.dump(doc, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
