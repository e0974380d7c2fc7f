#!/usr/bin/env python3
"""`import memtool` from the installed wheel, checked against the `memtool`
command of the same wheel (run by .ci/run in the virtualenv the wheel is
installed in, with pyarrow).

1. The command is the Rust binary itself (pip installed it unchanged), and
   it and the module are one version.
2. `memtool.summary` of a path, and of the file's bytes, is the document
   `memtool summary --format json` prints, whole, on every kind of input in
   tests/ and on the shared snapshots; `all_frames` is `--all-frames`.
3. `memtool.allocations` is the file `memtool export` writes, byte for byte
   and read back by pyarrow; the reader's warnings come as MemtoolWarning.
4. Errors: bytes that are no profile raise ProfileError naming the input; a
   missing file FileNotFoundError; a directory ProfileError; anything else
   TypeError.
5. Every public function and class has a docstring.

Usage: python_module_check.py MEMTOOL   (the command installed with the wheel)
"""

import glob
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import warnings

import pyarrow.parquet as pq

import memtool

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FIXTURES = [
    "tests/pprof/training.prof",
    "tests/pprof/sharded.prof",
    "tests/xspace/jax_mlp.xplane.pb",
    "tests/torch/snapshot.p4.pickle",
    "tests/torch/synthetic.pt.trace.json.gz",
    "tests/torch/synthetic.memory_timeline.json",
] + sorted(
    os.path.relpath(p, REPO)
    for p in glob.glob(os.path.join(REPO, "..", "shared", "fixtures", "torch", "*.pickle"))
)


def command(binary, *args):
    return subprocess.run([binary, *args], cwd=REPO, check=True, capture_output=True).stdout


def check_command(binary):
    with open(binary, "rb") as f:
        assert f.read(4) == b"\x7fELF", f"{binary} is not the memtool binary"
    version = command(binary, "--version").decode().split()
    assert version == ["memtool", memtool.__version__], (version, memtool.__version__)


def check_summary(binary, fixture):
    path = os.path.join(REPO, fixture)
    expected = json.loads(command(binary, "summary", fixture, "--format", "json"))
    # Run from the repository, as the command is: the path names the input.
    assert memtool.summary(fixture) == expected, fixture
    with open(path, "rb") as f:
        data = f.read()
    assert memtool.summary(data, name=fixture) == expected, fixture
    assert memtool.summary(bytearray(data), name=fixture) == expected, fixture
    unnamed = memtool.summary(data)
    assert unnamed["inputs"][0]["path"] == "<bytes>", unnamed["inputs"]
    everything = json.loads(
        command(binary, "summary", fixture, "--format", "json", "--all-frames")
    )
    assert memtool.summary(pathlib.Path(path), name=fixture, all_frames=True) == everything
    return expected


def check_allocations(binary, fixture, work):
    exported = os.path.join(work, "export.parquet")
    command(binary, "export", fixture, "-o", exported)
    expected = pq.read_table(exported)
    with open(os.path.join(REPO, fixture), "rb") as f:
        data = f.read()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = pq.read_table(io.BytesIO(memtool.allocations(data, name=fixture)))
        assert table.equals(expected, check_metadata=True), fixture
        with open(exported, "rb") as f:
            assert memtool.allocations(fixture) == f.read(), f"{fixture}: not the same bytes"
        small_groups = memtool.allocations(
            os.path.join(REPO, fixture), name=fixture, row_group_rows=7
        )
        assert pq.read_table(io.BytesIO(small_groups)).equals(expected), fixture
        if expected.num_rows > 7:
            assert pq.ParquetFile(io.BytesIO(small_groups)).num_row_groups > 1, fixture
    return [w for w in caught if issubclass(w.category, memtool.MemtoolWarning)]


def check_errors(work):
    try:
        memtool.summary(b"not a profile at all")
    except memtool.ProfileError as e:
        assert "<bytes>" in str(e), str(e)
    else:
        raise AssertionError("garbage read as a profile")
    try:
        memtool.allocations(b"\x00\x01", name="rank7.pickle")
    except memtool.ProfileError as e:
        assert "rank7.pickle" in str(e), str(e)
    else:
        raise AssertionError("garbage exported")
    assert issubclass(memtool.ProfileError, ValueError)
    try:
        memtool.allocations(os.path.join(REPO, FIXTURES[0]), row_group_rows=0)
    except ValueError as e:
        assert "row_group_rows" in str(e), str(e)
    else:
        raise AssertionError("row groups of no rows")
    missing = os.path.join(work, "missing.pickle")
    try:
        memtool.summary(missing)
    except FileNotFoundError as e:
        assert missing in str(e), str(e)
    else:
        raise AssertionError("a missing file read")
    try:
        memtool.summary(work)
    except memtool.ProfileError as e:
        assert "directory" in str(e), str(e)
    else:
        raise AssertionError("a directory read")
    for wrong in (3, None, ["a.prof"]):
        try:
            memtool.summary(wrong)
        except TypeError:
            pass
        else:
            raise AssertionError(f"{wrong!r} taken as a profile")


def check_rank_of(binary, work):
    """`memtool.rank_of` is the rule `memtool ranks` numbers files by: the
    names below, linked to one snapshot, get from the command the rank
    numbers the function gives (none where it gives None)."""
    names = ["rank3.pickle", "RANK_12.pickle", "memory_rank-7_step100.pickle",
             "snapshot-5.pickle", "worker_9.pt.pickle", "host0.pickle"]
    folder = os.path.join(work, "ranks")
    os.mkdir(folder)
    source = os.path.abspath("tests/torch/snapshot.p4.pickle")
    for name in names:
        os.symlink(source, os.path.join(folder, name))
    doc = json.loads(command(binary, "ranks", folder, "--format", "json"))
    by_file = {os.path.basename(r["file"]): r.get("rank_number") for r in doc["ranks"]}
    assert sorted(by_file) == sorted(names), by_file
    for name in names:
        assert memtool.rank_of(os.path.join(folder, name)) == by_file[name], name
        assert memtool.rank_of(pathlib.Path(folder, name)) == by_file[name], name
    assert [by_file[n] for n in names] == [3, 12, 7, 5, 9, None], by_file


def check_docstrings():
    for item in (memtool, memtool.summary, memtool.allocations, memtool.rank_of,
                 memtool.MemtoolWarning, memtool.ProfileError):
        assert item.__doc__ and len(item.__doc__.strip()) > 40, item


def main():
    binary = sys.argv[1]
    check_command(binary)
    check_docstrings()
    os.chdir(REPO)
    warned = []
    with tempfile.TemporaryDirectory() as work:
        for fixture in FIXTURES:
            doc = check_summary(binary, fixture)
            assert doc["memories"], fixture
            warned += check_allocations(binary, fixture, work)
        check_errors(work)
        check_rank_of(binary, work)
    # The shared snapshots include ring buffers, which the reader warns of.
    assert any("ring buffer" in str(w.message) for w in warned), [str(w.message) for w in warned]
    print(f"python_module_check: {len(FIXTURES)} inputs: summary and allocations equal the command's")


if __name__ == "__main__":
    main()
