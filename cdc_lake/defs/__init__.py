"""Dagster definitions, one folder per pipeline stage; loaded by ``load_from_defs_folder``.

All five assets are in one group, so the lineage opens on the whole pipeline rather than on
five collapsed boxes; each asset's stage is its ``stage`` tag and its folder here.
"""

import datetime

import dagster as dg

PIPELINE_GROUP = "cdc_pipeline"

# How fresh the lake and the order items should be: with the sensor on, a refresh follows each
# sink flush within a minute, so an hour without one means the pipeline has stopped. The
# daemon (`dg dev` runs it) evaluates the policy and the UI shows it on the asset's page.
LAKE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=datetime.timedelta(hours=1), warn_window=datetime.timedelta(minutes=15)
)
