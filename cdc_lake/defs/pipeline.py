"""``cdc_pipeline``: the whole pipeline in one run, every stage's assets with their checks,
from the outbox to the order items, in lineage order. ``cdc-lake demo`` starts with it (tagged
``cdc_lake/trigger=cdc-lake demo``), so its first run has a name in the UI; from the UI it
rebuilds everything the same way. It is as idempotent as each asset: applying the SQL, deploying
the connectors and upserting the raw files again changes nothing that is already there."""

import dagster as dg

from cdc_lake.defs import PIPELINE_GROUP

cdc_pipeline_job = dg.define_asset_job(
    PIPELINE_GROUP,
    selection=dg.AssetSelection.groups(PIPELINE_GROUP),
    description="Every asset of the pipeline with its checks: the outbox, the topics, the raw "
    "files, the Hudi tables and the order items.",
)
