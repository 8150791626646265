"""Debezium's placeholder for an unchanged TOASTed value (``cdc_lake/lake/unavailable.py``), on
the real S3 server and the real Hudi bundle: it never reaches the lake. A column holding it
keeps the key's previous value in the batch, else the stored row's; an explicit null is a value;
with neither, the refresh stops before committing, naming the table, the key and the column."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.tables import declared_schema
from cdc_lake.lake.unavailable import UnavailableValueError, fillable_columns
from cdc_lake.source.captured import OUTBOX, UNAVAILABLE_VALUE

BIG = '{"notes": "' + "9f" * 6000 + '"}'  # a JSON value large enough to be TOASTed


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw: Any) -> IngestResult:
    return ingest_new_files(spark, lake.client, lake.source, lake.table(), captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def _rows(spark: SparkSession, lake: SyntheticLake) -> dict[int, tuple]:
    df = read_table(spark, lake.table().base_path).where("NOT is_deleted")
    return {r["order_id"]: (r["customer"], r["shipped_date"].toordinal()) for r in df.collect()}


def test_only_text_columns_can_hold_the_placeholder():
    columns = fillable_columns(declared_schema(OUTBOX))
    assert "customer" in columns and "order_items" in columns  # JSON
    assert "order_id" not in columns and "order_date" not in columns and "updated_at" not in columns


def test_the_placeholder_is_filled_from_the_batch_or_the_lake(
    spark: SparkSession, lake: SyntheticLake
):
    lake.put([event(1, 100, 1, op="c", customer=BIG), event(2, 100, 2, op="c", customer=BIG)])
    first = _ingest(spark, lake)
    assert first.unavailable_lines == 0
    P = UNAVAILABLE_VALUE
    lake.put([
        # 1: two updates that left the value alone: the stored row's value.
        event(1, 110, 3, customer=P, shipped_date=10001),
        event(1, 130, 6, customer=P, shipped_date=10002),
        # 2: set to null, then an update that left it alone: null, not the stored value.
        event(2, 110, 4, customer=None),
        event(2, 120, 5, customer=P, shipped_date=10003),
        # 3: inserted in this batch, then updated: the insert's value.
        event(3, 100, 7, op="c", customer='{"x": 3}'),
        event(3, 120, 8, customer=P, shipped_date=10004),
    ])  # fmt: skip
    result = _ingest(spark, lake)
    assert result.unavailable_lines == 4
    epoch = 719163  # date(1970, 1, 1).toordinal()
    assert _rows(spark, lake) == {
        1: (BIG, epoch + 10002),
        2: (None, epoch + 10003),
        3: ('{"x": 3}', epoch + 10004),
    }
    # A replay of everything changes nothing.
    _ingest(spark, lake, replay_from=0)
    assert _rows(spark, lake)[1] == (BIG, epoch + 10002)


def test_a_placeholder_nothing_can_fill_stops_the_refresh(
    spark: SparkSession, lake: SyntheticLake
):
    lake.put([event(1, 100, 1, op="c", customer=BIG)])
    _ingest(spark, lake)
    commits = len(list(completed_commits(spark, lake.table().base_path)))
    P = UNAVAILABLE_VALUE
    lake.put([event(1, 110, 2, shipped_date=10001), event(99, 120, 3, customer=P, employee=P)])
    with pytest.raises(UnavailableValueError) as e:
        _ingest(spark, lake)
    text = str(e.value)
    assert "datalake.cdc_events" in text and "order_id 99: customer, employee" in text
    assert "Nothing was committed" in text and "REPLICA IDENTITY FULL" in text
    assert len(list(completed_commits(spark, lake.table().base_path))) == commits
    assert _rows(spark, lake)[1][1] == 719163 + 10000  # the other change was not half-committed
