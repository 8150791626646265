"""The per-customer figures and one build's rows, on a plain local Spark (no Hudi, no S3)."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession

from cdc_lake.marts.figures import customer_figures, customer_rows, totals, updated_figures
from cdc_lake.marts.items_table import DELETE_MARKER, line_changes
from cdc_lake.marts.order_items import ITEM_COLUMNS

SCHEMA = (
    "customer_id string, order_id long, order_date date, product_id long, product_name string, "
    "unit_price double, quantity long, discount double, revenue double"
)


def _items(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    full = [(c, o, None, p, f"P{p}", 1.0, q, 0.0, r) for c, o, p, q, r in rows]
    return spark.createDataFrame(full, SCHEMA)


def _as_dict(figures: DataFrame) -> dict:
    return {r["customer_id"]: tuple(r)[1:] for r in figures.collect()}


def test_figures_updated_from_old_and_new_lines_equal_figures_from_scratch(
    plain_spark: SparkSession,
):
    before = [("A", 1, 1, 2, 0.1), ("A", 1, 2, 1, 0.2), ("B", 2, 1, 3, 10.0),
              (None, 3, 1, 1, 5.0), ("C", 4, 1, None, None)]  # fmt: skip
    # Order 1 loses a line and changes customer; 3 is deleted; 5 is new; 2 and 4 unchanged.
    old = [r for r in before if r[1] in (1, 3)]
    new = [("B", 1, 1, 2, 0.1), ("A", 5, 7, 4, -1.0)]
    after = [r for r in before if r[1] not in (1, 3)] + new
    stored = customer_figures(_items(plain_spark, before))
    updated = updated_figures(stored, _items(plain_spark, old), _items(plain_spark, new))
    scratch = customer_figures(_items(plain_spark, after))
    assert _as_dict(updated) == _as_dict(scratch)
    # Decimal sums are exact: 0.1 + 0.2 - 0.2 - 0.1 leaves no residue behind.
    assert _as_dict(updated)["A"][:3] == (1, 1, Decimal("-1.000000000"))
    assert None not in _as_dict(updated)  # a customer left with no line is gone
    sums = totals(updated)
    assert (sums["rows"], sums["customers"]) == (4, 3)
    assert sums["bad_revenue_lines"] == 2  # a null and a negative revenue
    assert sums["revenue"] == Decimal("10.100000000") - 1
    rows = customer_rows(updated)
    assert [r["customer_id"] for r in rows] == ["B", "C", "A"]
    assert rows[0] == {"customer_id": "B", "revenue": 10.1, "orders": 2,
                       "avg_quantity": 2.5, "avg_revenue": 5.05}  # fmt: skip
    assert rows[1]["avg_quantity"] == 0.0 and rows[1]["avg_revenue"] == 0.0  # no values


def test_one_builds_rows_upsert_what_differs_and_delete_what_is_gone(plain_spark: SparkSession):
    old = _items(plain_spark, [("A", 1, 1, 2, 1.0), ("A", 1, 2, 1, 1.0), ("A", 2, None, 1, 1.0),
                               ("A", 3, 1, 1, 1.0)])  # fmt: skip
    new = _items(plain_spark, [("A", 1, 1, 2, 1.0), ("A", 1, 3, 1, 1.0), ("A", 2, None, 5, 5.0)])
    rows = {(r["order_id"], r["product_id"]): r[DELETE_MARKER]
            for r in line_changes(old, new).collect()}  # fmt: skip
    # (1, 1) is unchanged; (2, null) changed: its key matches null-safe, so it is no delete.
    assert rows == {(1, 3): False, (2, None): False, (1, 2): True, (3, 1): True}
    assert line_changes(old, new).columns == [*ITEM_COLUMNS, DELETE_MARKER]
