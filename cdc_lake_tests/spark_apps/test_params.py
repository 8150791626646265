"""The Spark apps' parameters (``cdc_lake/spark_apps/params.py``): what Dagster builds is what
the app reads after the JSON trip, defaults are declared once, and a mismatch fails at once."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

import pytest

from cdc_lake.lake.schema import SourceColumn, initial
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, CapturedTable
from cdc_lake.spark_apps.params import (
    APPS,
    DiffParams,
    HistoryParams,
    OrderItemsParams,
    UpsertParams,
)
from cdc_lake.spark_apps.run import run_app


def _upsert() -> UpsertParams:
    lake = LakeResource(lake_bucket="lake", quarantine=True, max_line_mb=2.5)
    cdc = CdcPipelineResource(raw_bucket="raw")
    columns = [SourceColumn("customer_id", "character(5)", False, 1), SourceColumn("x", "text")]
    return lake.upsert_params(
        cdc, replay_from_offset=7, previous_state={"digest": {"version": 3}}, full_scan=True,
        source_columns=columns, table=CUSTOMERS,
    )  # fmt: skip


def test_the_parameters_survive_the_json_trip():
    upsert = _upsert()
    wire = json.loads(json.dumps(upsert.to_json()))
    assert UpsertParams.from_json(wire) == upsert
    assert upsert.captured == CUSTOMERS and upsert.table.table_name == "customers"
    assert wire["captured"]["key"] == ["customer_id"]
    # A declaration the app's process does not know (a lake server started before it was added)
    # arrives whole, a composite key included.
    details = CapturedTable(
        source="datalake.order_details", key=("order_id", "product_id"), ddl_file="x.sql"
    )
    assert CapturedTable.from_json(json.loads(json.dumps(details.to_json()))) == details
    assert upsert.quarantine_path == "s3a://lake/quarantine/customers"
    items = LakeResource(lake_bucket="lake").order_items_params(rebuild=True)
    assert OrderItemsParams.from_json(json.loads(json.dumps(items.to_json()))) == items
    # The items are built from the table whose declaration lists them, which travels whole.
    assert items.captured == OUTBOX and items.table_path == "s3a://lake/lake/cdc_events"
    schema = initial("datalake.order_details", ("order_id", "product_id"),
                     [SourceColumn("order_id", "integer", False), SourceColumn("product_id",
                      "integer", False), SourceColumn("quantity", "smallint")])  # fmt: skip
    diff = DiffParams("s3a://lake/lake/order_details", schema, "s3a://lake/x.keys", 64, (3, 9))
    assert DiffParams.from_json(json.loads(json.dumps(diff.to_json()))) == diff
    # The customers keep a history beside their lake table, written as it is but unpartitioned,
    # with no change sets of its own.
    history = LakeResource(lake_bucket="lake", lake_prefix="x").history_params(CUSTOMERS, True)
    assert HistoryParams.from_json(json.loads(json.dumps(history.to_json()))) == history
    assert history.table_path == "s3a://lake/x/customers" and history.captured.history
    assert history.history.base_path == "s3a://lake/x/customers_history"
    assert history.history.table_name == "customers_history" and history.full_scan
    assert not history.history.change_sets and history.history.partition_field == ""
    assert set(APPS) == {"upsert", "order_items", "diff", "history"}
    # Only the diff app, which a check runs, reports without a materialization (entry.py).
    assert {a for a, p in APPS.items() if not p.REPORTS_MATERIALIZATION} == {"diff"}


def test_the_lake_resource_takes_the_apps_defaults():
    defaults = {f.name: f.default for f in fields(UpsertParams) if f.default is not MISSING}
    lake = LakeResource(lake_bucket="lake")
    for name in ("scheme", "max_line_mb", "full_scan_every"):
        assert getattr(lake, name) == defaults[name], name


def test_a_mismatch_names_the_fields_before_anything_runs():
    wire = _upsert().to_json()
    with pytest.raises(ValueError, match=r"unknown colour;.* missing topic;"):
        UpsertParams.from_json({**{k: v for k, v in wire.items() if k != "topic"}, "colour": 1})
    # run_app parses first: no Spark session is touched (None here).
    with pytest.raises(ValueError, match="missing captured, items"):
        run_app(None, None, "order_items", {"table_path": "s3a://x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown lake app 'merge'"):
        run_app(None, None, "merge", {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delete_mode"):
        UpsertParams.from_json({**wire, "table": {**wire["table"], "delete_mode": "soft-ish"}})


def test_delete_mode_is_hard_or_soft_on_both_sides():
    assert LakeResource(lake_bucket="lake", delete_mode="soft").upsert_params(
        CdcPipelineResource(raw_bucket="raw"), table=OUTBOX
    ).table.delete_mode == "soft"
    with pytest.raises(ValueError, match="delete_mode"):
        LakeResource(lake_bucket="lake", delete_mode="soft-ish")  # type: ignore[arg-type]


def test_the_per_run_figures_and_their_zeros_are_declared_once():
    """What a run read and did: the app reports each by name and type, and a run that starts no
    Spark reports the same names as zeros (cdc_lake/defs/lake/assets.py), never the last run's."""
    from cdc_lake.spark_apps.params import UpsertReport

    zeros = UpsertReport.per_run()
    assert set(zeros) == set(UpsertReport.PER_RUN)
    assert zeros["files_read"] == {"raw_value": 0, "type": "int"}
    assert zeros["backfilled_columns"] == {"raw_value": [], "type": "json"}
    assert zeros["orders_absent_from_snapshot"]["raw_value"] == 0
    ran = UpsertReport.per_run(files_read=3, change_set="12 rows")
    assert ran["files_read"]["raw_value"] == 3 and ran["change_set"]["raw_value"] == "12 rows"
    assert ran["events_read"]["raw_value"] == 0
    with pytest.raises(KeyError, match="not a per-run figure of the upsert app: colour"):
        UpsertReport.per_run(colour=1)
