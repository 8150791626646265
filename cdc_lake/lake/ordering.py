"""The merge rule: which change of an order wins, and how a delete is written. Edit this file,
and only this one, to change it.

Key
    One row per value of the table's key (its declaration's ``key``,
    ``cdc_lake/source/captured.py``; ``order_id`` for the outbox), across partitions. The rule
    below is the same for every captured table.

Ordering
    Per key, the change with the greatest ``(__source_ts_ms, __lsn)`` wins. ``cdc_ordering``
    (``ORDERING_FIELD``) encodes that pair as one zero-padded string (15 + 20 digits) whose
    lexical order is the numeric order. A null ``__lsn`` counts as 0: Debezium's incremental
    (ad-hoc) snapshot reads have none, and as ``__source_ts_ms`` the time they were emitted, so
    they sort after the changes streamed before them (``cdc_lake/streaming/signals.py``).
    - Within a batch, ``latest_per_key`` keeps the winner. Equal ``(ts, lsn)`` is broken by
      operation (d > u > c > r), then ``updated_at`` where the table has one, then the
      remaining columns, so the choice never depends on partitioning or input order, and exact
      duplicates collapse to one row.
    - Across batches, Hudi merges with ``EVENT_TIME_ORDERING`` on ``cdc_ordering``
      (``merge_options``): an incoming row replaces the stored one only if it is not older, so
      a change that arrives after a newer one is ignored.

Truncates
    A ``TRUNCATE`` reaches the topic as one marker per table (``__op`` t, no key:
    ``connectors/s3-sink``'s ``TruncateMarker``), at its own ``(__source_ts_ms, __lsn)``. It takes
    that place in the order: every key whose latest change is older than the truncate is deleted
    (``swept``: a delete stamped with the truncate's own ordering), and a change after it
    survives, in the same batch or in another partition of the topic. The newest truncate's
    ordering stays in the checkpoint (``cdc_lake/lake/checkpoint.py``), so a change older than it
    that arrives later (another partition, a replay) is dropped instead of coming back.
    Snapshots use the same sweep: once a completed snapshot is read, a live key whose latest
    change is older than it was deleted before it began (``cdc_lake/lake/snapshots.py``), and
    the delete is stamped just below the snapshot (its time, LSN 0).

Deletes
    A delete is a row with ``is_deleted`` true that competes like any change: a delete newer
    than an update wins, an older one loses. ``with_delete_marker`` then writes it as
    ``_hoodie_is_deleted`` (``hard``, the default: Hudi removes the row), or leaves the row
    flagged (``soft``: it keeps its ordering value, so an older change arriving after the delete
    cannot bring the row back; with hard deletes it can, since nothing is left to compare).
    Readers skip flagged rows with ``live_rows``.

Idempotency
    Everything here is deterministic, so replaying a file or a batch leaves the table as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any, Literal, get_args

from pyspark.sql import Column, Window
from pyspark.sql import functions as F

from cdc_lake.source.captured import key_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ORDERING_FIELD = "cdc_ordering"
# A truncate's ``__op``: never a row of its own, it sweeps the older rows (``swept``).
TRUNCATE_OP = "t"
# Ranks for breaking a (ts, lsn) tie: a delete beats an update beats an insert beats a snapshot.
OP_RANK = {"d": 3, "u": 2, "c": 1, "r": 0}
# cdc_ordering pads ts to 15 and lsn to 20 digits; values outside that range would break it.
MAX_SOURCE_TS_MS = 10**15 - 1
# hard: a delete removes the row; soft: it stays, flagged ``is_deleted`` (readers filter on it).
DeleteMode = Literal["hard", "soft"]
DELETE_MODES: tuple[DeleteMode, ...] = get_args(DeleteMode)


def ordering(ts: Column, lsn: Column) -> Column:
    """The ``cdc_ordering`` value of (source ts_ms, LSN); a null LSN counts as 0."""
    return F.format_string("%015d%020d", ts, F.coalesce(lsn, F.lit(0)))


def op_rank() -> Column:
    """A row's ``cdc_op`` as its tie-break rank (``OP_RANK``; -1 for any other)."""
    rank = F.lit(-1)
    for op, value in OP_RANK.items():
        rank = F.when(F.col("cdc_op") == op, F.lit(value)).otherwise(rank)
    return rank


