"""Raw Debezium lines -> lake rows, on a plain local Spark (no Hudi, no S3)."""

from __future__ import annotations

import datetime as dt
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DateType,
    LongType,
    TimestampType,
)

from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.transforms import (
    lake_columns,
    lines_from_text,
    parse_raw_lines,
    raw_event_schema,
    split_valid,
)
from cdc_lake.source.captured import OUTBOX
from cdc_lake_tests.lake.rows import KEY, event, lake_rows, line

# --- parsing ---------------------------------------------------------------------------------


def test_realistic_event_becomes_a_lake_row(plain_spark: SparkSession):
    raw = event(customer_id="AAAAS ")  # bpchar arrives blank padded
    lake = lake_rows(plain_spark, [raw])

    assert tuple(lake.columns) == lake_columns(OUTBOX_SCHEMA, OUTBOX)
    types = {f.name: f.dataType for f in lake.schema.fields}
    assert types["order_id"] == LongType()
    assert types["order_date"] == types["required_date"] == types["shipped_date"] == DateType()
    assert types["updated_at"] == TimestampType()
    assert types["is_deleted"] == BooleanType()
    assert types["cdc_lsn"] == types["cdc_source_ts_ms"] == LongType()

    row = lake.withColumn("updated_micros", F.unix_micros("updated_at")).collect()[0]
    assert row["order_id"] == 10251
    assert row["customer_id"] == "AAAAS"
    # 9683 days after 1970-01-01 (the generator's 4th order after 1996-07-04).
    assert row["order_date"] == dt.date(1996, 7, 6)
    assert row["required_date"] == dt.date(1996, 8, 3)
    assert row["shipped_date"] == dt.date(1996, 7, 22)
    expected = dt.datetime(2026, 11, 20, 23, 26, 15, 172753, tzinfo=dt.UTC)
    assert row["updated_micros"] == int(expected.timestamp()) * 1_000_000 + 172753
    for column in ("order_items", "products", "customer", "employee", "shipper", "shipment"):
        assert row[column] == raw[column]  # JSON text kept as it came
    assert (row["cdc_op"], row["cdc_lsn"], row["cdc_source_ts_ms"]) == (
        "r",
        31370880,
        raw["__source_ts_ms"],
    )
    assert row["is_deleted"] is False
    assert row["cdc_ordering"] == "001795217436837" + "00000000000031370880"
    assert row["order_year"] == "1996"


def test_new_order_without_lines_and_null_dates(plain_spark: SparkSession):
    lake = lake_rows(
        plain_spark,
        [event(order_items=None, products=None, order_date=None, shipped_date=None, __op="c")],
    )
    row = lake.collect()[0]
    assert row["order_items"] is None and row["products"] is None
    assert row["order_date"] is None and row["shipped_date"] is None
    assert row["order_year"] == "__null__"


def test_delete_event_is_a_deleted_row(plain_spark: SparkSession):
    lake = lake_rows(plain_spark, [event(__op="d", __deleted="true")])
    row = lake.collect()[0]
    assert (row["cdc_op"], row["is_deleted"]) == ("d", True)
    assert row["order_items"] == event()["order_items"]  # the old row comes along


def test_bad_lines_are_named_by_key_and_line_with_a_reason(plain_spark: SparkSession):
    other = KEY.replace("00000000000000000000", "00000000000000000100")
    good = line()
    no_order_id = event()
    del no_order_id["order_id"]
    file_a = "\n".join(
        [
            good,  # 1
            '{"order_id": 1, "__op": "c", ',  # 2: truncated
            json.dumps(no_order_id),  # 3
            line(order_id="abc"),  # 4
            line(__op="x"),  # 5
            line(__lsn="x"),  # 6
            line(order_id=None),  # 7
            "",  # 8: blank, not an error
            line(order_id=2) + line(order_id=3),  # 9: two events glued together
            line(order_id=2) + ", " + line(order_id=3),  # 10
        ]
    )
    file_b = "\n".join(
        [
            "not json at all",  # 1
            "[1, 2]",  # 2
            line(order_date=99_999_999_999),  # 3: overflows int
            line(updated_at="yesterday"),  # 4
            line(__deleted="maybe"),  # 5
            line(__source_ts_ms=-5),  # 6
            line(order_id=4),  # 7
        ]
    )
    lines = lines_from_text(plain_spark, [(KEY, file_a), (other, file_b)])
    parsed = parse_raw_lines(lines, OUTBOX_SCHEMA)
    good_rows, bad_rows = split_valid(parsed)

    bad = {(r["source_key"], r["line_no"]): r for r in bad_rows.collect()}
    errors = {where: r["error"] for where, r in bad.items()}
    assert errors == {
        (KEY, 2): "not valid JSON",
        (KEY, 3): "missing or null: order_id",
        (KEY, 4): "wrong type: order_id is not bigint",
        (KEY, 5): "unknown __op 'x'",
        (KEY, 6): "wrong type: __lsn is not bigint",
        (KEY, 7): "missing or null: order_id",
        (KEY, 9): "not valid JSON",
        (KEY, 10): "more than one JSON value on the line",
        (other, 1): "not valid JSON",
        (other, 2): "not a JSON object",
        (other, 3): "wrong type: order_date is not int",
        (other, 4): "updated_at is not a timestamp",
        (other, 5): "unknown __deleted 'maybe'",
        (other, 6): "__source_ts_ms out of range",
    }
    assert bad[(KEY, 4)]["value"] == line(order_id="abc")  # the line itself, for a fix-up
    assert bad_rows.columns == ["source_key", "line_no", "error", "value"]

    good_keys = sorted((r["source_key"], r["line_no"], r["order_id"]) for r in good_rows.collect())
    assert good_keys == [(KEY, 1, 10251), (other, 7, 4)]
    assert "error" not in good_rows.columns and "_corrupt_record" not in good_rows.columns
    assert "value" not in good_rows.columns


