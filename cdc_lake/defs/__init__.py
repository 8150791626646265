"""Dagster definitions, one folder per pipeline stage; loaded by ``load_from_defs_folder``.

All the assets are in one group, so the lineage opens on the whole pipeline (each captured
table's chain, and the order items) rather than on collapsed boxes; each asset's stage is its
``stage`` tag and its folder here.
"""

import datetime
from typing import NotRequired, TypedDict

import dagster as dg

PIPELINE_GROUP = "cdc_pipeline"
OWNERS = ["team:data-platform"]


# How fresh the lake and the order items should be: with the sensor on, a refresh follows each
# sink flush within a minute, so an hour without one means the pipeline has stopped. The
# daemon (`dg dev` runs it) evaluates the policy and the UI shows it on the asset's page.
LAKE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=datetime.timedelta(hours=1), warn_window=datetime.timedelta(minutes=15)
)


class StageAttrs(TypedDict):
    group_name: str
    owners: list[str]
    tags: dict[str, str]
    freshness_policy: NotRequired[dg.FreshnessPolicy]


def stage_attrs(
    module: str, *, owners: list[str] = OWNERS, fresh: bool = False
) -> StageAttrs:
    """What every asset of the pipeline carries, for ``@dg.asset(**stage_attrs(__name__))``: the
    group, its owners, the ``stage`` tag (the folder of ``module``, ``cdc_lake.defs.<stage>...``)
    and, for the lake's stages, the freshness policy."""
    parts = module.split(".")
    if parts[:2] != ["cdc_lake", "defs"] or len(parts) < 4:
        raise ValueError(f"{module!r} is not a module of a stage folder under cdc_lake.defs")
    attrs: StageAttrs = {
        "group_name": PIPELINE_GROUP,
        "owners": owners,
        "tags": {"stage": parts[2]},
    }
    if fresh:
        attrs["freshness_policy"] = LAKE_FRESHNESS
    return attrs


def stage_spec(
    module: str, key: dg.AssetKey, kinds: set[str], description: str, deps: list[dg.AssetKey]
) -> dg.AssetSpec:
    """An asset of the pipeline at the stage of ``module`` (the folder that defines it)."""
    return dg.AssetSpec(key, deps=deps, description=description, kinds=kinds, **stage_attrs(module))
