#!/usr/bin/env python3
"""Writes two CUDA snapshots under crates/memtool/tests/data/streams/ that
exercise what no shared snapshot records: a second CUDA stream, and
torch.compile's `compile_context`. Both are DERIVED, not captured: no GPU
is needed.

The allocations are those of a real run: the first third of the trace of
the made-here fixture torch_cpu_transformer.snapshot.pickle (torch 2.15, a
2-layer TransformerEncoder trained with Adam), replayed through the model
of the CUDA caching allocator in make_torch_oom_fixtures.py (sizes rounded,
small and large pools, segments, blocks), with frames as a CUDA snapshot
records them. Every entry carries `compile_context` and `user_metadata`,
as torch 2.5 and later write them.

- side_stream.pickle: the default stream (0) runs the model; a second
  stream (7) holds what data-parallel training puts on a side stream: an
  all-reduce bucket (an NCCL communication buffer, made under
  torch/distributed/distributed_c10d.py) for every 8 gradients the backward
  pass makes, the size of those gradients, freed 24 entries later; and a
  buffer for the next batch, prefetched on the side stream in the last
  tenth of the window and live at its end. The caching allocator never
  shares a segment between streams, so stream 7 has its own segments and
  blocks (`stream: 7` on its segments and trace entries).
- compiled.pickle: the same trace (on stream 0 only) as a run that
  compiled each encoder layer with torch.compile and recorded with
  `_record_memory_history(compile_context=True)`: entries made inside
  layer 0's forward carry `Torch-Compiled Region: 0/0` (frame 0, its first
  compile), those inside layer 1's `Torch-Compiled Region: 0/1` (the same
  code recompiled for the second module), the rest `N/A` (torch's value
  outside compiled code). The frames stay those of eager execution.

expected.json beside them holds the figures the trace gives, replayed by
this script alone (`expected`), which crates/memtool/tests/streams.rs
checks memtool against.

usage: python3 scripts/make_torch_stream_fixtures.py [SOURCE]
  (from the repository root; SOURCE defaults to
   ../shared/fixtures/torch/torch_cpu_transformer.snapshot.pickle)
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_torch_oom_fixtures as oom  # noqa: E402

OUT = os.path.join(oom.ROOT, "crates", "memtool", "tests", "data", "streams")
SIDE_STREAM = 7
# Gradients per all-reduce bucket, and how long a bucket stays (entries).
BUCKET_GRADIENTS = 8
BUCKET_ENTRIES = 24
COMM_FRAMES = [
    {"name": "all_reduce", "filename": oom.SITE_PACKAGES + "torch/distributed/distributed_c10d.py",
     "line": 2806},
    {"name": "_allreduce_fut", "filename": oom.SITE_PACKAGES
     + "torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py", "line": 28},
    {"name": "allreduce_hook", "filename": oom.SITE_PACKAGES
     + "torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py", "line": 54},
]
PREFETCH_FRAMES = [
    {"name": "prefetch", "filename": "torch_train.py", "line": 20},
    {"name": "<module>", "filename": "torch_train.py", "line": 17},
]
NOT_COMPILED = "N/A"


class StreamAllocator(oom.Allocator):
    """The oom script's allocator, for one stream: its entries and
    segments carry the stream, its addresses lie apart from stream 0's."""

    def __init__(self, stream, trace, base):
        super().__init__()
        self.stream = stream
        self.trace = trace  # shared by the streams, in order
        self.next_address = base
        self.context = NOT_COMPILED

    def entry(self, action, addr, size, frames):
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": self.stream,
                           "time_us": oom.T0 + len(self.trace), "frames": frames,
                           "compile_context": self.context, "user_metadata": ""})

    def segments_dump(self):
        segments = self.dump()["segments"]
        for s in segments:
            s["stream"] = self.stream
        return segments


def compile_context(profiler_frames):
    for f in profiler_frames:
        if f["name"] == "nn.Module: TransformerEncoderLayer_0":
            return "Torch-Compiled Region: 0/0"
        if f["name"] == "nn.Module: TransformerEncoderLayer_1":
            return "Torch-Compiled Region: 0/1"
    return NOT_COMPILED


