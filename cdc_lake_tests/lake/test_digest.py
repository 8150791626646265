"""The lake/outbox digest: its comparison, Spark and PostgreSQL agreeing bit for bit, and
``matches_source`` catching a stale row that keeps its key."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

from bench.outbox import HUDI_KEY, cdc_events_hudi, matches_source
from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.digest import (
    BUCKETS,
    VERSION,
    add_digests,
    compare_digests,
    empty_digest,
    source_digest,
    spark_digest,
)
from cdc_lake.lake.hudi_timeline import latest_schema
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.transforms import lake_columns
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake_tests.lake.test_pipeline import catch_up
from cdc_lake_tests.policies import as_lake_json

JSON_COLUMNS = ("order_items", "products", "customer", "employee", "shipper", "shipment")
EMPTY = empty_digest(schema=OUTBOX_SCHEMA)  # the outbox's, as sql/ declares it


def digest(
    buckets: dict[str, list[int]], n: int = BUCKETS, columns: list[str] | None = None
) -> dict:
    return {
        "version": VERSION,
        "buckets": n,
        "columns": columns if columns is not None else EMPTY["columns"],
        "rows": sum(v[0] for v in buckets.values()),
        "digest": buckets,
    }


# The comparison, pure.


def test_equal_digests_have_no_difference():
    d = digest({"1": [2, 66, 4226, 12345], "7": [1, 7, 49, 999]})
    diff = compare_digests(d, json.loads(json.dumps(d)))
    assert diff.equal and diff.key_buckets == diff.content_buckets == () and diff.details == {}


def test_adding_and_subtracting_digests_replaces_rows():
    base = digest({"1": [2, 66, 4226, 10], "2": [1, 2, 4, 20]})
    # Order 65 (bucket 1) replaced by a new version of itself, order 2 deleted, order 3 new.
    plus = digest({"1": [1, 65, 4225, 99], "3": [1, 3, 9, 30]})
    minus = digest({"1": [1, 65, 4225, 7], "2": [1, 2, 4, 20]})
    out = add_digests(base, plus, minus)
    assert out == digest({"1": [2, 66, 4226, 102], "3": [1, 3, 9, 30]})  # bucket 2 emptied
    assert compare_digests(out, add_digests(out, digest({}), digest({}))).equal
    with pytest.raises(ValueError, match="buckets"):
        add_digests(base, digest({}, n=8), digest({}))
    # Digests over other columns (a schema change) are not added up either.
    with pytest.raises(ValueError, match="columns"):
        add_digests(base, digest({}, columns=["order_id:int", "x:text"]), digest({}))
    with pytest.raises(ValueError, match="columns"):
        compare_digests(base, digest({}, columns=["order_id:int", "x:text"]))


def test_missing_and_extra_keys_are_key_differences():
    source = digest({"1": [2, 66, 4226, 10], "2": [1, 2, 4, 20], "3": [1, 3, 9, 30]})
    # Bucket 1 lost order 65, bucket 2 is gone, bucket 4 is extra.
    lake = digest({"1": [1, 1, 1, 7], "3": [1, 3, 9, 30], "4": [1, 4, 16, 40]})
    diff = compare_digests(source, lake)
    assert not diff.equal
    assert diff.key_buckets == (1, 2, 4) and diff.content_buckets == ()
    assert diff.details == {
        1: {"kind": "keys", "source_rows": 2, "lake_rows": 1},
        2: {"kind": "keys", "source_rows": 1, "lake_rows": 0},
        4: {"kind": "keys", "source_rows": 0, "lake_rows": 1},
    }


def test_same_keys_other_content_is_a_content_difference():
    source = digest({"1": [2, 66, 4226, 10], "5": [1, 5, 25, 50], "9": [1, 9, 81, 90]})
    lake = digest({"1": [2, 66, 4226, 11], "5": [1, 5, 25, 50], "9": [1, 9, 81, 91]})
    diff = compare_digests(source, lake)
    assert diff.content_buckets == (1, 9) and diff.key_buckets == ()
    assert diff.details[9] == {"kind": "content", "source_rows": 1, "lake_rows": 1}


def test_a_key_difference_wins_over_a_content_difference_in_one_bucket():
    diff = compare_digests(digest({"3": [1, 3, 9, 30]}), digest({"3": [1, 67, 4489, 31]}))
    assert diff.key_buckets == (3,) and diff.content_buckets == ()


def test_empty_digests_are_equal_and_differ_from_a_nonempty_one():
    assert compare_digests(EMPTY, empty_digest(schema=OUTBOX_SCHEMA)).equal
    diff = compare_digests(digest({"0": [1, 64, 4096, 5]}), EMPTY)
    assert diff.key_buckets == (0,)


@pytest.mark.parametrize(
    "other", [{"buckets": 32}, {"version": VERSION - 1}], ids=["buckets", "version"]
)
def test_digests_computed_differently_do_not_compare(other):
    with pytest.raises(ValueError, match="not comparable"):
        compare_digests(digest({}), digest({}) | other)


# Spark and PostgreSQL, on the stack.

EDGE_ROWS = [
    # order_id, customer_id, dates, one JSON literal for all six JSON columns, updated_at
    (1, None, None, None, None, None, "2024-01-01 00:00:00+00"),
    (2, "  AB  ", "1969-12-31", "1970-01-01", "2999-12-31",
     '{"name": "Müller – 東京 😀", "q": "say \\"hi\\"\\n", "n": 1.50, "a": [null, true]}',
     "2024-02-29 23:59:59.999999+00"),
    (3, "", "1900-02-28", None, "2000-01-01", "null", "1965-06-01 12:00:00.000001+05:30"),
    (-5, "VINET", "2020-01-01", "2020-01-29", None, "[]", "2026-07-04 10:11:12.5-07:00"),
    (70, "~", "1996-07-04", "1996-08-01", "1996-07-16", '""', "1996-07-04 00:00:00+00"),
]  # fmt: skip
SPARK_SCHEMA = StructType(
    [
        StructField("order_id", LongType()),
        StructField("customer_id", StringType()),
        *[StructField(c, DateType()) for c in ("order_date", "required_date", "shipped_date")],
        *[StructField(c, StringType()) for c in JSON_COLUMNS],
        StructField("updated_at_micros", LongType()),
    ]
)


def test_spark_and_postgres_hash_edge_values_alike(ingested, pg, spark):
    """Nulls, blank padding, non-ASCII and escaped JSON, dates before 1970, microseconds and
    time zones, a negative key: each row in a bucket of its own, so equal digests mean equal
    row hashes."""
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_edge (LIKE datalake.cdc_events)")
        for oid, cust, d1, d2, d3, doc, ts in EDGE_ROWS:
            cur.execute(
                "INSERT INTO digest_edge VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (oid, cust, d1, d2, d3, *[doc] * len(JSON_COLUMNS), ts),
            )
        # The JSON text as PostgreSQL prints it (what Debezium sends), the rest from Python.
        cur.execute("SELECT order_id, order_items::text, updated_at FROM digest_edge")
        pg_rows = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    pg.commit()

    def day(text: str | None) -> date | None:
        return date.fromisoformat(text) if text else None

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rows = []
    for oid, cust, d1, d2, d3, _, _ in EDGE_ROWS:
        json_text, updated_at = pg_rows[oid]
        micros = (updated_at - epoch) // timedelta(microseconds=1)
        rows.append((oid, cust, day(d1), day(d2), day(d3), *[json_text] * 6, micros))
    lake = spark.createDataFrame(rows, SPARK_SCHEMA).select(
        *[c for c in SPARK_SCHEMA.fieldNames() if c != "updated_at_micros"],
        F.timestamp_micros(F.col("updated_at_micros")).alias("updated_at"),
    )
    lake_digest = spark_digest(lake, schema=OUTBOX_SCHEMA)
    assert len(lake_digest["digest"]) == len(EDGE_ROWS)
    assert lake_digest["digest"]["59"][0] == 1  # -5 mod 64, non-negative in both engines
    # The outbox's field policies (the customer's phone and fax) leave these texts, which have
    # neither field, byte for byte as they are.
    source = source_digest(pg, table="digest_edge", schema=OUTBOX_SCHEMA, salt="s")
    diff = compare_digests(source, lake_digest)
    assert diff.equal, diff.details

    # Sanity of the test itself: one microsecond off is a content difference.
    shifted = lake.withColumn(
        "updated_at",
        F.when(
            F.col("order_id") == 2, F.col("updated_at") + F.expr("INTERVAL 1 MICROSECOND")
        ).otherwise(F.col("updated_at")),
    )
    diff = compare_digests(source, spark_digest(shifted, schema=OUTBOX_SCHEMA))
    assert diff.content_buckets == (2,) and diff.key_buckets == ()


def as_lake(spark, lines: list[tuple[str]], schema) -> Any:
    """Raw JSON lines parsed and converted to lake columns as the upsert does."""
    parsed = spark.createDataFrame(lines, "value string").select(
        F.from_json("value", schema.raw_struct(), {"mode": "FAILFAST"}).alias("e")
    )
    return parsed.select("e.*").select(*schema.to_lake())


def digest_diff(pg, table: str, schema, lake) -> Any:
    """The source table's digest against the lake rows', over ``schema``'s columns."""
    return compare_digests(
        source_digest(pg, table=table, schema=schema), spark_digest(lake, schema=schema)
    )