def ordering_text(ts: int, lsn: int) -> str:
    """``ordering``'s value for one (ts, lsn), in Python."""
    return f"{ts:015d}{lsn:020d}"


def key_value(row: Sequence[Any]) -> Any:
    """A collected row of the key's columns (and nothing else) as one value: the column's
    value for a one-column key, the tuple of values for a composite key (what samples name)."""
    return row[0] if len(row) == 1 else tuple(row)


def latest_per_key(rows: DataFrame, key: str | Sequence[str]) -> DataFrame:
    """Per value of ``key`` (a column, or the columns of a composite key), the lake row with the
    greatest ``(cdc_source_ts_ms, cdc_lsn)``, ties broken as the module docstring says."""
    rank = op_rank()
    first = [c for c in ("updated_at",) if c in rows.columns]
    by = key_columns(key)
    keys = (*by, "cdc_source_ts_ms", "cdc_lsn", "cdc_op", *first)
    window = Window.partitionBy(*by).orderBy(
        F.col("cdc_source_ts_ms").desc(),
        F.col("cdc_lsn").desc(),
        rank.desc(),
        *[F.col(c).desc_nulls_last() for c in first],
        *[F.col(c).desc_nulls_last() for c in rows.columns if c not in keys],
    )
    # row_number() == 1 lets Spark 3.5 keep one row per key before the shuffle too.
    return (
        rows.withColumn("_rank", F.row_number().over(window))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )


def swept(
    stored: DataFrame | None, batch: DataFrame, ts: int, lsn: int, key: str | Sequence[str]
) -> DataFrame:
    """Deletes, as lake rows stamped ``(ts, lsn)``, of the live keys whose latest change is older
    than ``(ts, lsn)``, over the table's current rows (``stored``; None before the first commit)
    and the batch's ``latest_per_key`` rows. Columns as ``batch``'s; a column the batch adds to
    the table is null in the rows stored before it."""
    columns = batch.columns
    aligned = [
        F.col(c) if stored is not None and c in stored.columns
        else F.lit(None).cast(batch.schema[c].dataType).alias(c)
        for c in columns
    ]  # fmt: skip
    sides = [batch] if stored is None else [stored.select(*aligned), batch]
    point = ordering(F.lit(ts), F.lit(lsn))
    by = list(key_columns(key))
    newer = reduce(
        lambda a, b: a.unionByName(b),
        [s.where(F.col(ORDERING_FIELD) >= point).select(*by) for s in sides],
    ).distinct()
    older = reduce(
        lambda a, b: a.unionByName(b), [s.where(F.col(ORDERING_FIELD) < point) for s in sides]
    )
    return (
        live_rows(latest_per_key(older, by))
        .join(newer, by, "left_anti")
        .withColumn("cdc_op", F.lit("d"))
        .withColumn("is_deleted", F.lit(True))
        .withColumn("cdc_source_ts_ms", F.lit(ts).cast("long"))
        .withColumn("cdc_lsn", F.lit(lsn).cast("long"))
        .withColumn(ORDERING_FIELD, point)
        .select(*columns)
    )


def with_delete_marker(rows: DataFrame, delete_mode: DeleteMode) -> DataFrame:
    """The rows as Hudi must receive them: with hard deletes, ``_hoodie_is_deleted`` set from
    ``is_deleted``; with soft deletes, unchanged."""
    if delete_mode == "hard":
        return rows.withColumn("_hoodie_is_deleted", F.col("is_deleted"))
    return rows


def live_rows(rows: DataFrame) -> DataFrame:
    """The rows that are not deleted (a null ``is_deleted`` counts as live)."""
    return rows.where(~F.coalesce(F.col("is_deleted"), F.lit(False)))


def merge_options(key: str | Sequence[str]) -> dict[str, str]:
    """Hudi's key and merge options for the rule above, for a table keyed by ``key`` (Hudi's
    record key of a composite key is ``col:value,col:value``, its key generator's)."""
    return {
        "hoodie.datasource.write.recordkey.field": ",".join(key_columns(key)),
        "hoodie.datasource.write.precombine.field": ORDERING_FIELD,
        "hoodie.write.record.merge.mode": "EVENT_TIME_ORDERING",
    }
