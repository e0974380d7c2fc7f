#!/usr/bin/env python3
"""Writes tests/xspace/tied_peak.xplane.pb: an XSpace holding one compiled
program whose heap reaches its peak at two positions of its heap simulator
trace, for the rule that the first is the program's peak (XProf's Memory
Viewer `peakHeapSizePosition`), with and without --xprof-compat.

The program `jit_tied` (program id 7), protobuf written field by field
(no dependency):
- allocation 0: parameter `p` (f32[4096], 16 KiB), live throughout;
- allocation 1: output `out` (f32[4096], 16 KiB), live throughout;
- allocation 2: the temporary allocation (272 KiB): `a` (f32[4096], 16
  KiB) at offset 256 KiB and `fusion.1`, `fusion.2` (f32[65536], 256 KiB
  each) both at offset 0, one after the other.
No buffer is under 16 KiB, so XProf's "small" row (--xprof-compat) is empty.
Trace: alloc a, alloc fusion.1, free fusion.1, alloc fusion.2, free
fusion.2, free a. The heap is 16 + 256 KiB after events 1 and 3
(positions of the trace), so the peak, 16 + 16 + 272 KiB, is reached twice;
the first holds `fusion.1`, the second `fusion.2`.

Usage: scripts/make_tied_peak_xspace.py [OUT]
"""

import os
import sys

F32 = 11
ALLOC, FREE = 0, 1


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def number(number, value):
    return varint(number << 3) + varint(value)


def shape(dims):
    """ShapeProto of an f32 array with its default layout."""
    layout = field(1, b"".join(varint(d) for d in reversed(range(len(dims)))))
    return (number(2, F32) + field(3, b"".join(varint(d) for d in dims))
            + field(5, layout))


def instruction(iid, name, opcode, dims, op_name):
    metadata = field(2, op_name) + field(3, "tied.py") + number(4, 10 + iid)
    return (field(1, name) + field(2, opcode) + field(3, shape(dims))
            + field(7, metadata) + number(35, iid))


def logical_buffer(bid, size, iid):
    return number(1, bid) + number(2, size) + field(3, number(4, iid))


def assigned(bid, offset, size):
    return number(1, bid) + number(2, offset) + number(3, size)


def event(kind, bid, name):
    return number(1, kind) + number(2, bid) + field(4, name)


def hlo_proto():
    instructions = [
        instruction(1, "p", "parameter", [4096], "p"),
        instruction(2, "a", "fusion", [4096], "jit(tied)/a"),
        instruction(3, "fusion.1", "fusion", [65536], "jit(tied)/first"),
        instruction(4, "fusion.2", "fusion", [65536], "jit(tied)/second"),
        instruction(5, "out", "fusion", [4096], "jit(tied)/out"),
    ]
    computation = field(1, "main") + b"".join(field(2, i) for i in instructions) + number(5, 1)
    module = field(1, "jit_tied") + field(2, "main") + field(3, computation) + number(5, 7)
    small, big = 4096 * 4, 65536 * 4
    buffers = [(1, small, 1), (2, small, 2), (3, big, 3), (4, big, 4), (5, small, 5)]
    allocations = [
        number(1, 0) + number(2, small) + number(5, 1) + number(6, 0)
        + field(9, assigned(1, 0, small)),
        number(1, 1) + number(2, small) + number(7, 1) + field(9, assigned(5, 0, small)),
        number(1, 2) + number(2, big + small) + field(9, assigned(2, big, small))
        + field(9, assigned(3, 0, big)) + field(9, assigned(4, 0, big)),
    ]
    trace = [
        event(ALLOC, 2, "a"),
        event(ALLOC, 3, "fusion.1"),
        event(FREE, 3, "fusion.2"),
        event(ALLOC, 4, "fusion.2"),
        event(FREE, 4, "out"),
        event(FREE, 2, "out"),
    ]
    assignment = (b"".join(field(1, logical_buffer(*b)) for b in buffers)
                  + b"".join(field(3, a) for a in allocations)
                  + field(4, b"".join(field(1, e) for e in trace) + number(3, 2)))
    return field(1, module) + field(3, assignment)


def xspace(hlo, program_id):
    """One `/host:metadata` plane whose event metadata carries the module as
    XProf finds it: the `Hlo Proto` stat (bytes) and `program_id`."""
    def stat_metadata(sid, name):
        meta = number(1, sid) + field(2, name)
        return field(5, number(1, sid) + field(2, meta))

    meta = (number(1, 1) + field(2, f"jit_tied({program_id})")
            + field(5, number(1, 7) + field(6, hlo))
            + field(5, number(1, 9) + number(4, program_id)))
    plane = (field(2, "/host:metadata") + stat_metadata(7, "Hlo Proto")
             + stat_metadata(9, "program_id") + field(4, number(1, 1) + field(2, meta)))
    return field(1, field(2, "/host:CPU")) + field(1, plane)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "tests", "xspace", "tied_peak.xplane.pb")
    data = xspace(hlo_proto(), 7)
    with open(out, "wb") as f:
        f.write(data)
    print("wrote", out, len(data), "bytes")


if __name__ == "__main__":
    main()
