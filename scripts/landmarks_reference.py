#!/usr/bin/env python3
"""The landmarks of a PyTorch snapshot's timeline, worked out from the pickle
alone (standard library), for crates/memtool/tests/landmarks.rs to state and
check `memtool summary`'s `landmarks[]` against.

For each file and device, by trace position (the index of the entry in
`device_traces`, memtool's `event_index` axis; `time_us` where entries carry
it):
  - bytes in use after each `alloc` / `free_completed` (an address freed
    without an alloc in the trace, and end-state `active_allocated` blocks
    never allocated in it, are live from the start: MemoryViz's rules);
  - each allocation's phase from its frames, outermost to innermost: under
    the autograd engine (`run_backward`, `_engine_run_backward`, a `backward`
    in torch/_tensor.py or torch/autograd/__init__.py) it is backward,
    otherwise the innermost frame that names one decides (`zero_grad`;
    `torch/optim/` or a `step` in an optimizer file: optimizer; a name with
    `backward`; `loss` or `cross_entropy`; `forward`, `_call_impl`,
    `_wrapped_call_impl`);
  - runs of one phase in allocation order; a backward run takes the
    allocations of no phase after it (the engine's thread has no stack); a
    step begins at a forward run after a backward, optimizer or zero_grad
    run, and ends where the next begins (the last, at the last entry);
  - per step: the spans (first to last allocation of each phase, the
    highest in use inside), the peak, the cliffs (runs of frees with no
    allocation between them, the three largest of at least a twentieth of
    the peak above the floor), the spike (allocations live at the peak made
    at most max(2, events/100) events before it and freed at most that many
    after), the recompute waves (four or more backward allocations in a row
    whose two innermost Python frames are those of a forward allocation of
    the step); in the first step, the optimizer state (optimizer allocations live past
    the step, where its optimizer spans raise what is in use by at least
    half of their bytes: state made before the recording and remade is not
    made here);
  - the floor: the least in use from the second step's start to the end;
  - the largest allocation (the first of the largest size).

usage: scripts/landmarks_reference.py FILE... (plain or gzipped pickles)
"""
import gzip
import json
import os
import pickle
import sys

FORWARD, LOSS, BACKWARD, OPTIMIZER, ZERO_GRAD = "forward", "loss", "backward", "optimizer", "zero_grad"


def split_frame(frame):
    """(function, file) of a frame; the profiler's `file.py(12): fn` names
    with the file `none` are split."""
    name, file = frame.get("name", ""), frame.get("filename", "")
    if file in ("", "none", "??") and "): " in name:
        location, function = name.split("): ", 1)
        if "(" in location and location.rsplit("(", 1)[0].endswith(".py"):
            return function, location.rsplit("(", 1)[0]
    return name, file


def named(name):
    lower = name.lower()
    if "zero_grad" in lower:
        return ZERO_GRAD
    if "backward" in lower:
        return BACKWARD
    if "loss" in lower or "cross_entropy" in lower:
        return LOSS
    if "forward" in lower or name in ("_call_impl", "_wrapped_call_impl") or name.startswith("nn.Module: "):
        return FORWARD
    return None


def phase_of(frames):
    engine, innermost = False, None
    for frame in reversed(frames):  # outermost first
        function, file = split_frame(frame)
        file = file.replace("\\", "/")
        if ("autograd::Engine::" in function or "run_backward" in function
                or "autograd::python::PythonEngine::" in function or "autograd::generated::" in function
                or (function == "backward" and (file.endswith("torch/_tensor.py")
                                                or file.endswith("torch/autograd/__init__.py")))):
            engine, innermost = True, BACKWARD
            continue
        if function.endswith("zero_grad"):
            innermost = ZERO_GRAD
            continue
        base = file.rsplit("/", 1)[-1].lower()
        if "torch/optim/" in file or (function == "step" and "optim" in base) or "optimizer_step" in function:
            innermost = OPTIMIZER
            continue
        p = named(function)
        if p is None and file.endswith("torch/nn/modules/loss.py"):
            p = LOSS
        if p is not None:
            innermost = p
    return BACKWARD if engine else innermost


