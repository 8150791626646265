"""Runs that find nothing new: the last real figures and check results, carried forward.

When an asset can tell, without Spark, that its data is exactly what its latest
materialization describes (the Hudi table: same newest commit and no raw object past the
checkpoint; the order items: built from the table's newest commit), it materializes again with
that materialization's metadata, so the UI and everything that reads the latest materialization
(the sensor's checkpoint, ``matches_source``'s digest) keep seeing the last real commit. The
check results declared on the asset are the latest completed evaluation of each, unchanged,
since they were computed on the same data; ``carried_from_run`` names the run that computed
them. If a selected check was never evaluated (one added since), nothing is carried: the
run evaluates it.

``checkpoint_of`` reads where the lake is from a Hudi materialization's metadata, and
``lake_checkpoint`` from the latest one: the sensor, the lake asset's carried-forward run and the
raw stage's ``pending_raw_objects`` all start from it.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (
    COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES,
)

from cdc_lake.spark_apps.params import UpsertReport


def latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey
) -> tuple[str, dict[str, dg.MetadataValue]] | None:
    """The run id and metadata of the asset's latest materialization, or None."""
    event = instance.get_latest_materialization_event(key)
    mat = event.asset_materialization if event else None
    if event is None or mat is None:
        return None
    return event.run_id, dict(mat.metadata)


def carried_metadata(
    previous: tuple[str, dict[str, dg.MetadataValue]], **overrides: dg.MetadataValue
) -> dict[str, dg.MetadataValue]:
    run_id, meta = previous
    carried_from = meta.get("carried_from_run") or dg.MetadataValue.text(run_id)
    return {**meta, "carried_from_run": carried_from, **overrides}


def carried_check_results(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey
) -> list[dg.AssetCheckResult] | None:
    """The latest completed evaluation of each of the asset's checks selected in this run; None
    if one of them was never evaluated (a check added since): the run must evaluate it, since
    Dagster requires a result for every selected check."""
    out = []
    for key in context.selected_asset_check_keys:
        if key.asset_key != asset_key:
            continue
        # The latest record may be this run's own PLANNED one: only completed ones count.
        history = context.instance.event_log_storage.get_asset_check_execution_history(
            key, limit=1, status=COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES
        )
        event = history[0].event if history else None
        evaluation = event.asset_check_evaluation if event else None
        if evaluation is None:
            return None
        run = dg.MetadataValue.text(history[0].run_id)
        out.append(
            dg.AssetCheckResult(
                check_name=key.name,
                passed=evaluation.passed,
                severity=evaluation.severity,
                metadata={"carried_from_run": run, **evaluation.metadata},
            )
        )
    return out


def checkpoint_of(metadata: dict[str, dg.MetadataValue]) -> dict | None:
    """The checkpoint a Hudi materialization's metadata records, or None."""
    stored = metadata.get(UpsertReport.CHECKPOINT)
    value = stored.value if stored is not None else None
    return value if isinstance(value, dict) else None


def lake_checkpoint(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict | None:
    """The checkpoint of the Hudi asset ``key``'s latest materialization: where that lake table
    is."""
    latest = latest_materialization(instance, key)
    return checkpoint_of(latest[1]) if latest else None
