"""The resource set for ``CDC_LAKE_ENV`` (default: the local stack), and the executor.

Runs execute in one process: every step then shares one Spark session, instead of each step
(and each asset check) starting a Spark JVM of its own in a subprocess.
"""

import dagster as dg

from cdc_lake.resources import build_resources


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=build_resources(), executor=dg.in_process_executor)
