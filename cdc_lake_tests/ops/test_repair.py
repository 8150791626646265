"""The repair path on the real pipeline: a lake broken on purpose (rows removed, a row set back
to stale content) fails ``matches_source``, and ``cdc-lake lake replay`` brings it back to
equal the outbox, row for row."""

from __future__ import annotations

import dagster as dg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.outbox import cdc_events_hudi, matches_source
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import latest_schema
from cdc_lake.lake.readers import read_table
from cdc_lake.ops.cli import main
from cdc_lake.ops.repair import replay
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake_tests.lake.test_pipeline import catch_up


def _lake(spark: SparkSession, path: str) -> dict[int, tuple]:
    rows = read_table(spark, path).select("order_id", "updated_at", "shipped_date", "order_items")
    return {r["order_id"]: (r["updated_at"], r["shipped_date"], r["order_items"])
            for r in rows.collect()}  # fmt: skip


def _source(pg) -> dict[int, tuple]:
    with pg.cursor() as cur:
        cur.execute("SELECT order_id, updated_at, shipped_date FROM datalake.cdc_events")
        return {r[0]: (r[1].replace(tzinfo=None), r[2]) for r in cur.fetchall()}


def _break(spark: SparkSession, table: HudiTableConfig, removed: list[int], stale: int) -> None:
    """Remove some orders, and set one back to an older, different version, behind the
    checkpoint's back."""
    # The columns the table's newest commit recorded: these commits record them again.
    schema = latest_schema(spark, table.base_path)
    assert schema is not None
    options = table.write_options(schema=schema)
    snapshot = read_table(spark, table.base_path)
    rows = snapshot.where(F.col("order_id").isin([*removed, stale])).drop(
        *[c for c in snapshot.columns if c.startswith("_hoodie")]
    )
    rows.write.format("hudi").options(
        **{**options, "hoodie.datasource.write.operation": "delete"}
    ).mode("append").save(table.base_path)
    older = (
        rows.where(F.col("order_id") == stale)
        .withColumn("shipped_date", F.lit(None).cast("date"))
        .withColumn("order_items", F.lit("[]"))
        .withColumn("cdc_ordering", F.lit("0" * 35))
        .withColumn("_hoodie_is_deleted", F.lit(False))
    )
    older.write.format("hudi").options(**options).mode("append").save(table.base_path)


def test_replay_repairs_a_broken_lake(local_stack: LocalStack, ingested, resources, pg, spark):
    catch_up(resources)
    mine = local_resources(
        local_stack.settings, lake={"lake_prefix": "repair-test"},
        flush_interval_ms=1500,
    )  # fmt: skip
    assert dg.materialize([cdc_events_hudi, matches_source], resources=mine).success
    table = mine["lake"].table_config(OUTBOX)
    source = _source(pg)
    assert {k: v[:2] for k, v in _lake(spark, table.base_path).items()} == source

    victims = sorted(source)[:3]
    stale = sorted(source)[10]
    _break(spark, table, victims, stale)
    broken = _lake(spark, table.base_path)
    assert not set(victims) & set(broken) and broken[stale][2] == "[]"
    checked = dg.materialize(
        [cdc_events_hudi, matches_source], resources=mine, raise_on_error=False
    )
    verdict = {e.check_name: e for e in checked.get_asset_check_evaluations()}["matches_source"]
    assert not verdict.passed and verdict.severity == dg.AssetCheckSeverity.ERROR

    said: list[str] = []
    assert replay(local_stack.settings, 0, resources=mine, say=said.append, table=OUTBOX) == 0, said
    assert any("raw objects" in line for line in said)
    assert {k: v[:2] for k, v in _lake(spark, table.base_path).items()} == _source(pg)


def test_replay_command_line_needs_an_offset(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["lake", "replay"])
    assert exit_.value.code == 2
    assert "--from-offset" in capsys.readouterr().err
