"""Upsert the raw CDC files not yet ingested into the Hudi ``cdc_events`` table.

One run:
1. reads the checkpoint (last raw key per topic partition) from the newest Hudi commit;
2. lists only the objects after it, resuming each partition's listing with ``StartAfter``;
3. parses every line, and refuses the whole batch if any line is bad. The error names the
   object key and line, and nothing is committed. With ``quarantine`` on, bad lines are written
   to the quarantine prefix instead, and the rest goes on;
4. keeps the latest change per order by (source ts_ms, LSN), then upserts it. The new
   checkpoint goes into the same Hudi commit.

So a run with no new files commits nothing. Files at or before the checkpoint are never read
again. A crash before the commit leaves the old checkpoint, so the same files are read again and
give the same result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake import transforms as T
from cdc_lake.lake.hudi import CommitInfo, HudiTableConfig, latest_checkpoint, latest_commit
from cdc_lake.raw.objects import ListingStats, RawObject, list_new_objects

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class MalformedRawFileError(ValueError):
    """A raw file holds a line that is not a valid change event; nothing was committed."""


@dataclass(frozen=True)
class RawSource:
    bucket: str
    prefix: str
    scheme: str = "s3a"  # Hadoop's filesystem scheme for the same bucket

    def uri(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"


@dataclass
class IngestResult:
    committed: CommitInfo | None
    files: list[RawObject] = field(default_factory=list)
    events_read: int = 0
    events_upserted: int = 0
    quarantined: int = 0
    quarantine_path: str | None = None
    checkpoint: dict[str, str] = field(default_factory=dict)
    list_requests: int = 0
    seconds: float = 0.0

    @property
    def bytes_read(self) -> int:
        return sum(f.size for f in self.files)


def read_lines(spark: SparkSession, source: RawSource, objects: list[RawObject]) -> DataFrame:
    """(source_key, line_no, value) for every line of the objects; line_no is 1-based."""
    whole = spark.read.text([source.uri(o.key) for o in objects], wholetext=True)
    prefix_len = len(f"{source.scheme}://{source.bucket}/")
    return whole.select(
        F.expr(f"substring(input_file_name(), {prefix_len + 1})").alias("source_key"),
        F.posexplode(F.split(F.col("value"), "\n")).alias("pos", "value"),
    ).select("source_key", (F.col("pos") + 1).cast("int").alias("line_no"), "value")


def describe_bad(bad: DataFrame, limit: int = 5) -> list[str]:
    rows = bad.orderBy("source_key", "line_no").limit(limit).collect()
    return [f"{r['source_key']} line {r['line_no']}: {r['error']}" for r in rows]


def ingest_new_files(
    spark: SparkSession,
    s3_client: Any,
    source: RawSource,
    table: HudiTableConfig,
    quarantine_path: str | None = None,
    max_files: int | None = None,
) -> IngestResult:
    t0 = time.monotonic()
    cursor = latest_checkpoint(spark, table.base_path)
    stats = ListingStats()
    objects, _ = list_new_objects(s3_client, source.bucket, source.prefix, cursor, stats)
    objects = sorted(objects)
    if max_files is not None:
        objects = objects[:max_files]
    result = IngestResult(committed=None, files=objects, checkpoint=cursor)
    result.list_requests = stats.list_requests
    if not objects:
        result.seconds = time.monotonic() - t0
        return result
    new_cursor = dict(cursor)
    for obj in objects:
        new_cursor[obj.partition_prefix] = max(new_cursor.get(obj.partition_prefix, ""), obj.key)

    parsed = T.parse_raw_lines(read_lines(spark, source, objects)).cache()
    latest: DataFrame | None = None
    try:
        good, bad = T.split_valid(parsed)
        n_bad = bad.count()
        if n_bad:
            if quarantine_path is None:
                raise MalformedRawFileError(
                    f"{n_bad} malformed line(s) in the raw files; nothing was committed. "
                    + "; ".join(describe_bad(bad))
                )
            target = f"{quarantine_path.rstrip('/')}/batch={int(time.time() * 1000)}"
            bad.write.mode("append").json(target)
            result.quarantined, result.quarantine_path = n_bad, target
        rows = T.to_lake_rows(good)
        result.events_read = rows.count()
        latest = T.latest_per_key(rows)
        if table.delete_mode == "hard":
            latest = latest.withColumn("_hoodie_is_deleted", F.col("is_deleted"))
        # Counted and then written: kept, so the window over the batch is computed once.
        latest = latest.persist()
        result.events_upserted = latest.count()
        latest.write.format("hudi").options(**table.write_options(new_cursor)).mode("append").save(
            table.base_path
        )
    finally:
        if latest is not None:
            latest.unpersist()
        parsed.unpersist()
    result.committed = latest_commit(spark, table.base_path)
    result.checkpoint = new_cursor
    result.seconds = time.monotonic() - t0
    return result


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
