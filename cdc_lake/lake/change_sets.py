"""Each commit's change set, written by the upsert itself: per order the commit touched, its row
before the commit and its row after, as compressed Parquet beside the table.

Against Hudi's change feed (``cdc_lake/lake/changes.py``; ``HudiTableConfig.change_sets``)
    Hudi 1.1 logs a commit's changes as uncompressed Avro, a before- and an after-image of every
    row it wrote: 422 of a table's 979 MiB after 1M orders and 12 small batches. The change
    sets of the same commits take 17.5 MiB. But reading the rows back from the file versions
    the commit rewrote costs more time than the feed costs the write: 1.04-1.32x per small batch
    into 1M orders, 1.47x for the load (docs/benchmarks.md, issue 25). So the feed stays the
    default, and change sets are the choice where storage counts more than write time.

What a change set holds (``write_change_set``, right after a COPY_ON_WRITE commit)
    The commit's metadata names each file group it wrote: the new base file and the version it
    replaced (none for a new file group). Of the batch's keys (every order the upsert was
    given, including changes that lost to a newer stored row), a change set holds the rows the
    replaced versions held (``before``) and the rows the new versions hold (``after``), as the
    table's columns in lake types. So it shows what Hudi wrote, not what it was asked to: an
    order left twice in the table by one commit shows two ``after`` rows; a hard delete shows
    a ``before`` row and no ``after``; a partition move a ``before`` in the old partition and an
    ``after`` in the new. It costs a read of the file versions the commit rewrote (filtered to
    the batch's keys), never of a file group it did not touch.

Trust (``read_change_sets``)
    A change set is written under ``<table>/.cdc_lake/change_sets/<instant>/`` after its commit
    completed, and trusted only if its commit is on the completed timeline and Spark's
    ``_SUCCESS`` marker, written last, is there. A crash after the commit and before the marker
    leaves a commit without a trusted change set: readers then fall back (Hudi's feed where the
    table has it, else a read of the snapshot), never to a partial set. A rerun of the same
    commit cannot happen (a retried refresh makes a new commit), and a change set whose commit was
    rolled back is never read. MERGE_ON_READ delta commits get none (their changes sit in log
    files): readers fall back as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_lake.lake.changes import first_and_last, image_rows, image_schema, read_changes
from cdc_lake.lake.hudi import (
    CommitInfo,
    change_feed_gap,
    completed_commits,
    delete_path,
    file_writes,
    list_dirs,
    path_exists,
)
from cdc_lake.lake.tables import or_declared

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from cdc_lake.lake.schema import LakeSchema

CHANGE_SETS_DIR = ".cdc_lake/change_sets"
SUCCESS = "_SUCCESS"


def change_set_path(base_path: str, instant: str) -> str:
    return f"{base_path.rstrip('/')}/{CHANGE_SETS_DIR}/{instant}"


def _image_struct(schema: LakeSchema | None, *first: tuple[str, str]) -> StructType:
    """An image's columns, the table's and the lake's own, lake-typed (after ``first``)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    lake = {c.name: c.lake_type for c in or_declared(schema).columns}
    struct = StructType()
    for name, spark_type in first:
        struct.add(name, _parse_datatype_string(spark_type))
    for f in image_schema(schema).fields:
        struct.add(f.name, _parse_datatype_string(lake[f.name]) if f.name in lake else f.dataType)
    return struct


def _rows_of(
    spark: SparkSession, files: Sequence[str], keys: DataFrame, schema: LakeSchema | None
) -> DataFrame | None:
    """The rows of these base files whose key is among ``keys``, as image columns. Read with the
    image's schema: only those columns are read, and one the files predate is null."""
    if not files:
        return None
    rows = spark.read.schema(_image_struct(schema)).parquet(*files)
    return rows.join(F.broadcast(keys), or_declared(schema).key, "left_semi")


