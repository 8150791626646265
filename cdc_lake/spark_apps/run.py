"""The lake's Spark apps, by name, as plain functions of a SparkSession and JSON parameters.

The same functions run in three places: in the Dagster process on local Spark (the local Spark
launcher), as a step on an EMR cluster and as an EMR Serverless job run (both through
``cdc_lake/spark_apps/entry.py`` and Dagster Pipes). Parameters and results are JSON
(``cdc_lake/spark_apps/report.py``), so they travel unchanged through Pipes extras and messages.

- ``upsert``: the raw files into the Hudi table, then its checks
  (``cdc_lake/spark_apps/upsert.py``).
- ``diff``: the rows that differ from the source in the digest buckets a check found different
  (``cdc_lake/spark_apps/diff.py``); it writes nothing.
- ``order_items``: the order items brought up to the table's newest commit from its change
  feed (or rebuilt from its snapshot), then their checks (``cdc_lake/spark_apps/order_items.py``).
- ``history``: a captured table's history table, every version of its rows, brought up to the
  lake table's newest commit (``cdc_lake/spark_apps/history.py``).

Every app runs with the session's most used JVM names pinned
(``cdc_lake/spark_apps/jvm_names.py``). An unknown app name, or parameters that do not match
the app's (``cdc_lake/spark_apps/params.py``), raise ``ValueError`` before anything is read or
written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cdc_lake.spark_apps import jvm_names
from cdc_lake.spark_apps.diff import run_diff
from cdc_lake.spark_apps.history import run_history
from cdc_lake.spark_apps.order_items import run_order_items
from cdc_lake.spark_apps.params import (
    APPS,
    DiffParams,
    HistoryParams,
    OrderItemsParams,
    UpsertParams,
)
from cdc_lake.spark_apps.report import AppReport
from cdc_lake.spark_apps.upsert import run_upsert

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_app(spark: SparkSession, s3_client: Any, app: str, params: Mapping[str, Any]) -> AppReport:
    """The app ``app`` with its JSON ``params`` (as the wire carries them)."""
    if app not in APPS:
        raise ValueError(f"unknown lake app {app!r}: expected one of {', '.join(sorted(APPS))}")
    typed = APPS[app].from_json(params)
    jvm_names.pin(spark)  # fewer py4j round trips for every app on this session
    if isinstance(typed, UpsertParams):
        return run_upsert(spark, s3_client, typed)
    if isinstance(typed, DiffParams):
        return run_diff(spark, typed)
    if isinstance(typed, HistoryParams):
        return run_history(spark, typed)
    assert isinstance(typed, OrderItemsParams)
    return run_order_items(spark, typed)
