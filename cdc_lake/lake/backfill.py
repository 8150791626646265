"""A column added at the source with a default, or without one, reaching the rows the lake
already holds: the stored live rows given a column's missing value
(``stored_with_missing_values``), and the commit of a schema change alone when no new line came
with it (``commit_backfill``). When and why: ``cdc_lake/lake/ingest.py``, "Schema"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake import ordering as O
from cdc_lake.lake import transforms as T
from cdc_lake.lake.commit import IngestResult, write_commit
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import LakeColumn, LakeSchema
from cdc_lake.source.captured import CapturedTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame, SparkSession


def commit_backfill(
    spark: SparkSession,
    table: HudiTableConfig,
    schema: LakeSchema,
    captured: CapturedTable,
    backfill: Sequence[LakeColumn],
    untaken: Sequence[LakeColumn],
    checkpoint: dict[str, Any],
    result: IngestResult,
) -> None:
    """A commit of the schema change alone, when no new line came with it, the checkpoint as it
    was: so a column added at the source reaches the lake at the first refresh after the
    ``ALTER``, not with the next change. With a missing value to give (``backfill``), the
    stored live rows with it; a column the stored rows read as null (``untaken``, added
    without a default) needs one stored row only, written again as it is with the new columns,
    for Hudi to take them (a table with no live row takes them with its first)."""
    filled = stored_with_missing_values(
        spark, table, schema, captured, backfill, limit=None if backfill else 1
    )
    try:
        result.events_upserted = filled.count()
        result.backfilled = result.events_upserted if backfill else 0
        if result.events_upserted:
            rows = O.with_delete_marker(filled, table.delete_mode)
            write_commit(spark, rows, table, checkpoint, schema, result)
            # Both kinds may come in one ALTER: each column once, in the table's order.
            result.backfilled_columns = tuple(dict.fromkeys(c.name for c in (*backfill, *untaken)))
    finally:
        filled.unpersist()


def stored_with_missing_values(
    spark: SparkSession,
    table: HudiTableConfig,
    schema: LakeSchema,
    captured: CapturedTable,
    backfill: Sequence[LakeColumn],
    limit: int | None = None,
) -> DataFrame:
    """The stored live rows (``limit`` of them), as lake rows, with the ``backfill`` columns set
    to their missing value (null for a column added again without one). They keep their
    ordering, so a newer change in the batch still wins over them, and Hudi's event-time merge
    takes them over the stored rows they equal but for these columns (on equal ordering, the
    incoming record)."""
    names = {c.name: c for c in backfill}
    stored = read_table(spark, table.base_path)

    def value(name: str) -> Column:
        if name in names:
            # Nullable, as the column is in the table (a bare literal is not; its key never is).
            value = F.when(F.col(schema.keys[0]).isNotNull(), schema.missing_lake(names[name]))
            return value.alias(name)
        if name in stored.columns:
            return F.col(name)
        # Added in the same change without a default: null, as Hudi reads it in stored rows.
        return F.lit(None).cast(schema.column(name).lake_type).alias(name)

    # Persisted: the table is read once, for the union (or the write) and the count.
    live = O.live_rows(stored)
    live = live.limit(limit) if limit is not None else live
    return live.select(*[value(c) for c in T.lake_columns(schema, captured)]).persist()