def write_change_set(
    spark: SparkSession,
    base_path: str,
    commit: CommitInfo,
    keys: DataFrame,
    schema: LakeSchema | None = None,
) -> int | None:
    """The change set of ``commit`` (just completed, COPY_ON_WRITE) for the batch's ``keys`` (a
    one-column DataFrame of the key): see the module docstring. Returns its row count, or None
    when a version the commit replaced is gone already (a cleaner that keeps a single commit's
    versions): then the commit has no change set, and readers fall back."""
    try:
        writes = file_writes(spark, base_path, commit.instant)
    except FileNotFoundError:
        return None
    prune_change_sets(spark, base_path)
    base = base_path.rstrip("/")
    before = _rows_of(spark, [f"{base}/{w.previous}" for w in writes if w.previous], keys, schema)
    after = _rows_of(spark, [f"{base}/{w.path}" for w in writes], keys, schema)
    sides = [
        df.select(F.lit(side).alias("_side"), "*")
        for side, df in (("before", before), ("after", after))
        if df is not None
    ]
    if not sides:
        return 0
    rows = (sides[0] if len(sides) == 1 else sides[0].unionByName(sides[1])).persist()
    try:
        n = rows.count()
        # One file per commit: the rows are few, and a day of commits makes many sets.
        rows.coalesce(1).write.mode("overwrite").option("compression", "zstd").parquet(
            change_set_path(base_path, commit.instant)
        )
    finally:
        rows.unpersist()
    return n


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
    schema: LakeSchema | None = None,
) -> DataFrame:
    """The change sets of ``commits`` (each must have one: ``has_change_sets``) in the shape of
    ``cdc_lake.lake.changes.read_changes``: the key, ``commit`` (the commit's completion time,
    which orders them), ``before`` and ``after`` as structs of the image columns, here
    lake-typed (``image_rows(..., typed=True)``)."""
    key = or_declared(schema).key
    struct = _image_struct(schema, ("_side", "string"))
    image = F.struct(*[F.col(f.name) for f in struct.fields[1:]])
    parts = []
    for c in commits:
        rows = spark.read.schema(struct).parquet(change_set_path(base_path, c.instant))
        parts.append(
            rows.select(
                F.col(key),
                F.lit(c.completed).alias("commit"),
                F.when(F.col("_side") == "before", image).alias("before"),
                F.when(F.col("_side") == "after", image).alias("after"),
            )
        )
    if not parts:
        raise ValueError("read_change_sets: no commits given")
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


@dataclass(frozen=True)
class Span:
    """What the commits of a range did, per changed order (``first_and_last``'s shape)."""

    changes: DataFrame  # read_changes' shape: the key, commit, before, after
    typed: bool  # images lake-typed (change sets) or as Hudi's feed writes them
    source: str  # "change sets" or "Hudi's change feed"
    key: str

    def first_and_last(self) -> DataFrame:
        return first_and_last(self.changes, self.key)

    def rows(self, images: DataFrame, side: str, schema: LakeSchema | None = None) -> DataFrame:
        return image_rows(images, side, schema, typed=self.typed)


def changes_between(
    spark: SparkSession,
    base_path: str,
    commits: Sequence[CommitInfo],
    after_instant: str,
    after_completed: str,
    upto: CommitInfo,
    schema: LakeSchema | None = None,
) -> tuple[Span | None, str]:
    """The changes of ``commits``, those after ``after`` up to ``upto``: from their change sets
    when each has one, else from Hudi's change feed when the table has one that covers them;
    else (None, why), and the caller reads the snapshot."""
    key = or_declared(schema).key
    if commits and has_change_sets(spark, base_path, commits):
        changes = read_change_sets(spark, base_path, commits, schema)
        return Span(changes, True, "change sets", key), ""
    gap = change_feed_gap(spark, base_path, after_instant)
    if gap is not None:
        return None, f"a commit since has no change set, and {gap}"
    changes = read_changes(spark, base_path, after_completed, upto.completed, schema)
    return Span(changes, False, "Hudi's change feed", key), ""
