"""One refresh job per captured table (its declaration names it: ``lake_refresh`` for the
outbox, ``<table>_lake_refresh`` for the others): the table's Hudi asset, then every asset built
from it (the outbox's order items), in one run.

The raw-files sensor (``cdc_lake/defs/lake/sensors.py``) requests it for each batch of new raw
objects, and ``cdc-lake refresh`` runs it after catching up. It ingests from the Hudi table's own
checkpoint, so a run that is skipped or fails loses nothing, and a rerun with nothing new
commits nothing.

``lake_full_check`` refreshes every captured table's Hudi table with ``full_scan`` on: the
checks rescan each whole table rather than follow the change feed, and compare the two. Its
schedule runs it nightly once turned on. Every table's upsert also rescans by itself every
``LakeResource.full_scan_every`` commits, and on request (run config ``full_scan`` on its
refresh job).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from cdc_lake.defs.keys import KEYS, TableKeys

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )


def hudi_op(key: dg.AssetKey) -> str:
    """A Hudi asset's op: run config reaches the asset through it."""
    return "__".join(key.path)


def refresh_job(k: TableKeys) -> UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        k.refresh_job,
        # The table's Hudi asset and what is built from it: a mart never lags its table's run.
        selection=dg.AssetSelection.assets(k.hudi).downstream(),
        description=f"Upsert the new raw CDC files of {k.table.source} into its Hudi table, then "
        "rebuild what is built from it.",
    )


refresh_jobs = {k.table: refresh_job(k) for k in KEYS}

lake_full_check_job = dg.define_asset_job(
    "lake_full_check",
    selection=dg.AssetSelection.assets(*(k.hudi for k in KEYS)),
    description="Refresh every Hudi table and rescan it in full: the key and delete checks and "
    "the live-row digest from the whole table, compared with the state kept from the change "
    "feed (the incremental_matches_rescan check).",
    config={"ops": {hudi_op(k.hudi): {"config": {"full_scan": True}} for k in KEYS}},
)

# Off by default, like the sensor: turn it on in the UI (Automation) for a nightly rescan.
lake_full_check_schedule = dg.ScheduleDefinition(
    job=lake_full_check_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
