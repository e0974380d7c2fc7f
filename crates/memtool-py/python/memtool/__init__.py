"""memtool from Python: where did my GPU/TPU memory go?

The same wheel installs the ``memtool`` command and this module. Both read
XSpace (``*.xplane.pb``), JAX pprof, PyTorch CUDA snapshots, Chrome traces and
memory timelines, with the same Rust core, so a figure here is the figure the
command prints.

    import io
    import memtool
    import pyarrow.parquet as pq

    doc = memtool.summary("memory.prof")
    peaks = [(m["id"], m["peak_bytes"]) for m in doc["memories"]]
    table = pq.read_table(io.BytesIO(memtool.allocations("memory.prof")))

A profile is given as a path (``str`` or ``os.PathLike``) or as its bytes
(``bytes``, ``bytearray``, ``memoryview``: a Spark ``binaryFile`` row's
``content``, an object read from storage). Gzipped inputs are read as they
are. Run directories and TensorBoard logdirs are for the command; here one
call reads one file.

See docs/python.md for the functions and docs/spark.md for a PySpark job
that runs them over thousands of rank files.
"""

import json
import os
import warnings

from memtool._memtool import ProfileError, __version__
from memtool._memtool import allocations_parquet as _allocations_parquet
from memtool._memtool import rank_of as _rank_of
from memtool._memtool import summary_json as _summary_json

__all__ = ["summary", "allocations", "rank_of", "ProfileError", "MemtoolWarning", "__version__"]


class MemtoolWarning(UserWarning):
    """What memtool read around instead of failing (the command's
    ``warning:`` lines on standard error): a truncated ring buffer, figures
    that contradict each other, sizes past 64 bits."""


def _source(path_or_bytes):
    """The profile as the extension takes it: ``bytes``, or a path as ``str``."""
    if isinstance(path_or_bytes, bytes):
        return path_or_bytes
    if isinstance(path_or_bytes, (bytearray, memoryview)):
        return bytes(path_or_bytes)
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return path
    raise TypeError(
        "a profile is a path (str, os.PathLike) or its bytes, not "
        + type(path_or_bytes).__name__
    )


def summary(path_or_bytes, *, name=None, all_frames=False):
    """The summary of one profile: the document ``memtool summary --format
    json`` prints (schema ``memtool/summary/v1``, docs/json/summary.md), as a
    dict.

    Each memory (device, allocator, compiled program's memory space) is one
    entry of ``["memories"]`` with its ``peak_bytes``, the live set at the
    peak by stack, and the out-of-memory post-mortem where the profile
    recorded a failure. The reader's warnings are in ``["warnings"]``.

    :param path_or_bytes: a profile file's path (``str`` or
        ``os.PathLike``), or the profile's bytes (``bytes``, ``bytearray``,
        ``memoryview``), gzipped or not.
    :param name: what messages call the input (default: the path, or
        ``<bytes>``).
    :param all_frames: show every frame of each stack, as the command's
        ``--all-frames`` (by default library frames are hidden so bytes land
        on your own code).
    :returns: the summary document, a ``dict``.
    :raises ProfileError: the input is no profile memtool reads (the
        command's exit 2); the message names the input and, where known, the
        byte.
    :raises OSError: the file cannot be opened.
    """
    return json.loads(_summary_json(_source(path_or_bytes), name, all_frames))


def allocations(path_or_bytes, *, name=None, all_frames=False, row_group_rows=None):
    """Every allocation of one profile: the table ``memtool export`` writes
    (schema ``memtool/export/v1``, columns in docs/export.md), as the bytes
    of a Parquet file.

    Read it with ``pyarrow.parquet.read_table(io.BytesIO(data))``, pandas'
    ``read_parquet``, Polars, DuckDB or Spark. One row per interval an
    allocation was live; ``live_at_peak`` marks the live set at each memory's
    peak, so ``sum(bytes) WHERE live_at_peak`` is what ``summary`` breaks
    down. The ``input`` column holds ``name``.

    Parquet, not Arrow: memtool writes Parquet with the ``parquet`` crate's
    column writers and carries no Arrow library, so the wheel stays small;
    pyarrow reads the bytes without copying the columns twice.

    Warnings of the reader (the command's ``warning:`` lines) are issued as
    :class:`MemtoolWarning`.

    :param path_or_bytes: a profile file's path (``str`` or
        ``os.PathLike``), or the profile's bytes, gzipped or not.
    :param name: the ``input`` column's value and what messages call the
        input (default: the path, or ``<bytes>``). A Spark job passes the
        file's path.
    :param all_frames: ``user_frame`` and ``stack`` keep library frames, as
        the command's ``--all-frames``.
    :param row_group_rows: rows per Parquet row group (default 122,880, the
        command's ``--row-group-rows``).
    :returns: a Parquet file, ``bytes``.
    :raises ProfileError: the input is no profile memtool reads.
    :raises OSError: the file cannot be opened.
    """
    data, notes = _allocations_parquet(
        _source(path_or_bytes), name, all_frames, row_group_rows
    )
    for note in notes:
        warnings.warn(note, MemtoolWarning, stacklevel=2)
    return data


def rank_of(path):
    """The rank number a file's name gives, or ``None``: the rule ``memtool
    ranks`` numbers its rank files by, from the same Rust code.

    The digits after ``rank`` (``rank3``, ``rank_3``, ``rank-3``, any case;
    the last such in the name), else the last run of digits between a ``-``
    or ``_`` and a ``.`` (``snapshot-3.pickle``, ``worker_12.pt.trace.json``).
    Only the file name counts, not its folders; ``path`` is a ``str`` or
    ``os.PathLike`` (a URL such as Spark's ``file:/…/rank3.pickle`` works).

        >>> memtool.rank_of("dumps/rank_12.pickle")
        12
        >>> memtool.rank_of("host0.xplane.pb") is None
        True
    """
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return _rank_of(path)
