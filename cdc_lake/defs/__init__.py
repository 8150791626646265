"""Dagster definitions, one folder per pipeline stage; loaded by ``load_from_defs_folder``.

All the assets are in one group, so the lineage opens on the whole pipeline (each captured
table's chain, and the order items) rather than on collapsed boxes; each asset's stage is its
``stage`` tag and its folder here.
"""

import datetime

import dagster as dg

PIPELINE_GROUP = "cdc_pipeline"
OWNERS = ["team:data-platform"]


def stage_spec(
    key: dg.AssetKey, stage: str, kinds: set[str], description: str, deps: list[dg.AssetKey]
) -> dg.AssetSpec:
    """An asset of the pipeline's group at ``stage`` (the folder that defines it)."""
    return dg.AssetSpec(
        key,
        deps=deps,
        description=description,
        group_name=PIPELINE_GROUP,
        kinds=kinds,
        owners=OWNERS,
        tags={"stage": stage},
    )


# How fresh the lake and the order items should be: with the sensor on, a refresh follows each
# sink flush within a minute, so an hour without one means the pipeline has stopped. The
# daemon (`dg dev` runs it) evaluates the policy and the UI shows it on the asset's page.
LAKE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=datetime.timedelta(hours=1), warn_window=datetime.timedelta(minutes=15)
)
