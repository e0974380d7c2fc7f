#!/usr/bin/env python3
"""An independent reading of training phases and Python stacks in PyTorch
profiles, for the figures `crates/memtool/tests/torch.rs` checks memtool's
against (Python standard library only; memtool never needs it).

For a snapshot pickle (`_dump_snapshot`, or `_profile_to_snapshot`) it replays
the trace as MemoryViz does (frees without an `alloc` and end-state blocks
never allocated are live from the start) and prints the peak, the bytes live
there by phase, and the phases of the allocations in order (runs). For a
Chrome trace (`*.pt.trace.json[.gz]`) it pairs `[memory]` events by address,
gives each the `python_function` spans on its thread that enclose it (the
innermost is the leaf) and the phase they and the named ranges around it
tell, and prints the same, plus the bytes live at the peak by leaf frame.

The phase rules, written again here from their description: under the
autograd engine (`run_backward`, `torch/_tensor.py` `backward`,
`torch::autograd::Engine::*`, `autograd::engine::evaluate_function` ranges)
is backward; otherwise the innermost frame or range that names a phase
decides: `zero_grad`; `torch/optim/` files, a `step` in a file named like an
optimizer, `Optimizer.step#` ranges; names with `backward`; `loss` or
`cross_entropy`; `forward`, `_call_impl`, `nn.Module: X`.

usage: scripts/torch_phases_reference.py FILE...
"""
import collections
import gzip
import json
import pickle
import re
import sys

PROFILER_FRAME = re.compile(r"^(.*\.py)\((\d+)\): (.+)$")


def split(name, file=""):
    """(function, file, line) of a frame as the profiler may write it."""
    if file in ("", "none", "??"):
        m = PROFILER_FRAME.match(name)
        if m:
            return m.group(3), m.group(1), int(m.group(2))
    return name, file, 0


def label(function, file, line):
    if not file:
        return function
    return f"{function} {file}:{line}" if line else f"{function} {file}"


def word(name):
    low = name.lower()
    if "zero_grad" in low:
        return "zero_grad"
    if "backward" in low:
        return "backward"
    if "loss" in low or "cross_entropy" in low:
        return "loss"
    if "forward" in low or name in ("_call_impl", "_wrapped_call_impl") or name.startswith("nn.Module: "):
        return "forward"
    return None


def frame_mark(function, file):
    file = file.replace("\\", "/")
    engine = ("autograd::Engine::", "autograd::python::PythonEngine::", "autograd::generated::", "run_backward")
    if any(k in function for k in engine) or (
        function == "backward" and (file.endswith("torch/_tensor.py") or file.endswith("torch/autograd/__init__.py"))
    ):
        return "ENGINE"
    if function.endswith("zero_grad"):
        return "zero_grad"
    if "torch/optim/" in file or (function == "step" and "optim" in file.split("/")[-1].lower()) or "optimizer_step" in function:
        return "optimizer"
    return word(function) or ("loss" if file.endswith("torch/nn/modules/loss.py") else None)


def range_mark(name):
    if name.startswith("autograd::engine::evaluate_function"):
        return "ENGINE"
    if name.startswith("Optimizer.zero_grad"):
        return "zero_grad"
    if name.startswith("Optimizer.step"):
        return "optimizer"
    return word(name) or ("optimizer" if "optimizer" in name.lower() else None)


def phase(marks_outermost_first):
    marks = [m for m in marks_outermost_first if m]
    if "ENGINE" in marks:
        return "backward"
    return marks[-1] if marks else None


def runs(phases):
    out = []
    for p in phases:
        if p is None:
            continue
        if out and out[-1][0] == p:
            out[-1][1] += 1
        else:
            out.append([p, 1])
    return [p for p, _ in out]


