"""Values Debezium did not receive: an unchanged TOASTed column, and how the lake fills it in.

Why
    PostgreSQL stores a large text, JSONB or numeric value out of line (TOAST). An ``UPDATE``
    that leaves such a value alone writes no copy of it to the WAL, unless the table's replica
    identity is ``FULL``, so Debezium's change event cannot hold it and carries the placeholder
    ``UNAVAILABLE_VALUE`` instead (``cdc_lake/source/captured.py``: the source connector's
    ``unavailable.value.placeholder``, set to it in ``cdc_lake/streaming/connect_config.py``).
    Written as it is, the placeholder would replace the real value in the lake.

The rule
    A column that holds the placeholder keeps the value the same key had just before:
    1. the previous change of that key in the batch (by the merge rule's order,
       ``cdc_lake/lake/ordering.py``) whose value is not the placeholder;
    2. else the lake's stored live row of that key, looked up by key (Hudi's record index
       answers a key filter without reading the table);
    3. else nothing tells the value: the refresh stops before committing anything
       (``UnavailableValueError``), naming the table, the key and the column, and how to get
       past it (``REPLICA IDENTITY FULL``, then a resnapshot of the table).
    A table declared ``replica_identity="full"`` (the default) gets whole rows from the WAL and
    should never see the placeholder; the rule holds for every table all the same.
    An explicit null is a value, and is kept. A delete is not filled (its row is removed, or
    flagged with its old values).

When
    Only in a batch whose raw lines hold the placeholder at all (counted in the batch summary
    the ingestion makes anyway), so a batch without one pays nothing. Only columns whose raw and
    lake values are text can hold it (text, bpchar, JSON, numeric's exact text); every other
    type PostgreSQL never TOASTs here.

Idempotency
    The fill is deterministic: the same lines and the same stored rows give the same values, so
    a replay changes nothing.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_lake.lake import ordering as O
from cdc_lake.lake.schema import KINDS, LakeSchema
from cdc_lake.source.captured import UNAVAILABLE_VALUE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Past this many keys the stored rows are joined instead of filtered by a list of keys.
MAX_LOOKUP_KEYS = 10_000


class UnavailableValueError(ValueError):
    """A change holds Debezium's placeholder and nothing tells the value; nothing committed."""


def fillable_columns(schema: LakeSchema) -> list[str]:
    """The columns that can hold the placeholder: text in the raw lines and in the lake."""
    return [
        c.name
        for c in schema.live
        if c.name not in schema.keys
        and KINDS[c.kind].raw == "string"
        and KINDS[c.kind].lake == "string"
    ]


def line_has_placeholder() -> Column:
    """Per raw line: whether its text holds the placeholder anywhere (the batch summary counts
    these, so a batch without one skips the fill)."""
    return F.instr(F.col("value"), UNAVAILABLE_VALUE) > 0


def _is_placeholder(name: str) -> Column:
    return F.coalesce(F.col(name) == F.lit(UNAVAILABLE_VALUE), F.lit(False))


def _any_placeholder(columns: list[str]) -> Column:
    return reduce(lambda a, b: a | b, [_is_placeholder(c) for c in columns], F.lit(False))


def fill_from_batch(rows: DataFrame, schema: LakeSchema) -> DataFrame:
    """The batch's lake rows with each placeholder replaced by the same key's previous value in
    the batch (rule 1); a placeholder with no earlier value in the batch stays."""
    columns = fillable_columns(schema)
    if not columns:
        return rows
    earlier = (
        Window.partitionBy(*schema.keys)
        .orderBy(F.col(O.ORDERING_FIELD), O.op_rank())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    filled = rows
    for c in columns:
        # The latest earlier value that is not the placeholder; a struct, so a null value is
        # taken as a value and not skipped as "none".
        known = F.when(~_is_placeholder(c), F.struct(F.col(c).alias("v")))
        before = F.last(known, ignorenulls=True).over(earlier)
        filled = filled.withColumn(
            c, F.when(_is_placeholder(c) & before.isNotNull(), before["v"]).otherwise(F.col(c))
        )
    return filled


def fill_from_table(
    latest: DataFrame, stored: DataFrame | None, schema: LakeSchema, table: str
) -> DataFrame:
    """The batch's winners (``latest_per_key``; persist them, they are read more than once)
    with each placeholder left after ``fill_from_batch`` taken from the stored live row of the
    same key (rule 2), persisted. Raises ``UnavailableValueError`` (rule 3) when a live winner
    still holds one."""
    columns = fillable_columns(schema)
    if not columns:
        return latest
    live = ~F.coalesce(F.col("is_deleted"), F.lit(False))
    keys_ = list(schema.keys)
    needing = latest.where(live & _any_placeholder(columns)).select(*keys_).distinct()
    keys = needing.limit(MAX_LOOKUP_KEYS + 1).collect()
    if not keys:
        return latest
    filled = latest
    if stored is not None:
        found = O.live_rows(stored)
        found = (
            # A filter on a one-column key, which Hudi's data skipping can prune files by.
            found.where(F.col(keys_[0]).isin([r[0] for r in keys]))
            if len(keys) <= MAX_LOOKUP_KEYS and len(keys_) == 1
            else found.join(F.broadcast(needing), keys_, "left_semi")
        )
        known = [c for c in columns if c in found.columns]
        found = found.select(
            *keys_,
            F.lit(True).alias("_stored"),
            *[F.col(c).alias(f"_stored_{c}") for c in known],
        )
        filled = latest.join(F.broadcast(found), keys_, "left")
        # Only where the key has a stored row: a missing one leaves the placeholder (rule 3).
        has_stored = live & F.coalesce(F.col("_stored"), F.lit(False))
        for c in known:
            filled = filled.withColumn(
                c,
                F.when(has_stored & _is_placeholder(c), F.col(f"_stored_{c}")).otherwise(
                    F.col(c)
                ),
            )
        # Persisted (the caller unpersists it): checked here, then written.
        filled = filled.select(*latest.columns).persist()
    left = (
        filled.where(live & _any_placeholder(columns))
        .select(
            F.struct(*keys_).alias("key"),
            F.array_compact(
                F.array(*[F.when(_is_placeholder(c), F.lit(c)) for c in columns])
            ).alias("columns"),
        )
        .orderBy("key")
        .limit(5)
        .collect()
    )
    if left:
        raise UnavailableValueError(unavailable_message(table, schema.keys, left))
    return filled


def unavailable_message(table: str, keys: tuple[str, ...], left: list) -> str:
    """``left``: rows of ``key`` (a struct of the key's columns) and ``columns``."""
    where = "; ".join(
        f"{', '.join(keys)} {O.key_value(r['key'])!r}: {', '.join(r['columns'])}" for r in left
    )
    return (
        f"{table}: a change holds Debezium's placeholder {UNAVAILABLE_VALUE!r} (an unchanged "
        f"TOASTed value the WAL did not carry) and neither an earlier change in this batch nor "
        f"the lake holds the value: {where}. Nothing was committed. Fix: ALTER TABLE {table} "
        "REPLICA IDENTITY FULL (what the source asset does for a table declared "
        "replica_identity='full'), then `cdc-lake source resnapshot --table "
        f"{table} --all` so that the lake gets every row whole, and refresh."
    )
