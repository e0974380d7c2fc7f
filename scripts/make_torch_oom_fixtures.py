#!/usr/bin/env python3
"""Writes three out-of-memory PyTorch snapshots under
crates/memtool/tests/data/oom/, and the figures torch's own rules give for
them (expected.json there).

No GPU is needed. The allocations are those of a real run: the made-here
fixture torch_cpu_transformer.snapshot.pickle (torch 2.15, a 2-layer
TransformerEncoder trained 3 steps, converted by torch's own
`_memory_viz._profile_to_snapshot`). Its trace (sizes, order, Python stacks)
is replayed through a model of the CUDA caching allocator
(c10/cuda/CUDACachingAllocator.cpp): sizes rounded to 512 bytes, a small
pool (requests <= 1 MiB, 2 MiB segments) and a large pool (20 MiB segments
for requests under 10 MiB, else the request rounded to 2 MiB), best fit by
size then address within a pool and stream, blocks split when the rest is at
least 512 bytes (small) or over 1 MiB (large), freed blocks merged with free
neighbours. When an allocation fails the allocator releases every segment
that holds no live block and retries; the snapshot an out-of-memory
observer (`torch._C._cuda_attach_out_of_memory_observer`) dumps then is
written in the format of `torch.cuda.memory._snapshot()`:

- `device_traces`: the trace entries, ending with the `oom` entry, which
  keeps `device_free` (what cudaMemGetInfo reported) where other entries
  keep `addr`, and `size` = the request rounded by the allocator;
- `segments`: the allocator's segments at that moment, with their blocks;
- `allocator_settings`: the defaults.

Frames are made what a CUDA snapshot records: the profiler's
`file.py(line): function` names become (function, file, line) with torch's
files under site-packages; its `nn.Module:` and `<built-in ...>` entries,
which a CUDA snapshot does not record, are dropped.

The snapshots:
- capacity.pickle: at the run's peak, a request larger than the whole device
  (given as --capacity in the tests) less what is live;
- fragmentation.pickle: a request that the free memory inside reserved
  segments plus the device's free memory could hold, but no free block can;
- outside_pytorch.pickle: a request that fails with little reserved and
  little free on a device of 80 GiB: the rest is held outside PyTorch;
- fragmentation_expandable.pickle: fragmentation.pickle with
  `expandable_segments:True` in its allocator settings;
- after_failure.pickle: the capacity failure on an allocator with
  expandable segments on, after which the program caught the error and
  freed its largest tensors before dumping: the trace goes on after the
  `oom` entry and the segments are the (mostly free) end state. Its
  expected figures are the allocator's at the failure.

usage: python3 scripts/make_torch_oom_fixtures.py [SOURCE]
  (from the repository root; SOURCE defaults to
   ../shared/fixtures/torch/torch_cpu_transformer.snapshot.pickle)
"""
import collections
import copy
import json
import os
import pickle
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "crates", "memtool", "tests", "data", "oom")
DEFAULT_SOURCE = os.path.join(ROOT, "..", "shared", "fixtures", "torch", "torch_cpu_transformer.snapshot.pickle")

