"""Each commit's change set, written by the upsert itself: per order the commit touched, its row
before the commit and its row after, as compressed Parquet beside the table.

Against Hudi's change feed (``cdc_lake/lake/changes.py``; ``HudiTableConfig.change_feed``)
    Hudi 1.1 logs a commit's changes as uncompressed Avro, a before- and an after-image of every
    row it wrote: 411 of a table's 479 MiB after 1M events over 200,000 orders in 10 batches.
    The change sets of the same commits take 18 MiB of 86 MiB. Reading the rows back from the
    file versions the commit rewrote costs time the feed does not: 1.06x at those 1M events,
    about 1.1x for a small commit (docs/benchmarks-log.md, issue 25). So change sets are the default
    (``change_sets``), and the feed an option for readers of Hudi's CDC queries.

What a change set holds (``write_change_set``, right after a COPY_ON_WRITE commit)
    The commit's metadata names each file group it wrote: the new base file and the version it
    replaced (none for a new file group). Of the batch's keys (every order the upsert was
    given, including changes that lost to a newer stored row), a change set holds the rows the
    replaced versions held (``before``) and the rows the new versions hold (``after``), as the
    table's columns in lake types. So it shows what Hudi wrote, not what it was asked to: an
    order left twice in the table by one commit shows two ``after`` rows; a hard delete shows
    a ``before`` row and no ``after``; a partition move a ``before`` in the old partition and an
    ``after`` in the new. It costs a read of the file versions the commit rewrote (filtered to
    the batch's keys), never of a file group it did not touch. Each row also carries
    ``_applied_ts_ms``: the source time of the change the commit was given for its key, the
    time of a hard delete, which has no ``after`` row to hold it (the history table closes the
    deleted version then, ``cdc_lake/lake/history.py``); null in sets written before it was.

Trust (``read_change_sets``)
    A change set is written under ``<table>/.cdc_lake/change_sets/<instant>/`` after its commit
    completed, and trusted only if its commit is on the completed timeline and Spark's
    ``_SUCCESS`` marker, written last, is there. A crash after the commit and before the marker
    leaves a commit without a trusted change set: readers then fall back (Hudi's feed where the
    table has it, else a read of the snapshot), never to a partial set. A rerun of the same
    commit cannot happen (a retried refresh makes a new commit), and a change set whose commit was
    rolled back is never read. MERGE_ON_READ delta commits get none (their changes sit in log
    files): readers fall back as before. Nor does a table's first commit
    (``commit.write_commit``): a reader follows commits after the one it last saw, and one that
    saw none scans the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_lake.lake.changes import first_and_last, image_rows, image_schema, read_changes
from cdc_lake.lake.hudi_timeline import (
    CommitInfo,
    change_feed_gap,
    completed_commits,
    delete_path,
    file_writes,
    list_dirs,
    path_exists,
)
from cdc_lake.lake.schema import spark_type
from cdc_lake.lake.timeline import instant_time

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from cdc_lake.lake.schema import LakeSchema

CHANGE_SETS_DIR = ".cdc_lake/change_sets"
SUCCESS = "_SUCCESS"
# The source time of the change the commit was given for the row's key (see the docstring).
APPLIED_TS = "_applied_ts_ms"


def change_set_path(base_path: str, instant: str) -> str:
    return f"{base_path.rstrip('/')}/{CHANGE_SETS_DIR}/{instant}"


def _image_struct(schema: LakeSchema, *first: tuple[str, str]) -> StructType:
    """An image's columns, the table's and the lake's own, lake-typed (after ``first``)."""
    from pyspark.sql.types import StructType

    lake = {c.name: c.lake_type for c in schema.columns}
    struct = StructType()
    for name, ddl in first:
        struct.add(name, spark_type(ddl))
    for f in image_schema(schema).fields:
        struct.add(f.name, spark_type(lake[f.name]) if f.name in lake else f.dataType)
    return struct


def write_change_set(
    spark: SparkSession,
    base_path: str,
    commit: CommitInfo,
    keys: DataFrame,
    schema: LakeSchema,
) -> int | None:
    """The change set of ``commit`` (just completed, COPY_ON_WRITE) for the batch's ``keys`` (a
    DataFrame of the key columns of ``schema``, the table's, and ``cdc_source_ts_ms``: the
    change given for each key, one per key): see the module docstring. Returns
    its row count, or None when a version the commit replaced is gone already (a cleaner that
    keeps a single commit's versions): then the commit has no change set, and readers fall
    back."""
    from pyspark.sql import Observation

    try:
        writes = file_writes(spark, base_path, commit.instant)
    except FileNotFoundError:
        return None
    prune_change_sets(spark, base_path)
    if not writes:
        return 0
    base = base_path.rstrip("/")
    files = [f"{base}/{w.path}" for w in writes] + [
        f"{base}/{w.previous}" for w in writes if w.previous
    ]
    # One read of both versions (only the image's columns; one the files predate is null): the
    # commit's own files, named after its instant, hold the after rows.
    written = F.col("_metadata.file_name").endswith(f"_{commit.instant}.parquet")
    rows = (
        spark.read.schema(_image_struct(schema))
        .parquet(*files)
        .select(F.when(written, "after").otherwise("before").alias("_side"), "*")
        .join(
            # One change per key (the callers give one): a join that keeps the rows one to one.
            F.broadcast(
                keys.select(*schema.keys, F.col("cdc_source_ts_ms").alias(APPLIED_TS))
                .dropDuplicates(list(schema.keys))
            ),
            list(schema.keys),
        )
    )
    # Counted while written (no second pass). As many files as the read has partitions: one or
    # two for a small commit, and a large one is read and written in parallel (a coalesce to
    # one file would run all of it in one task). The committer's v2 algorithm moves each file
    # once, at task commit: a set is trusted only by the _SUCCESS written at job commit.
    counted = Observation(f"change_set_{commit.instant}")  # one name per query in the session
    options = {"compression": "zstd", "mapreduce.fileoutputcommitter.algorithm.version": "2"}
    observed = rows.observe(counted, F.count(F.lit(1)).alias("rows"))
    observed.write.mode("overwrite").options(**options).parquet(
        change_set_path(base_path, commit.instant)
    )
    return int(counted.get["rows"])


