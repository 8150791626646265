"""The history asset's check (``cdc_lake/defs/lake/history.py``): the open versions' digest
against the digest the lake asset's latest materialization reported, at the same commit. The
check runs on the real stack in ``cdc_lake_tests/ingestion/test_every_event.py`` and the Spark
kill fault test; here its verdicts, from a Dagster instance with recorded materializations."""

from __future__ import annotations

from typing import Any

import dagster as dg

from cdc_lake.defs.keys import KEYS, table_keys
from cdc_lake.defs.lake.history import history_tables, matches_lake
from cdc_lake.source.captured import CUSTOMERS, OUTBOX
from cdc_lake.spark_apps.params import HistoryReport, UpsertReport

K = table_keys(CUSTOMERS)


def _digest(instant: str, content: int, columns: tuple[str, ...] = ("phone:hashed",)) -> dict:
    return {"version": 3, "buckets": 64, "columns": list(columns), "rows": 2,
            "digest": {"5": [2, 10, 58, content]}, "instant": instant}  # fmt: skip


def _history_meta(reached: str, digest: dict[str, Any]) -> dict[str, Any]:
    return {HistoryReport.LAKE_COMMIT: dg.MetadataValue.text(reached),
            HistoryReport.OPEN_DIGEST: dg.MetadataValue.json(digest)}  # fmt: skip


def _instance_with_lake_digest(digest: dict[str, Any] | None) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.ephemeral()
    if digest is not None:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                K.hudi, metadata={UpsertReport.LIVE_KEY_DIGEST: dg.MetadataValue.json(digest)}
            )
        )
    return instance


def test_only_tables_that_keep_a_history_have_one():
    assert CUSTOMERS.history and not OUTBOX.history
    assert set(history_tables) == {k.table for k in KEYS if k.table.history} == {CUSTOMERS}
    assert K.history == dg.AssetKey(["hudi", "datalake", "customers_history"])
    assert table_keys(OUTBOX).history is None


def test_the_check_passes_only_on_equal_digests_at_the_same_commit():
    instance = _instance_with_lake_digest(_digest("20261205010101000", 99))
    same = matches_lake(instance, K, _history_meta("20261205010101000", _digest("x", 99)))
    assert same.passed and same.metadata["current_versions"].value == 2
    stale = matches_lake(instance, K, _history_meta("20261205010101000", _digest("x", 98)))
    assert not stale.passed and stale.metadata["differing_buckets"].value == {
        "5": {"kind": "content", "source_rows": 2, "lake_rows": 2}
    }
    # The lake moved on without the history (or the other way round): no verdict but a fail.
    later = matches_lake(instance, K, _history_meta("20261205020202000", _digest("x", 99)))
    assert not later.passed and "materialize the Hudi table" in str(later.metadata["reason"].value)
    # Digests over other columns do not compare.
    other = _digest("x", 99, ("phone:text",))
    cols = matches_lake(instance, K, _history_meta("20261205010101000", other))
    assert not cols.passed and "not comparable" in str(cols.metadata["reason"].value)
    # No lake materialization at all.
    empty = _instance_with_lake_digest(None)
    assert not matches_lake(empty, K, _history_meta("20261205010101000", _digest("x", 99))).passed