KIB, MIB, GIB = 1024, 1024 * 1024, 1024 ** 3
SMALL_SIZE = 1 * MIB  # kSmallSize
SMALL_BUFFER = 2 * MIB  # kSmallBuffer
LARGE_BUFFER = 20 * MIB  # kLargeBuffer
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge
MIN_BLOCK = 512  # kMinBlockSize
T0 = 1_760_000_000_000_000
# Entries the trace keeps (`_record_memory_history(max_entries=...)`): a ring
# buffer, so the snapshot also holds blocks allocated before its window.
MAX_ENTRIES = 300
# Tensors the program of after_failure.pickle frees after catching the error.
AFTER_FAILURE_FREES = 40
SITE_PACKAGES = "/opt/venv/lib/python3.12/site-packages/"
PROFILER_FRAME = re.compile(r"^(.*\.py)\((\d+)\): (.*)$")


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else MIN_BLOCK * ((n + MIN_BLOCK - 1) // MIN_BLOCK)


def allocation_size(n):
    if n <= SMALL_SIZE:
        return SMALL_BUFFER
    if n < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((n + ROUND_LARGE - 1) // ROUND_LARGE)


FRAME_LISTS = {}


def cuda_frames(frames):
    """The profiler's frames as a CUDA snapshot records them, leaf first.
    Equal lists are one object, as torch shares them, so the pickle refers
    back to them."""
    key = tuple(f["name"] for f in frames)
    if key not in FRAME_LISTS:
        FRAME_LISTS[key] = convert_frames(frames)
    return FRAME_LISTS[key]


def convert_frames(frames):
    out = []
    for f in frames:
        m = PROFILER_FRAME.match(f["name"])
        if not m:
            continue
        filename, line, name = m.group(1), int(m.group(2)), m.group(3)
        if filename.startswith("torch/"):
            filename = SITE_PACKAGES + filename
        out.append({"name": name, "filename": filename, "line": line})
    return out


class Allocator:
    """The caching allocator of one device and stream, as far as the
    snapshot shows it."""

    def __init__(self):
        self.segments = []  # each: dict(address, size, pool, blocks=[[addr, size, requested, state, frames]])
        self.next_address = 0x7F00_0000_0000
        self.trace = []
        self.live = {}  # address -> (segment, block)

    def entry(self, action, addr, size, frames):
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                           "time_us": T0 + len(self.trace), "frames": frames})

    def pool(self, size):
        return "small" if size <= SMALL_SIZE else "large"

    def find_free(self, size, pool):
        best = None
        for seg in self.segments:
            if seg["pool"] != pool:
                continue
            for i, b in enumerate(seg["blocks"]):
                if b[3] == "inactive" and b[1] >= size:
                    key = (b[1], b[0])
                    if best is None or key < best[0]:
                        best = (key, seg, i)
        return best

    def malloc(self, request, frames):
        size = round_size(request)
        pool = self.pool(size)
        found = self.find_free(size, pool)
        if found is None:
            seg_size = allocation_size(size)
            seg = {"address": self.next_address, "size": seg_size, "pool": pool, "frames": frames,
                   "blocks": [[self.next_address, seg_size, 0, "inactive", []]]}
            self.next_address += seg_size + 2 * MIB  # segments are not adjacent
            self.segments.append(seg)
            self.entry("segment_alloc", seg["address"], seg_size, frames)
            found = (None, seg, 0)
        _, seg, i = found
        block = seg["blocks"][i]
        rest = block[1] - size
        split = rest >= MIN_BLOCK if pool == "small" else rest > SMALL_SIZE
        if split:
            seg["blocks"].insert(i + 1, [block[0] + size, rest, 0, "inactive", []])
            block[1] = size
        block[2], block[3], block[4] = request, "active_allocated", frames
        self.live[block[0]] = seg
        self.entry("alloc", block[0], request, frames)
        return block[0]

    def free(self, address, frames):
        seg = self.live.pop(address)
        blocks = seg["blocks"]
        i = next(j for j, b in enumerate(blocks) if b[0] == address)
        request = blocks[i][2]
        self.entry("free_requested", address, request, frames)
        self.entry("free_completed", address, request, frames)
        blocks[i] = [address, blocks[i][1], 0, "inactive", []]
        # Merge with free neighbours.
        if i + 1 < len(blocks) and blocks[i + 1][3] == "inactive":
            blocks[i][1] += blocks.pop(i + 1)[1]
        if i > 0 and blocks[i - 1][3] == "inactive":
            blocks[i - 1][1] += blocks.pop(i)[1]

    def release_cached(self, frames):
        """What the allocator does before giving up: every segment with no
        live block goes back to the device."""
        kept = []
        for seg in self.segments:
            if all(b[3] == "inactive" for b in seg["blocks"]):
                self.entry("segment_free", seg["address"], seg["size"], frames)
            else:
                kept.append(seg)
        self.segments = kept

    def reserved(self):
        return sum(s["size"] for s in self.segments)

    def fail(self, request, device_free, frames):
        """The allocator gives up on `request`: cached segments released
        first, then the `oom` entry."""
        self.release_cached(frames)
        self.trace.append({"action": "oom", "device_free": device_free, "size": round_size(request),
                           "stream": 0, "time_us": T0 + len(self.trace), "frames": frames})

    def snapshot(self, request, device_free, frames):
        self.fail(request, device_free, frames)
        return self.dump()

    def dump(self, expandable=False):
        """`torch.cuda.memory._snapshot()` of the allocator as it is now."""
        segments = []
        for seg in self.segments:
            blocks = [{"address": b[0], "size": b[1], "requested_size": b[2], "state": b[3], "frames": b[4]}
                      for b in seg["blocks"]]
            active = [b for b in blocks if b["state"] == "active_allocated"]
            segments.append({
                "device": 0, "address": seg["address"], "total_size": seg["size"],
                "allocated_size": sum(b["size"] for b in active),
                "active_size": sum(b["size"] for b in active),
                "requested_size": sum(b["requested_size"] for b in active),
                "stream": 0, "segment_type": seg["pool"], "segment_pool_id": (0, 0),
                "is_expandable": expandable, "frames": seg["frames"], "blocks": blocks,
            })
        return {
            "segments": segments,
            "device_traces": [self.trace[-MAX_ENTRIES:]],
            "allocator_settings": {
                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "",
                "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": expandable, "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
            },
        }


