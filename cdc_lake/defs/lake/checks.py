"""Checks of the CDC invariants on the Hudi table.

- ``order_id_unique``: one row per key.
- ``no_deleted_orders``: with hard deletes, no row flagged deleted survives.
- ``no_quarantined_lines``: the quarantine prefix is empty (only fills with quarantine on).
- ``matches_source`` (blocking): after catch-up, the live order_ids equal the outbox's. While
  raw files or topic records are still pending, the lake cannot match yet. The check then fails
  with WARN severity and says what is pending. A mismatch with nothing pending is an ERROR.
"""

import dagster as dg
from dagster_aws.s3 import S3Resource
from dagster_pyspark import PySparkResource
from pyspark.sql import functions as F

from cdc_lake.defs.lake.assets import HUDI_KEY
from cdc_lake.lake.hudi import latest_checkpoint, table_exists
from cdc_lake.lake.ingest import read_table
from cdc_lake.raw.objects import list_new_objects
from cdc_lake.resources import CdcPipelineResource, KafkaResource, LakeResource, PostgresResource
from cdc_lake.streaming.topics import committed_offsets, end_offsets


def _snapshot(pyspark: PySparkResource, lake: LakeResource):
    spark = pyspark.spark_session
    if not table_exists(spark, lake.table_path):
        return None
    return read_table(spark, lake.table_path)


@dg.asset_check(asset=HUDI_KEY, description="order_id is unique in the Hudi table")
def order_id_unique(pyspark: PySparkResource, lake: LakeResource) -> dg.AssetCheckResult:
    df = _snapshot(pyspark, lake)
    if df is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "table does not exist"})
    dupes = df.groupBy("order_id").count().where("count > 1")
    n = dupes.count()
    sample = [r["order_id"] for r in dupes.limit(10).collect()]
    return dg.AssetCheckResult(
        passed=n == 0, metadata={"duplicated_keys": n, "sample": dg.MetadataValue.json(sample)}
    )


@dg.asset_check(asset=HUDI_KEY, description="no deleted order survives in the table")
def no_deleted_orders(pyspark: PySparkResource, lake: LakeResource) -> dg.AssetCheckResult:
    df = _snapshot(pyspark, lake)
    if df is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "table does not exist"})
    flagged = df.where(F.col("is_deleted")).count()
    if lake.delete_mode == "soft":
        # Soft deletes keep their rows on purpose, flagged; readers filter on is_deleted.
        return dg.AssetCheckResult(
            passed=True, metadata={"soft_deleted_rows": flagged, "delete_mode": "soft"}
        )
    return dg.AssetCheckResult(
        passed=flagged == 0, metadata={"deleted_rows_left": flagged, "delete_mode": "hard"}
    )


@dg.asset_check(asset=HUDI_KEY, description="no raw line was quarantined as malformed")
def no_quarantined_lines(s3: S3Resource, lake: LakeResource) -> dg.AssetCheckResult:
    client = s3.get_client()
    listed = client.list_objects_v2(
        Bucket=lake.lake_bucket, Prefix=lake.quarantine_prefix + "/", MaxKeys=1000
    )
    files = [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".json")]
    return dg.AssetCheckResult(
        passed=not files,
        metadata={
            "quarantine_files": len(files),
            "quarantine_path": dg.MetadataValue.path(lake.quarantine_path),
        },
    )


@dg.asset_check(
    asset=HUDI_KEY,
    blocking=True,
    description="after catch-up, the table's order_ids equal the PostgreSQL outbox's",
)
def matches_source(
    pyspark: PySparkResource,
    postgres: PostgresResource,
    kafka: KafkaResource,
    s3: S3Resource,
    cdc: CdcPipelineResource,
    lake: LakeResource,
) -> dg.AssetCheckResult:
    spark = pyspark.spark_session
    df = _snapshot(pyspark, lake)
    lake_ids: set[int] = set()
    if df is not None:
        live = df.where(~F.coalesce(F.col("is_deleted"), F.lit(False)))
        lake_ids = {int(r[0]) for r in live.select("order_id").collect()}
    conn = postgres.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT order_id FROM datalake.cdc_events")
            source_ids = {int(r[0]) for r in cur.fetchall()}
    finally:
        conn.close()
    missing, extra = source_ids - lake_ids, lake_ids - source_ids
    meta = {
        "lake_rows": len(lake_ids),
        "source_rows": len(source_ids),
        "missing_in_lake": len(missing),
        "not_in_source": len(extra),
        "sample_missing": dg.MetadataValue.json(sorted(missing)[:10]),
        "sample_extra": dg.MetadataValue.json(sorted(extra)[:10]),
    }
    if not missing and not extra:
        return dg.AssetCheckResult(passed=True, metadata=meta)
    # Not equal: is the lake merely behind?
    checkpoint = latest_checkpoint(spark, lake.table_path)
    pending_files, _ = list_new_objects(s3.get_client(), cdc.raw_bucket, cdc.raw_prefix, checkpoint)
    conf = kafka.client_conf()
    ends = end_offsets(conf, cdc.topic)
    done = committed_offsets(conf, cdc.sink_consumer_group, cdc.topic, list(ends))
    pending_records = sum(max(0, e - done.get(p, 0)) for p, e in ends.items())
    meta |= {"pending_raw_files": len(pending_files), "pending_topic_records": pending_records}
    behind = bool(pending_files) or pending_records > 0
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN if behind else dg.AssetCheckSeverity.ERROR,
        metadata=meta,
        description="not caught up yet" if behind else "caught up, yet different from source",
    )