def frame_key(frames, i):
    """The i-th innermost Python frame (its file ends in `.py`), as written."""
    python = [f for f in frames if split_frame(f)[1].endswith(".py")]
    if i >= len(python):
        return None
    f = python[i]
    return (f.get("name"), f.get("filename"), f.get("line"))


def landmarks(data, device):
    trace = data["device_traces"][device]
    pos = lambda i: trace[i].get("time_us", i) if "time_us" in trace[0] else i
    # Live at the start: frees of addresses never allocated before them, and
    # end-state blocks never allocated in the trace.
    allocated, start = set(), 0
    for t in trace:
        if t["action"] == "alloc":
            allocated.add(t["addr"])
        elif t["action"] == "free_completed" and t["addr"] not in allocated:
            start += t["size"]
    live_end = {}
    for t in trace:
        if t["action"] == "alloc":
            live_end[t["addr"]] = t
        elif t["action"] == "free_completed":
            live_end.pop(t["addr"], None)
    for seg in data.get("segments", []):
        if seg.get("device", device) != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            block_addr, addr = addr, addr + b["size"]
            if b["state"] == "active_allocated" and block_addr not in live_end and block_addr not in allocated:
                start += b.get("requested_size") or b["size"]
    # Events (alloc and free_completed), in-use after each, lifetimes.
    events, in_use, live, allocs = [], [], {}, []
    total, seen = start, set()
    for i, t in enumerate(trace):
        if t["action"] == "alloc":
            a = {"made": len(events), "size": t["size"], "freed": None, "frames": t.get("frames", []),
                 "phase": phase_of(t.get("frames", []))}
            allocs.append(a)
            live[t["addr"]] = a
            seen.add(t["addr"])
            total += t["size"]
            events.append((i, "alloc", a))
        elif t["action"] == "free_completed":
            a = live.pop(t["addr"], None)
            if a is not None:
                a["freed"] = len(events)
                total -= a["size"]
            elif t["addr"] not in seen:
                total -= t["size"]
            events.append((i, "free", a))
        else:
            continue
        in_use.append(total)
    n = len(events)
    # Phase runs by event index.
    runs = []
    for e, (i, kind, a) in enumerate(events):
        if kind != "alloc" or a["phase"] is None:
            continue
        if runs and runs[-1][0] == a["phase"]:
            runs[-1][2] = e
        else:
            runs.append([a["phase"], e, e])
    for k, run in enumerate(runs):
        if run[0] == BACKWARD:
            end = runs[k + 1][1] if k + 1 < len(runs) else n
            for e in range(run[2] + 1, end):
                if events[e][1] == "alloc" and events[e][2]["phase"] is None:
                    run[2] = e
    steps, closed = [], True
    for run in runs:
        if run[0] == FORWARD and closed:
            if steps:
                steps[-1]["last"] = run[1] - 1
            steps.append({"id": len(steps), "first": run[1], "last": n - 1, "runs": []})
            closed = False
        if steps:
            steps[-1]["runs"].append(run)
            closed = closed or run[0] in (BACKWARD, OPTIMIZER, ZERO_GRAD)
    at = lambda e: pos(events[e][0])
    highest = lambda f, l: max(range(f, l + 1), key=lambda e: (in_use[e], -e))
    out = []
    frm = steps[1]["first"] if len(steps) > 1 else (steps[0]["first"] if steps else 0)
    low = min(range(frm, n), key=lambda e: (in_use[e], e))
    floor = in_use[low]
    out.append({"kind": "floor", "start": at(low), "bytes": floor})
    for s in steps:
        pk = highest(s["first"], s["last"])
        out.append({"kind": "step", "step": s["id"], "start": at(s["first"]), "end": at(s["last"]),
                    "bytes": in_use[pk]})
        for phase in (FORWARD, LOSS, BACKWARD, OPTIMIZER, ZERO_GRAD):
            rs = [r for r in s["runs"] if r[0] == phase]
            if rs:
                f, l = rs[0][1], rs[-1][2]
                out.append({"kind": phase, "step": s["id"], "start": at(f), "end": at(l),
                            "bytes": in_use[highest(f, l)]})
        # Spike.
        near = max(2, (s["last"] - s["first"]) // 100)
        spike = [a for a in allocs if pk - near <= a["made"] <= pk and a["freed"] is not None
                 and pk < a["freed"] <= pk + near]
        sb = sum(a["size"] for a in spike)
        if sb and sb * 100 >= in_use[pk]:
            out.append({"kind": "spike", "step": s["id"], "start": at(min(a["made"] for a in spike)),
                        "end": at(max(a["freed"] for a in spike)), "bytes": sb})
        # Cliffs.
        cliffs, cur = [], None
        for e in range(s["first"], s["last"] + 1):
            if events[e][1] == "free":
                before = in_use[e - 1] if e else start
                if before == in_use[e]:
                    continue
                cur = cur or [e, e, 0]
                cur[1] = e
                cur[2] += before - in_use[e]
            elif cur:
                cliffs.append(cur)
                cur = None
        if cur:
            cliffs.append(cur)
        threshold = max(1, (in_use[pk] - floor) // 20)
        cliffs = sorted([c for c in cliffs if c[2] >= threshold], key=lambda c: (-c[2], c[0]))[:3]
        for c in sorted(cliffs):
            out.append({"kind": "cliff", "step": s["id"], "start": at(c[0]), "end": at(c[1]), "bytes": c[2]})
        # Recompute waves.
        fwd = {(frame_key(a["frames"], 0), frame_key(a["frames"], 1))
               for r in s["runs"] if r[0] == FORWARD
               for e in range(r[1], r[2] + 1) if events[e][1] == "alloc"
               for a in [events[e][2]] if a["phase"] == FORWARD and frame_key(a["frames"], 0)}
        waves, wave = [], []
        for r in s["runs"]:
            if r[0] != BACKWARD:
                continue
            for e in range(r[1], r[2] + 1):
                if events[e][1] != "alloc" or events[e][2]["phase"] != BACKWARD:
                    continue
                a = events[e][2]
                if frame_key(a["frames"], 0) and (frame_key(a["frames"], 0), frame_key(a["frames"], 1)) in fwd:
                    wave.append(e)
                elif wave:
                    waves.append(wave)
                    wave = []
        if wave:
            waves.append(wave)
        for w in waves:
            if len(w) >= 4:
                out.append({"kind": "recompute", "step": s["id"], "start": at(w[0]), "end": at(w[-1]),
                            "bytes": sum(events[e][2]["size"] for e in w)})
    if steps:
        s = steps[0]
        opt = [r for r in s["runs"] if r[0] == OPTIMIZER]
        state = [events[e][2] for r in opt for e in range(r[1], r[2] + 1)
                 if events[e][1] == "alloc" and events[e][2]["phase"] == OPTIMIZER
                 and (events[e][2]["freed"] is None or events[e][2]["freed"] > s["last"])]
        kept = sum(a["size"] for a in state)
        grew = in_use[opt[-1][2]] - (in_use[opt[0][1] - 1] if opt and opt[0][1] else start) if opt else 0
        if state and grew * 2 >= kept:
            out.append({"kind": "optimizer_state", "step": 1, "start": at(state[0]["made"]),
                        "end": at(state[-1]["made"]), "bytes": sum(a["size"] for a in state),
                        "allocation_count": len(state)})
    largest = max(allocs, key=lambda a: (a["size"], -a["made"]))
    out.append({"kind": "largest_allocation", "start": at(largest["made"]),
                "end": at(largest["freed"] if largest["freed"] is not None else n - 1), "bytes": largest["size"]})
    return out


def main(paths):
    for path in paths:
        with open(path, "rb") as raw:
            head = raw.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            data = pickle.load(f)
        for device, trace in enumerate(data["device_traces"]):
            if trace:
                print(f"# {os.path.basename(path)} device {device}")
                for l in landmarks(data, device):
                    print(json.dumps(l))


if __name__ == "__main__":
    main(sys.argv[1:])