# PostgreSQL's text of real and double precision values: zeros of both signs, NaN, infinities,
# subnormals, extremes, and values whose decimal text is not their binary value.
FLOATS = ["1.1", "-0", "0", "NaN", "Infinity", "-Infinity", "1e-45", "3.4028235e+38",
          "0.1", "123456.79", None]  # fmt: skip
DOUBLES = ["0.30000000000000004", "-0", "5e-324", "1.7976931348623157e+308", "NaN", "-Infinity",
           "2.5", "1e+100", "0.1", "-123.456", None]  # fmt: skip


def _java_number(text: str | None) -> str:
    """A float's JSON token as Debezium's converter writes it (Java's Float/Double.toString):
    NaN and the infinities bare, an integral value with ".0" (so -0 keeps its sign)."""
    if text is None:
        return "null"
    return text if any(c in text for c in ".eNI") else text + ".0"


def test_spark_and_postgres_hash_floats_alike(pg, spark):
    """real and double precision as the pipeline carries them: each value's text in a raw JSON
    line, parsed and converted by the lake schema, hashes as the source's own value does."""
    from cdc_lake.lake.schema import SourceColumn, initial

    columns = [SourceColumn("id", "bigint", False), SourceColumn("r", "real"),
               SourceColumn("d", "double precision")]  # fmt: skip
    schema = initial("digest_floats", "id", columns)
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_floats (id bigint, r real, d double precision)")
        for i, (r, d) in enumerate(zip(FLOATS, DOUBLES, strict=True)):
            cur.execute("INSERT INTO digest_floats VALUES (%s, %s::real, %s::float8)", (i, r, d))
        # A NaN PostgreSQL computes carries other bits (the sign) than the 'NaN' literal's.
        cur.execute("INSERT INTO digest_floats VALUES (%s, 'Infinity'::real - 'Infinity'::real, "
                    "'Infinity'::float8 - 'Infinity'::float8)", (len(FLOATS),))  # fmt: skip
        cur.execute("SELECT id, r::text, d::text, r::float8 FROM digest_floats ORDER BY id")
        source = cur.fetchall()
    pg.commit()
    lines = [(f'{{"id": {i}, "r": {_java_number(r)}, "d": {_java_number(d)}}}',)
             for i, r, d, _ in source]  # fmt: skip
    lake = as_lake(spark, lines, schema)
    lake_digest = spark_digest(lake, schema=schema)
    assert len(lake_digest["digest"]) == len(source)  # a bucket per row
    diff = compare_digests(source_digest(pg, table="digest_floats", schema=schema), lake_digest)
    assert diff.equal, diff.details
    # The lake holds real's 1.1 as its exact value, which is not the double 1.1.
    got = {r["id"]: r["r"] for r in lake.collect()}
    assert got[0] == source[0][3] == 1.100000023841858 and got[0] != 1.1

    # Sanity of the test itself: the double nearest to "1.1" is a content difference.
    as_double = lake.withColumn("r", F.when(F.col("id") == 0, F.lit(1.1)).otherwise(F.col("r")))
    diff = compare_digests(
        source_digest(pg, table="digest_floats", schema=schema),
        spark_digest(as_double, schema=schema),
    )
    assert diff.content_buckets == (0,) and diff.key_buckets == ()


