#!/usr/bin/env python3
"""Rewrite the absolute file names in captured profiles into relative ones.

A profile captured with the scripts in this directory names every Python frame
by the absolute path of the machine that made it (the checkout and the
virtualenv JAX ran from). Committed fixtures must not carry such paths, so
this rewrites them, in place:

  <checkout>/scripts/X                       -> scripts/X
  <venv>/lib/pythonX.Y/site-packages/...     -> venv/lib/pythonX.Y/site-packages/...
  (and likewise .../dist-packages/)

`site-packages` stays in the name: memtool's default library-frame filter
recognises library code by it. The checkout is the part of a file name before
`/scripts/capture_` unless given with --checkout; a virtualenv is the part
before `/lib/pythonX.Y/site-packages/`.

Formats:
  pprof (gzipped or not): the file names are in `string_table` (Profile field
    6); the top-level message is re-encoded with only those strings changed,
    every other field is copied byte for byte. A gzipped file stays gzipped,
    with mtime 0 and no file name in the header, so the bytes are reproducible.
  XSpace (.xplane.pb): the names sit in HLO metadata nested deep in protobuf
    messages. A length-delimited field whose payload starts with one of the
    prefixes is a string and is rewritten; any other payload that contains a
    prefix's bytes is walked as a message if it parses fully as one (fixing
    every enclosing length), else it is a string and the prefixes in it are
    replaced. Everything else is copied byte for byte.

The file is rewritten only if something changed, and the result is checked to
contain no prefix any more.

usage: python3 scripts/relativize_fixture_paths.py [--checkout DIR] FILE...
(standard library only; the capture scripts call relativize_file() on what
they write.)
"""
import argparse
import gzip
import re
import struct
import sys
import zlib

GZIP_MAGIC = b"\x1f\x8b"
# A virtualenv (or any Python prefix) before its packages directory.
VENV_RE = re.compile(rb"^(/.*?)/lib/(python\d+(?:\.\d+)?)/(site|dist)-packages/")
CHECKOUT_RE = re.compile(rb"^(/.*?)/scripts/capture_")


# --- protobuf wire format -------------------------------------------------


def read_varint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def varint(n):
    out = bytearray()
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            out.append(x | 0x80)
        else:
            out.append(x)
            return bytes(out)


def fields(buf):
    """Yields (field number, wire type, tag bytes, payload or None, raw field
    bytes) for each field of a message; raises ValueError unless the whole
    buffer parses as fields (groups are not accepted)."""
    pos = 0
    end = len(buf)
    while pos < end:
        start = pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        tag = buf[start:pos]
        if wire == 0:
            _, pos = read_varint(buf, pos)
            payload = None
        elif wire == 1:
            pos += 8
            payload = None
        elif wire == 5:
            pos += 4
            payload = None
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            if pos + length > end:
                raise ValueError("length past end")
            payload = buf[pos : pos + length]
            pos += length
        else:
            raise ValueError("wire type %d" % wire)
        if pos > end:
            raise ValueError("field past end")
        yield number, wire, tag, payload, buf[start:pos]


def parses(buf):
    try:
        for _ in fields(buf):
            pass
        return True
    except ValueError:
        return False


# --- the rewrite ----------------------------------------------------------


