"""The ``lake_refresh`` Dagster job: the Hudi table, then the order items, in one run.

The raw-files sensor (``cdc_lake/defs/lake/sensors.py``) requests it for each batch of new raw
objects, and ``cdc-lake refresh`` runs it after catching up. It ingests from the Hudi table's own
checkpoint, so a run that is skipped or fails loses nothing, and a rerun with nothing new
commits nothing.

``lake_full_check`` does the same for the Hudi table with ``full_scan`` on: the checks rescan the
whole table rather than follow the change feed, and compare the two. Its schedule runs it nightly
once turned on; the upsert also rescans by itself every ``LakeResource.full_scan_every``
commits.
"""

import dagster as dg

from cdc_lake.defs.keys import HUDI_KEY, ORDER_ITEMS_KEY

# The Hudi asset's op: run config reaches the asset through it.
HUDI_OP = "__".join(HUDI_KEY.path)

lake_refresh_job = dg.define_asset_job(
    "lake_refresh",
    selection=dg.AssetSelection.assets(HUDI_KEY, ORDER_ITEMS_KEY),
    description="Upsert new raw CDC files into Hudi, then rebuild the order items.",
)

lake_full_check_job = dg.define_asset_job(
    "lake_full_check",
    selection=dg.AssetSelection.assets(HUDI_KEY),
    description="Refresh the Hudi table and rescan it in full: the key and delete checks and the "
    "live-row digest from the whole table, compared with the state kept from the change feed "
    "(the incremental_matches_rescan check).",
    config={"ops": {HUDI_OP: {"config": {"full_scan": True}}}},
)

# Off by default, like the sensor: turn it on in the UI (Automation) for a nightly rescan.
lake_full_check_schedule = dg.ScheduleDefinition(
    job=lake_full_check_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
