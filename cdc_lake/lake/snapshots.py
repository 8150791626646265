"""A completed Debezium snapshot is authoritative: orders it no longer holds leave the lake.

Why
    Debezium's PostgreSQL connector takes an interrupted snapshot again from a new point and
    streams from there. An order read by the first, cut-short snapshot and deleted before the
    second one gets no delete event, so no line ever tells the lake to remove it. The same holds
    after any new snapshot that replaces lost history (a recreated slot, ``snapshot.mode``
    ``when_needed``).

The rule
    Every record of one PostgreSQL snapshot carries the same ``__source_ts_ms``: the start of the
    snapshot's transaction (``now()`` on the database's clock). The snapshot's last record is
    marked ``__source_snapshot`` ``last`` (or ``last_in_data_collection``). Once that record is
    read, every live order whose latest change is older than the snapshot (``cdc_source_ts_ms``
    below it, counting the lake's rows and the batch's) was absent from the snapshot, so it was
    deleted in the source before the snapshot began. It becomes a delete in the same Hudi commit
    as the rest of the batch.

Ordering
    The delete is stamped just below the snapshot: ``cdc_source_ts_ms`` = the snapshot's time
    and ``cdc_lsn`` = 0. It beats every change older than the snapshot, and loses to the
    snapshot's own reads and to every change streamed after it, so a read of the same order that
    arrives later (another partition, a replay) still wins. A replay of the snapshot finds
    nothing more to delete, so the rule is idempotent.

Cost
    One scan of the table's current rows, only in the refresh that reads a snapshot's last
    record; the snapshot itself is a copy of the whole table.

Limits
    Only the initial or a blocking snapshot of the whole table marks ``last``; incremental
    (ad-hoc) snapshots mark ``incremental`` and never delete. A blocking snapshot restricted by
    ``additional-conditions`` would delete the orders it filtered out: the project never sends
    one. On a topic with more than one partition the sweep runs when the partition holding the
    ``last`` record is read; orders whose reads sit in other, unread partitions are deleted and
    come back when those are read (hard deletes) or win over the delete (soft deletes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_lake.lake import ordering as O

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Debezium's source.snapshot on a table snapshot's final record.
SNAPSHOT_END = ("last", "last_in_data_collection")


def snapshot_end_ts() -> Column:
    """Per good event: its ``__source_ts_ms`` if it is a snapshot's last record, else null.
    Its max over a batch is ``completed_snapshot_ts``."""
    is_end = (F.col("__op") == "r") & F.col("__source_snapshot").isin(*SNAPSHOT_END)
    return F.when(is_end, F.col("__source_ts_ms"))


def completed_snapshot_ts(good: DataFrame) -> int | None:
    """The ``__source_ts_ms`` of the newest snapshot whose last record is among these good
    events (``split_valid``'s output), or None."""
    row = good.agg(F.max(snapshot_end_ts()).alias("ts")).first()
    return None if row is None or row["ts"] is None else int(row["ts"])


def absent_from_snapshot(
    stored: DataFrame | None, batch: DataFrame, snapshot_ts: int, key: str | Sequence[str]
) -> DataFrame:
    """Deletes, as lake rows, of the live keys whose latest change is older than the
    snapshot, over the table's current rows (``stored``, None before the first commit) and the
    batch's ``latest_per_key`` rows; columns as ``batch``. The merge rule's sweep, stamped just
    below the snapshot (``cdc_lake/lake/ordering.py``)."""
    return O.swept(stored, batch, snapshot_ts, 0, key)
