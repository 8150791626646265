"""Changes of the source's schema, end to end on the real stack: each reaches the lake or stops
the refresh loudly, and none is dropped in silence.

One pipeline of its own (database, connectors, topic, raw prefix, Hudi table: the fault suite's
``FaultPipeline``), so altering its outbox disturbs no other test. In order, on one lake table:

1. columns added at the source (text, smallint, boolean, numeric, real: 1.1 and NaN, held as
   the real's exact value; timestamp and timestamp(3); time and time(3)), set on 10 orders,
   with events from before the change in the same batch: the lake gets them, earlier rows
   read null (or the column's default, for the columns added with one, as PostgreSQL reads
   them), and ``matches_source`` (its digest now covering them) and ``schema_matches_source``
   pass. Order writes through the triggers go on between the ``ALTER TABLE`` and any change of
   the function that fills the outbox; then the edits of ``sql/002_outbox.sql`` that
   docs/schema-changes.md lists make the triggers fill another new column, on every order;
2. a widening (smallint -> bigint) with a value past 32 bits goes through;
3. a replay from offset 0, across the change, changes nothing;
4. a dropped column stays in the lake, null on rows changed since, and the schema check warns;
5. a rename stops the refresh, naming both names, and it goes on once renamed back;
6. an incompatible change (text -> integer) stops the refresh, naming the table, the column and
   both types: no commit, the table as it was.
"""

from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import functions as F

from bench.outbox import HUDI_OP, cdc_events_hudi, matches_source, schema_matches_source
from cdc_lake import sql_dir
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.readers import read_table
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake_tests.faults.harness import FaultPipeline

ADDED = {"sales_channel": "text", "priority": "smallint", "gift": "boolean",
         "discount_total": "numeric(10,2)", "weight": "real", "promised_at": "timestamp",
         "packed_at": "timestamp(3)", "ready_at": "time", "slot_at": "time(3)"}  # fmt: skip
# Added with a default: PostgreSQL reads it for every row stored before, with no change event.
DEFAULTED = {"channel_group": "text DEFAULT 'retail'", "handling_fee": "numeric(6,2) DEFAULT 2.50",
             "opened_at": "timestamptz DEFAULT '2026-01-02 03:04:05+01'"}  # fmt: skip
# real's 1.1 as a double: what PostgreSQL's real::float8 gives and what the lake must hold.
REAL_1_1 = struct.unpack("f", struct.pack("f", 1.1))[0]
CHECKS = [matches_source, schema_matches_source]


@pytest.fixture
def pipeline(local_stack: LocalStack, secret_env: dict[str, str], spark: Any) -> Iterator[Any]:
    p = FaultPipeline(local_stack, "schema_change", sample_scale=0.1)
    try:
        yield p
    finally:
        p.close()


def sql(p: FaultPipeline, statement: str, args: tuple = ()) -> list[tuple]:
    return p.sql(statement, args=args)


def refresh(p: FaultPipeline, **run_config: Any) -> dg.ExecuteInProcessResult:
    config = {"ops": {HUDI_OP: {"config": run_config}}} if run_config else None
    return dg.materialize(
        [cdc_events_hudi, *CHECKS],
        resources=p.resources,
        instance=p_instance(p),
        run_config=config,
        raise_on_error=False,
    )


_instances: dict[str, dg.DagsterInstance] = {}


def p_instance(p: FaultPipeline) -> dg.DagsterInstance:
    """One instance per pipeline: the checks and the nothing-new path read its history."""
    return _instances.setdefault(p.name, dg.DagsterInstance.ephemeral())


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (mat,) = [e.materialization for e in result.get_asset_materialization_events()]
    return {k: v.value for k, v in mat.metadata.items()}


def readme_trigger_edits(path: Path, column: str, expression: str) -> str:
    """sql/002_outbox.sql with the edits docs/schema-changes.md's "Adding a column, end to end"
    lists."""
    text = path.read_text()
    edits = [
        ("ALTER TABLE cdc_events REPLICA IDENTITY FULL;\n",
         f"ALTER TABLE cdc_events REPLICA IDENTITY FULL;\n"
         f"ALTER TABLE cdc_events ADD COLUMN IF NOT EXISTS {column} text;\n"),
        ("    updated_at timestamptz\n)\nLANGUAGE sql STABLE",
         f"    updated_at timestamptz,\n    {column} text\n)\nLANGUAGE sql STABLE"),
        ("        clock_timestamp()\n    FROM datalake.orders o",
         f"        clock_timestamp(),\n        {expression}\n    FROM datalake.orders o"),
        ("shipper, shipment, updated_at)\n", f"shipper, shipment, updated_at, {column})\n"),
        ("        updated_at = EXCLUDED.updated_at\n",
         f"        updated_at = EXCLUDED.updated_at,\n        {column} = EXCLUDED.{column}\n"),
        ("ev.shipper, ev.shipment)", f"ev.shipper, ev.shipment, ev.{column})"),
        ("EXCLUDED.shipper, EXCLUDED.shipment);",
         f"EXCLUDED.shipper, EXCLUDED.shipment, EXCLUDED.{column});"),
    ]  # fmt: skip
    for old, new in edits:
        assert text.count(old) == 1, f"docs/schema-changes.md's edit no longer fits: {old!r}"
        text = text.replace(old, new)
    return text


