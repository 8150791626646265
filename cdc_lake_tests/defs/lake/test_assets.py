"""The Hudi asset through ``materialize`` on the real stack: its checks follow the change feed
from the state the last materialization reported, and the ``lake_full_check`` job's config
rescans the table and compares."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import dagster as dg

from bench.outbox import HUDI_KEY, cdc_events_hudi
from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.defs.lake.assets import hudi_table_assets
from cdc_lake.defs.lake.jobs import lake_full_check_job
from cdc_lake.lake.hudi_timeline import recorded_partition_field
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.readers import read_table
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack


def _meta(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    [mat] = [e.materialization for e in result.get_asset_materialization_events()
             if e.materialization.asset_key == HUDI_KEY]  # fmt: skip
    return {k: v.value for k, v in mat.metadata.items()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    """The outbox's Hudi table's check evaluations, by name."""
    return {e.check_name: e for e in result.get_asset_check_evaluations()
            if e.asset_key == HUDI_KEY}  # fmt: skip


def test_checks_follow_the_change_feed_and_a_full_check_compares(
    local_stack: LocalStack, secret_env
):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(
        s,
        lake={"lake_prefix": f"synthetic/{lake.name}"},
        raw_prefix=lake.raw_prefix,
    )
    instance = dg.DagsterInstance.ephemeral()
    lake.put([event(i, 100, i + 1) for i in range(30)])
    first = dg.materialize([cdc_events_hudi], resources=resources, instance=instance)
    assert first.success
    assert _meta(first)["checks_mode"] == "full"

    lake.put([event(4, 200, 100, deleted=True, op="d"), event(5, 200, 101, customer_id="QUICK")])
    second = dg.materialize([cdc_events_hudi], resources=resources, instance=instance)
    assert second.success
    meta = _meta(second)
    # Followed from the first run's state: the table was not rescanned.
    assert meta["checks_mode"] == "incremental"
    assert meta["live_key_digest"]["rows"] == 29 and meta["dagster/row_count"] == 29
    checks = _checks(second)
    assert checks["order_id_unique"].passed and checks["no_deleted_orders"].passed
    # No rescan this run: the check carries the newest full scan's verdict (the first run's).
    carried = checks["incremental_matches_rescan"]
    assert carried.passed and carried.metadata["compared_now"].value is False

    lake.put([event(6, 300, 200, customer_id="BONAP")])
    # The job rescans every captured table's Hudi table; the others have nothing to ingest here.
    defs = dg.Definitions(assets=hudi_table_assets, jobs=[lake_full_check_job], resources=resources)
    run = defs.resolve_job_def("lake_full_check").execute_in_process(instance=instance)
    assert run.success
    meta = _meta(run)
    assert meta["checks_mode"] == "full" and meta["live_key_digest"]["rows"] == 29
    rescan = _checks(run)["incremental_matches_rescan"]
    assert rescan.passed, rescan.metadata
    assert rescan.metadata["compared_now"].value is True


def test_a_table_an_earlier_release_partitioned_keeps_its_layout_and_the_asset_says_so(
    local_stack: LocalStack, secret_env, spark
):
    """The default layout is none now; a table created with ``order_year`` partitions (as the
    default was) goes on being written so, with the setting's difference in its metadata and a
    warning in the run's log, and its checks pass, a move between years included."""
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(
        s, lake={"lake_prefix": f"synthetic/{lake.name}"}, raw_prefix=lake.raw_prefix
    )
    table = resources["lake"].table_config(OUTBOX)
    assert table.partition_field == ""
    lake.put([event(i, 100, i, op="c", order_date=9700) for i in (1, 2, 3)])
    ingest_new_files(
        spark,
        client,
        lake.source,
        replace(table, partition_field="order_year"),
        captured=OUTBOX,
        declared=OUTBOX_COLUMNS,
    )

    lake.put([event(1, 200, 10, order_date=10300), event(2, 200, 11, op="d", deleted=True)])
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([cdc_events_hudi], resources=resources, instance=instance)
    assert result.success
    meta = _meta(result)
    assert meta["new_commit"] is True and meta["partition_field"] == "order_year"
    assert "created partitioned by order_year" in meta["layout_note"]
    assert "partition_field=''" in meta["layout_note"]
    assert all(c.passed for c in _checks(result).values()), _checks(result)
    warnings = [e.user_message for e in instance.all_logs(result.run_id)
                if e.level == logging.WARNING]  # fmt: skip
    assert any("applies to new tables only" in w for w in warnings), warnings
    assert recorded_partition_field(spark, table.base_path) == "order_year"
    rows = read_table(spark, table.base_path).collect()
    assert sorted((r["order_id"], r["_hoodie_partition_path"]) for r in rows) == [
        (1, "order_year=1998"), (3, "order_year=1996")
    ]  # fmt: skip
