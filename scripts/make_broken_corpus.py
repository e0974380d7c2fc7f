#!/usr/bin/env python3
"""Writes tests/broken/: inputs a CI gate meets after a crashed job (cut,
corrupt, hostile, or not a profile at all), made from the repository's own
fixtures with the standard library only. Each file's exact expected error
line is in tests/broken/expected.tsv, checked by crates/memtool/tests/broken.rs.

usage: python3 scripts/make_broken_corpus.py
"""
import gzip
import os
import pickle
import random
import struct
import zlib

root = os.path.join(os.path.dirname(__file__), "..")
out = os.path.join(root, "tests", "broken")
os.makedirs(out, exist_ok=True)


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def varint(n):
    b = bytearray()
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            b.append(x | 0x80)
        else:
            b.append(x)
            return bytes(b)


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


profile = open(os.path.join(root, "tests", "pprof", "training.prof"), "rb").read()
raw = gzip.decompress(profile)

write("empty.prof", b"")
write("truncated.prof.gz", profile[: len(profile) // 2])
write("truncated.pb", raw[: len(raw) * 2 // 3])
rng = random.Random(20261122)
write("random.bin", bytes(rng.randrange(256) for _ in range(4096)))
write("text.txt", b"Traceback (most recent call last):\n  File \"train.py\", line 1\nMemoryError\n")
# A pprof whose first sample claims 2^40 bytes.
write("length-past-end.pb", raw[:12] + varint(2 << 3 | 2) + varint(1 << 40) + b"\x00" * 16)
# 300 MiB of zeros in ~300 KB: no profile, refused from its first 64 KiB
# without inflating the rest.
c = zlib.compressobj(9, zlib.DEFLATED, 31)
bomb = b"".join(c.compress(b"\0" * (1 << 20)) for _ in range(300)) + c.flush()
write("bomb.gz", bomb)
# A gzip stream whose CRC does not match (a bit flipped in the payload).
damaged = bytearray(profile)
damaged[len(damaged) // 2] ^= 0x10
write("bad-crc.prof.gz", bytes(damaged))
# XSpace with a host plane but no allocator events and no compiled programs.
plane = varint(1 << 3) + varint(1) + field(2, b"/host:CPU")
write("no-memory-data.xplane.pb", field(1, plane) + field(4, b"worker-0"))

# Pickles: refused opcodes, broken memo, and cut files.
write("global-reduce.pickle", b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.")
write("missing-memo.pickle", b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]h\x07a.")
snapshot = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1 << 20, "size": 512,
                                                "stream": 0, "time_us": 1, "frames": []}]]}
good = pickle.dumps(snapshot, protocol=4)
write("truncated.pickle", good[: len(good) // 2])
# 200 bytes that expand to a list of 2^60 elements if shared references are
# copied instead of shared: each level is a list of the previous one, twice.
levels = b"".join(b"(h" + bytes([i]) + b"h" + bytes([i]) + b"l\x94" for i in range(60))
write("huge-list.pickle", b"\x80\x04]\x94" + levels + b".")
# Lists nested 100,000 deep.
write("deep.pickle", b"\x80\x04" + b"]" * 100_000 + b"a" * 99_999 + b".")
# A snapshot whose trace frees before it allocates and reuses a live address.
odd = {"segments": [], "device_traces": [[
    {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0, "time_us": 1, "frames": []},
    {"action": "alloc", "addr": 8192, "size": 512, "stream": 0, "time_us": 2, "frames": []},
    {"action": "alloc", "addr": 8192, "size": 1024, "stream": 0, "time_us": 3, "frames": []},
]]}
write("free-before-alloc.pickle", pickle.dumps(odd, protocol=4))
# A profiler trace cut in the middle of a string.
trace = b'{"traceEvents": [{"ph": "i", "name": "[memory]", "args": {"Addr": 1, "Bytes": 512, "Devi'
write("cut-mid-string.pt.trace.json", trace)
# Pickles of protocols 0 and 1 (no header says so), which memtool does not read.
write("protocol0.pickle", pickle.dumps(snapshot, protocol=0))
write("protocol1.pickle", pickle.dumps(snapshot, protocol=1))
# XProf's own JSON pages, given instead of the .xplane.pb they were made from.
write("xprof.memory_profile.json", b'{"memoryProfilePerAllocator":{"mklcpu":{}},"numHosts":1}')
write("xprof.memory_viewer.json", b'{"heapSizes":[0.5,1.0],"unpaddedHeapSizes":[0.5,1.0]}')
# 8 MiB that start like a trace in 8 KB: within the default cap of 4 GiB (it
# is cut JSON), past a --max-decompressed of 4 MiB (tests/broken.rs).
c = zlib.compressobj(9, zlib.DEFLATED, 31)
write("trace-bomb.json.gz", c.compress(b'{"traceEvents": [') +
      b"".join(c.compress(b" " * (1 << 20)) for _ in range(8)) + c.flush())
# A whole gzip stream, then bytes that are not gzip; and then NUL padding,
# which gzip -d accepts.
write("trailing-garbage.prof.gz", profile + b"this is not gzip")
write("nul-padded.prof.gz", profile + b"\0" * 4096)
# An XSpace whose first field is a group (field 15, `{` ... `|`): not JSON.
write("group.xplane.pb", b"{\x08\x05|" + field(1, plane))
# A valid trace after a UTF-8 byte order mark (Windows editors write one).
small_trace = (b'{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "pid": 1, "tid": 1, '
               b'"args": {"Addr": 4096, "Bytes": 512, "Device Type": 0, "Device Id": -1}}]}')
write("bom.pt.trace.json", b"\xef\xbb\xbf" + small_trace)
# [memory] events whose Bytes are out of any integer's range.
write("bytes-out-of-range.pt.trace.json", small_trace.replace(b'"Bytes": 512', b'"Bytes": 1e30'))
# One trace entry listed a thousand times in one batch (MARK BINGET... APPENDS):
# refused at the first copy, not read a thousand times.
entry = (b"}\x94(\x8c\x06action\x8c\x05alloc\x8c\x04addrK\x10\x8c\x04sizeK\x08u")
write("shared-entry.pickle", b"\x80\x04}\x94(\x8c\x0ddevice_traces]\x94(]\x94(" + entry
      + b"h\x03" * 1000 + b"eeu.")


# An XSpace whose event metadata defines id 2 twice, as MemoryDeallocation
# and then as MemoryAllocation: a protobuf reader keeps the last definition
# (so the free reads as a second allocation), while the allocator's own
# figures (bytes_allocated) count it as a free.
def xstat(key, value):
    if isinstance(value, bytes):
        return field(4, varint(1 << 3) + varint(key) + field(5, value))
    return field(4, varint(1 << 3) + varint(key) + varint(3 << 3) + varint(value))


def metadata_entry(number, key, name):
    value = varint(1 << 3) + varint(key) + field(2, name)
    return field(number, varint(1 << 3) + varint(key) + field(2, value))


stat_names = [b"allocator_name", b"bytes_allocated", b"bytes_reserved", b"bytes_available",
              b"peak_bytes_in_use", b"requested_bytes", b"allocation_bytes", b"addr"]
stats = {name: i + 1 for i, name in enumerate(stat_names)}


def memory_event(meta, offset_ps, addr, size, allocated, peak):
    figures = [xstat(stats[b"allocator_name"], b"GPU_0_bfc"),
               xstat(stats[b"bytes_allocated"], allocated), xstat(stats[b"bytes_reserved"], 0),
               xstat(stats[b"bytes_available"], 1 << 20), xstat(stats[b"peak_bytes_in_use"], peak),
               xstat(stats[b"requested_bytes"], size), xstat(stats[b"allocation_bytes"], size),
               xstat(stats[b"addr"], addr)]
    return field(4, varint(1 << 3) + varint(meta) + varint(2 << 3) + varint(offset_ps) + b"".join(figures))


KIB = 1024
line = (varint(1 << 3) + varint(1) + field(2, b"Memory") + varint(3 << 3) + varint(1_000)
        + memory_event(1, 1_000, 0x1000, 1 * KIB, 1 * KIB, 1 * KIB)
        + memory_event(1, 2_000, 0x2000, 2 * KIB, 3 * KIB, 3 * KIB)
        + memory_event(2, 3_000, 0x1000, 1 * KIB, 2 * KIB, 3 * KIB)
        + memory_event(1, 4_000, 0x3000, KIB // 2, 2 * KIB + KIB // 2, 3 * KIB))
plane = (varint(1 << 3) + varint(2) + field(2, b"/host:CPU") + field(3, line)
         + metadata_entry(4, 1, b"MemoryAllocation") + metadata_entry(4, 2, b"MemoryDeallocation")
         + metadata_entry(4, 2, b"MemoryAllocation")
         + b"".join(metadata_entry(5, i, name) for name, i in stats.items()))
write("duplicate-metadata-id.xplane.pb", field(1, plane))
print("wrote", len(os.listdir(out)), "files to", out)
