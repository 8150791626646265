"""Upsert the raw CDC lines not yet ingested into the Hudi ``cdc_events`` table.

One run:
1. reads the checkpoint, the last Kafka offset ingested per topic partition, from the newest
   Hudi commit (``cdc_lake/lake/checkpoint.py``; a version-1 checkpoint of object keys is
   upgraded on the way);
2. lists, per partition, the raw objects from the one that held the checkpoint on, and reads
   those that may hold greater offsets. Keys that are not raw objects of the configured topic
   are reported (``IngestResult.ignored_keys``) and never read;
3. parses every line, places it by its Kafka partition and offset, and keeps only the lines past
   the checkpoint. So objects that were overwritten, re-cut with more records, duplicated or
   overlapping change nothing, and a line is never ingested twice;
4. refuses the whole batch if any of those lines is bad: the error names the object key and
   line, nothing is committed, and it says how to get past it (quarantine, or fix or remove
   the object), since the same lines block every later refresh. A line is bad when
   ``parse_raw_lines`` says so, when it is not valid UTF-8, or when it is longer than
   ``max_line_mb``. With ``quarantine`` on, bad lines are written to the quarantine prefix
   instead, and the rest goes on;
5. keeps the latest change per key (``cdc_lake/lake/ordering.py``), a value Debezium did not
   receive (an unchanged TOASTed column) filled in from the key's previous value or the run
   stopped before committing (``cdc_lake/lake/unavailable.py``). When the batch holds the last
   record of a completed Debezium snapshot, the live rows older than that snapshot are deleted
   (``cdc_lake/lake/snapshots.py``): the snapshot no longer held them. When it holds a
   truncate, every live row older than the newest one is deleted, and the truncate's place is
   kept in the checkpoint, so an older change read later is dropped (``ordering.py``);
6. upserts the result. The new checkpoint goes into the same Hudi commit. An existing table is
   written in the layout it was created with (its partition field), whatever the setting says
   now: Hudi cannot change it in place (``IngestResult.layout_note`` says when they differ).

Schema
    Before reading anything, the source's columns (its catalog's, passed in by the caller) are
    evolved into the lake's (``cdc_lake/lake/schema.py``): a change the lake cannot take stops
    the refresh with ``SchemaChangeError`` and nothing is committed. Lines are parsed with the
    evolved columns, so a batch holding events from before and after a change lands whole (a
    column an earlier event lacks is null). A fresh line with a field that neither the source
    nor the lake has (a column added after the catalog was read, or added and dropped again
    before this refresh) also stops the refresh, naming the field, the object and the line:
    nothing is ever dropped in silence. The evolved schema goes into the commit's metadata.
    A column added with a default (``ADD COLUMN ... DEFAULT``) is read by PostgreSQL from the
    catalog for every row stored before, with no change event: a line that lacks the field
    gets that value, and the commit that adds the column gives it to every live row the lake
    holds (a rewrite of the table, once per such change; ``IngestResult.backfilled``), in a
    commit of its own when no new line came with the change. A column added without a default
    reaches the table with the next commit, every stored row reading it as null; when no new
    line comes, with a commit of its own that writes one stored row again as it was.

So a run with nothing new commits nothing. A crash before the commit leaves the old checkpoint:
the same lines are read again and give the same result. A replay (``replay_from``) reads again
from a given offset; the latest change still wins, so it can only repair, never regress.

The parts a run uses: the raw lines are read, and a batch of them summed up, in
``cdc_lake/lake/raw_lines.py``; the lake's columns are resolved in
``cdc_lake/lake/table_schema.py``; stored rows get a new column's missing value in
``cdc_lake/lake/backfill.py``; each commit is written in ``cdc_lake/lake/commit.py``; the table
is read back through ``cdc_lake/lake/readers.py``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake import checkpoint as C
from cdc_lake.lake import ordering as O
from cdc_lake.lake import reconcile as R
from cdc_lake.lake import snapshots as S
from cdc_lake.lake import transforms as T
from cdc_lake.lake import unavailable as U
from cdc_lake.lake.backfill import commit_backfill, stored_with_missing_values
from cdc_lake.lake.commit import IngestResult, write_commit
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import latest_checkpoint, recorded_partition_field, table_exists
from cdc_lake.lake.raw_lines import (
    DEFAULT_MAX_LINE_MB,
    RawSource,
    malformed_message,
    read_lines,
    summarize,
    unhashed_message,
    unknown_fields_message,
)
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import LakeSchema, SchemaChangeError, SourceColumn
from cdc_lake.lake.table_schema import lake_schema
from cdc_lake.source.captured import CapturedTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession


class MalformedRawFileError(ValueError):
    """A raw file holds a line that is not a valid change event; nothing was committed."""


def current_checkpoint(
    spark: SparkSession, s3_client: Any, source: RawSource, table: HudiTableConfig
) -> C.Checkpoint:
    return C.load(
        latest_checkpoint(spark, table.base_path), source.layout, s3_client, source.bucket
    )


def ingest_new_files(
    spark: SparkSession,
    s3_client: Any,
    source: RawSource,
    table: HudiTableConfig,
    quarantine_path: str | None = None,
    max_files: int | None = None,
    replay_from: int | None = None,
    max_line_mb: float = DEFAULT_MAX_LINE_MB,
    source_columns: Sequence[SourceColumn] | None = None,
    *,
    captured: CapturedTable,
    declared: Sequence[SourceColumn] | None = None,
    reconcile: R.SourceKeys | None = None,
) -> IngestResult:
    """One refresh (see the module docstring) of the table that ``captured`` declares.
    ``reconcile``: the source's keys; the live rows whose key they lack are deleted in the same
    commit (``cdc_lake/lake/reconcile.py``), in a commit of their own when nothing is new.
    ``replay_from``: read every partition again from that offset on, whatever the checkpoint
    says. A line over ``max_line_mb`` is bad. ``source_columns``: the source table's columns as
    its catalog lists them now; ``declared``: as ``sql/`` declares them (``lake_schema``)."""
    t0 = time.monotonic()
    table, note = _as_recorded(spark, table)
    schema, backfill, untaken = lake_schema(spark, table, source_columns, captured, declared)
    stored = current_checkpoint(spark, s3_client, source, table)
    start = stored.rewound(replay_from) if replay_from is not None else stored
    plan = C.plan(s3_client, source.bucket, source.layout, start)
    objects = plan.objects[:max_files] if max_files is not None else plan.objects
    result = IngestResult(
        committed=None,
        files=objects,
        checkpoint=stored.to_json(),
        ignored_keys=plan.ignored,
        list_requests=plan.list_requests,
        schema=schema,
        partition_field=table.partition_field,
        layout_note=note,
    )
    if not objects:
        if backfill or untaken:
            commit_backfill(
                spark, table, schema, captured, backfill, untaken, stored.to_json(), result
            )
        if reconcile is not None:
            _commit_reconcile(spark, table, schema, captured, reconcile, stored.to_json(), result)
        result.seconds = time.monotonic() - t0
        return result

    positioned = T.with_kafka_position(
        T.parse_raw_lines(read_lines(spark, source, objects, max_line_mb), schema), source.topic
    )
    after = F.lit(-1)  # lines at or below the checkpoint offset are already in the table
    if start.partitions:
        done = F.create_map(
            *[x for p, v in start.partitions.items() for x in (F.lit(p), F.lit(v.offset))]
        )
        after = F.coalesce(F.try_element_at(done, F.col("kafka_partition")), F.lit(-1))
    parsed = positioned.cache()
    is_fresh = F.col("kafka_offset") > after
    fresh = parsed.where(is_fresh)
    latest: DataFrame | None = None
    absent: DataFrame | None = None
    truncated: DataFrame | None = None
    unfilled: DataFrame | None = None
    left: DataFrame | None = None
    filled_in: DataFrame | None = None
    filled: DataFrame | None = None
    try:
        batch = summarize(parsed, is_fresh, objects, start, schema)
        result.lines_skipped = batch.lines - batch.fresh
        result.offset_gaps = batch.gaps
        progress = batch.progress
        if not progress:
            if backfill or untaken:
                commit_backfill(
                    spark, table, schema, captured, backfill, untaken, stored.to_json(), result
                )
            if reconcile is not None:
                _commit_reconcile(
                    spark, table, schema, captured, reconcile, stored.to_json(), result
                )
            result.seconds = time.monotonic() - t0
            return result
        if batch.unknown_fields:
            raise SchemaChangeError(unknown_fields_message(batch, schema, source))
        if batch.unhashed_at is not None:
            raise SchemaChangeError(unhashed_message(batch, schema, source))
        good, bad = T.split_valid(fresh)
        n_bad = batch.bad
        if n_bad:
            if quarantine_path is None:
                raise MalformedRawFileError(malformed_message(n_bad, bad, source))
            target = f"{quarantine_path.rstrip('/')}/batch={int(time.time() * 1000)}"
            bad.write.mode("append").json(target)
            result.quarantined, result.quarantine_path = n_bad, target
        rows = T.to_lake_rows(good, schema, captured)
        result.events_read = batch.good
        # A truncate's marker is no row: it sweeps (below). A change older than a truncate
        # applied before lost to it.
        rows = rows.where(F.col("cdc_op") != O.TRUNCATE_OP)
        if start.truncated:
            rows = rows.where(F.col(O.ORDERING_FIELD) >= F.lit(start.truncated))
        # Read only when a fill, a snapshot's end or a truncate needs the stored rows.
        needs_stored = (
            batch.unavailable
            or batch.snapshot_ts_ms is not None
            or batch.truncate
            or reconcile is not None
        )
        rows_now = (
            read_table(spark, table.base_path)
            if needs_stored and table_exists(spark, table.base_path)
            else None
        )
        result.unavailable_lines = batch.unavailable
        if batch.unavailable:
            rows = U.fill_from_batch(rows, schema)
        latest = O.latest_per_key(rows, schema.keys)
        if batch.unavailable:
            # Kept: the fill reads the winners for its lookup, its check and the write.
            unfilled = latest.persist()
            latest = filled_in = U.fill_from_table(unfilled, rows_now, schema, schema.table)
        result.snapshot_ts_ms = batch.snapshot_ts_ms
        if result.snapshot_ts_ms is not None:
            absent = S.absent_from_snapshot(
                rows_now, latest, result.snapshot_ts_ms, schema.keys
            ).persist()
            result.absent_from_snapshot = absent.count()
            latest = O.latest_per_key(latest.unionByName(absent), schema.keys)
        if batch.truncate is not None:
            truncated = O.swept(rows_now, latest, *batch.truncate, schema.keys).persist()
            result.truncated_rows = truncated.count()
            latest = O.latest_per_key(latest.unionByName(truncated), schema.keys)
        if reconcile is not None:
            left = R.leftovers(spark, rows_now, latest, reconcile, schema).persist()
            result.reconciled_rows = left.count()
            latest = O.latest_per_key(latest.unionByName(left), schema.keys)
        if backfill:
            filled = stored_with_missing_values(spark, table, schema, captured, backfill)
            latest = O.latest_per_key(latest.unionByName(filled), schema.keys)
            result.backfilled_columns = tuple(c.name for c in backfill)
        latest = O.with_delete_marker(latest, table.delete_mode)
        # Counted and then written: kept, so the window over the batch is computed once.
        latest = latest.persist()
        result.events_upserted = latest.count()
        if filled is not None:
            # Stored rows the batch does not change: they kept their ordering.
            result.backfilled = filled.join(rows, list(schema.keys), "left_anti").count()
        new_checkpoint = (
            stored.advanced(progress)
            .truncated_at(O.ordering_text(*batch.truncate) if batch.truncate is not None else None)
            .applied_until(batch.newest_ts_ms)
        )
        write_commit(spark, latest, table, new_checkpoint.to_json(), schema, result)
    finally:
        if latest is not None:
            latest.unpersist()
        if absent is not None:
            absent.unpersist()
        for kept in (truncated, unfilled, filled_in, left):
            if kept is not None:
                kept.unpersist()
        if filled is not None:
            filled.unpersist()
        parsed.unpersist()
    result.checkpoint = new_checkpoint.to_json()
    result.seconds = time.monotonic() - t0
    return result


def _as_recorded(spark: SparkSession, table: HudiTableConfig) -> tuple[HudiTableConfig, str]:
    """``table`` in the layout an existing table records, and a note when the setting differs
    (a new layout needs a new table: docs/cdc-semantics.md, "Partitions")."""
    recorded = recorded_partition_field(spark, table.base_path)
    written = table.laid_out_as(recorded)
    if written.partition_field == table.partition_field:
        return table, ""
    return written, (
        f"the table was created {_layout(recorded or '')} and is written so; the setting "
        f"partition_field={table.partition_field!r} ({_layout(table.partition_field)}) applies "
        "to new tables only"
    )


def _layout(partition_field: str) -> str:
    return f"partitioned by {partition_field}" if partition_field else "without partitions"


def _commit_reconcile(
    spark: SparkSession,
    table: HudiTableConfig,
    schema: LakeSchema,
    captured: CapturedTable,
    keys: R.SourceKeys,
    checkpoint: dict[str, Any],
    result: IngestResult,
) -> None:
    """A commit of the leftovers' deletes alone, the checkpoint as it was (nothing new was
    read); none when there are none, or no table yet."""
    if not table_exists(spark, table.base_path):
        return
    stored = read_table(spark, table.base_path)
    # A column the table does not have yet (added without a default) is null in its rows.
    aligned = stored.select(*[
        F.col(c) if c in stored.columns
        else F.lit(None).cast(schema.column(c).lake_type).alias(c)
        for c in T.lake_columns(schema, captured)
    ])  # fmt: skip
    left = R.leftovers(spark, None, aligned, keys, schema).persist()
    try:
        result.reconciled_rows = result.events_upserted = left.count()
        if result.reconciled_rows:
            write_commit(spark, O.with_delete_marker(left, table.delete_mode), table, checkpoint,
                         schema, result)  # fmt: skip
    finally:
        left.unpersist()
