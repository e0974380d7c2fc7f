#!/usr/bin/env python3
"""Writes small structured seeds for the fuzz targets: one per format and
shape, a few hundred bytes each, so the fuzzer starts inside every reader
and runs thousands of times a second (the real fixtures run 30-50 times).

    scripts/fuzz-seeds.py            # into fuzz/corpus/load and fuzz/corpus/analyses

Standard library only. The seeds are generated, not committed (fuzz/corpus
is ignored).
"""

import gzip
import json
import pathlib
import pickle
import struct
import sys

# --- protobuf wire format --------------------------------------------------


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def vint(number, v):
    return varint(number << 3) + varint(v)


def ld(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number, v):
    return varint(number << 3 | 1) + struct.pack("<d", v)


# --- pprof (JAX device memory profile) -------------------------------------


def pprof(devices=("TPU_0", "TPU_1"), with_executable=True, without_device=False):
    strings = ["", "allocations", "count", "space", "bytes", "device", "kind", "buffer",
               "executable", "train_step", "apply", "train.py", "jax/_src/core.py", "matmul"]
    strings += devices
    s = {name: i for i, name in enumerate(strings)}
    out = ld(1, vint(1, s["allocations"]) + vint(2, s["count"]))
    out += ld(1, vint(1, s["space"]) + vint(2, s["bytes"]))
    # functions 1-3, locations 1-3 (a user frame, a library frame, an op)
    for fid, (name, file) in enumerate(
            [("train_step", "train.py"), ("apply", "jax/_src/core.py"), ("matmul", "train.py")], 1):
        out += ld(5, vint(1, fid) + vint(2, s[name]) + vint(4, s[file]))
    for lid in (1, 2, 3):
        out += ld(4, vint(1, lid) + ld(4, vint(1, lid) + vint(2, 10 * lid)))

    def sample(locations, count, nbytes, device, kind="buffer"):
        body = ld(1, b"".join(varint(l) for l in locations))
        body += ld(2, varint(count) + varint(nbytes))
        if device is not None:
            body += ld(3, vint(1, s["device"]) + vint(2, s[device]))
        body += ld(3, vint(1, s["kind"]) + vint(2, s[kind]))
        return ld(2, body)

    for i, device in enumerate(devices):
        dev = None if without_device else device
        out += sample([3, 2, 1], 2, 4096 << i, dev)
        out += sample([2, 1], 1, 1000 + i, dev)
        out += sample([], 1, 64, dev)
    if with_executable:
        out += sample([1], 1, 8192, None, kind="executable")
    for name in strings:
        out += ld(6, name)
    return out


# --- XSpace ----------------------------------------------------------------


def stat(metadata_id, value):
    """An XStat: int -> uint64, negative -> int64, float -> double,
    str -> str, bytes -> bytes, ('ref', id) -> ref_value."""
    body = vint(1, metadata_id)
    if isinstance(value, tuple):
        body += vint(7, value[1])
    elif isinstance(value, bool) or isinstance(value, int) and value >= 0:
        body += vint(3, int(value))
    elif isinstance(value, int):
        body += vint(4, value)
    elif isinstance(value, float):
        body += fixed64(2, value)
    elif isinstance(value, str):
        body += ld(5, value)
    else:
        body += ld(6, value)
    return body


def map_entry(number, key, value):
    return ld(number, vint(1, key) + ld(2, value))


def plane(name, lines=(), event_metadata=(), stat_metadata=(), stats=()):
    body = ld(2, name)
    for line in lines:
        body += ld(3, line)
    for mid, meta_name, meta_stats in event_metadata:
        meta = vint(1, mid) + ld(2, meta_name)
        for st in meta_stats:
            meta += ld(5, st)
        body += map_entry(4, mid, meta)
    for sid, stat_name in stat_metadata:
        body += map_entry(5, sid, vint(1, sid) + ld(2, stat_name))
    for st in stats:
        body += ld(6, st)
    return body


ALLOCATOR_STATS = ["allocator_name", "addr", "bytes_allocated", "allocation_bytes",
                   "requested_bytes", "bytes_reserved", "bytes_available", "fragmentation",
                   "peak_bytes_in_use", "tf_op", "region_type", "data_type", "shape",
                   "step_num", "device_ordinal", "index_on_host", "GPU_0_bfc"]
