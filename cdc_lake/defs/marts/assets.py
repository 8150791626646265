"""The flattened order items: one row per order line of the Hudi table's current snapshot.

Rebuilt in full from the snapshot each time and written as Parquet (overwrite), by the same
Spark job locally and on EMR, which also evaluates the two checks (revenue never negative,
every line's order live in the lake). Deleted orders are gone from the snapshot, so their lines
are gone too. In production the Parquet is registered in the Glue database for Athena.
"""

import dagster as dg

from cdc_lake.defs.lake.assets import HUDI_KEY
from cdc_lake.marts.report import chart_markdown, chart_png
from cdc_lake.resources import LakeResource
from cdc_lake.spark_jobs import SparkJobsResource

ORDER_ITEMS_KEY = dg.AssetKey(["s3", "marts", "order_items"])


@dg.asset(
    key=ORDER_ITEMS_KEY,
    deps=[HUDI_KEY],
    group_name="marts",
    kinds={"spark", "parquet", "s3"},
    owners=["team:analytics"],
    tags={"stage": "marts"},
    check_specs=[
        dg.AssetCheckSpec(
            "revenue_non_negative", asset=ORDER_ITEMS_KEY, description="revenue >= 0 on every row"
        ),
        dg.AssetCheckSpec(
            "orders_exist_in_lake",
            asset=ORDER_ITEMS_KEY,
            description="every row's order exists in the Hudi table",
        ),
    ],  # fmt: skip
)
def order_items(
    context: dg.AssetExecutionContext, spark_jobs: SparkJobsResource, lake: LakeResource
) -> dg.MaterializeResult:
    """One row per order item: customer_id, order_id, order_date, product_id, product_name,
    unit_price, quantity, discount and revenue = unit_price × quantity × (1 − discount)."""
    outcome = spark_jobs.run(context, "order_items", lake.order_items_params())
    stats = outcome.metadata["customer_stats"].value
    top = [{k: s[k] for k in ("customer_id", "revenue", "orders")} for s in stats[:5]]
    extra = {
        "top_customers": dg.MetadataValue.json(top),
        "chart": dg.MetadataValue.md(chart_markdown(chart_png(stats))),
    }
    if (registered := lake.register_order_items()) is not None:
        extra["glue_table"] = dg.MetadataValue.text(f"{lake.glue_database}.order_items")
        extra["glue_action"] = dg.MetadataValue.text(registered)
    context.log.info(
        f"{outcome.metadata['dagster/row_count'].value} order items, "
        f"revenue {outcome.metadata['total_revenue'].value:,.2f}"
    )
    return outcome.materialize_result(context, **extra)
