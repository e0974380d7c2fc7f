#!/usr/bin/env python3
"""Many ranks, one answer, on Spark: every rank's profile parsed where the
files are, with `import memtool`, and the cross-rank questions asked in Spark
SQL.

    spark-submit scripts/spark_ranks.py 's3a://bucket/run42/rank*.pickle' --out s3a://bucket/run42/memtool
    python scripts/spark_ranks.py 'dumps/*.pickle' --out memtool-ranks    # local mode, every core

1. `spark.read.format("binaryFile")` reads each rank file as one row (path,
   bytes).
2. `mapInArrow` turns each file into its allocations table with
   `memtool.allocations` (the table `memtool export` writes, docs/export.md),
   plus a `rank` column: the number in the file name by `memtool ranks`'s
   own rule (`memtool.rank_of`: `rank3`, `rank_3`, `snapshot-3.pickle`),
   else the file's place among the inputs in path order.
3. The table is written as Parquet partitioned by rank (`OUT/allocations/
   rank=3/part-….parquet`): the layout docs/export.md queries with DuckDB on
   one machine.
4. Spark SQL answers from it: the peak of each rank (a replay of the
   allocation and free events, as `memtool summary` and `memtool ranks`
   report it), the fleet's median and max and their ratio (imbalance), the
   outlier ranks (peak more than 10 % above the median), and what the
   highest rank holds at its peak that the median rank does not, by your own
   frame.

The figures are printed and written to `OUT/ranks.json`. Needs pyspark,
pyarrow and memtool (`pip install memtool`) on the driver and the executors.
See docs/spark.md.
"""

import argparse
import json
import os
import sys

# What `memtool ranks` calls an outlier: a peak more than 10 % above the
# median rank's.
OUTLIER_RATIO = 1.10

# The allocations table of `memtool export` (docs/export.md, schema
# memtool/export/v1), as Spark types, and the rank this job adds.
EXPORT_SCHEMA = "memtool/export/v1"
ALLOCATION_COLUMNS = [
    ("input", "string"),
    ("host", "string"),
    ("memory", "string"),
    ("axis", "string"),
    ("bytes", "bigint"),
    ("requested", "bigint"),
    ("buffers", "bigint"),
    ("address", "bigint"),
    ("alloc_at", "bigint"),
    ("free_at", "bigint"),
    ("alloc_event", "bigint"),
    ("free_event", "bigint"),
    ("snapshot", "string"),
    ("live_at_peak", "boolean"),
    ("op", "string"),
    ("shape", "string"),
    ("dtype", "string"),
    ("category", "string"),
    ("step", "bigint"),
    ("phase", "string"),
    ("stack", "string"),
    ("user_frame", "string"),
]
RANKED_SCHEMA = ", ".join(f"{n} {t}" for n, t in ALLOCATION_COLUMNS + [("rank", "bigint")])

def assign_ranks(paths):
    """Each path's rank: the number in its name by `memtool ranks`'s rule
    (`memtool.rank_of`: `rank3`, `rank_3`, `rank-3`, `snapshot-3.pickle`)
    when every name has one and no two share it, else its place among the
    paths in path order (said on stderr)."""
    import memtool

    named = {p: memtool.rank_of(p) for p in paths}
    numbers = [r for r in named.values() if r is not None]
    if len(numbers) == len(paths) and len(set(numbers)) == len(numbers):
        return named
    print(
        "spark_ranks: not every file name carries a distinct rank number "
        "(rank3, rank_3, snapshot-3.pickle: memtool.rank_of); ranks are the files' "
        "places in path order",
        file=sys.stderr,
    )
    return {p: i for i, p in enumerate(sorted(paths))}