SID = {name: i + 100 for i, name in enumerate(ALLOCATOR_STATS)}


def xevent(metadata_id, offset_ps, stats):
    body = vint(1, metadata_id) + vint(2, offset_ps)
    for st in stats:
        body += ld(4, st)
    return body


def allocator_xspace(out_of_order=False, two_lines=True, with_env=True):
    """`/host:CPU` lines of MemoryAllocation/MemoryDeallocation events."""
    def alloc(offset, addr, nbytes, in_use, op="MatMul", free=False, allocator=("ref", SID["GPU_0_bfc"])):
        stats = [stat(SID["allocator_name"], allocator), stat(SID["addr"], addr),
                 stat(SID["allocation_bytes"], nbytes), stat(SID["requested_bytes"], nbytes - 8),
                 stat(SID["bytes_allocated"], in_use), stat(SID["bytes_reserved"], 1 << 20),
                 stat(SID["bytes_available"], (1 << 20) - in_use),
                 stat(SID["fragmentation"], 0.25), stat(SID["peak_bytes_in_use"], in_use + 64)]
        if not free:
            stats += [stat(SID["tf_op"], op), stat(SID["region_type"], "output"),
                      stat(SID["data_type"], 1), stat(SID["shape"], "[32,64]")]
        return xevent(2 if free else 1, offset, stats)

    events_a = [alloc(1000, 0x1000, 256, 256), alloc(3000, 0x2000, 512, 768, op="Conv2D"),
                alloc(5000, 0x1000, 256, 512, free=True)]
    events_b = [alloc(2000, 0x3000, 128, 128, allocator="mklcpu"),
                xevent(3, 2500, [stat(SID["step_num"], 1)]),
                alloc(4000, 0x3000, 128, 0, free=True, allocator="mklcpu"),
                alloc(4500, 0x9000, 64, 0, free=True, allocator="mklcpu")]
    if out_of_order:
        events_a.reverse()
    lines = [vint(3, 1_700_000_000) + ld(2, "line a") + b"".join(ld(4, e) for e in events_a)]
    if two_lines:
        lines.append(vint(3, 1_700_000_000) + ld(2, "line b") + b"".join(ld(4, e) for e in events_b))
    host = plane("/host:CPU", lines,
                 [(1, "MemoryAllocation", []), (2, "MemoryDeallocation", []),
                  (3, "train_step", [])],
                 [(sid, name) for name, sid in SID.items()])
    out = ld(1, host)
    if with_env:
        env = plane("Task Environment", stat_metadata=[(1, "profile_start_time")],
                    stats=[stat(1, 1_699_999_999_000)])
        out = ld(1, env) + out
    return out


def hlo_module(name="jit_step", spaces=(0, 1), share=True):
    """An HloProto: instructions, logical buffers, buffer allocations
    (parameter, constant, temporary per memory space) and one heap simulator
    trace per space with ALLOC, FREE and SHARE_WITH events."""
    def shape(dims, element_type=11):
        return vint(2, element_type) + ld(3, b"".join(varint(d) for d in dims))

    instructions = b""
    for iid, (iname, op) in enumerate([("param.0", "parameter"), ("fusion.1", "fusion"),
                                       ("dot.2", "dot"), ("constant.3", "constant")]):
        meta = ld(2, f"jit(step)/jvp({op})") + ld(3, "train.py") + vint(4, 10 + iid)
        instructions += ld(2, ld(1, iname) + ld(2, op) + ld(3, shape([32, 64])) +
                           ld(7, meta) + vint(35, iid))
    module = ld(1, name) + ld(2, "main") + ld(3, ld(1, "main") + instructions + vint(5, 1)) + vint(5, 7)
    logical = b""
    allocations = b""
    traces = b""
    index = 0
    for space in spaces:
        base = 10 * space
        for k, (iid, size) in enumerate([(0, 8192), (1, 4096), (2, 4096), (3, 256)]):
            loc = vint(4, iid) + ld(3, varint(0))
            logical += ld(1, vint(1, base + k + 1) + vint(2, size) + ld(3, loc) + vint(4, space))
        # parameter, constant, temporary
        allocations += ld(3, vint(1, index) + vint(2, 8192) + vint(5, 1) + vint(8, space) +
                          ld(9, vint(1, base + 1) + vint(3, 8192)))
        allocations += ld(3, vint(1, index + 1) + vint(2, 256) + vint(12, 1) + vint(8, space) +
                          ld(9, vint(1, base + 4) + vint(3, 256)))
        allocations += ld(3, vint(1, index + 2) + vint(2, 8192) + vint(8, space) +
                          ld(9, vint(1, base + 2) + vint(3, 4096)) +
                          ld(9, vint(1, base + 3) + vint(2, 4096) + vint(3, 4096)))
        events = [(0, base + 2, 0, "fusion.1"), (0, base + 3, 0, "dot.2"), (1, base + 2, 0, "dot.2")]
        if share:
            events.append((2, base + 2, base + 3, "dot.2"))
        events.append((1, base + 3, 0, "dot.2"))
        trace = b"".join(ld(1, vint(1, kind) + vint(2, buf) + ld(3, "main") + ld(4, inst) + vint(5, canon))
                         for kind, buf, canon, inst in events)
        traces += ld(4, trace + vint(2, 1) + vint(3, index + 2))
        index += 3
    return ld(1, module) + ld(3, logical + allocations + traces)