def prune_change_sets(spark: SparkSession, base_path: str) -> int:
    """Delete the change sets of commits older than the oldest on the active timeline (archived:
    no reader can follow them any more). Returns how many went."""
    oldest = next(completed_commits(spark, base_path), None)
    if oldest is None:
        return 0
    stale = [i for i in list_change_sets(spark, base_path) if i < oldest.instant]
    for instant in stale:
        delete_path(spark, change_set_path(base_path, instant))
    return len(stale)


def list_change_sets(spark: SparkSession, base_path: str) -> list[str]:
    """The instants that have a change set directory (complete or not), oldest first."""
    return sorted(list_dirs(spark, f"{base_path.rstrip('/')}/{CHANGE_SETS_DIR}"))


def has_change_sets(spark: SparkSession, base_path: str, commits: Sequence[CommitInfo]) -> bool:
    """Whether every one of ``commits`` (completed) has a trusted change set."""
    return all(
        path_exists(spark, f"{change_set_path(base_path, c.instant)}/{SUCCESS}") for c in commits
    )


def read_change_sets(
    spark: SparkSession,
    base_path: str,
    commits: Sequence[CommitInfo],
    schema: LakeSchema,
) -> DataFrame:
    """The change sets of ``commits`` (each must have one: ``has_change_sets``) in the shape of
    ``cdc_lake.lake.changes.read_changes``: the key, ``commit`` (the commit's completion time,
    which orders them), ``before`` and ``after`` as structs of the image columns, here
    lake-typed (``image_rows(..., typed=True)``). ``schema``: the table's."""
    image = F.struct(*[F.col(f.name) for f in _image_struct(schema).fields])
    return read_change_set_sides(spark, base_path, commits, schema).select(
        *[F.col(k) for k in schema.keys],
        F.col("_commit").alias("commit"),
        F.when(F.col("_side") == "before", image).alias("before"),
        F.when(F.col("_side") == "after", image).alias("after"),
    )


def read_change_set_sides(
    spark: SparkSession, base_path: str, commits: Sequence[CommitInfo], schema: LakeSchema
) -> DataFrame:
    """The rows of the change sets of ``commits`` (each must have one) as written: the image
    columns lake-typed, ``_side`` (before or after), ``_applied_ts_ms``, ``_commit``, the
    commit's completion time, which orders them, and ``_commit_ms``, that time in epoch
    milliseconds (UTC, as the stack and EMR write it). ``schema``: the table's."""
    from pyspark.sql.types import LongType

    if not commits:
        raise ValueError("read_change_sets: no commits given")
    struct = _image_struct(schema, ("_side", "string"))
    struct.add(APPLIED_TS, LongType())
    out = None
    for c in commits:
        rows = spark.read.schema(struct).parquet(change_set_path(base_path, c.instant))
        when = instant_time(c.completed[:17])
        rows = rows.withColumn("_commit", F.lit(c.completed)).withColumn(
            "_commit_ms", F.lit(int(when.timestamp() * 1000) if when else None).cast("long")
        )
        out = rows if out is None else out.unionByName(rows)
    assert out is not None
    return out


@dataclass(frozen=True)
class Span:
    """What the commits of a range did, per changed order (``first_and_last``'s shape)."""

    changes: DataFrame  # read_changes' shape: the key, commit, before, after
    typed: bool  # images lake-typed (change sets) or as Hudi's feed writes them
    source: str  # "change sets" or "Hudi's change feed"
    keys: tuple[str, ...]

    def first_and_last(self) -> DataFrame:
        return first_and_last(self.changes, self.keys)

    def rows(self, images: DataFrame, side: str, schema: LakeSchema) -> DataFrame:
        return image_rows(images, side, schema, typed=self.typed)


def changes_between(
    spark: SparkSession,
    base_path: str,
    commits: Sequence[CommitInfo],
    after_instant: str,
    after_completed: str,
    upto: CommitInfo,
    schema: LakeSchema,
) -> tuple[Span | None, str]:
    """The changes of ``commits``, those after ``after`` up to ``upto``: from their change sets
    when each has one, else from Hudi's change feed when the table has one that covers them;
    else (None, why), and the caller reads the snapshot. ``schema``: the table's."""
    keys = schema.keys
    if commits and has_change_sets(spark, base_path, commits):
        changes = read_change_sets(spark, base_path, commits, schema)
        return Span(changes, True, "change sets", keys), ""
    gap = change_feed_gap(spark, base_path, after_instant)
    if gap is not None:
        return None, f"a commit since has no change set, and {gap}"
    changes = read_changes(spark, base_path, after_completed, upto.completed, schema)
    return Span(changes, False, "Hudi's change feed", keys), ""
