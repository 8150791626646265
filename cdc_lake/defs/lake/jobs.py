"""The ``lake_refresh`` Dagster job: the Hudi table, then the order items, in one run.

The raw-files sensor (``cdc_lake/defs/lake/sensors.py``) requests it for each batch of new raw
objects, and ``cdc-lake refresh`` runs it after catching up. It ingests from the Hudi table's own
checkpoint, so a run that is skipped or fails loses nothing, and a rerun with nothing new
commits nothing.
"""

import dagster as dg

from cdc_lake.defs.keys import HUDI_KEY, ORDER_ITEMS_KEY

lake_refresh_job = dg.define_asset_job(
    "lake_refresh",
    selection=dg.AssetSelection.assets(HUDI_KEY, ORDER_ITEMS_KEY),
    description="Upsert new raw CDC files into Hudi, then rebuild the order items.",
)
