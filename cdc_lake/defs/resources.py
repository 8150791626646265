"""The resource set for ``CDC_LAKE_ENV`` (default: the local stack)."""

import dagster as dg

from cdc_lake.resources import build_resources


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=build_resources())
