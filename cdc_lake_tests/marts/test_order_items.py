"""The order items from lake rows, on a plain local Spark (no Hudi, no S3)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DateType, DoubleType, LongType, StringType

from cdc_lake.lake.ordering import latest_per_key
from cdc_lake.marts.order_items import flatten_order_items
from cdc_lake_tests.lake.rows import PRODUCT_5, PRODUCT_11, event, lake_rows


def test_flatten_order_items(plain_spark: SparkSession):
    items = [
        {"discount": 0.25, "quantity": 68, "product_id": 5, "unit_price": 25.34},
        {"discount": 0.0, "quantity": 3, "product_id": 11, "unit_price": 14.0},
    ]
    lake = lake_rows(
        plain_spark,
        [
            # products listed in the other order than the items: the match is by product_id
            event(
                order_id=1,
                order_items=json.dumps(items),
                products=json.dumps([PRODUCT_11, PRODUCT_5]),
            ),
            event(order_id=2, __op="d", __deleted="true"),
            event(order_id=3, order_items=None, products=None),
            event(order_id=4, order_items="[]", products="[]"),
            event(order_id=5, customer_id="BBBBB ", order_date=None),
        ],
    )
    flat = flatten_order_items(lake)
    assert flat.columns == [
        "customer_id",
        "order_id",
        "order_date",
        "product_id",
        "product_name",
        "unit_price",
        "quantity",
        "discount",
        "revenue",
    ]
    types = [f.dataType for f in flat.schema.fields]
    assert types == [
        StringType(),
        LongType(),
        DateType(),
        LongType(),
        StringType(),
        DoubleType(),
        LongType(),
        DoubleType(),
        DoubleType(),
    ]

    got = {(r["order_id"], r["product_id"]): r for r in flat.collect()}
    assert sorted(got) == [(1, 5), (1, 11), (5, 5)]  # 2 deleted, 3 and 4 have no lines
    bread = got[(1, 5)]
    assert bread["product_name"] == "West Bread"
    assert (bread["unit_price"], bread["quantity"], bread["discount"]) == (25.34, 68, 0.25)
    assert bread["revenue"] == pytest.approx(1292.34)
    assert (bread["customer_id"], bread["order_date"]) == ("AAAAS", dt.date(1996, 7, 6))
    cheese = got[(1, 11)]
    assert cheese["product_name"] == "Queso Cabrales"
    assert cheese["revenue"] == pytest.approx(42.0)
    other = got[(5, 5)]
    assert (other["customer_id"], other["order_date"]) == ("BBBBB", None)


def test_flatten_after_latest_drops_an_order_whose_last_event_is_a_delete(
    plain_spark: SparkSession,
):
    ts = 1_795_217_436_837
    lake = lake_rows(
        plain_spark,
        [
            event(order_id=1, __op="c", __source_ts_ms=ts, __lsn=1),
            event(order_id=1, __op="d", __deleted="true", __source_ts_ms=ts + 1, __lsn=2),
            event(order_id=2, __op="c", __source_ts_ms=ts, __lsn=3),
        ],
    )
    flat = flatten_order_items(latest_per_key(lake, "order_id"))
    assert [(r["order_id"], r["product_id"]) for r in flat.collect()] == [(2, 5)]
