"""Naming the differing rows (``cdc_lake/lake/diff.py``): the description, the wire form, and
Spark against PostgreSQL on a composite key with odd bytes."""

from __future__ import annotations

import uuid

from pyspark.sql import functions as F

from cdc_lake.lake.diff import (
    MAX_BUCKETS,
    RowDifferences,
    buckets_to_read,
    describe,
    differences,
    write_source_rows,
)
from cdc_lake.lake.digest import BUCKETS, compare_digests, source_digest, spark_digest
from cdc_lake.lake.reconcile import key_of_hex
from cdc_lake.lake.schema import SourceColumn, initial
from cdc_lake.stack import LocalStack
from cdc_lake_tests.lake.test_digest import as_lake


def test_a_key_comes_back_from_its_hex_column_by_column():
    assert key_of_hex("3130323438") == ("10248",)
    assert key_of_hex("41,2c62") == ("A", ",b")  # a comma inside a column is hex, not a split
    assert key_of_hex("ff") == ("\ufffd",)  # not UTF-8: shown, not raised


def test_the_lowest_buckets_are_read_first():
    assert buckets_to_read([9, 3, 60, 1, 2, 40]) == (1, 2, 3, 9)[:MAX_BUCKETS]


def test_differences_travel_as_json():
    found = RowDifferences((3, 7), {"missing": 1, "extra": 0, "stale": 1},
                           {"missing": [("1", "a")], "stale": [("2", "b")]},
                           {("2", "b"): ["qty"]})  # fmt: skip
    assert RowDifferences.from_json(found.to_json()) == found


def test_the_description_names_keys_columns_and_each_repair():
    found = RowDifferences(
        (1, 2, 3, 4),
        {"missing": 7, "extra": 1, "stale": 1},
        {"missing": [("1", "x"), ("2", "y")], "extra": [("3", "z")], "stale": [("4", "w")]},
        {("4", "w"): ["quantity", "discount"]},
    )
    text = describe(found, ("order_id", "product_id"), "datalake.order_details", 9)
    assert text.startswith("in the 4 bucket(s) read of 9 differing: ")
    missing, extra, stale = text.split(" | ")
    assert missing.endswith(
        "7 row(s) the lake lacks: (order_id, product_id)=(1, x); (order_id, product_id)=(2, y) "
        "and 5 more. Repair: `cdc-lake source resnapshot --table datalake.order_details --all`"
    )
    assert extra == (
        "1 row(s) the source no longer has: (order_id, product_id)=(3, z). Repair: "
        "`cdc-lake lake reconcile --table datalake.order_details`"
    )
    assert stale.startswith(
        "1 row(s) stale in the lake: (order_id, product_id)=(4, w) (quantity, discount). "
        "Repair: `cdc-lake source resnapshot"
    )


def test_nothing_found_says_so():
    found = RowDifferences((5,), {"missing": 0, "extra": 0, "stale": 0}, {}, {})
    assert describe(found, ("id",), "t", 1).startswith("no differing row found in 1 differing")


def test_spark_names_what_postgres_holds_otherwise(local_stack: LocalStack, pg, spark):
    """A composite text key with a comma, a newline and non-ASCII: one row stale in one column,
    one missing from the lake, one extra; every differing bucket read."""
    columns = [SourceColumn("a", "text", False), SourceColumn("b", "text", False),
               SourceColumn("qty", "integer"), SourceColumn("note", "text")]  # fmt: skip
    table = f"diff_{uuid.uuid4().hex[:8]}"
    schema = initial(f"public.{table}", ("a", "b"), columns)
    source_rows = [("k,1", "é\n", 1, "same"), ("k2", "x", 2, "source note"), ("k3", "y", 3, None),
                   ("only source", "z", 4, "n")]  # fmt: skip
    with pg.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (a text, b text, qty int, note text, "
                    "PRIMARY KEY (a, b))")  # fmt: skip
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", source_rows)
    pg.commit()
    try:
        import json

        lake_rows = [("k,1", "é\n", 1, "same"), ("k2", "x", 2, "lake note"), ("k3", "y", 3, None),
                     ("only lake", "z", 4, "n")]  # fmt: skip
        lines = [(json.dumps({"a": a, "b": b, "qty": q, "note": n}),) for a, b, q, n in lake_rows]
        lake = as_lake(spark, lines, schema)
        diff = compare_digests(source_digest(pg, table=table, schema=schema),
                               spark_digest(lake, schema=schema))  # fmt: skip
        differing = sorted(diff.details)
        assert 1 <= len(differing) <= 3 and not diff.equal

        s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
        bucket = local_stack.settings.lake_bucket
        key = f"diff-test/{table}.keys"
        n = write_source_rows(pg, s3, bucket, key, schema, BUCKETS, differing)
        assert n == sum(diff.details[b]["source_rows"] for b in differing)
        found = differences(spark, lake, f"s3a://{bucket}/{key}", schema, BUCKETS, differing)
        s3.delete_object(Bucket=bucket, Key=key)
    finally:
        with pg.cursor() as cur:
            cur.execute(f"DROP TABLE {table}")
        pg.commit()
    assert found.counts == {"missing": 1, "extra": 1, "stale": 1}
    assert found.keys == {"missing": [("only source", "z")], "extra": [("only lake", "z")],
                          "stale": [("k2", "x")]}  # fmt: skip
    assert found.columns == {("k2", "x"): ["note"]}
    # The row with the comma, newline and é is equal on both sides: not reported.
    assert ("k,1", "é\n") not in [k for keys in found.keys.values() for k in keys]
    assert lake.where(F.col("a") == "k,1").count() == 1