def test_several_problems_report_the_first(plain_spark: SparkSession):
    broken = event(__op="x", __lsn=None)
    del broken["order_id"]
    lines = lines_from_text(plain_spark, [(KEY, json.dumps(broken))])
    parsed = parse_raw_lines(lines, OUTBOX_SCHEMA)
    assert parsed.collect()[0]["error"] == "missing or null: order_id, __lsn"


def test_spark_from_json_permissive_behaviour_we_rely_on(plain_spark: SparkSession):
    """Pins Spark's behaviour: a Spark upgrade that changes it must fail here, not in the lake."""
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
    texts = [
        line(order_id="abc"),
        line(__lsn="x"),
        line(customer_id=7),
        line(order_id=1) + " trailing",
    ]
    df = lines_from_text(plain_spark, [(KEY, "\n".join(texts))]).orderBy("line_no")
    struct = raw_event_schema(OUTBOX_SCHEMA)
    rows = df.select(F.from_json("value", struct, options).alias("e")).collect()
    wrong_order_id, wrong_lsn, number_as_string, trailing = (r["e"] for r in rows)
    # Wrong type: the line lands in _corrupt_record and the other fields survive.
    assert wrong_order_id["_corrupt_record"] == texts[0]
    assert wrong_order_id["order_id"] is None and wrong_order_id["__lsn"] == 31370880
    assert wrong_lsn["_corrupt_record"] == texts[1]
    assert wrong_lsn["__lsn"] is None and wrong_lsn["order_id"] == 10251
    # A number in a string field is not an error: Spark keeps its JSON text.
    assert number_as_string["_corrupt_record"] is None
    assert number_as_string["customer_id"] == "7"
    # Content after the object is silently ignored: why parse_raw_lines checks it itself.
    assert trailing["_corrupt_record"] is None and trailing["order_id"] == 1


def test_wrong_type_is_caught_without_partial_results(plain_spark: SparkSession):
    conf = "spark.sql.json.enablePartialResults"
    before = plain_spark.conf.get(conf)
    assert before is not None
    plain_spark.conf.set(conf, "false")
    try:
        lines = lines_from_text(plain_spark, [(KEY, line(order_id="abc") + "\n" + line())])
        parsed = parse_raw_lines(lines, OUTBOX_SCHEMA)
        errors = [r["error"] for r in parsed.orderBy("line_no").collect()]
    finally:
        plain_spark.conf.set(conf, before)
    assert errors == ["wrong type", None]


def test_blank_lines_are_ignored_but_counted(plain_spark: SparkSession):
    text = "\n   \n" + line(order_id=1) + "\r\n\t\r\n" + line(order_id=2) + "\r\n\n"
    lines = lines_from_text(plain_spark, [(KEY, text), ("empty.jsonl", "")])
    parsed = parse_raw_lines(lines, OUTBOX_SCHEMA)
    rows = sorted((r["line_no"], r["order_id"], r["error"]) for r in parsed.collect())
    assert rows == [(3, 1, None), (5, 2, None)]


def test_lines_from_text_numbers_lines_like_the_ingestion_reader(plain_spark: SparkSession):
    odd = line(customer_id="A\u2028B")  # JSON allows U+2028 unescaped: not a line break
    text = f"a\r\nb\rc\n{odd}\n"
    files = [("k1", text), ("empty", ""), ("k2", "x"), ("k3", "\n\n")]
    rows = lines_from_text(plain_spark, files).collect()
    assert [(r["source_key"], r["line_no"], r["value"]) for r in rows] == [
        ("k1", 1, "a\r"),
        ("k1", 2, "b\rc"),
        ("k1", 3, odd),
        ("k2", 1, "x"),
        ("k3", 1, ""),
        ("k3", 2, ""),
    ]
    assert lines_from_text(plain_spark, []).count() == 0