class Rewriter:
    """Literal byte replacements: absolute prefix -> relative prefix."""

    def __init__(self, checkout=None):
        self.pairs = {}
        if checkout:
            self.add_checkout(checkout.encode() if isinstance(checkout, str) else checkout)

    def add_checkout(self, checkout):
        checkout = checkout.rstrip(b"/")
        if checkout.startswith(b"/"):
            self.pairs[checkout + b"/scripts/"] = b"scripts/"

    def learn(self, name):
        """Learns the prefixes an absolute file name starts with."""
        m = VENV_RE.match(name)
        if m:
            self.pairs[m.group(1) + b"/lib/"] = b"venv/lib/"
        m = CHECKOUT_RE.match(name)
        if m and not any(k.endswith(b"/scripts/") for k in self.pairs):
            self.add_checkout(m.group(1))

    def prefixes(self):
        # Longest first, so a prefix inside another is replaced last.
        return sorted(self.pairs, key=len, reverse=True)

    def contains(self, buf):
        return any(p in buf for p in self.pairs)

    def starts(self, buf):
        return any(buf.startswith(p) for p in self.pairs)

    def string(self, s):
        for p in self.prefixes():
            s = s.replace(p, self.pairs[p])
        return s

    def message(self, buf):
        """Rewrites a nested message (XSpace); returns new bytes."""
        out = bytearray()
        for _, wire, tag, payload, raw in fields(buf):
            if wire != 2 or not self.contains(payload):
                out += raw
                continue
            if self.starts(payload):
                new = self.string(payload)
            elif parses(payload):
                new = self.message(payload)
            else:
                new = self.string(payload)
            out += tag + varint(len(new)) + new
        return bytes(out)

    def pprof(self, buf):
        """Rewrites a Profile's string_table (field 6); returns new bytes."""
        out = bytearray()
        for number, wire, tag, payload, raw in fields(buf):
            if number == 6 and wire == 2 and self.contains(payload):
                new = self.string(payload)
                out += tag + varint(len(new)) + new
            else:
                out += raw
        return bytes(out)


def learn_strings(rewriter, buf, depth=0):
    """Learns prefixes from every length-delimited payload that starts with
    '/' (such a payload never parses as a message: '/' is wire type 7)."""
    if depth > 100:
        return
    for _, wire, _, payload, _ in fields(buf):
        if wire != 2 or not payload:
            continue
        if payload[:1] == b"/":
            rewriter.learn(payload)
        elif parses(payload):
            learn_strings(rewriter, payload, depth + 1)


def gzip_bytes(data):
    """gzip with mtime 0, no file name, maximum compression: reproducible."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = c.compress(data) + c.flush()
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff"
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return header + body + trailer


def relativize_bytes(data, kind, checkout=None):
    """Returns (new bytes, {old prefix: new prefix}) for a pprof or XSpace."""
    rewriter = Rewriter(checkout)
    gzipped = data[:2] == GZIP_MAGIC
    raw = gzip.decompress(data) if gzipped else data
    if kind == "pprof":
        for number, wire, _, payload, _ in fields(raw):
            if number == 6 and wire == 2 and payload[:1] == b"/":
                rewriter.learn(payload)
        new = rewriter.pprof(raw) if rewriter.pairs else raw
    elif kind == "xspace":
        learn_strings(rewriter, raw)
        new = rewriter.message(raw) if rewriter.pairs else raw
    else:
        raise ValueError("unknown kind %r" % kind)
    left = [p.decode() for p in rewriter.pairs if p in new]
    if left:
        raise ValueError("absolute prefixes left after the rewrite: %s" % ", ".join(left))
    if new == raw:
        return data, rewriter.pairs
    return (gzip_bytes(new) if gzipped else new), rewriter.pairs


def kind_of(path):
    return "xspace" if path.endswith(".xplane.pb") else "pprof"


def relativize_file(path, checkout=None, kind=None):
    """Rewrites the file in place; returns {old prefix: new prefix} (bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    new, pairs = relativize_bytes(data, kind or kind_of(path), checkout)
    if new != data:
        with open(path, "wb") as f:
            f.write(new)
    return pairs


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", help="the checkout the capture ran in "
                    "(default: the part of a file name before /scripts/capture_)")
    ap.add_argument("--format", choices=["pprof", "xspace"],
                    help="default: xspace for *.xplane.pb, else pprof")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    for path in args.files:
        pairs = relativize_file(path, args.checkout, args.format)
        what = ", ".join("%s -> %s" % (k.decode(), v.decode()) for k, v in sorted(pairs.items()))
        print("%s: %s" % (path, what or "no absolute paths"))


if __name__ == "__main__":
    main(sys.argv[1:])