def is_backward(profiler_frames):
    return any("run_backward" in f["name"] for f in profiler_frames)


def derive(source, side_stream):
    trace = []
    main = StreamAllocator(0, trace, 0x7F00_0000_0000)
    side = StreamAllocator(SIDE_STREAM, trace, 0x7F80_0000_0000)
    addresses = {}
    gradients = []  # sizes of the backward's gradients not yet bucketed
    buckets = []  # (entry index to free it at, address)
    prefetched = False
    for i, e in enumerate(source):
        frames = oom.cuda_frames(e["frames"])
        main.context = NOT_COMPILED if side_stream else compile_context(e["frames"])
        if e["action"] == "alloc":
            if e["addr"] in addresses:
                main.free(addresses.pop(e["addr"]), frames)
            addresses[e["addr"]] = main.malloc(e["size"], frames)
            if side_stream and is_backward(e["frames"]):
                gradients.append(e["size"])
        elif e["action"] == "free_completed" and e["addr"] in addresses:
            main.free(addresses.pop(e["addr"]), frames)
        if not side_stream:
            continue
        while buckets and buckets[0][0] <= i:
            side.free(buckets.pop(0)[1], COMM_FRAMES + frames[-2:])
        if len(gradients) >= BUCKET_GRADIENTS:
            # Made by the DDP reducer's hook, under the user's backward call.
            buckets.append((i + BUCKET_ENTRIES, side.malloc(sum(gradients), COMM_FRAMES + frames[-2:])))
            gradients = []
        if not prefetched and i >= len(source) * 9 // 10:
            side.malloc(4 * oom.MIB, PREFETCH_FRAMES)
            prefetched = True
    segments = main.segments_dump() + (side.segments_dump() if side_stream else [])
    snap = main.dump()
    snap["segments"] = segments
    snap["device_traces"] = [trace]
    return snap


def expected(snap):
    """The figures torch's rules give, replayed here from the trace alone
    (a block counts its request from `alloc` to `free_completed`): each
    stream's own peak, the memory's peak (the first point with the most
    live bytes) and, there, the bytes of each stream and each compiled
    graph (`compile_context` without torch's prefix; `<none>` for N/A)."""
    live = {}
    by_stream = {}
    own_peak = {}
    top, at_top = -1, None
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            by_stream[e["stream"]] = by_stream.get(e["stream"], 0) + e["size"]
        elif e["action"] == "free_completed" and e["addr"] in live:
            gone = live.pop(e["addr"])
            by_stream[gone["stream"]] -= gone["size"]
        else:
            continue
        for stream, b in by_stream.items():
            own_peak[stream] = max(own_peak.get(stream, 0), b)
        total = sum(by_stream.values())
        if total > top:
            top, at_top = total, list(live.values())
    at_peak_streams, at_peak_graphs = {}, {}
    for e in at_top:
        at_peak_streams[str(e["stream"])] = at_peak_streams.get(str(e["stream"]), 0) + e["size"]
        graph = e["compile_context"]
        graph = "<none>" if graph == NOT_COMPILED else graph[len("Torch-Compiled Region: "):]
        at_peak_graphs[graph] = at_peak_graphs.get(graph, 0) + e["size"]
    return {"peak_bytes": top, "stream_peak_bytes": {str(k): v for k, v in own_peak.items()},
            "at_peak_by_stream": at_peak_streams, "at_peak_by_compiled_graph": at_peak_graphs}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else oom.DEFAULT_SOURCE
    with open(path, "rb") as f:
        source = pickle.load(f)["device_traces"][0]
    source = source[: len(source) // 3]
    os.makedirs(OUT, exist_ok=True)
    figures = {}
    for name, side_stream in (("side_stream", True), ("compiled", False)):
        oom.FRAME_LISTS.clear()
        snap = derive(source, side_stream)
        with open(os.path.join(OUT, f"{name}.pickle"), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        figures[name] = expected(snap)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(figures, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
