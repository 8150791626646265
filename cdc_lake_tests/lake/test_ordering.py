"""The merge rule (``cdc_lake/lake/ordering.py``) on lake rows, on a plain local Spark: the latest
change per order wins, whatever the input order or partitioning; the ordering value sorts like
(ts, lsn); an incremental snapshot read, which has no LSN, sorts by its emission time."""

from __future__ import annotations

import random

from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.ordering import latest_per_key
from cdc_lake.lake.transforms import lines_from_text, parse_raw_lines
from cdc_lake_tests.lake.rows import KEY, by_order, event, lake_rows, line

# --- ordering and deduplication --------------------------------------------------------------


def test_latest_per_key(plain_spark: SparkSession):
    ts = 1_795_217_436_837
    later = "2026-11-21T00:00:00Z"
    events = [
        # Order 1: three updates in one batch, file order scrambled; the newest wins.
        event(order_id=1, __op="u", __source_ts_ms=ts + 20, __lsn=300, customer_id="LAST"),
        event(order_id=1, __op="c", __source_ts_ms=ts, __lsn=100, customer_id="FIRST"),
        event(order_id=1, __op="u", __source_ts_ms=ts + 10, __lsn=200, customer_id="MIDDLE"),
        # Order 2: an older event after a newer one is ignored.
        event(order_id=2, __op="u", __source_ts_ms=ts + 50, __lsn=500, customer_id="NEW"),
        event(order_id=2, __op="u", __source_ts_ms=ts + 40, __lsn=400, customer_id="OLD"),
        # Order 3: same ts, lsn 100 beats lsn 99 (unpadded strings would sort the other way).
        event(order_id=3, __op="u", __source_ts_ms=ts, __lsn=100, customer_id="LSN100"),
        event(order_id=3, __op="u", __source_ts_ms=ts, __lsn=99, customer_id="LSN99"),
        # Order 4: the delete is the latest event.
        event(order_id=4, __op="c", __source_ts_ms=ts, __lsn=10),
        event(order_id=4, __op="d", __deleted="true", __source_ts_ms=ts + 1, __lsn=11),
        # Order 5: an exact tie on (ts, lsn) goes to the delete, before updated_at is looked at.
        event(order_id=5, __op="u", __source_ts_ms=ts, __lsn=7, updated_at=later),
        event(order_id=5, __op="d", __deleted="true", __source_ts_ms=ts, __lsn=7),
        # Order 7: the same for an update against an insert.
        event(order_id=7, __op="c", __source_ts_ms=ts, __lsn=8, updated_at=later, customer_id="C"),
        event(order_id=7, __op="u", __source_ts_ms=ts, __lsn=8, customer_id="U"),
        # Order 6: the same event read twice (a replayed file) gives one row.
        event(order_id=6, __op="c", __source_ts_ms=ts, __lsn=1),
        event(order_id=6, __op="c", __source_ts_ms=ts, __lsn=1),
    ]
    rows = lake_rows(plain_spark, events)
    latest = latest_per_key(rows, "order_id")
    assert latest.columns == rows.columns
    got = by_order(latest)
    assert latest.count() == 7
    assert got[1]["customer_id"] == "LAST" and got[1]["cdc_lsn"] == 300
    assert got[2]["customer_id"] == "NEW"
    assert got[3]["customer_id"] == "LSN100"
    assert (got[4]["cdc_op"], got[4]["is_deleted"]) == ("d", True)
    assert (got[5]["cdc_op"], got[5]["is_deleted"]) == ("d", True)
    assert got[6]["cdc_lsn"] == 1
    assert (got[7]["cdc_op"], got[7]["customer_id"]) == ("u", "U")

    # The winner does not depend on input order or partitioning.
    shuffled = events[:]
    random.Random(7).shuffle(shuffled)
    again = by_order(latest_per_key(lake_rows(plain_spark, shuffled).repartition(3), "order_id"))
    assert again == got


def test_cdc_ordering_sorts_like_ts_then_lsn(plain_spark: SparkSession):
    pairs = [
        (1_795_217_436_837, 9),
        (1_795_217_436_837, 10),
        (1_795_217_436_837, 99),
        (1_795_217_436_837, 100),
        (1_795_217_436_837, 31_370_880),
        (1_795_217_436_838, 5),
        (999_999_999_999, 9_223_372_036_854_775_807),  # 12-digit ts, largest lsn
        (0, 0),
        (999_999_999_999_999, 1),
    ]
    events = [event(order_id=i, __source_ts_ms=ts, __lsn=lsn) for i, (ts, lsn) in enumerate(pairs)]
    rows = lake_rows(plain_spark, events).collect()
    orderings = {(r["cdc_source_ts_ms"], r["cdc_lsn"]): r["cdc_ordering"] for r in rows}
    assert all(len(o) == 35 for o in orderings.values())
    assert sorted(orderings, key=lambda p: orderings[p]) == sorted(pairs)


def test_incremental_snapshot_read_has_no_lsn_and_sorts_by_its_emission_time(
    plain_spark: SparkSession,
):
    ts = 1_795_217_436_837
    # As Debezium 3.6 emits an ad-hoc (incremental) snapshot read: __lsn null, ts_ms the
    # emission time, later than every change streamed before it.
    resent = event(order_id=1, __op="r", __lsn=None, __source_ts_ms=ts + 5, customer_id="NOW")
    streamed = event(order_id=1, __op="u", __lsn=900, __source_ts_ms=ts, customer_id="BEFORE")
    rows = lake_rows(plain_spark, [streamed, resent])
    got = by_order(latest_per_key(rows, "order_id"))[1]
    assert (got["cdc_op"], got["customer_id"], got["cdc_lsn"]) == ("r", "NOW", None)
    assert got["cdc_ordering"] == f"{ts + 5:015d}{0:020d}"
    # In the same millisecond a streamed change, which has an LSN, still wins.
    tie = event(order_id=1, __op="u", __lsn=1, __source_ts_ms=ts + 5, customer_id="SAME_MS")
    latest = latest_per_key(lake_rows(plain_spark, [resent, tie]), "order_id")
    assert by_order(latest)[1]["cdc_op"] == "u"
    # Only a snapshot read may lack an LSN.
    lines = lines_from_text(plain_spark, [(KEY, line(__op="u", __lsn=None))])
    parsed = parse_raw_lines(lines, OUTBOX_SCHEMA)
    assert parsed.collect()[0]["error"] == "missing or null: __lsn"


def test_a_composite_key_keeps_one_row_per_pair_of_values(plain_spark: SparkSession):
    """(order_id, product_id): rows sharing one column of the key are different rows."""
    columns = ["order_id", "product_id", "cdc_source_ts_ms", "cdc_lsn", "cdc_op", "quantity"]
    rows = plain_spark.createDataFrame(
        [
            (1, 10, 5, 50, "c", 1),
            (1, 10, 6, 60, "u", 2),  # the latest change of (1, 10)
            (1, 11, 5, 51, "c", 3),  # same order, another product: a row of its own
            (2, 10, 7, 70, "u", 4),  # same product, another order
            (2, 10, 4, 40, "c", 5),
        ],
        columns,
    ).repartition(3)
    got = {
        (r["order_id"], r["product_id"]): r["quantity"]
        for r in latest_per_key(rows, ("order_id", "product_id")).collect()
    }
    assert got == {(1, 10): 2, (1, 11): 3, (2, 10): 4}
    # By order_id alone, the same rows collapse to one per order.
    by_order_id = latest_per_key(rows, "order_id").collect()
    assert {(r["order_id"], r["quantity"]) for r in by_order_id} == {(1, 2), (2, 4)}