def replay(source, stop, visit=None):
    """The allocator after the source's first `stop` entries; `visit` sees
    it after each entry (with the number of entries replayed)."""
    alloc = Allocator()
    addresses = {}
    for i, e in enumerate(source[:stop]):
        frames = cuda_frames(e["frames"])
        if e["action"] == "alloc":
            if e["addr"] in addresses:
                alloc.free(addresses.pop(e["addr"]), frames)
            addresses[e["addr"]] = alloc.malloc(e["size"], frames)
        elif e["action"] == "free_completed" and e["addr"] in addresses:
            alloc.free(addresses.pop(e["addr"]), frames)
        if visit:
            visit(alloc, i + 1)
    return alloc


BEFORE_RECORDING = "<allocated before recording, still live>"


def user_frame(frames):
    """memtool's rule (and the usual one): the innermost Python frame
    outside site-packages; else the leaf."""
    for f in frames:
        if f["filename"].endswith(".py") and "site-packages" not in f["filename"]:
            return f"{f['name']} {f['filename']}:{f['line']}"
    if frames:
        f = frames[0]
        return f"{f['name']} {f['filename']}:{f['line']}"
    return "<no stack>"


def figures(snap, capacity):
    """What the file says, computed from the dicts alone."""
    trace = snap["device_traces"][0]
    oom = next(e for e in reversed(trace) if e["action"] == "oom")
    live = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e["frames"])
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    # Blocks live in the segments that the window did not allocate were
    # allocated before it: MemoryViz counts them at their requested size,
    # and memtool names them so.
    for s in snap["segments"]:
        for b in s["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in live:
                live[b["address"]] = (b["requested_size"], None)
    by_user_frame = collections.Counter()
    for size, frames in live.values():
        key = BEFORE_RECORDING if frames is None else user_frame(frames)
        by_user_frame[key] += size
    free_by_pool = collections.Counter()
    largest_by_pool = {}
    reserved = allocated = 0
    for s in snap["segments"]:
        reserved += s["total_size"]
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                allocated += b["size"]
            elif b["state"] == "inactive":
                key = f"{s['segment_type']}/{s['stream']}"
                free_by_pool[key] += b["size"]
                largest_by_pool[key] = max(largest_by_pool.get(key, 0), b["size"])
    return {
        "request_bytes": oom["size"],
        "device_free_bytes": oom["device_free"],
        "capacity_bytes": capacity,
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "free_in_reserved_bytes": sum(free_by_pool.values()),
        "free_by_pool": dict(sorted(free_by_pool.items())),
        "largest_free_block_by_pool": dict(sorted(largest_by_pool.items())),
        "live_bytes": sum(size for size, _ in live.values()),
        "live_by_user_frame": dict(sorted(by_user_frame.items())),
    }


def oom_frames(source, at):
    """The stack of the source's next allocation: the one that fails."""
    for e in source[at:]:
        if e["action"] == "alloc":
            return cuda_frames(e["frames"])
    return []


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_SOURCE
    with open(path, "rb") as f:
        source = pickle.load(f)["device_traces"][0]
    os.makedirs(OUT, exist_ok=True)
    expected = {}

    # Capacity: at the source's peak of live bytes, a request that cannot fit
    # on a device of `capacity` bytes even with every byte not live free.
    running, peak_at, top = 0, 0, -1
    live = {}
    for i, e in enumerate(source):
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
        running = sum(live.values()) if e["action"] in ("alloc", "free_completed") else running
        if running > top:
            top, peak_at = running, i + 1
    alloc = replay(source, peak_at)
    capacity = 64 * MIB
    reserved_after = sum(s["size"] for s in alloc.segments
                         if not all(b[3] == "inactive" for b in s["blocks"]))
    request = 48 * MIB
    snap = alloc.snapshot(request, capacity - reserved_after, oom_frames(source, peak_at))
    write("capacity", snap)
    expected["capacity"] = figures(snap, capacity)

    # After the failure: the capacity failure again, on a device whose
    # allocator has expandable segments on, but the program caught the error
    # and freed its tensors before the snapshot was dumped: the segments are
    # the end state, mostly free, and the trace goes on after the `oom`
    # entry. The figures at the failure are those of the allocator then.
    alloc = replay(source, peak_at)
    alloc.fail(request, capacity - reserved_after, oom_frames(source, peak_at))
    at_failure = alloc.dump(expandable=True)
    # The largest tensors go first (the smallest stay, as a model's would),
    # few enough that the window still holds the `oom` entry.
    live = sorted(alloc.live.items(), key=lambda kv: -next(b[1] for b in kv[1]["blocks"] if b[0] == kv[0]))
    for address, _ in live[:AFTER_FAILURE_FREES]:
        alloc.free(address, [])
    snap = alloc.dump(expandable=True)
    assert any(e["action"] == "oom" for e in snap["device_traces"][0])
    write("after_failure", snap)
    expected["after_failure"] = figures(at_failure, capacity)
    expected["after_failure"]["end_free_in_reserved_bytes"] = figures(snap, capacity)["free_in_reserved_bytes"]

    # Fragmentation: the point with the most free bytes stranded in the
    # reserved segments that hold live blocks; a request larger than any free
    # block but smaller than those free bytes, on a device with less free than
    # a new segment for it needs.
    best = [None]

    def stranded(a, stop):
        free = [b[1] for s in a.segments if any(x[3] != "inactive" for x in s["blocks"])
                for b in s["blocks"] if b[3] == "inactive"]
        if len(free) >= 2 and (best[0] is None or sum(free) - max(free) > best[0][1]):
            best[0] = (stop, sum(free) - max(free))

    replay(source, len(source), stranded)
    stop = best[0][0]
    alloc = replay(source, stop)
    alloc.release_cached([])
    free = [b[1] for s in alloc.segments for b in s["blocks"] if b[3] == "inactive"]
    device_free = 2 * MIB - 512 * KIB  # less than any segment the request could get
    # The largest whole MiB that the free memory could hold with 1 MiB to
    # spare: larger than any free block, smaller than them all together.
    request = (sum(free) + device_free - MIB) // MIB * MIB
    assert max(free) < request <= sum(free) + device_free, "no fragmented point in the source"
    snap = alloc.snapshot(request, device_free, oom_frames(source, stop))
    write("fragmentation", snap)
    expected["fragmentation"] = figures(snap, alloc.reserved() + device_free)
    # The same failure on an allocator with expandable segments already on:
    # the advice must not recommend them again.
    snap = copy.deepcopy(snap)
    snap["allocator_settings"]["expandable_segments"] = True
    snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    write("fragmentation_expandable", snap)
    expected["fragmentation_expandable"] = expected["fragmentation"]

    # Outside PyTorch: early in the run, little reserved, a 512 MiB request,
    # and 300 MiB free on an 80 GiB device: the rest is someone else's.
    stop = len(source) // 10
    alloc = replay(source, stop)
    snap = alloc.snapshot(512 * MIB, 300 * MIB, oom_frames(source, stop))
    write("outside_pytorch", snap)
    expected["outside_pytorch"] = figures(snap, 80 * GIB)

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    return expected


def write(name, snap):
    with open(os.path.join(OUT, f"{name}.pickle"), "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
