"""Outbox events as ExtractNewRecordState writes them, and the lake rows they become, on plain
Spark: shared by the transform tests and the order-items tests."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession

from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.schema.columns import KIND_VALUES
from cdc_lake.lake.transforms import lines_from_text, parse_raw_lines, split_valid, to_lake_rows
from cdc_lake.source.captured import OUTBOX

KEY = "raw/t.datalake.cdc_events/partition=0/t.datalake.cdc_events+0+00000000000000000000.jsonl"

PRODUCT_5 = {
    "category": {"category_id": 5, "category_name": "Grains/Cereals"},
    "supplier": {"supplier_id": 7, "company_name": "Pavlova, Ltd."},
    "product_id": 5,
    "product_name": "West Bread",
    "unit_price": 99.0,  # the catalogue price; revenue must use the order line's price
    "discontinued": 0,
}
PRODUCT_11 = {"product_id": 11, "product_name": "Queso Cabrales", "unit_price": 21.0}


def event(**overrides: Any) -> dict[str, Any]:
    """A realistic outbox event, as ExtractNewRecordState writes it."""
    base: dict[str, Any] = {
        "order_id": 10251,
        "customer_id": "AAAAS",
        "order_date": 9683,
        "required_date": 9711,
        "shipped_date": 9699,
        "order_items": json.dumps(
            [{"discount": 0.25, "quantity": 68, "product_id": 5, "unit_price": 25.34}]
        ),
        "products": json.dumps([PRODUCT_5]),
        "customer": json.dumps({"customer_id": "AAAAS", "company_name": "River Delta Market"}),
        "employee": json.dumps({"employee_id": 3, "first_name": "Janet", "territories": []}),
        "shipper": json.dumps({"shipper_id": 2, "company_name": "United Package"}),
        "shipment": json.dumps({"freight": 621.66, "ship_via": 2, "ship_city": "Lyon"}),
        "updated_at": "2026-11-20T23:26:15.172753Z",
        "__deleted": "false",
        "__op": "r",
        "__db": "cdc_lake",
        "__table": "cdc_events",
        "__schema": "datalake",
        "__lsn": 31370880,
        "__source_ts_ms": 1795217436837,
    }
    base.update(overrides)
    # Any column sql/ declares that this event does not set (one added later): its kind's value.
    for c in OUTBOX_SCHEMA.columns:
        base.setdefault(c.name, KIND_VALUES[c.kind])
    return base


def line(**overrides: Any) -> str:
    return json.dumps(event(**overrides))


def lake_rows(spark: SparkSession, events: list[dict[str, Any]], key: str = KEY) -> DataFrame:
    text = "".join(json.dumps(e) + "\n" for e in events)
    good, bad = split_valid(parse_raw_lines(lines_from_text(spark, [(key, text)]), OUTBOX_SCHEMA))
    assert bad.count() == 0
    return to_lake_rows(good, OUTBOX_SCHEMA, OUTBOX)


def by_order(df: DataFrame) -> dict[int, Row]:
    return {r["order_id"]: r for r in df.collect()}