def allocations_of(ranks):
    """The `mapInArrow` function: each binaryFile row (path, content) becomes
    the Arrow batches of its allocations table, with its rank."""

    def to_allocations(batches):
        import io

        import memtool
        import pyarrow as pa
        import pyarrow.parquet as pq

        names = [n for n, _ in ALLOCATION_COLUMNS]
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content")
            for i, path in enumerate(paths):
                data = memtool.allocations(contents[i].as_py(), name=path)
                table = pq.read_table(io.BytesIO(data))
                schema = (table.schema.metadata or {}).get(b"memtool.schema", b"").decode()
                if schema != EXPORT_SCHEMA or table.column_names != names:
                    raise ValueError(
                        f"{path}: memtool wrote {schema or 'an unknown schema'} "
                        f"with columns {table.column_names}; this job reads {EXPORT_SCHEMA}"
                    )
                rank = pa.array([ranks[path]] * table.num_rows, pa.int64())
                table = table.append_column("rank", rank)
                # Spark's columns are nullable; memtool's required ones are
                # declared non-null in the Parquet schema.
                table = table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))
                yield from table.to_batches()

    return to_allocations


# The peak of each memory of each rank, replayed from the rows: +bytes where
# an allocation is made (before the first event for those live at the
# start), -bytes where it is freed, the highest running total; for memories
# made of snapshots (JAX pprof), the largest snapshot. `live_at_peak_bytes`
# is memtool's own live set at its peak.
PEAKS_SQL = """
WITH changes AS (
  SELECT rank, memory, coalesce(alloc_event, -1) AS event, bytes AS delta
  FROM allocations WHERE snapshot IS NULL
  UNION ALL
  SELECT rank, memory, free_event, -bytes
  FROM allocations WHERE snapshot IS NULL AND free_event IS NOT NULL
),
running AS (
  SELECT rank, memory,
         sum(delta) OVER (PARTITION BY rank, memory ORDER BY event
                          ROWS UNBOUNDED PRECEDING) AS live
  FROM changes
),
snapshots AS (
  SELECT rank, memory, sum(bytes) AS live
  FROM allocations WHERE snapshot IS NOT NULL GROUP BY rank, memory, snapshot
),
replayed AS (
  SELECT rank, memory, max(live) AS peak_bytes
  FROM (SELECT * FROM running UNION ALL SELECT * FROM snapshots)
  GROUP BY rank, memory
),
at_peak AS (
  SELECT rank, memory, first(input) AS input,
         coalesce(sum(bytes) FILTER (WHERE live_at_peak), 0) AS live_at_peak_bytes
  FROM allocations GROUP BY rank, memory
)
SELECT rank, memory, input, peak_bytes, live_at_peak_bytes
FROM replayed JOIN at_peak USING (rank, memory)
ORDER BY rank, memory
"""

# A rank's peak: its highest memory's (a rank is one device, usually).
FLEET_SQL = f"""
WITH per_rank AS (SELECT rank, max(peak_bytes) AS peak_bytes FROM peaks GROUP BY rank)
SELECT count(*) AS ranks,
       percentile(peak_bytes, 0.5) AS median_bytes,
       max(peak_bytes) AS max_bytes,
       max(peak_bytes) / percentile(peak_bytes, 0.5) AS imbalance,
       max_by(rank, peak_bytes) AS highest_rank,
       sort_array(collect_list(CASE WHEN peak_bytes > {OUTLIER_RATIO} * median_peak
                                    THEN rank END)) AS outliers
FROM per_rank, (SELECT percentile(peak_bytes, 0.5) AS median_peak FROM per_rank)
"""

# The rank whose peak is nearest the median (the lower rank of a tie).
MEDIAN_RANK_SQL = """
WITH per_rank AS (SELECT rank, max(peak_bytes) AS peak_bytes FROM peaks GROUP BY rank)
SELECT rank FROM per_rank, (SELECT percentile(peak_bytes, 0.5) AS median FROM per_rank)
ORDER BY abs(peak_bytes - median), rank LIMIT 1
"""