def failure(result: dg.ExecuteInProcessResult) -> str:
    return "\n".join(
        str(e.event_specific_data.error)  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type_value == "STEP_FAILURE"
    )


def micros(delta: datetime.timedelta) -> int:
    return delta // datetime.timedelta(microseconds=1)


def lake_rows(p: FaultPipeline, spark: Any) -> dict[int, Any]:
    return {r["order_id"]: r for r in read_table(spark, p.lake.table_path_of(OUTBOX)).collect()}


def test_schema_changes_reach_the_lake_or_stop_the_refresh(pipeline: FaultPipeline, spark):
    p = pipeline
    p.start()
    p.catch_up()
    first = refresh(p)
    assert first.success and all(c.passed for c in checks(first).values())
    assert metadata(first)["schema_version"] == 1

    # 1. Changes before the ALTER, left in the raw files: the next batch mixes both schemas.
    p.workload(changes=15, rate=20, seed=11).finish()
    added = ", ".join(
        f"ADD COLUMN {name} {pg_type}" for name, pg_type in (ADDED | DEFAULTED).items()
    )
    sql(p, f"ALTER TABLE datalake.cdc_events {added}")
    # Order writes through the triggers still work before anything fills the new columns.
    p.workload(changes=15, rate=20, seed=12).finish()
    orders = [r[0] for r in sql(p, "SELECT order_id FROM datalake.cdc_events ORDER BY 1 LIMIT 10")]
    sql(
        p,
        "UPDATE datalake.cdc_events SET sales_channel = 'web-' || order_id, priority = 7, "
        "gift = (order_id %% 2 = 0), discount_total = 12.50, "
        "weight = CASE WHEN order_id %% 3 = 0 THEN 'NaN' ELSE 1.1 END, "
        "promised_at = '2026-03-01 12:34:56.123456', packed_at = '1969-07-20 20:17:40.25', "
        "ready_at = CASE WHEN order_id = %s THEN time '24:00:00' ELSE '23:59:59.999999' END, "
        "slot_at = '07:30:15.125' WHERE order_id = ANY(%s)",
        (orders[1], orders),
    )
    p.workload(changes=10, rate=20, seed=13).finish()  # later order changes keep the values
    p.catch_up()
    second = refresh(p)
    assert second.success, second.all_events
    found = checks(second)
    assert found["matches_source"].passed, found["matches_source"].metadata
    assert found["schema_matches_source"].passed, found["schema_matches_source"].metadata
    meta = metadata(second)
    assert meta["schema_version"] == 2
    assert "added sales_channel (text)" in meta["schema_change"]
    columns = {c.name: c.type for c in meta["dagster/column_schema"].columns}
    assert {"sales_channel", "priority", "gift", "discount_total"} <= set(columns)
    assert meta["live_key_digest"]["columns"].count("sales_channel:text") == 1
    rows = lake_rows(p, spark)
    for oid in orders:
        assert rows[oid]["sales_channel"] == f"web-{oid}" and rows[oid]["priority"] == 7
        assert rows[oid]["gift"] is (oid % 2 == 0) and rows[oid]["discount_total"] == "12.50"
        weight = rows[oid]["weight"]
        assert math.isnan(weight) if oid % 3 == 0 else weight == REAL_1_1 != 1.1
    # Wall-clock times as Debezium counts them: from 1970-01-01 00:00, as written.
    clocks = (
        read_table(spark, p.lake.table_path_of(OUTBOX))
        .where(F.col("order_id") == orders[0])
        .select(
            F.unix_micros("promised_at").alias("promised"),
            F.unix_micros("packed_at").alias("packed"),
        )
        .first()
    )
    assert clocks is not None
    epoch = datetime.datetime(1970, 1, 1)
    assert clocks["promised"] == micros(datetime.datetime(2026, 3, 1, 12, 34, 56, 123456) - epoch)
    assert clocks["packed"] == micros(datetime.datetime(1969, 7, 20, 20, 17, 40, 250000) - epoch)
    # time: microseconds since midnight, from Debezium's MicroTime and (time(3)) Time.
    assert rows[orders[0]]["ready_at"] == 86_400_000_000 - 1
    assert rows[orders[1]]["ready_at"] == 86_400_000_000  # 24:00:00, the day's end
    assert rows[orders[0]]["slot_at"] == ((7 * 60 + 30) * 60 + 15) * 1_000_000 + 125_000
    others = [r for oid, r in rows.items() if oid not in orders]
    assert others and all(r["sales_channel"] is None for r in others)
    # The defaults reached every row: stored ones by the commit that added the columns, and
    # those whose events were written before the ALTER (matches_source covers all three).
    opened = datetime.datetime(2026, 1, 2, 2, 4, 5)
    assert {(r["channel_group"], r["handling_fee"], r["opened_at"]) for r in rows.values()} == {
        ("retail", "2.50", opened)
    }
    assert meta["backfilled_columns"] == list(DEFAULTED) and meta["backfilled_rows"] > 0

    # 1b. docs/schema-changes.md's way to have the triggers fill a new column: its edits of
    # sql/002_outbox.sql, applied, then the outbox brought in line as the source asset does.
    sql(p, readme_trigger_edits(sql_dir() / "002_outbox.sql", "destination", "o.ship_country"))
    sql(p, "SELECT datalake.load_cdc_events()")
    p.workload(changes=10, rate=20, seed=14).finish()  # new orders get it from the trigger
    p.catch_up()
    filled = refresh(p)
    assert filled.success and checks(filled)["matches_source"].passed
    assert checks(filled)["schema_matches_source"].passed
    source = dict(sql(p, "SELECT order_id, destination FROM datalake.cdc_events"))
    assert any(v is not None for v in source.values())  # the triggers filled it
    lake = {oid: r["destination"] for oid, r in lake_rows(p, spark).items()}
    assert lake == source

    # 2. Widening: the lake holds every integer as bigint.
    sql(p, "ALTER TABLE datalake.cdc_events ALTER COLUMN priority TYPE bigint")
    sql(p, "UPDATE datalake.cdc_events SET priority = 5000000000 WHERE order_id = %s", (orders[0],))
    p.catch_up()
    third = refresh(p)
    assert third.success and checks(third)["matches_source"].passed
    assert metadata(filled)["schema_version"] == 3 and metadata(third)["schema_version"] == 4
    assert lake_rows(p, spark)[orders[0]]["priority"] == 5_000_000_000

    # 3. A replay from offset 0, across the change, changes nothing.
    before = metadata(third)["live_key_digest"]
    replay = refresh(p, replay_from_offset=0)
    assert replay.success and checks(replay)["matches_source"].passed
    after = metadata(replay)["live_key_digest"]
    assert (after["digest"], after["rows"]) == (before["digest"], before["rows"])

    # 4. A dropped column stays, null on the rows changed since; the schema check warns.
    sql(p, "ALTER TABLE datalake.cdc_events DROP COLUMN gift")
    sql(p, "UPDATE datalake.cdc_events SET priority = 8 WHERE order_id = %s", (orders[1],))
    p.catch_up()
    fourth = refresh(p)
    assert fourth.success
    found = checks(fourth)
    assert found["matches_source"].passed
    warn = found["schema_matches_source"]
    assert not warn.passed and warn.severity == dg.AssetCheckSeverity.WARN
    assert warn.metadata["dropped_at_source"].value == ["gift"]
    rows = lake_rows(p, spark)
    assert rows[orders[1]]["gift"] is None and rows[orders[1]]["priority"] == 8
    assert rows[orders[2]]["gift"] is (orders[2] % 2 == 0)  # not changed since: kept

    # 5. A rename stops (the catalog keeps a renamed column's attnum), even with no new rows;
    # renamed back, the refresh goes on.
    commits = [c.instant for c in completed_commits(spark, p.lake.table_path_of(OUTBOX))]
    sql(p, "ALTER TABLE datalake.cdc_events RENAME COLUMN priority TO prio")
    renamed = refresh(p)
    assert not renamed.success
    assert "'priority' was renamed to 'prio'" in failure(renamed)
    sql(p, "ALTER TABLE datalake.cdc_events RENAME COLUMN prio TO priority")
    assert refresh(p).success
    assert [c.instant for c in completed_commits(spark, p.lake.table_path_of(OUTBOX))] == commits

    # 6. Incompatible: text -> integer stops before anything is committed.
    digest = metadata(fourth)["live_key_digest"]["digest"]
    sql(p, "ALTER TABLE datalake.cdc_events ALTER COLUMN sales_channel TYPE integer USING NULL")
    sql(p, "UPDATE datalake.cdc_events SET sales_channel = 3 WHERE order_id = %s", (orders[3],))
    p.catch_up()
    failed = refresh(p)
    assert not failed.success
    message = failure(failed)
    for part in ("datalake.cdc_events", "'sales_channel'", "text", "integer", "Nothing was"):
        assert part in message, message
    assert [c.instant for c in completed_commits(spark, p.lake.table_path_of(OUTBOX))] == commits
    table = read_table(spark, p.lake.table_path_of(OUTBOX))
    kept = table.where(F.col("order_id") == orders[3]).first()
    assert kept is not None and kept["sales_channel"] == f"web-{orders[3]}"
    assert "sales_channel string" in table.schema.simpleString().replace(":", " ")
    assert table.count() == sum(v[0] for v in digest.values())  # hard deletes: all live
