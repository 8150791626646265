"""Checks on the order items: revenue is never negative, and every line's order is live in the
Hudi table."""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import functions as F

from cdc_lake.defs.marts.assets import ORDER_ITEMS_KEY
from cdc_lake.lake.ingest import read_table
from cdc_lake.resources import LakeResource


@dg.asset_check(asset=ORDER_ITEMS_KEY, description="revenue >= 0 on every row")
def revenue_non_negative(pyspark: PySparkResource, lake: LakeResource) -> dg.AssetCheckResult:
    items = pyspark.spark_session.read.parquet(lake.order_items_path)
    bad = items.where((F.col("revenue") < 0) | F.col("revenue").isNull()).count()
    return dg.AssetCheckResult(passed=bad == 0, metadata={"negative_or_null_revenue": bad})


@dg.asset_check(asset=ORDER_ITEMS_KEY, description="every row's order exists in the Hudi table")
def orders_exist_in_lake(pyspark: PySparkResource, lake: LakeResource) -> dg.AssetCheckResult:
    spark = pyspark.spark_session
    items = spark.read.parquet(lake.order_items_path)
    live = read_table(spark, lake.table_path).where(~F.coalesce(F.col("is_deleted"), F.lit(False)))
    orphans = items.join(live.select("order_id"), "order_id", "left_anti")
    n = orphans.count()
    sample = [r["order_id"] for r in orphans.select("order_id").distinct().limit(10).collect()]
    return dg.AssetCheckResult(
        passed=n == 0, metadata={"orphan_rows": n, "sample": dg.MetadataValue.json(sample)}
    )