def test_postgres_hashes_a_hashed_column_as_the_source_connector_does(pg, spark):
    """A hashed column (``CapturedTable.hashed``): the lake holds the connector's hash, the
    SHA-256 of the salt's then the value's UTF-8 bytes, in hex; PostgreSQL computes the same
    from the plain value with the salt, so the digests match. Without the salt, no digest."""
    from cdc_lake.lake.schema import SourceColumn, initial

    columns = [SourceColumn("id", "bigint", False), SourceColumn("phone", "text", hashed=True)]
    schema = initial("digest_hashed", "id", columns)
    values = ["+33 1 23 45 67 89", "Zürich ☎ 0041", "", None]
    salt = "salt ünïcode " + uuid.uuid4().hex

    def connector_hash(v: str | None) -> str | None:
        return None if v is None else hashlib.sha256((salt + v).encode()).hexdigest()

    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_hashed (id bigint, phone text)")
        for i, v in enumerate(values):
            cur.execute("INSERT INTO digest_hashed VALUES (%s, %s)", (i, v))
    pg.commit()
    lake = spark.createDataFrame(
        [(i, connector_hash(v)) for i, v in enumerate(values)], "id bigint, phone string"
    )
    source = source_digest(pg, table="digest_hashed", schema=schema, salt=salt)
    assert compare_digests(source, spark_digest(lake, schema=schema)).equal
    # Another salt, or the plain values in the lake, are content differences.
    other = source_digest(pg, table="digest_hashed", schema=schema, salt=salt + "x")
    assert compare_digests(other, spark_digest(lake, schema=schema)).content_buckets
    plain = spark.createDataFrame(list(enumerate(values)), "id bigint, phone string")
    assert compare_digests(source, spark_digest(plain, schema=schema)).content_buckets
    with pytest.raises(ValueError, match="phone are hashed .* CDC_LAKE_COLUMN_SALT"):
        source_digest(pg, table="digest_hashed", schema=schema)


