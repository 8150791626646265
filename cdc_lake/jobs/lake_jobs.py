"""The lake's Spark jobs, as plain functions of a SparkSession and JSON parameters.

The same functions run in three places: in the Dagster process on local Spark
(``LocalSparkJobs``), as a step on an EMR cluster and as an EMR Serverless job run (both through
``cdc_lake/jobs/entry.py`` and Dagster Pipes). Parameters and results are JSON, so they travel
unchanged through Pipes extras and messages.

- ``upsert``: ingests the raw files after the checkpoint into the Hudi table (see
  ``cdc_lake/lake/ingest.py`` for ordering, deletes, idempotency and bad input). It then reads the
  table back and evaluates the Spark-side CDC checks (``order_id_unique``,
  ``no_deleted_orders``), and the digest of the live rows (keys and content, see
  ``cdc_lake/lake/digest.py``) that the ``matches_source`` check compares with the outbox without
  a second Spark job. With nothing new it commits nothing and reports the newest commit's
  figures (``commit_instant``, counts) with ``new_commit`` false.
- ``order_items``: rebuilds the flattened order items from the current snapshot (Parquet,
  overwrite) and evaluates its checks (``revenue_non_negative``, ``orders_exist_in_lake``). It
  reports the Hudi commit it was built from (``hudi_commit_instant``), so a later run can tell
  the table has not changed since.

Metadata values use the Pipes wire form ``{"raw_value": ..., "type": ...}``; check results are
``{"check_name", "passed", "severity", "metadata"}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.digest import ROW_HASH, empty_digest, spark_digest, spark_row_hash
from cdc_lake.lake.hudi import HudiTableConfig, latest_commit, table_exists
from cdc_lake.lake.ingest import DEFAULT_MAX_LINE_MB, RawSource, ingest_new_files, read_table
from cdc_lake.lake.transforms import flatten_order_items

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHART_CUSTOMERS = 200  # the chart's scatter: enough customers to see the shape


def meta(value: Any, kind: str) -> dict[str, Any]:
    return {"raw_value": value, "type": kind}


@dataclass
class JobReport:
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, **metadata: dict[str, Any]) -> None:
        self.checks.append(
            {"check_name": name, "passed": passed, "severity": "ERROR", "metadata": metadata}
        )


def live_rows(table: DataFrame) -> DataFrame:
    return table.where(~F.coalesce(F.col("is_deleted"), F.lit(False)))


def run_upsert(spark: SparkSession, s3_client: Any, params: dict[str, Any]) -> JobReport:
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
    report = JobReport()
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


def customer_rows(items: DataFrame, limit: int = CHART_CUSTOMERS) -> list[dict[str, Any]]:
    """Per customer: revenue, orders, average quantity and revenue per line; top by revenue."""
    rows = (
        items.groupBy("customer_id")
        .agg(
            F.sum("revenue").alias("revenue"),
            F.countDistinct("order_id").alias("orders"),
            F.avg("quantity").alias("avg_quantity"),
            F.avg("revenue").alias("avg_revenue"),
        )
        .orderBy(F.desc("revenue"), "customer_id")
        .limit(limit)
        .collect()
    )
    return [
        {
            "customer_id": r["customer_id"],
            "revenue": round(float(r["revenue"]), 2),
            "orders": int(r["orders"]),
            "avg_quantity": float(r["avg_quantity"]),
            "avg_revenue": float(r["avg_revenue"]),
        }
        for r in rows
    ]


def preview_markdown(items: DataFrame, limit: int = 10) -> str:
    rows = items.orderBy("order_id", "product_id").limit(limit).collect()
    cols = items.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_order_items(spark: SparkSession, params: dict[str, Any]) -> JobReport:
    table_path, items_path = params["table_path"], params["items_path"]
    # Read before the snapshot: a commit landing in between makes the next run rebuild again.
    built_from = latest_commit(spark, table_path)
    flatten_order_items(read_table(spark, table_path)).write.mode("overwrite").parquet(items_path)
    written = spark.read.parquet(items_path).cache()
    report = JobReport()
    try:
        count = written.count()
        total = written.agg(F.sum("revenue")).collect()[0][0] or 0.0
        customers = written.select("customer_id").distinct().count()
        report.metadata = {
            "dagster/row_count": meta(count, "int"),
            "total_revenue_usd": meta(round(float(total), 2), "float"),
            "customers": meta(customers, "int"),
            "customer_stats": meta(customer_rows(written), "json"),
            "preview": meta(preview_markdown(written), "md"),
            "path": meta(items_path, "path"),
            "hudi_commit_instant": meta(built_from.instant if built_from else "none", "text"),
        }
        bad = written.where((F.col("revenue") < 0) | F.col("revenue").isNull()).count()
        report.check("revenue_non_negative", bad == 0, negative_or_null_revenue=meta(bad, "int"))
        live = live_rows(read_table(spark, table_path)).select("order_id")
        orphans = written.join(live, "order_id", "left_anti")
        n = orphans.count()
        sample = [int(r["order_id"]) for r in orphans.select("order_id").distinct().limit(10)
                  .collect()]  # fmt: skip
        report.check("orders_exist_in_lake", n == 0, orphan_rows=meta(n, "int"),
                     sample=meta(sample, "json"))  # fmt: skip
    finally:
        written.unpersist()
    return report


def run_job(spark: SparkSession, s3_client: Any, job: str, params: dict[str, Any]) -> JobReport:
    if job == "upsert":
        return run_upsert(spark, s3_client, params)
    if job == "order_items":
        return run_order_items(spark, params)
    raise ValueError(f"unknown lake job {job!r}: expected 'upsert' or 'order_items'")
