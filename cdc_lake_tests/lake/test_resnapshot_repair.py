"""Repair by incremental snapshot, through the public assets: a lake that lost orders (hard
deletes written straight to Hudi) and holds a stale row gets them back from Debezium's re-sent
rows, and then equals the outbox row for row."""

from __future__ import annotations

import json

import dagster as dg
import psycopg2
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.outbox import cdc_events_hudi, matches_source
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import latest_schema
from cdc_lake.lake.readers import read_table
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.signals import request_snapshot
from cdc_lake.streaming.topics import end_offsets
from cdc_lake_tests.ingestion.helpers import wait_for_events
from cdc_lake_tests.lake.test_pipeline import catch_up
from cdc_lake_tests.topic_reader import read_all, reader_conf


def _lake(spark: SparkSession, path: str) -> dict[int, tuple]:
    rows = read_table(spark, path).select("order_id", "updated_at", "shipped_date", "order_items")
    return {r["order_id"]: (r["updated_at"], r["shipped_date"],
                            json.loads(r["order_items"]) if r["order_items"] else None)
            for r in rows.collect()}  # fmt: skip


def _source(pg) -> dict[int, tuple]:
    with pg.cursor() as cur:
        cur.execute(
            "SELECT order_id, updated_at, shipped_date, order_items FROM datalake.cdc_events"
        )
        rows = {r[0]: (r[1].replace(tzinfo=None), r[2], r[3]) for r in cur.fetchall()}
    pg.commit()
    return rows


def _break(spark: SparkSession, table: HudiTableConfig, removed: list[int], stale: int) -> None:
    """Hard-delete some orders and give one stale content (its ordering value kept, as if a
    change had been lost), behind the checkpoint's back, with the table's own write options."""
    # The columns the table's newest commit recorded: these commits record them again.
    schema = latest_schema(spark, table.base_path)
    assert schema is not None
    options = table.write_options(schema=schema)
    snapshot = read_table(spark, table.base_path)
    rows = snapshot.where(F.col("order_id").isin([*removed, stale])).drop(
        *[c for c in snapshot.columns if c.startswith("_hoodie")]
    )
    gone = rows.where(F.col("order_id").isin(removed))
    gone.write.format("hudi").options(
        **{**options, "hoodie.datasource.write.operation": "delete"}
    ).mode("append").save(table.base_path)
    older = (
        rows.where(F.col("order_id") == stale)
        .withColumn("shipped_date", F.lit(None).cast("date"))
        .withColumn("order_items", F.lit("[]"))
        .withColumn("_hoodie_is_deleted", F.lit(False))  # a data column of the table's schema
    )
    older.write.format("hudi").options(**options).mode("append").save(table.base_path)


def test_incremental_snapshot_repairs_a_broken_lake(
    local_stack: LocalStack, ingested, resources, pg, spark
):
    catch_up(resources)
    mine = local_resources(
        local_stack.settings, lake={"lake_prefix": "resnapshot-repair"},
        flush_interval_ms=1500, heartbeat_interval_ms=1000,
    )  # fmt: skip
    assert dg.materialize([cdc_events_hudi], resources=mine).success
    table = mine["lake"].table_config(OUTBOX)
    source = _source(pg)
    assert _lake(spark, table.base_path) == source

    ids = sorted(source)
    removed, stale = ids[5:8], ids[20]
    _break(spark, table, removed, stale)
    broken = _lake(spark, table.base_path)
    assert not set(removed) & set(broken)
    assert broken[stale][1:] == (None, []) != source[stale][1:]

    conf, topic = reader_conf(local_stack.settings), resources["cdc"].topic_of(OUTBOX)
    before = sum(end_offsets(conf, topic).values())
    conn = psycopg2.connect(local_stack.settings.pg_dsn())
    try:
        request_snapshot(conn, [*removed, stale], table=OUTBOX)
    finally:
        conn.close()
    wait_for_events(
        lambda: [r for r in read_all(conf, topic)[before:] if r],
        lambda evs: {e["order_id"] for e in evs if e["__op"] == "r"} >= {*removed, stale},
        timeout_s=120,
    )
    catch_up(resources)  # the sink has flushed the re-sent rows to raw files

    repaired = dg.materialize([cdc_events_hudi, matches_source], resources=mine)
    assert repaired.success
    assert {e.check_name: e.passed for e in repaired.get_asset_check_evaluations()} == {
        "order_id_unique": True,
        "no_deleted_orders": True,
        "incremental_matches_rescan": True,
        "matches_source": True,
    }
    assert _lake(spark, table.base_path) == _source(pg)
