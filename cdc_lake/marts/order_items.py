"""The order items: one row per order line of the Hudi table's live orders.

``flatten_order_items`` is a pure function of a lake snapshot: deleted orders (``is_deleted``,
``cdc_lake/lake/ordering.py``) give no rows, and an order whose ``order_items`` is null, [] or
not JSON gives none either. Revenue is unit_price * quantity * (1 - discount), null when an
input is null.

``customer_rows`` gives the per-customer figures that the Dagster process draws as a chart
(``cdc_lake/marts/chart.py``), so matplotlib never has to be on EMR, and ``preview_markdown`` the
first rows. The Spark app that writes the items is ``cdc_lake/spark_apps/order_items.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from cdc_lake.lake.ordering import live_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHART_CUSTOMERS = 200  # the chart's scatter: enough customers to see the shape

ORDER_ITEMS_SCHEMA = ArrayType(
    StructType(
        [
            StructField("discount", DoubleType()),
            StructField("quantity", LongType()),
            StructField("product_id", LongType()),
            StructField("unit_price", DoubleType()),
        ]
    )
)
# Only what the flattening needs; from_json ignores the other keys.
PRODUCTS_SCHEMA = ArrayType(
    StructType(
        [
            StructField("product_id", LongType()),
            StructField("product_name", StringType()),
        ]
    )
)


def flatten_order_items(lake: DataFrame) -> DataFrame:
    """One row per order line of the live (not deleted) orders in a lake snapshot.

    Columns: customer_id, order_id, order_date, product_id, product_name, unit_price, quantity,
    discount, revenue = unit_price * quantity * (1 - discount); a null input gives a null
    revenue. Orders whose order_items is null, [] or not JSON give no rows. product_name comes
    from the order's own products array, matched by product_id.
    """
    live = live_rows(lake)
    items = F.filter(F.from_json(F.col("order_items"), ORDER_ITEMS_SCHEMA), lambda i: i.isNotNull())
    with_items = live.select(
        "customer_id",
        "order_id",
        "order_date",
        F.from_json(F.col("products"), PRODUCTS_SCHEMA).alias("_products"),
        F.explode(items).alias("_item"),
    )
    item = F.col("_item")
    # The order's products array is small: a lookup within the row beats a join with a shuffle.
    product = F.try_element_at(
        F.filter(F.col("_products"), lambda p: p["product_id"] == item["product_id"]), F.lit(1)
    )
    unit_price, quantity, discount = item["unit_price"], item["quantity"], item["discount"]
    return with_items.select(
        "customer_id",
        F.col("order_id").cast(LongType()).alias("order_id"),
        "order_date",
        item["product_id"].alias("product_id"),
        product["product_name"].alias("product_name"),
        unit_price.alias("unit_price"),
        quantity.alias("quantity"),
        discount.alias("discount"),
        (unit_price * quantity * (F.lit(1.0) - discount)).alias("revenue"),
    )


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
