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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake import checkpoint as C
from cdc_lake.lake import ordering as O
from cdc_lake.lake import reconcile as R
from cdc_lake.lake import snapshots as S
from cdc_lake.lake import transforms as T
from cdc_lake.lake import unavailable as U
from cdc_lake.lake.change_sets import write_change_set
from cdc_lake.lake.hudi import (
    CommitInfo,
    HudiTableConfig,
    data_column_types,
    latest_checkpoint,
    latest_commit,
    latest_schema,
    recorded_partition_field,
    table_exists,
)
from cdc_lake.lake.schema import (
    LakeColumn,
    LakeSchema,
    SchemaChangeError,
    SourceColumn,
    evolve,
    from_lake_types,
    not_in_table,
    to_backfill,
)
from cdc_lake.lake.tables import declared_columns
from cdc_lake.raw.objects import RawLayout, RawObject
from cdc_lake.source.captured import OUTBOX, CapturedTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame, SparkSession


# A longer raw line is a bad line, not parsed (``LakeResource.max_line_mb``). Past about 19 MB
# one JSON string exceeds the parser's own limit (Jackson's 20M characters) anyway.
DEFAULT_MAX_LINE_MB = 8.0
MB = 1024 * 1024


class MalformedRawFileError(ValueError):
    """A raw file holds a line that is not a valid change event; nothing was committed."""