def snapshot(path):
    with open(path, "rb") as f:
        s = pickle.load(f)
    result = {}
    for device, trace in enumerate(s.get("device_traces", [])):
        if not trace:
            continue
        # Frees of addresses not live then were allocated before the trace;
        # what is left allocated at its end is live at the end.
        freed_before, live_at_end = 0, set()
        for e in trace:
            if e["action"] == "alloc":
                live_at_end.add(e["addr"])
            elif e["action"] == "free_completed":
                if e["addr"] in live_at_end:
                    live_at_end.discard(e["addr"])
                else:
                    freed_before += e["size"]
        still_live = 0
        for seg in s.get("segments", []):
            if seg.get("device", device) != device:
                continue
            addr = seg["address"]
            for b in seg["blocks"]:
                block_addr, addr = addr, addr + b["size"]
                if b["state"] == "active_allocated" and block_addr not in live_at_end:
                    still_live += b.get("requested_size") or b["size"]
        current = freed_before + still_live
        live, best, order = {}, (current, {}, freed_before), []
        freed_later = freed_before
        for e in trace:
            if e["action"] == "alloc":
                frames = e.get("frames", [])
                p = phase([frame_mark(*split(f["name"], f["filename"])[:2]) for f in reversed(frames)])
                order.append(p)
                live[e["addr"]] = (e["size"], p)
                current += e["size"]
                if current > best[0]:
                    best = (current, dict(live), freed_later)
            elif e["action"] == "free_completed":
                if e["addr"] in live:
                    current -= live.pop(e["addr"])[0]
                else:
                    current -= e["size"]
                    freed_later -= e["size"]
        by_phase = collections.Counter()
        for size, p in best[1].values():
            by_phase[p or "<none>"] += size
        by_phase["<allocated before recording, freed later>"] += best[2]
        by_phase["<allocated before recording, still live>"] += still_live
        result[str(device)] = {
            "peak_bytes": best[0],
            "by_phase": {k: v for k, v in sorted(by_phase.items()) if v},
            "phase_runs": runs(order),
        }
    return result


def trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    spans = collections.defaultdict(list)  # tid -> (start, end, is_frame, name)
    for e in events:
        if e.get("ph") != "X" or "dur" not in e or e["name"].startswith("ProfilerStep#"):
            continue
        is_frame = e.get("cat") == "python_function"
        if is_frame or range_mark(e["name"]):
            spans[e["tid"]].append((e["ts"], e["ts"] + e["dur"], is_frame, e["name"]))
    for s in spans.values():
        s.sort(key=lambda x: (x[0], -x[1]))

    def around(e):
        # Brute force on purpose: every span that encloses the event.
        return [s for s in spans[e["tid"]] if s[0] <= e["ts"] <= s[1]]

    live, current, best, order = {}, 0, (0, {}), []
    for e in memory:
        a = e["args"]
        if a.get("Device Type", 0) != 0:
            continue
        if a["Bytes"] >= 0:
            enclosing = around(e)
            marks = [frame_mark(*split(n)[:2]) if is_frame else range_mark(n) for _, _, is_frame, n in enclosing]
            frames = [split(n) for _, _, is_frame, n in enclosing if is_frame]
            leaf = label(*frames[-1]) if frames else "<no stack>"
            p = phase(marks)
            order.append(p)
            if a["Addr"] in live:
                current -= live.pop(a["Addr"])[0]
            live[a["Addr"]] = (a["Bytes"], p, leaf)
            current += a["Bytes"]
            if current > best[0]:
                best = (current, dict(live))
        elif a["Addr"] in live:
            current -= live.pop(a["Addr"])[0]
    by_phase, by_leaf = collections.Counter(), collections.Counter()
    for size, p, leaf in best[1].values():
        by_phase[p or "<none>"] += size
        by_leaf[leaf] += size
    return {
        "cpu": {
            "peak_bytes": best[0],
            "by_phase": dict(sorted(by_phase.items())),
            "by_leaf_frame": dict(sorted(by_leaf.items())),
            "phase_runs": runs(order),
        }
    }


def main():
    out = {}
    for path in sys.argv[1:]:
        out[path.rsplit("/", 1)[-1]] = trace(path) if ".json" in path else snapshot(path)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