# Values of a jsonb column with field policies: escapes, non-ASCII, control characters, a
# nested object and array beside, a null, a number, an absent field, and values that are no
# object at all (left as they are).
POLICY_DOCS = [
    {"phone": 'say "hi" \\ Zürich ☎ 😀\t\u0001', "fax": "030-0076545", "city": "Berlin"},
    {"fax": None, "phone": None, "n": [1, {"phone": "nested, kept"}], "z": {"fax": "kept"}},
    {"phone": "", "fax": ""},
    {"phone": "only"},
    {"fax": 12, "city": "no phone"},
    {},
    [{"phone": "in an array, kept"}],
    "a string",
    None,
]


def test_postgres_applies_field_policies_as_the_source_connector_does(pg, spark):
    """A jsonb column with field policies (``customer.phone`` hashed, ``customer.fax``
    excluded): the lake holds PostgreSQL's print of the value with the fax left out and the
    phone's string hashed, which the digest's SQL computes from the plain value."""
    from dataclasses import replace

    from cdc_lake.lake.schema import SourceColumn, captured_schema

    table = replace(OUTBOX, source="digest_fields", key="id")
    columns = [SourceColumn("id", "bigint", False), SourceColumn("customer", "jsonb")]
    schema = captured_schema(table, columns)
    assert schema.field_policies("customer") == (("fax",), ("phone",))
    salt = "salt ünïcode " + uuid.uuid4().hex
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_fields (id bigint, customer jsonb)")
        for i, doc in enumerate(POLICY_DOCS):
            cur.execute("INSERT INTO digest_fields VALUES (%s, %s::jsonb)",
                        (i, None if doc is None else json.dumps(doc)))  # fmt: skip
        # What the lake holds: PostgreSQL's own print of the value the policies leave.
        held = []
        for i, doc in enumerate(POLICY_DOCS):
            want = as_lake_json(table, "customer", doc, salt)
            cur.execute("SELECT %s::jsonb::text", (None if want is None else json.dumps(want),))
            held.append((i, cur.fetchone()[0]))
    pg.commit()
    assert "kept" in held[1][1] and "in an array, kept" in held[6][1] and "030" not in held[0][1]
    lake = spark.createDataFrame(held, "id bigint, customer string")
    source = source_digest(pg, table="digest_fields", schema=schema, salt=salt)
    diff = compare_digests(source, spark_digest(lake, schema=schema))
    assert diff.equal, diff.details
    # Another salt, or the plain value (the fax kept, the phone plain), differ in content.
    other = source_digest(pg, table="digest_fields", schema=schema, salt=salt + "x")
    assert compare_digests(other, spark_digest(lake, schema=schema)).content_buckets == (0, 2, 3)
    unpoliced = source_digest(pg, table="digest_fields", schema=replace(
        schema, excluded=(), hashed_fields=()))  # fmt: skip
    assert set(compare_digests(unpoliced, spark_digest(lake, schema=schema)).content_buckets) == {
        0, 1, 2, 3, 4
    }  # fmt: skip
    with pytest.raises(ValueError, match="customer.phone.* are hashed .* CDC_LAKE_COLUMN_SALT"):
        source_digest(pg, table="digest_fields", schema=schema)


