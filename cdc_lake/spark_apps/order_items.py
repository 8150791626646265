"""The order-items app: the order items rebuilt in full from the Hudi table's current snapshot
(``cdc_lake/marts/order_items.py``), then their checks.

The items are written as Parquet (overwrite, so a rerun gives the same files' content), then
``revenue_non_negative`` and ``orders_exist_in_lake`` are evaluated on what was written. It
reports the Hudi commit it was built from (``hudi_commit_instant``), read before the snapshot, so
a later run can tell the table has not changed since; a commit landing in between only makes the
next run rebuild again. It runs locally or on EMR by name through ``cdc_lake/spark_apps/run.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.hudi import latest_commit
from cdc_lake.lake.ingest import read_table
from cdc_lake.lake.ordering import live_rows
from cdc_lake.marts.order_items import customer_rows, flatten_order_items, preview_markdown
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_order_items(spark: SparkSession, params: dict[str, Any]) -> AppReport:
    table_path, items_path = params["table_path"], params["items_path"]
    # Read before the snapshot: a commit landing in between makes the next run rebuild again.
    built_from = latest_commit(spark, table_path)
    flatten_order_items(read_table(spark, table_path)).write.mode("overwrite").parquet(items_path)
    written = spark.read.parquet(items_path).cache()
    report = AppReport()
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
