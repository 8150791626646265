"""The definitions load in-process without touching any service."""

from __future__ import annotations

import socket

import dagster as dg
import pytest


def test_definitions_load_without_connecting(monkeypatch: pytest.MonkeyPatch):
    def no_network(*args, **kwargs):
        raise AssertionError("loading the definitions opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    from cdc_lake.definitions import defs

    loaded = defs() if not isinstance(defs, dg.Definitions) else defs
    assert isinstance(loaded, dg.Definitions)
    loaded.get_repository_def().load_all_definitions()


def test_definitions_hold_the_pipeline():
    from cdc_lake.definitions import defs

    loaded = defs() if not isinstance(defs, dg.Definitions) else defs
    repo = loaded.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert keys == {
        "postgres/datalake/cdc_events_outbox",
        "kafka/cdc_events_topic",
        "s3/raw/cdc_events_files",
        "hudi/datalake/cdc_events",
        "s3/marts/order_items",
        # The second captured table, from its declaration alone.
        "postgres/datalake/customers",
        "kafka/customers_topic",
        "s3/raw/customers_files",
        "hudi/datalake/customers",
        # Its declaration keeps a history: one more table, downstream of its Hudi table.
        "hudi/datalake/customers_history",
    }
    graph = repo.asset_graph
    history = dg.AssetKey.from_user_string("hudi/datalake/customers_history")
    customers = dg.AssetKey.from_user_string("hudi/datalake/customers")
    assert graph.get(history).parent_keys == {customers}
    # Lineage runs outbox -> topic -> raw files -> Hudi -> order items.
    chain = [
        "postgres/datalake/cdc_events_outbox",
        "kafka/cdc_events_topic",
        "s3/raw/cdc_events_files",
        "hudi/datalake/cdc_events",
        "s3/marts/order_items",
    ]
    customers = [
        "postgres/datalake/customers",
        "kafka/customers_topic",
        "s3/raw/customers_files",
        "hudi/datalake/customers",
    ]
    for line in (chain, customers):
        for upstream, downstream in zip(line, line[1:], strict=False):
            parents = graph.get(dg.AssetKey.from_user_string(downstream)).parent_keys
            assert parents == {dg.AssetKey.from_user_string(upstream)}, (downstream, parents)
    # Each stage's assets carry the group, owners and a stage tag that is their folder's name.
    stages = ["source", "streaming", "raw", "lake", "marts"]
    for line in (chain, customers):
        for key, stage in zip(line, stages, strict=False):
            node = graph.get(dg.AssetKey.from_user_string(key))
            assert node.owners and node.kinds and node.description, key
            assert node.group_name == "cdc_pipeline" and node.tags["stage"] == stage, key
    checks = {c.name for c in repo.asset_graph.asset_check_keys}
    assert {"order_id_unique", "no_deleted_orders", "matches_source", "revenue_non_negative",
            "orders_exist_in_lake", "no_quarantined_lines", "replication_slot_lag",
            "sink_consumer_lag", "source_connector_running", "sink_connector_running",
            "pending_raw_objects", "incremental_matches_rescan",
            "schema_matches_source", "lake_lag_seconds"} <= checks  # fmt: skip
    # The lake and its mart carry a freshness policy, shown by the UI once the daemon runs.
    for key in ("hudi/datalake/cdc_events", "s3/marts/order_items"):
        assert graph.get(dg.AssetKey.from_user_string(key)).freshness_policy is not None
    assert repo.has_sensor_def("raw_cdc_files_sensor")
    # The customers' own checks, sensor and refresh job, named after the table.
    hudi = dg.AssetKey.from_user_string("hudi/datalake/customers")
    assert {c.name for c in repo.asset_graph.asset_check_keys if c.asset_key == hudi} == {
        "customer_id_unique", "no_deleted_customers", "incremental_matches_rescan",
        "matches_source", "no_quarantined_lines", "schema_matches_source", "lake_lag_seconds",
    }  # fmt: skip
    assert repo.get_sensor_def("customers_raw_files_sensor").job_name == "customers_lake_refresh"
    # The nightly full rescan: a named job and a schedule, off until a user turns it on.
    full = repo.get_schedule_def("lake_full_check_schedule")
    assert full.job_name == "lake_full_check"
    assert full.default_status == dg.DefaultScheduleStatus.STOPPED
    # The instance's pruning: a job and a daily schedule, off too.
    prune = repo.get_schedule_def("dagster_runs_prune_schedule")
    assert prune.job_name == "dagster_runs_prune"
    assert prune.default_status == dg.DefaultScheduleStatus.STOPPED
    assert set(loaded.resources or {}) >= {"postgres", "kafka", "kafka_connect", "s3", "spark_jobs"}
    # The whole pipeline as one named job (the demo's first run): every executable asset and
    # every check.
    pipeline = loaded.resolve_job_def("cdc_pipeline")
    executable = {k for k in graph.get_all_asset_keys() if graph.get(k).is_executable}
    assert pipeline.asset_layer.executable_asset_keys == executable
    assert pipeline.asset_layer.asset_graph.asset_check_keys == repo.asset_graph.asset_check_keys


def test_runs_share_one_process_and_spark_session():
    from cdc_lake.definitions import defs

    loaded = defs() if not isinstance(defs, dg.Definitions) else defs
    job = loaded.resolve_job_def("lake_refresh")
    assert job.executor_def.name == dg.in_process_executor.name


def test_stage_attrs_take_the_stage_from_the_module():
    from cdc_lake.defs import LAKE_FRESHNESS, stage_attrs

    attrs = stage_attrs("cdc_lake.defs.marts.assets", owners=["team:analytics"], fresh=True)
    assert attrs["tags"] == {"stage": "marts"} and attrs["owners"] == ["team:analytics"]
    assert attrs.get("freshness_policy") == LAKE_FRESHNESS
    assert "freshness_policy" not in stage_attrs("cdc_lake.defs.raw.assets")
    with pytest.raises(ValueError, match="not a module of a stage folder"):
        stage_attrs("cdc_lake.defs")