# timestamp without time zone at both of Debezium's precisions: before 1970, leap day,
# microseconds, far future.
WALL_CLOCKS = ["1969-12-31 23:59:59.999999", "2024-02-29 23:59:59.999999", "1900-01-01 00:00:00",
               "2026-07-04 10:11:12.5", "4000-01-01 00:00:00.000001", None]  # fmt: skip


def test_spark_and_postgres_hash_timestamps_without_zone_alike(pg, spark):
    """timestamp(3) and timestamp as the pipeline carries them: Debezium's milliseconds and
    microseconds since 1970-01-01 00:00 of the wall-clock time, in a raw JSON line, parsed and
    converted by the lake schema, hash as the source's own values do."""
    from cdc_lake.lake.schema import SourceColumn, initial

    columns = [SourceColumn("id", "bigint", False),
               SourceColumn("ms", "timestamp(3) without time zone"),
               SourceColumn("us", "timestamp without time zone")]  # fmt: skip
    schema = initial("digest_wall_clocks", "id", columns)
    assert [c.kind for c in schema.columns[1:]] == ["timestamp_ms", "timestamp_us"]
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_wall_clocks "
                    "(id bigint, ms timestamp(3), us timestamp)")  # fmt: skip
        for i, text in enumerate(WALL_CLOCKS):
            cur.execute("INSERT INTO digest_wall_clocks VALUES (%s, %s, %s)", (i, text, text))
        cur.execute("SELECT id, ms, us FROM digest_wall_clocks ORDER BY id")
        source = cur.fetchall()  # naive datetimes; ms rounded to milliseconds by PostgreSQL
    pg.commit()
    epoch = datetime(1970, 1, 1)

    def since(value: datetime | None, unit: timedelta) -> str:
        return "null" if value is None else str((value - epoch) // unit)

    lines = [(f'{{"id": {i}, "ms": {since(ms, timedelta(milliseconds=1))}, '
              f'"us": {since(us, timedelta(microseconds=1))}}}',)
             for i, ms, us in source]  # fmt: skip
    lake = as_lake(spark, lines, schema)
    diff = digest_diff(pg, "digest_wall_clocks", schema, lake)
    assert diff.equal, diff.details
    as_micros = lake.select("id", F.unix_micros("us").alias("us")).collect()
    micros = {r["id"]: r["us"] for r in as_micros}
    assert micros[0] == -1 and micros[len(WALL_CLOCKS) - 1] is None

    # Sanity of the test itself: a wall-clock read in another zone is a content difference.
    us = F.col("us")
    shifted = lake.withColumn(
        "us", F.when(F.col("id") == 1, us + F.expr("INTERVAL 1 HOUR")).otherwise(us)
    )
    diff = digest_diff(pg, "digest_wall_clocks", schema, shifted)
    assert diff.content_buckets == (1,) and diff.key_buckets == ()


# time without time zone at both of Debezium's precisions: midnight, the last millisecond and
# microsecond of the day (time(3) rounds the latter to 24:00:00), the day's end, fractions.
CLOCKS = ["00:00:00", "23:59:59.999", "23:59:59.999999", "07:30:15.125", "12:00:00.000001",
          "24:00:00", None]  # fmt: skip


def test_spark_and_postgres_hash_times_alike(pg, spark):
    """time(3) and time as the pipeline carries them: Debezium's milliseconds and microseconds
    since midnight in a raw JSON line, parsed and converted by the lake schema (microseconds in
    a bigint), hash as the source's own values do."""
    from cdc_lake.lake.schema import SourceColumn, initial

    columns = [SourceColumn("id", "bigint", False),
               SourceColumn("ms", "time(3) without time zone"),
               SourceColumn("us", "time without time zone")]  # fmt: skip
    schema = initial("digest_clocks", "id", columns)
    assert [c.kind for c in schema.columns[1:]] == ["time_ms", "time_us"]
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE digest_clocks (id bigint, ms time(3), us time)")
        for i, text in enumerate(CLOCKS):
            cur.execute("INSERT INTO digest_clocks VALUES (%s, %s, %s)", (i, text, text))
        cur.execute("SELECT id, ms::text, us::text FROM digest_clocks ORDER BY id")
        source = cur.fetchall()  # ms rounded to milliseconds by PostgreSQL
    pg.commit()

    def since_midnight(text: str | None, unit: int) -> str:
        """What Debezium sends: 24:00:00 as the day's length (DBZ-1164)."""
        if text is None:
            return "null"
        h, m, s = text.split(":")
        micros = (int(h) * 3600 + int(m) * 60) * 10**6 + int(Decimal(s) * 10**6)
        return str(micros // unit)

    lines = [(f'{{"id": {i}, "ms": {since_midnight(ms, 1000)}, '
              f'"us": {since_midnight(us, 1)}}}',) for i, ms, us in source]  # fmt: skip
    lake = as_lake(spark, lines, schema)
    diff = digest_diff(pg, "digest_clocks", schema, lake)
    assert diff.equal, diff.details
    held = {r["id"]: (r["ms"], r["us"]) for r in lake.collect()}
    day = 86_400_000_000
    assert held[1] == (day - 1000, day - 1000) and held[2] == (day, day - 1)
    assert held[3] == (27_015_125_000, 27_015_125_000) and held[5] == (day, day)
    assert held[6] == (None, None)

    # Sanity of the test itself: a millisecond off is a content difference.
    us = F.col("us")
    shifted = lake.withColumn("us", F.when(F.col("id") == 4, us + 1000).otherwise(us))
    diff = digest_diff(pg, "digest_clocks", schema, shifted)
    assert diff.content_buckets == (4,) and diff.key_buckets == ()


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _lake_digest(result: dg.ExecuteInProcessResult) -> dict:
    """The digest part of the table state the Hudi asset reports (``live_key_digest`` also
    names the commit and keeps counts: ``cdc_lake/lake/table_state.py``)."""
    mats = [e.materialization for e in result.get_asset_materialization_events()]
    (mat,) = [m for m in mats if m.asset_key == HUDI_KEY]
    state = mat.metadata["live_key_digest"].value
    assert isinstance(state, dict)
    return {k: state[k] for k in ("version", "buckets", "columns", "rows", "digest")}


def _copy_prefix(client, bucket: str, source: str, target: str) -> int:
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=source)
        for o in page.get("Contents", [])
    ]
    for key in keys:
        client.copy_object(
            Bucket=bucket,
            Key=target + key[len(source) :],
            CopySource={"Bucket": bucket, "Key": key},
        )
    return len(keys)