# What the highest rank holds at its peak that the median rank does not, by
# your own frame (the innermost frame outside libraries; else the op).
DIFFERENCE_SQL = """
WITH held AS (
  SELECT rank, coalesce(user_frame, op, '<unknown>') AS frame, sum(bytes) AS bytes
  FROM allocations WHERE live_at_peak AND rank IN ({highest}, {median})
  GROUP BY rank, coalesce(user_frame, op, '<unknown>')
)
SELECT frame,
       coalesce(sum(bytes) FILTER (WHERE rank = {highest}), 0) AS highest_bytes,
       coalesce(sum(bytes) FILTER (WHERE rank = {median}), 0) AS median_bytes,
       coalesce(sum(bytes) FILTER (WHERE rank = {highest}), 0)
         - coalesce(sum(bytes) FILTER (WHERE rank = {median}), 0) AS more_bytes
FROM held GROUP BY frame
ORDER BY more_bytes DESC, frame LIMIT {top}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="rank files, folders or globs (any Hadoop path)")
    parser.add_argument("--out", required=True, help="folder for allocations/ and ranks.json")
    parser.add_argument("--top", type=int, default=10, help="frames in the difference (10)")
    args = parser.parse_args()

    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("memtool ranks")
    if not SparkConf().contains("spark.master"):
        # Run as a plain script: local mode on every core, the workers
        # running this Python (which has memtool and pyarrow).
        builder = builder.master("local[*]")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # One file per Arrow batch: a batch holds its files' bytes, so memory is
    # one profile and its table per task, whatever the files' sizes.
    builder = builder.config("spark.sql.execution.arrow.maxRecordsPerBatch", "1")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    # Spark's warnings (a glob is "no metadata directory", with a stack
    # trace) bury the answer; errors still show.
    spark.sparkContext.setLogLevel("ERROR")

    files = spark.read.format("binaryFile").load(args.inputs)
    paths = [row.path for row in files.select("path").collect()]
    if not paths:
        sys.exit(f"spark_ranks: no files in {' '.join(args.inputs)}")
    ranks = assign_ranks(paths)

    table = os.path.join(args.out, "allocations")
    rows = files.select("path", "content").mapInArrow(allocations_of(ranks), RANKED_SCHEMA)
    rows.write.mode("overwrite").partitionBy("rank").parquet(table)

    spark.read.parquet(table).createOrReplaceTempView("allocations")
    peaks = spark.sql(PEAKS_SQL)
    peaks.cache().createOrReplaceTempView("peaks")
    fleet = spark.sql(FLEET_SQL).first()
    (median_rank,) = spark.sql(MEDIAN_RANK_SQL).first()
    difference = spark.sql(
        DIFFERENCE_SQL.format(highest=fleet.highest_rank, median=median_rank, top=args.top)
    )

    print("Peak of each rank:")
    peaks.show(len(paths) * 4, truncate=False)
    print(
        f"{fleet.ranks} ranks: median {fleet.median_bytes:,.0f} B, max {fleet.max_bytes:,} B "
        f"(rank {fleet.highest_rank}), imbalance max/median {fleet.imbalance:.3f}; "
        f"outliers (> {OUTLIER_RATIO:.2f} x median): {list(fleet.outliers) or 'none'}"
    )
    print(f"What rank {fleet.highest_rank} holds at its peak that rank {median_rank} (median) does not:")
    difference.show(args.top, truncate=False)

    report = {
        "ranks": [row.asDict() for row in peaks.collect()],
        "median_bytes": fleet.median_bytes,
        "max_bytes": fleet.max_bytes,
        "imbalance": fleet.imbalance,
        "highest_rank": fleet.highest_rank,
        "median_rank": median_rank,
        "outliers": list(fleet.outliers),
        "highest_over_median": [row.asDict() for row in difference.collect()],
    }
    with open_output(spark, os.path.join(args.out, "ranks.json")) as out:
        json.dump(report, out, indent=2)
        out.write("\n")
    spark.stop()


def open_output(spark, path):
    """A text file at `path`: local paths directly; others (s3a://, hdfs://)
    through Hadoop's file system, as Spark wrote the table."""
    if "://" not in path or path.startswith("file://"):
        local = path[len("file://"):] if path.startswith("file://") else path
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        return open(local, "w")
    return _HadoopText(spark, path)


class _HadoopText:
    """A text file written through the JVM's Hadoop FileSystem."""

    def __init__(self, spark, path):
        self.spark, self.path, self.parts = spark, path, []

    def write(self, text):
        self.parts.append(text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            jvm = self.spark._jvm
            hadoop_path = jvm.org.apache.hadoop.fs.Path(self.path)
            fs = hadoop_path.getFileSystem(self.spark._jsc.hadoopConfiguration())
            out = fs.create(hadoop_path, True)
            out.write(bytearray("".join(self.parts).encode()))
            out.close()
        return False


if __name__ == "__main__":
    main()