def programs_xspace(modules=1):
    meta_stats = [(7, "Hlo Proto"), (9, "program_id")]
    event_metadata = []
    for m in range(modules):
        hlo = hlo_module(name=f"jit_step{m}", spaces=(0, 1) if m == 0 else (0,), share=m == 0)
        event_metadata.append((m + 1, f"jit_step{m}", [stat(7, hlo), stat(9, 40 + m)]))
    metadata = plane("/host:metadata", event_metadata=event_metadata, stat_metadata=meta_stats)
    return ld(1, plane("/host:CPU")) + ld(1, metadata)


# --- PyTorch snapshot pickles ----------------------------------------------


def snapshot(shared_list=False, profiler=False, with_time=True):
    frames = [{"name": "forward", "filename": "model.py", "line": 12},
              {"name": "train_step", "filename": "train.py", "line": 40}]
    deeper = [{"name": "empty", "filename": "torch/_ops.py", "line": 3}] + frames

    def entry(action, addr, size, t, stack=frames, **extra):
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": stack}
        if with_time:
            e["time_us"] = t
        if profiler:
            e["category"] = "ACTIVATION"
        e.update(extra)
        return e

    trace = [entry("segment_alloc", 0x7000, 2 << 20, 1),
             entry("alloc", 0x7000, 512, 2),
             entry("alloc", 0x7200, 1024, 3, deeper),
             entry("free_requested", 0x7000, 512, 4),
             entry("free_completed", 0x7000, 512, 5),
             entry("free_completed", 0x9000, 64, 6),
             entry("oom", 0, 1 << 30, 7, device_free=4096),
             entry("snapshot", 0, 0, 8)]
    blocks = [{"size": 1024, "requested_size": 1000, "address": 0x7200, "state": "active_allocated",
               "frames": deeper},
              {"size": (2 << 20) - 1024, "requested_size": 0, "address": 0x7600, "state": "inactive"}]
    segments = [{"device": 0, "address": 0x7000, "total_size": 2 << 20, "allocated_size": 1024,
                 "active_size": 1024, "requested_size": 1000, "stream": 0,
                 "segment_type": "large", "blocks": blocks}]
    traces = [trace, trace] if shared_list else [trace, []]
    snap = {"segments": segments, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
            "external_annotations": [{"device": 0, "stage": "START", "name": "ProfilerStep#1",
                                      "time_us": 1},
                                     {"device": 0, "stage": "END", "name": "ProfilerStep#1",
                                      "time_us": 6}]}
    return snap


# --- PyTorch Chrome trace and memory timeline ------------------------------