@dataclass(frozen=True)
class RawSource:
    bucket: str
    prefix: str
    topic: str
    scheme: str = "s3a"  # Hadoop's filesystem scheme for the same bucket

    @property
    def layout(self) -> RawLayout:
        return RawLayout(self.prefix, self.topic)

    def uri(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"


@dataclass
class IngestResult:
    committed: CommitInfo | None
    files: list[RawObject] = field(default_factory=list)
    events_read: int = 0
    events_upserted: int = 0
    lines_skipped: int = 0  # at or below the checkpoint: already in the table
    quarantined: int = 0
    quarantine_path: str | None = None
    checkpoint: dict[str, Any] = field(default_factory=dict)
    ignored_keys: list[str] = field(default_factory=list)
    offset_gaps: int = 0  # offsets missing between the checkpoint and the newest line
    snapshot_ts_ms: int | None = None  # a completed snapshot's time, when the batch ends one
    absent_from_snapshot: int = 0  # live orders that snapshot no longer held: deleted
    truncated_rows: int = 0  # live rows older than a truncate in the batch: deleted
    reconciled_rows: int = 0  # live rows whose key the source no longer held: deleted
    unavailable_lines: int = 0  # fresh lines holding Debezium's placeholder: filled in
    list_requests: int = 0
    seconds: float = 0.0
    schema: LakeSchema | None = None  # the lake's columns after this run
    # Stored live rows given the missing value of a column added with a default, and the names
    # of the columns they got; in a commit of the schema alone, also the columns added without
    # one (every stored row reads them as null).
    backfilled: int = 0
    backfilled_columns: tuple[str, ...] = ()
    # Rows of the commit's change set (cdc_lake/lake/change_sets.py); None: it has none, and
    # ``change_set_error`` may say why.
    change_set_rows: int | None = None
    change_set_error: str = ""
    # The partition field written ("": none), and why it is not the setting's, if it is not.
    partition_field: str = ""
    layout_note: str = ""

    def change_set_text(self) -> str:
        if self.committed is None:
            return "no new commit"
        if self.change_set_rows is not None:
            return f"{self.change_set_rows} rows"
        return f"none: {self.change_set_error or 'not written for this table'}"

    @property
    def bytes_read(self) -> int:
        return sum(f.size for f in self.files)


def read_lines(
    spark: SparkSession,
    source: RawSource,
    objects: list[RawObject],
    max_line_mb: float = DEFAULT_MAX_LINE_MB,
) -> DataFrame:
    """(source_key, line_no, value, input_error) for every line of the objects; line_no is
    1-based. ``input_error`` names a line over ``max_line_mb`` (MB of 2^20 bytes, the \\n not
    counted) or not valid UTF-8, and is null otherwise; ``parse_raw_lines`` reports it.

    Objects are read as bytes, not as text: Spark's text reader would turn invalid UTF-8 into
    U+FFFD and the line would pass. Bytes map 1:1 onto ISO-8859-1 characters, so the split at
    \\n and each line's bytes are exact; each line is then decoded as UTF-8.
    """
    paths = [source.uri(o.key) for o in objects]
    files = spark.read.format("binaryFile").load(paths)
    prefix_len = len(f"{source.scheme}://{source.bucket}/")
    lines = files.select(
        F.expr(f"substring(path, {prefix_len + 1})").alias("source_key"),
        F.posexplode(F.split(F.decode("content", "ISO-8859-1"), "\n")).alias("pos", "raw"),
    )
    raw = F.encode(F.col("raw"), "ISO-8859-1")
    text = F.decode(raw, "UTF-8")
    # Decoding replaces invalid bytes with U+FFFD; only then can the round trip differ, so
    # lines without one skip the re-encoding.
    invalid = F.instr(F.col("value"), "\ufffd") > 0
    invalid = invalid & (F.encode(F.col("value"), "UTF-8") != F.encode(F.col("raw"), "ISO-8859-1"))
    n_bytes = F.length("raw")  # one ISO-8859-1 character per byte
    return lines.select(
        "source_key", (F.col("pos") + 1).cast("int").alias("line_no"), "raw", text.alias("value")
    ).select(
        "source_key",
        "line_no",
        "value",
        F.when(
            n_bytes > F.lit(int(max_line_mb * MB)),
            F.format_string(
                f"line %d is %.1f MB, over the limit of {max_line_mb:g} MB",
                F.col("line_no"),
                n_bytes / F.lit(MB),
            ),
        )
        .when(invalid, F.lit("not valid UTF-8"))
        .alias(T.INPUT_ERROR),
    )


def describe_bad(bad: DataFrame, limit: int = 5) -> list[str]:
    rows = bad.orderBy("source_key", "line_no").limit(limit).collect()
    return [f"{r['source_key']} line {r['line_no']}: {r['error']}" for r in rows]


def malformed_message(n_bad: int, bad: DataFrame, source: RawSource) -> str:
    """What is wrong, and how to get past it: the same lines block every later refresh."""
    keys = [r["source_key"] for r in bad.select("source_key").distinct().orderBy("source_key")
            .limit(5).collect()]  # fmt: skip
    return (
        f"{n_bad} malformed line(s) in the raw files; nothing was committed. "
        + "; ".join(describe_bad(bad))
        + ". Every refresh stops here until these lines are dealt with. To get past them, "
        "either enable quarantine: LakeResource(quarantine=True) (locally "
        "local_resources(lake={'quarantine': True})) writes bad lines to the quarantine prefix "
        "and commits the rest; or fix or remove the object(s) "
        + ", ".join(source.uri(k).replace(f"{source.scheme}://", "s3://", 1) for k in keys)
        + " (removing one also drops its good lines)."
    )


def current_checkpoint(
    spark: SparkSession, s3_client: Any, source: RawSource, table: HudiTableConfig
) -> C.Checkpoint:
    return C.load(
        latest_checkpoint(spark, table.base_path), source.layout, s3_client, source.bucket
    )


@dataclass(frozen=True)
class _Batch:
    """What one pass over the batch's lines tells (``_summarize``)."""

    lines: int  # every line read, fresh or not
    fresh: int  # past the checkpoint
    bad: int  # fresh and bad
    good: int  # fresh and good: the events read
    snapshot_ts_ms: int | None  # a completed snapshot's time (``S.completed_snapshot_ts``)
    truncate: tuple[int, int] | None  # the newest truncate's (ts, lsn) among the good lines
    unavailable: int  # good lines holding Debezium's placeholder (``U.line_has_placeholder``)
    progress: dict[int, C.PartitionProgress]
    gaps: int
    unknown_fields: list[str]  # fields of fresh good lines that the schema does not know
    unknown_at: str | None  # the first line holding one: "<key> line <n>"


def _summarize(
    parsed: DataFrame, is_fresh: Column, objects: list[RawObject], checkpoint: C.Checkpoint
) -> _Batch:
    """The batch's counts, snapshot end, and per partition the greatest offset read and the
    object holding it, plus the offsets missing between the checkpoint and that offset: one
    Spark job over the (cached) lines instead of one per figure.

    A partition's distinct offsets are counted exactly (an offset the sink delivered twice
    counts once) with Spark's offset bitmaps: the lines are grouped by partition and bitmap
    bucket (32,768 offsets each), and the buckets' counts are added here. A ``count_distinct``
    beside the other figures made Spark expand every line and shuffle it twice more."""
    fresh = F.coalesce(is_fresh, F.lit(False))
    good = fresh & F.col("error").isNull()
    has_unknown = good & (F.size(T.UNKNOWN_FIELDS) > 0)
    offset = F.col("kafka_offset")
    # Among objects holding the same greatest offset, the earliest: listing resumes there.
    newest = F.struct(offset, (-F.col("start")).alias("minus_start"), F.col("source_key"))
    truncate_at = F.struct(
        F.col("__source_ts_ms").alias("ts"), F.coalesce(F.col("__lsn"), F.lit(0)).alias("lsn")
    )
    rows = (
        parsed.withColumn("start", F.regexp_extract("source_key", T.KEY_POSITION, 2).cast("long"))
        # Fresh offsets are >= 0 (past a checkpoint of at least -1); other lines: no bucket.
        .withColumn("bucket", F.when(fresh, F.bitmap_bucket_number(offset)))
        .groupBy("kafka_partition", "bucket")
        .agg(
            F.count(F.lit(1)).alias("lines"),
            F.count_if(fresh).alias("fresh"),
            F.count_if(fresh & F.col("error").isNotNull()).alias("bad"),
            F.count_if(good).alias("good"),
            F.max(F.when(good, S.snapshot_end_ts())).alias("snapshot_ts"),
            F.max(F.when(good & (F.col("__op") == O.TRUNCATE_OP), truncate_at)).alias("truncate"),
            F.count_if(good & U.line_has_placeholder()).alias("unavailable"),
            F.max(F.when(fresh, newest)).alias("newest"),
            F.min(F.when(fresh, offset)).alias("low"),
            F.bitmap_construct_agg(F.when(fresh, F.bitmap_bit_position(offset))).alias("bits"),
            F.array_distinct(
                F.flatten(F.collect_list(F.when(has_unknown, F.col(T.UNKNOWN_FIELDS))))
            ).alias("unknown"),
            F.min(F.when(has_unknown, F.struct("source_key", "line_no"))).alias("unknown_at"),
        )
        .withColumn("n", F.when(F.col("bucket").isNotNull(), F.bitmap_count("bits")))
        .drop("bits")
        .collect()
    )
    etags = {o.key: o.etag for o in objects}
    fresh_by_partition: dict[int, list[Any]] = {}  # a partition's buckets with fresh lines
    for r in rows:
        if r["fresh"]:
            fresh_by_partition.setdefault(int(r["kafka_partition"]), []).append(r)
    progress, gaps = {}, 0
    for p, buckets in fresh_by_partition.items():
        top = max(r["newest"] for r in buckets)
        low = min(int(r["low"]) for r in buckets)
        n = sum(int(r["n"]) for r in buckets)
        progress[p] = C.PartitionProgress(
            int(top["kafka_offset"]), -int(top["minus_start"]), etags.get(top["source_key"], "")
        )
        gaps += int(top["kafka_offset"]) - low + 1 - n
        gaps += low - checkpoint.offset(p) - 1
    snapshots = [int(r["snapshot_ts"]) for r in rows if r["snapshot_ts"] is not None]
    unknown_at = [tuple(r["unknown_at"]) for r in rows if r["unknown_at"] is not None]
    first = min(unknown_at, default=None)
    truncates = [(int(r["truncate"]["ts"]), int(r["truncate"]["lsn"])) for r in rows
                 if r["truncate"] is not None]  # fmt: skip
    return _Batch(
        lines=sum(int(r["lines"]) for r in rows),
        fresh=sum(int(r["fresh"]) for r in rows),
        bad=sum(int(r["bad"]) for r in rows),
        good=sum(int(r["good"]) for r in rows),
        snapshot_ts_ms=max(snapshots) if snapshots else None,
        truncate=max(truncates, default=None),
        unavailable=sum(int(r["unavailable"]) for r in rows),
        progress=progress,
        gaps=gaps,
        unknown_fields=sorted({f for r in rows for f in (r["unknown"] or [])}),
        unknown_at=f"{first[0]} line {first[1]}" if first else None,
    )


def lake_schema(
    spark: SparkSession,
    table: HudiTableConfig,
    source_columns: Sequence[SourceColumn] | None,
    captured: CapturedTable = OUTBOX,
    declared: Sequence[SourceColumn] | None = None,
) -> tuple[LakeSchema, tuple[LakeColumn, ...], tuple[LakeColumn, ...]]:
    """The lake's columns of the table ``captured`` declares, once the source's are taken
    (``SchemaChangeError`` if they cannot be), the columns whose missing value the stored
    rows get in this commit (``schema.to_backfill``), and the columns the table does not have
    yet (``schema.not_in_table``). ``source_columns``: as the source's catalog
    lists them; None when it could not be read: then the columns the newest commit recorded,
    or for a table without any, the ones ``sql/`` declares (``declared``: as the caller read
    them, for a Spark app that has no ``sql/``, as on EMR)."""
    exists = table_exists(spark, table.base_path)
    recorded = latest_schema(spark, table.base_path) if exists else None
    if source_columns is None:
        source_columns = (
            [SourceColumn(c.name, str(c.source_type), True, c.position) for c in recorded.live]
            if recorded is not None
            else list(declared)
            if declared is not None
            else declared_columns(captured)
        )
    lake_only = (*T.CDC_COLUMNS, *captured.lake_partition)
    lake_types = data_column_types(spark, table.base_path, lake_only) if exists else None
    schema = evolve(captured.source, captured.key, list(source_columns), lake_types, recorded)
    return schema, to_backfill(lake_types, recorded, schema), not_in_table(lake_types, schema)


def table_schema(spark: SparkSession, base_path: str) -> LakeSchema | None:
    """The columns of an existing lake table, as its newest commit recorded them or, for a
    table from before, as its types tell; None when there is no table. For readers of the
    table, which need no source (the order items, on EMR too)."""
    if not table_exists(spark, base_path):
        return None
    recorded = latest_schema(spark, base_path)
    if recorded is not None:
        return recorded
    lake_types = data_column_types(spark, base_path, (*T.CDC_COLUMNS, *OUTBOX.lake_partition))
    return from_lake_types(OUTBOX.source, OUTBOX.key, lake_types)


def unknown_fields_message(batch: _Batch, schema: LakeSchema, source: RawSource) -> str:
    where = batch.unknown_at or ""
    key, _, line = where.partition(" line ")
    return (
        f"{schema.table}: raw lines hold field(s) {', '.join(batch.unknown_fields)} that neither "
        f"the source table's columns (as its catalog stood when this refresh began) nor the lake "
        f"table has; first at {source.uri(key).replace(f'{source.scheme}://', 's3://', 1)} line "
        f"{line}. Nothing was committed. If the column was added at the source just now, "
        "refresh again: the next refresh reads the catalog anew and adds it. If it was added "
        "and dropped again before the lake saw it, add it back (ALTER TABLE ... ADD COLUMN) so "
        "its type is known, refresh, then drop it."
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
    captured: CapturedTable = OUTBOX,
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
            _commit_backfill(
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
        batch = _summarize(parsed, is_fresh, objects, start)
        result.lines_skipped = batch.lines - batch.fresh
        result.offset_gaps = batch.gaps
        progress = batch.progress
        if not progress:
            if backfill or untaken:
                _commit_backfill(
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
            filled = _stored_with_missing_values(spark, table, schema, captured, backfill)
            latest = O.latest_per_key(latest.unionByName(filled), schema.keys)
            result.backfilled_columns = tuple(c.name for c in backfill)
        latest = O.with_delete_marker(latest, table.delete_mode)
        # Counted and then written: kept, so the window over the batch is computed once.
        latest = latest.persist()
        result.events_upserted = latest.count()
        if filled is not None:
            # Stored rows the batch does not change: they kept their ordering.
            result.backfilled = filled.join(rows, list(schema.keys), "left_anti").count()
        new_checkpoint = stored.advanced(progress).truncated_at(
            O.ordering_text(*batch.truncate) if batch.truncate is not None else None
        )
        _write(spark, latest, table, new_checkpoint.to_json(), schema, result)
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


def _commit_backfill(
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
    filled = _stored_with_missing_values(
        spark, table, schema, captured, backfill, limit=None if backfill else 1
    )
    try:
        result.events_upserted = filled.count()
        result.backfilled = result.events_upserted if backfill else 0
        if result.events_upserted:
            rows = O.with_delete_marker(filled, table.delete_mode)
            _write(spark, rows, table, checkpoint, schema, result)
            # Both kinds may come in one ALTER: each column once, in the table's order.
            result.backfilled_columns = tuple(dict.fromkeys(c.name for c in (*backfill, *untaken)))
    finally:
        filled.unpersist()


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
            _write(spark, O.with_delete_marker(left, table.delete_mode), table, checkpoint,
                   schema, result)  # fmt: skip
    finally:
        left.unpersist()


def _write(
    spark: SparkSession,
    rows: DataFrame,
    table: HudiTableConfig,
    checkpoint: dict[str, Any],
    schema: LakeSchema,
    result: IngestResult,
) -> None:
    """One Hudi commit of ``rows``, with the checkpoint and the schema in its metadata, then
    (COPY_ON_WRITE, but the table's first) its change set. The commit goes into ``result``."""
    options = table.write_options(checkpoint, schema)
    # A table's first commit gets no change set: no reader follows it (a reader with no state
    # scans the table), and its set would copy every row the table holds.
    first = table.change_sets and not table_exists(spark, table.base_path)
    rows.write.format("hudi").options(**options).mode("append").save(table.base_path)
    result.committed = latest_commit(spark, table.base_path)
    cow = table.table_type == "COPY_ON_WRITE"
    if first:
        result.change_set_error = "the table's first commit (readers scan it in full)"
    elif table.change_sets and cow and result.committed is not None:
        # The data is committed: a change set that fails leaves the commit without one, which
        # readers see and fall back from (a rescan). The refresh itself succeeded.
        try:
            result.change_set_rows = write_change_set(
                spark, table.base_path, result.committed, rows.select(*schema.keys), schema
            )
            if result.change_set_rows is None:
                result.change_set_error = "a file version the commit replaced is cleaned already"
        except Exception as e:  # py4j's errors carry Spark's and the file system's
            result.change_set_error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


def _stored_with_missing_values(
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


def read_table(spark: SparkSession, base_path: str, **options: str) -> DataFrame:
    """The current snapshot (or, with options, a time-travel or incremental view)."""
    return spark.read.format("hudi").options(**options).load(base_path)


def read_as_of(spark: SparkSession, base_path: str, instant: str) -> DataFrame:
    return read_table(spark, base_path, **{"as.of.instant": instant})


def read_incremental(
    spark: SparkSession, base_path: str, begin_instant: str, end_instant: str | None = None
) -> DataFrame:
    """Records written by commits that completed after ``begin_instant`` and up to
    ``end_instant`` (inclusive). Hudi 1.x ranges over completion times: pass
    ``CommitInfo.completed``."""
    opts = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": begin_instant,
    }
    if end_instant:
        opts["hoodie.datasource.read.end.instanttime"] = end_instant
    return read_table(spark, base_path, **opts)
