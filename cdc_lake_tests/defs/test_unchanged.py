"""A lake refresh with nothing new, through ``materialize`` on the real stack: it runs no Spark
app, keeps the last real commit's figures and check results as the latest materialization, the
order items are not rebuilt, and the sensor still starts from the lake's checkpoint."""

from __future__ import annotations

from typing import Any

import dagster as dg

from bench.outbox import HUDI_KEY, cdc_events_hudi, raw_cdc_files_sensor
from bench.synthetic import SyntheticLake, event
from cdc_lake.defs.keys import ORDER_ITEMS_KEY
from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.lake.timeline import newest_commit_instant
from cdc_lake.resources.local import local_resources
from cdc_lake.resources.spark import SparkLauncher
from cdc_lake.stack import LocalStack

ASSETS = [cdc_events_hudi, order_items]
DATA_VERSION = "dagster/data_version"  # the materialization tag MaterializeResult's version sets


def _meta(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    [mat] = [e.materialization for e in result.get_asset_materialization_events()
             if e.materialization.asset_key == key]  # fmt: skip
    return {k: v.value for k, v in mat.metadata.items()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(key)
    assert event is not None and event.asset_materialization is not None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_empty_run_keeps_the_last_commit_and_starts_no_spark(local_stack: LocalStack, secret_env):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(
        s,
        lake={
            "lake_prefix": f"synthetic/{lake.name}",
            "order_items_prefix": f"synthetic/{lake.name}/order_items",
        },
        raw_prefix=lake.raw_prefix,
    )
    # The base launcher raises on any app: a run that needs Spark fails with it.
    no_spark = {**resources, "spark_jobs": SparkLauncher()}
    instance = dg.DagsterInstance.ephemeral()
    lake.put([event(1, 100, 1), event(2, 100, 2), event(3, 100, 3, op="c")])
    lake.put([event(2, 200, 4, deleted=True, op="d")], partition=1)

    first = dg.materialize(ASSETS, resources=resources, instance=instance)
    assert first.success
    hudi, items = _meta(first, HUDI_KEY), _meta(first, ORDER_ITEMS_KEY)
    instant = hudi["commit_instant"]
    assert instant != "none" and hudi["new_commit"] is True
    assert instant == newest_commit_instant(
        client, s.lake_bucket, f"synthetic/{lake.name}/cdc_events"
    )
    assert hudi["dagster/row_count"] == 2 and hudi["events_upserted"] == 3
    assert items["hudi_commit_instant"] == instant and items["unchanged"] is False
    assert _checks(first) == dict.fromkeys(
        [
            "order_id_unique",
            "no_deleted_orders",
            "incremental_matches_rescan",
            "revenue_non_negative",
            "orders_exist_in_lake",
        ],
        True,
    )

    empty = dg.materialize(ASSETS, resources=no_spark, instance=instance)
    assert empty.success  # no Spark app was asked for
    again = _meta(empty, HUDI_KEY)
    assert again["new_commit"] is False and again["files_read"] == 0
    for key in ["commit_instant", "records_inserted", "records_updated", "records_deleted",
                "checkpoint", "dagster/row_count", "live_key_digest", "table_path"]:  # fmt: skip
        assert again[key] == hudi[key], key
    assert again["carried_from_run"] == first.run_id
    # The latest materialization is still the last real commit's, for the UI and the sensor.
    assert _latest(instance, HUDI_KEY)["commit_instant"] == instant
    same_items = _meta(empty, ORDER_ITEMS_KEY)
    assert same_items["unchanged"] is True
    for key in ["dagster/row_count", "total_revenue_usd", "customer_stats", "hudi_commit_instant"]:
        assert same_items[key] == items[key], key
    # The checks were computed on this very data: carried, with the run that computed them.
    assert _checks(empty) == _checks(first)
    carried = {e.check_name: e.metadata["carried_from_run"].value
               for e in empty.get_asset_check_evaluations()}  # fmt: skip
    assert set(carried.values()) == {first.run_id}
    versions = {e.materialization.asset_key: (e.materialization.tags or {}).get(DATA_VERSION)
                for e in empty.get_asset_materialization_events()}  # fmt: skip
    assert versions == {HUDI_KEY: instant, ORDER_ITEMS_KEY: instant}

    # A second empty run carries the same figures, naming the run that committed.
    twice = dg.materialize(ASSETS, resources=no_spark, instance=instance)
    assert twice.success and _meta(twice, HUDI_KEY)["carried_from_run"] == first.run_id

    # The sensor reads the carried checkpoint: nothing pending, even for a sensor just turned on.
    sensor_resources = {k: resources[k] for k in SENSOR_RESOURCES}
    ctx = dg.build_sensor_context(instance=instance, cursor=None, resources=sensor_resources)
    idle = raw_cdc_files_sensor(ctx)
    assert isinstance(idle, dg.SkipReason)
    assert "no raw objects past the lake's checkpoint" in (idle.skip_message or "")

    # New data: the sensor asks, the run commits, the items are rebuilt from the new commit.
    lake.put([event(4, 300, 5, op="c")], partition=1)
    ctx = dg.build_sensor_context(instance=instance, cursor=None, resources=sensor_resources)
    assert isinstance(raw_cdc_files_sensor(ctx), dg.SensorResult)
    assert not dg.materialize(
        ASSETS, resources=no_spark, instance=instance, raise_on_error=False
    ).success
    fresh = dg.materialize(ASSETS, resources=resources, instance=instance)
    assert fresh.success
    newer = _meta(fresh, HUDI_KEY)
    assert newer["new_commit"] is True and newer["commit_instant"] > instant
    assert newer["dagster/row_count"] == 3 and "carried_from_run" not in newer
    rebuilt = _meta(fresh, ORDER_ITEMS_KEY)
    assert rebuilt["unchanged"] is False
    assert rebuilt["hudi_commit_instant"] == newer["commit_instant"]
    assert rebuilt["dagster/row_count"] == items["dagster/row_count"] + 1

    # An instance that has not seen the table takes the Spark path; with nothing new it reports
    # the newest commit, not "none".
    other = dg.DagsterInstance.ephemeral()
    spark_path = dg.materialize([cdc_events_hudi], resources=resources, instance=other)
    assert spark_path.success
    seen = _meta(spark_path, HUDI_KEY)
    assert seen["new_commit"] is False and seen["commit_instant"] == newer["commit_instant"]
    assert seen["records_inserted"] == newer["records_inserted"]
    assert seen["checkpoint"] == newer["checkpoint"]
    # The same table state, rescanned in full here (this instance has no state to go on from).
    fields = ("version", "buckets", "rows", "digest", "instant", "table_rows", "flagged_rows")
    assert {k: seen["live_key_digest"][k] for k in fields} == {
        k: newer["live_key_digest"][k] for k in fields
    }
    assert seen["live_key_digest"]["mode"] == "full"
