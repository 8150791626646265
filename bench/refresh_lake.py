"""What the refresh benchmarks (``empty``, ``refresh``) share: a synthetic lake of ``orders``
orders on the stack's S3 server, with its own raw prefix and tables, the local resources
pointed at it, and the assets the ``lake_refresh`` job runs (the Hudi table, then the order
items)."""

from __future__ import annotations

import uuid
from typing import Any

import dagster as dg

from bench.outbox import HUDI_KEY, cdc_events_hudi
from bench.synthetic import SyntheticLake, event
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.resources.local import local_resources
from cdc_lake.spark_apps.params import UpsertReport
from cdc_lake.stack import LocalStack

ASSETS = [cdc_events_hudi, order_items]


def synthetic_lake(
    stack: LocalStack, client: Any, orders: int, name: str, **lake_settings: Any
) -> tuple[SyntheticLake, dict[str, Any]]:
    """``orders`` orders (one insert each, in 10 raw files) and resources that refresh them,
    with these settings of the lake resource (e.g. ``table_type``) over the defaults."""
    s = stack.settings
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket, name=f"{name}-{uuid.uuid4().hex[:6]}")
    per_file = max(1, orders // 10)
    for start in range(0, orders, per_file):
        lake.put([event(i, 100, i + 1) for i in range(start, min(orders, start + per_file))])
    resources = local_resources(
        s,
        lake={
            "lake_prefix": f"synthetic/{lake.name}",
            "order_items_prefix": f"synthetic/{lake.name}/order_items",
            **lake_settings,
        },
        raw_prefix=lake.raw_prefix,
        spark="in_process",  # the benchmark's own session, already up
    )
    return lake, resources


def new_commit(result: dg.ExecuteInProcessResult) -> bool:
    """Whether the run's Hudi materialization made a new commit."""
    mat = next(
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == HUDI_KEY
    )
    return bool(mat.metadata[UpsertReport.NEW_COMMIT].value)
