"""The Hudi asset through ``materialize`` on the real stack: its checks follow the change feed
from the state the last materialization reported, and the ``lake_full_check`` job's config
rescans the table and compares."""

from __future__ import annotations

from typing import Any

import dagster as dg

from bench.synthetic import SyntheticLake, event
from cdc_lake.defs.keys import HUDI_KEY
from cdc_lake.defs.lake.assets import cdc_events_hudi
from cdc_lake.defs.lake.jobs import lake_full_check_job
from cdc_lake.resources.local import local_resources
from cdc_lake.stack import LocalStack


def _meta(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    [mat] = [e.materialization for e in result.get_asset_materialization_events()
             if e.materialization.asset_key == HUDI_KEY]  # fmt: skip
    return {k: v.value for k, v in mat.metadata.items()}


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_checks_follow_the_change_feed_and_a_full_check_compares(
    local_stack: LocalStack, secret_env
):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(
        s,
        lake={"table_prefix": f"synthetic/{lake.name}/cdc_events"},
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
    defs = dg.Definitions(assets=[cdc_events_hudi], jobs=[lake_full_check_job], resources=resources)
    run = defs.resolve_job_def("lake_full_check").execute_in_process(instance=instance)
    assert run.success
    meta = _meta(run)
    assert meta["checks_mode"] == "full" and meta["live_key_digest"]["rows"] == 29
    rescan = _checks(run)["incremental_matches_rescan"]
    assert rescan.passed, rescan.metadata
    assert rescan.metadata["compared_now"].value is True
