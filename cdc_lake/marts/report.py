"""Summaries and charts of the order items, as in the reference dashboard: revenue of the top
customers, and each customer's average quantity against average revenue, sized by orders."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class CustomerStats:
    customer_id: str
    revenue: float
    orders: int
    avg_quantity: float
    avg_revenue: float


def customer_stats(items: DataFrame) -> list[CustomerStats]:
    rows = (
        items.groupBy("customer_id")
        .agg(
            F.sum("revenue").alias("revenue"),
            F.countDistinct("order_id").alias("orders"),
            F.avg("quantity").alias("avg_quantity"),
            F.avg("revenue").alias("avg_revenue"),
        )
        .orderBy(F.desc("revenue"), "customer_id")
        .collect()
    )
    return [
        CustomerStats(
            r["customer_id"],
            float(r["revenue"]),
            int(r["orders"]),
            float(r["avg_quantity"]),
            float(r["avg_revenue"]),
        )
        for r in rows
    ]


def chart_png(stats: list[CustomerStats], top: int = 10) -> bytes:
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    fig, (bars, scatter) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=80)
    head = stats[:top]
    bars.barh([s.customer_id for s in reversed(head)], [s.revenue for s in reversed(head)])
    bars.set_title(f"Revenue of the top {len(head)} customers")
    bars.set_xlabel("revenue")
    scatter.scatter(
        [s.avg_quantity for s in stats],
        [s.avg_revenue for s in stats],
        s=[12 * s.orders for s in stats],
        alpha=0.5,
    )
    scatter.set_title("Per customer: average quantity vs average revenue (size: orders)")
    scatter.set_xlabel("average quantity per line")
    scatter.set_ylabel("average revenue per line")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def chart_markdown(png: bytes) -> str:
    return f"![order items](data:image/png;base64,{base64.b64encode(png).decode()})"


def preview_markdown(items: DataFrame, limit: int = 10) -> str:
    rows = items.orderBy("order_id", "product_id").limit(limit).collect()
    cols = items.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