def chrome_trace(with_addr=True, bare=False):
    def mem(ts, nbytes, addr, device_type=1, total=None):
        args = {"Bytes": nbytes, "Device Type": device_type, "Device Id": 0}
        if with_addr:
            args["Addr"] = addr
        if total is not None:
            args["Total Allocated"] = total
            args["Total Reserved"] = 1 << 20
        return {"name": "[memory]", "ph": "i", "ts": ts, "pid": 1, "tid": 1, "s": "t", "args": args}

    events = [{"name": "ProfilerStep#1", "ph": "X", "cat": "user_annotation", "ts": 0, "dur": 100,
               "pid": 1, "tid": 1},
              {"name": "aten::matmul", "ph": "X", "cat": "cpu_op", "ts": 5, "dur": 20, "pid": 1,
               "tid": 1},
              mem(10, 512, 0x7000, total=512), mem(12, 2048, 0x8000, total=2560),
              mem(30, -512, 0x7000, total=2048), mem(40, -64, 0x9000, device_type=0, total=0),
              mem(50, 128, 0x7000, device_type=0)]
    if bare:
        return events
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU",
                                                      "totalGlobalMem": 1 << 34}],
            "traceEvents": events}


def timeline_coalesced():
    times = [0, 10, 20, 30]
    sizes = [[0, 100, 0, 50, 0, 0, 0, 0, 0],
             [10, 100, 20, 50, 400, 0, 0, 0, 0],
             [20, 100, 20, 50, 100, 300, 0, 0, 0],
             [30, 100, 20, 50, 0, 0, 100, 0, 7]]
    return [times, sizes]


def timeline_raw():
    # [time ns, action, delta bytes, category]; -1: before profiling
    return [[-1, 0, 4096, 0], [1000, 1, 512, 4], [2000, 1, 1024, 3], [3000, 2, -512, 4],
            [4000, 1, 64, 7], [5000, 2, -64, 7]]


# ---------------------------------------------------------------------------


def seeds():
    yield "pprof_two_devices.prof", pprof()
    yield "pprof_no_device_label.prof", pprof(devices=("TPU_0",), with_executable=False,
                                              without_device=True)
    yield "xspace_allocators.xplane.pb", allocator_xspace()
    yield "xspace_allocators_out_of_order.xplane.pb", allocator_xspace(out_of_order=True,
                                                                       with_env=False)
    yield "xspace_one_line.xplane.pb", allocator_xspace(two_lines=False)
    yield "xspace_programs.xplane.pb", programs_xspace()
    yield "xspace_two_programs.xplane.pb", programs_xspace(modules=2)
    for protocol in (2, 3, 4, 5):
        yield f"snapshot_p{protocol}.pickle", pickle.dumps(snapshot(), protocol=protocol)
    yield "snapshot_shared_trace_list.pickle", pickle.dumps(snapshot(shared_list=True), protocol=4)
    yield "snapshot_profiler_untimed.pickle", pickle.dumps(snapshot(profiler=True, with_time=False),
                                                           protocol=4)
    yield "trace.pt.trace.json", json.dumps(chrome_trace()).encode()
    yield "trace_without_addr.pt.trace.json", json.dumps(chrome_trace(with_addr=False)).encode()
    yield "trace_bare_array.json", json.dumps(chrome_trace(bare=True)).encode()
    yield "timeline.json", json.dumps(timeline_coalesced()).encode()
    yield "timeline.raw.json", json.dumps(timeline_raw()).encode()
    # gzip in front of a reader, and two members
    yield "pprof.prof.gz", gzip.compress(pprof(), mtime=0)
    yield "snapshot.pickle.gz", gzip.compress(pickle.dumps(snapshot(), protocol=4), mtime=0)
    body = json.dumps(chrome_trace()).encode()
    half = len(body) // 2
    yield "trace_two_members.json.gz", gzip.compress(body[:half], mtime=0) + gzip.compress(
        body[half:], mtime=0)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    targets = sys.argv[1:] or ["load", "analyses"]
    made = list(seeds())
    for target in targets:
        corpus = root / "fuzz" / "corpus" / target
        corpus.mkdir(parents=True, exist_ok=True)
        for name, data in made:
            (corpus / name).write_bytes(data)
    sizes = sorted(len(d) for _, d in made)
    print(f"{len(made)} seeds per target in fuzz/corpus/{{{','.join(targets)}}} "
          f"({sizes[0]}-{sizes[-1]} bytes)")


if __name__ == "__main__":
    main()