def test_digest_matches_the_outbox_and_catches_a_stale_row(
    ingested, resources, local_stack, secret_env, pg, spark
):
    catch_up(resources)
    assert dg.materialize([cdc_events_hudi], resources=resources).success
    # Break a copy of the shared table, so other tests never see the stale row.
    shared = resources["lake"].table_prefix_of(OUTBOX)
    own = local_resources(
        local_stack.settings,
        lake={"lake_prefix": f"digest-test/{uuid.uuid4().hex[:8]}"},
        flush_interval_ms=1500,
    )
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    bucket = own["lake"].lake_bucket
    assert _copy_prefix(s3, bucket, f"{shared}/", f"{own['lake'].table_prefix_of(OUTBOX)}/") > 0

    # The copy commits nothing new; its digest equals the outbox's.
    result = dg.materialize([cdc_events_hudi, matches_source], resources=own)
    assert result.success
    check = _checks(result)["matches_source"]
    assert check.passed, check.metadata
    lake_digest = _lake_digest(result)
    salt = local_stack.settings.credentials.column_salt
    source = source_digest(pg, schema=OUTBOX_SCHEMA, salt=salt)
    assert lake_digest == source and source["rows"] > 800

    # The digest relies on the lake's JSON text being PostgreSQL's jsonb text, byte for byte:
    # the source's, or for a column with field policies (the customer, the employee),
    # PostgreSQL's print of the source's value under them (phones hashed, the fax left out).
    path = own["lake"].table_path_of(OUTBOX)
    table = read_table(spark, path)
    schema = latest_schema(spark, path)  # the copy's own: the rows written below record it
    assert schema is not None
    lake_rows = {r["order_id"]: r for r in table.collect()}
    policed = sorted(OUTBOX.json_columns)
    assert policed == ["customer", "employee"]
    plain = [c for c in JSON_COLUMNS if c not in policed]
    with pg.cursor() as cur:
        texts_sql = ", ".join(f"{c}::text" for c in plain)
        cur.execute(f"SELECT order_id, {', '.join(policed)}, {texts_sql} FROM datalake.cdc_events")
        for oid, *values in cur.fetchall():
            docs, texts = values[: len(policed)], values[len(policed) :]
            assert [lake_rows[oid][c] for c in plain] == texts, oid
            for column, doc in zip(policed, docs, strict=True):
                held = lake_rows[oid][column]
                parsed = None if held is None else json.loads(held)
                assert parsed == as_lake_json(OUTBOX, column, doc, salt), (oid, column)
            assert "fax" in docs[0] and '"fax"' not in lake_rows[oid]["customer"]
            assert "home_phone" in docs[1]  # every Northwind order has both
        held = [r[c] for r in lake_rows.values() for c in policed if r[c] is not None]
        cur.execute("SELECT t = t::jsonb::text FROM unnest(%s::text[]) AS t", (held,))
        assert all(same for (same,) in cur.fetchall())

    # Make one row stale: its shipped_date one day off, under the same key, ordered as newest.
    # Delete another from the lake only (missing), and add one the source never had (extra),
    # in another bucket.
    victim = min(oid for oid, r in lake_rows.items() if r["shipped_date"] is not None)
    gone = max(oid for oid in lake_rows if oid % BUCKETS != victim % BUCKETS)
    extra = gone + BUCKETS * 1000  # the same bucket as the missing row
    ordering = F.format_string("%015d%020d", F.col("cdc_source_ts_ms") + 1, F.col("cdc_lsn"))
    newer = table.withColumn("cdc_ordering", ordering)
    stale = newer.where(F.col("order_id") == victim).withColumn(
        "shipped_date", F.date_add(F.col("shipped_date"), 1)
    )
    added = newer.where(F.col("order_id") == gone).withColumn("order_id", F.lit(extra))
    written = (
        stale.unionByName(added)
        .select(*lake_columns(schema, OUTBOX), F.lit(False).alias("_hoodie_is_deleted"))
        .unionByName(
            newer.where(F.col("order_id") == gone).select(
                *lake_columns(schema, OUTBOX), F.lit(True).alias("_hoodie_is_deleted")
            )
        )
    )
    options = own["lake"].table_config(OUTBOX).write_options(schema=schema)
    written.write.format("hudi").options(**options).mode("append").save(path)
    assert read_table(spark, path).where(F.col("order_id") == victim).count() == 1

    result = dg.materialize([cdc_events_hudi, matches_source], resources=own, raise_on_error=False)
    lake_digest = _lake_digest(result)
    diff = compare_digests(source_digest(pg, schema=OUTBOX_SCHEMA, salt=salt), lake_digest)
    assert diff.content_buckets == (victim % BUCKETS,) and diff.key_buckets == (gone % BUCKETS,)
    assert lake_digest["rows"] == source["rows"]
    check = _checks(result)["matches_source"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    meta: dict[str, Any] = {k: v.value for k, v in check.metadata.items()}
    assert (meta["key_differences"], meta["content_differences"]) == (1, 1)
    bucket = str(victim % BUCKETS)
    n = source["digest"][bucket][0]
    assert meta["sample_buckets"][bucket] == {"kind": "content", "source_rows": n, "lake_rows": n}

    # The check names each row, its kind, the stale row's column, and each kind's repair.
    rows = meta["differing_rows"]
    assert rows["counts"] == {"missing": 1, "extra": 1, "stale": 1}
    assert rows["keys"] == {"missing": [[str(gone)]], "extra": [[str(extra)]],
                            "stale": [[str(victim)]]}  # fmt: skip
    assert rows["columns"] == [[[str(victim)], ["shipped_date"]]]
    text = check.description or ""
    assert f"1 row(s) the lake lacks: order_id={gone}. Repair: `cdc-lake source resnapshot" in text
    assert (
        f"1 row(s) the source no longer has: order_id={extra}. Repair: `cdc-lake lake reconcile "
        "--table datalake.cdc_events`" in text
    )
    assert f"1 row(s) stale in the lake: order_id={victim} (shipped_date)" in text
    assert "in 2 differing bucket(s)" in text
