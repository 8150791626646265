"""The order items' figures: one row of additive sums per customer, kept up to date from the
lines a build removes and adds, so no figure needs a scan of the items table.

Per ``customer_id`` (null is a customer of its own, as in a GROUP BY): ``lines``, ``orders``
(distinct orders with a line), ``revenue`` (the sum of the lines' revenue, a null revenue
counting 0), ``revenue_lines`` (lines with a revenue), ``quantity``, ``quantity_lines``, and
``bad_revenue_lines`` (revenue negative or null: the ``revenue_non_negative`` check).

Every column is a sum over lines, and an order's lines all have the order's customer, so the
figures of a set of orders' lines can be subtracted and added: ``updated_figures`` is the
stored figures, less those of the changed orders' old lines, plus those of their new lines.
Revenue is summed as DECIMAL(38, 9) (each line's revenue rounded to 9 decimals), whose sums are
exact: figures updated over any number of builds equal, digit for digit, those computed from
scratch (``customer_figures`` of the whole table), which floating-point sums would drift from.

``totals`` and ``customer_rows`` (the chart's top customers) read only these rows: their cost
follows the number of customers, not of lines.
"""

from __future__ import annotations

from decimal import Decimal
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHART_CUSTOMERS = 200  # the chart's scatter: enough customers to see the shape
REVENUE_TYPE = DecimalType(38, 9)
SUMS = (
    "lines",
    "orders",
    "revenue",
    "revenue_lines",
    "quantity",
    "quantity_lines",
    "bad_revenue_lines",
)


def customer_figures(items: DataFrame) -> DataFrame:
    """The figures of these order-item lines, one row per customer."""
    revenue = F.col("revenue")
    return items.groupBy("customer_id").agg(
        F.count(F.lit(1)).alias("lines"),
        F.countDistinct("order_id").alias("orders"),
        F.coalesce(F.sum(revenue.cast(REVENUE_TYPE)), F.lit(0).cast(REVENUE_TYPE))
        .cast(REVENUE_TYPE)
        .alias("revenue"),
        F.count(revenue).alias("revenue_lines"),
        F.coalesce(F.sum("quantity"), F.lit(0)).cast("long").alias("quantity"),
        F.count("quantity").alias("quantity_lines"),
        F.count(F.when((revenue < 0) | revenue.isNull(), 1)).alias("bad_revenue_lines"),
    )


def updated_figures(stored: DataFrame | None, old: DataFrame, new: DataFrame) -> DataFrame:
    """``stored`` (None: nothing yet) less the figures of the ``old`` lines plus those of the
    ``new`` ones; customers left with no line are dropped."""
    removed = customer_figures(old).select("customer_id", *[(-F.col(c)).alias(c) for c in SUMS])
    parts = [customer_figures(new), removed] + ([stored] if stored is not None else [])
    summed = (
        reduce(lambda a, b: a.unionByName(b), parts)
        .groupBy("customer_id")
        .agg(*[F.sum(c).alias(c) for c in SUMS])
    )
    return summed.withColumn("revenue", F.col("revenue").cast(REVENUE_TYPE)).where(
        F.col("lines") != 0
    )


def totals(figures: DataFrame) -> dict[str, Any]:
    """rows, revenue (a Decimal), customers and bad_revenue_lines over all customers."""
    r = figures.agg(
        F.sum("lines").alias("rows"),
        F.sum("revenue").alias("revenue"),
        F.count(F.lit(1)).alias("customers"),
        F.sum("bad_revenue_lines").alias("bad_revenue_lines"),
    ).collect()[0]
    return {
        "rows": int(r["rows"] or 0),
        "revenue": r["revenue"] if r["revenue"] is not None else Decimal(0),
        "customers": int(r["customers"]),
        "bad_revenue_lines": int(r["bad_revenue_lines"] or 0),
    }


def customer_rows(figures: DataFrame, limit: int = CHART_CUSTOMERS) -> list[dict[str, Any]]:
    """Per customer: revenue, orders, average quantity and revenue per line (0.0 when no line
    has one); the top ``limit`` by revenue, ties by customer_id."""
    rows = figures.orderBy(F.desc("revenue"), "customer_id").limit(limit).collect()
    return [
        {
            "customer_id": r["customer_id"],
            "revenue": round(float(r["revenue"]), 2),
            "orders": int(r["orders"]),
            "avg_quantity": r["quantity"] / r["quantity_lines"] if r["quantity_lines"] else 0.0,
            "avg_revenue": float(r["revenue"]) / r["revenue_lines"] if r["revenue_lines"] else 0.0,
        }
        for r in rows
    ]
