"""The flattened order items: one row per order line of the Hudi table's current snapshot.

Rebuilt in full from the snapshot each time and written as Parquet (overwrite). Deleted
orders are gone from the snapshot, so their lines are gone too.
"""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import functions as F

from cdc_lake.defs.lake.assets import HUDI_KEY
from cdc_lake.lake.ingest import read_table
from cdc_lake.lake.transforms import flatten_order_items
from cdc_lake.marts.report import chart_markdown, chart_png, customer_stats, preview_markdown
from cdc_lake.resources import LakeResource

ORDER_ITEMS_KEY = dg.AssetKey(["s3", "marts", "order_items"])


@dg.asset(
    key=ORDER_ITEMS_KEY,
    deps=[HUDI_KEY],
    group_name="marts",
    kinds={"spark", "parquet", "s3"},
    owners=["team:analytics"],
    tags={"stage": "marts"},
)
def order_items(
    context: dg.AssetExecutionContext, pyspark: PySparkResource, lake: LakeResource
) -> dg.MaterializeResult:
    """One row per order item: customer_id, order_id, order_date, product_id, product_name,
    unit_price, quantity, discount and revenue = unit_price × quantity × (1 − discount)."""
    spark = pyspark.spark_session
    items = flatten_order_items(read_table(spark, lake.table_path))
    items.write.mode("overwrite").parquet(lake.order_items_path)
    written = spark.read.parquet(lake.order_items_path).cache()
    try:
        count = written.count()
        total = written.agg(F.sum("revenue")).collect()[0][0] or 0.0
        stats = customer_stats(written)
        preview = preview_markdown(written)
    finally:
        written.unpersist()
    top = [
        {"customer_id": s.customer_id, "revenue": round(s.revenue, 2), "orders": s.orders}
        for s in stats[:5]
    ]
    context.log.info(f"{count} order items, revenue {total:,.2f}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": dg.MetadataValue.int(count),
            "total_revenue": dg.MetadataValue.float(round(float(total), 2)),
            "customers": dg.MetadataValue.int(len(stats)),
            "top_customers": dg.MetadataValue.json(top),
            "preview": dg.MetadataValue.md(preview),
            "chart": dg.MetadataValue.md(chart_markdown(chart_png(stats))),
            "path": dg.MetadataValue.path(lake.order_items_path),
        }
    )
