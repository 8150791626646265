"""The upsert app: the raw files after the checkpoint into the Hudi table, then its checks.

It ingests the new raw files (see ``cdc_lake/lake/ingest.py`` for ordering, deletes, idempotency
and bad input), then reads the table back and evaluates the Spark-side CDC checks
(``order_id_unique``, ``no_deleted_orders``), and the digest of the live rows (keys and content,
see ``cdc_lake/lake/digest.py``) that the ``matches_source`` check compares with the outbox
without a second Spark app. With nothing new it commits nothing and reports the newest commit's
figures (``commit_instant``, counts) with ``new_commit`` false. It runs locally or on EMR by
name through ``cdc_lake/spark_apps/run.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.digest import ROW_HASH, empty_digest, spark_digest, spark_row_hash
from cdc_lake.lake.hudi import HudiTableConfig, latest_commit, table_exists
from cdc_lake.lake.ingest import DEFAULT_MAX_LINE_MB, RawSource, ingest_new_files, read_table
from cdc_lake.lake.ordering import live_rows
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_upsert(spark: SparkSession, s3_client: Any, params: dict[str, Any]) -> AppReport:
    table = HudiTableConfig(**params["table"])
    quarantine_path = params.get("quarantine_path")
    result = ingest_new_files(
        spark,
        s3_client,
        RawSource(
            params["raw_bucket"], params["raw_prefix"], params["topic"], params.get("scheme", "s3a")
        ),
        table,
        quarantine_path=quarantine_path,
        replay_from=params.get("replay_from_offset"),
        max_line_mb=params.get("max_line_mb", DEFAULT_MAX_LINE_MB),
    )
    exists = table_exists(spark, table.base_path)
    # Nothing committed: report the newest commit's figures, never "none" over a real table.
    commit = result.committed or (latest_commit(spark, table.base_path) if exists else None)
    report = AppReport()
    report.metadata = {
        "commit_instant": meta(commit.instant if commit else "none", "text"),
        "new_commit": meta(result.committed is not None, "bool"),
        "records_inserted": meta(commit.inserts if commit else 0, "int"),
        "records_updated": meta(commit.updates if commit else 0, "int"),
        "records_deleted": meta(commit.deletes if commit else 0, "int"),
        "files_read": meta(len(result.files), "int"),
        "bytes_read": meta(result.bytes_read, "int"),
        "events_read": meta(result.events_read, "int"),
        "events_upserted": meta(result.events_upserted, "int"),
        "quarantined_lines": meta(result.quarantined, "int"),
        "lines_already_ingested": meta(result.lines_skipped, "int"),
        "offset_gaps": meta(result.offset_gaps, "int"),
        # A completed snapshot in the batch deletes the live orders it no longer held.
        "orders_absent_from_snapshot": meta(result.absent_from_snapshot, "int"),
        "ignored_raw_keys": meta(len(result.ignored_keys), "int"),
        "ignored_raw_keys_sample": meta(result.ignored_keys[:10], "json"),
        "table_path": meta(table.base_path, "path"),
        "table_type": meta(table.table_type, "text"),
        "checkpoint": meta(result.checkpoint, "json"),
        "s3_list_requests": meta(result.list_requests, "int"),
        "seconds": meta(round(result.seconds, 2), "float"),
    }
    if not exists:
        report.metadata["dagster/row_count"] = meta(0, "int")
        report.metadata["live_key_digest"] = meta(empty_digest(), "json")
        reason = meta("table does not exist yet: no raw files ingested", "text")
        report.check("order_id_unique", False, reason=reason)
        report.check("no_deleted_orders", False, reason=reason)
        return report

    # One read serves the checks and the digest; the cache keeps each row's hash, not its JSON.
    snapshot = (
        read_table(spark, table.base_path)
        .select("order_id", "is_deleted", spark_row_hash().alias(ROW_HASH))
        .cache()
    )
    try:
        report.metadata["dagster/row_count"] = meta(snapshot.count(), "int")
        dupes = snapshot.groupBy("order_id").count().where("count > 1")
        n_dupes = dupes.count()
        sample = [int(r["order_id"]) for r in dupes.limit(10).collect()]
        report.check("order_id_unique", n_dupes == 0, duplicated_keys=meta(n_dupes, "int"),
                     sample=meta(sample, "json"))  # fmt: skip
        flagged = snapshot.where(F.col("is_deleted")).count()
        if table.delete_mode == "soft":
            # Soft deletes keep their rows on purpose, flagged; readers filter on is_deleted.
            report.check("no_deleted_orders", True, soft_deleted_rows=meta(flagged, "int"),
                         delete_mode=meta("soft", "text"))  # fmt: skip
        else:
            report.check("no_deleted_orders", flagged == 0, deleted_rows_left=meta(flagged, "int"),
                         delete_mode=meta("hard", "text"))  # fmt: skip
        report.metadata["live_key_digest"] = meta(spark_digest(live_rows(snapshot)), "json")
    finally:
        snapshot.unpersist()
    return report
