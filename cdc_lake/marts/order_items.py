"""The order items: one row per order line of the Hudi table's live orders.

``flatten_order_items`` is a pure function of lake rows (a snapshot, or the before/after images
of the change feed): deleted orders (``is_deleted``, ``cdc_lake/lake/ordering.py``) give no
rows, and an order whose ``order_items`` is null, [] or not JSON gives none either. Revenue is
unit_price * quantity * (1 - discount), null when an input is null. A line's key is
(order_id, product_id) (``ITEM_KEY``): the source's order_details key, so it is unique.

The items are stored as a Hudi table (``cdc_lake/marts/items_table.py``); ``read_order_items``
reads it with the flattening's columns. ``preview_markdown`` gives the first rows; the
per-customer figures are in ``cdc_lake/marts/figures.py``. The Spark app that builds the items
is ``cdc_lake/spark_apps/order_items.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from cdc_lake.lake.ordering import live_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ITEM_KEY = ("order_id", "product_id")
ITEM_COLUMNS = (
    "customer_id",
    "order_id",
    "order_date",
    "product_id",
    "product_name",
    "unit_price",
    "quantity",
    "discount",
    "revenue",
)

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


def read_order_items(spark: SparkSession, items_path: str) -> DataFrame:
    """The order items table's current rows, with the flattening's columns only."""
    return spark.read.format("hudi").load(items_path).select(*ITEM_COLUMNS)


def preview_markdown(items: DataFrame, limit: int = 10) -> str:
    rows = items.orderBy("order_id", "product_id").limit(limit).collect()
    cols = items.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
