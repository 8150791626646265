"""The resource set for ``CDC_LAKE_ENV`` (default: the local stack), and the executor.

The resources are ``pinned``: no run config can change an endpoint or a secret's source.

Runs execute in one process: every step then shares one Spark session, instead of each step
(and each asset check) starting a Spark JVM of its own in a subprocess.
"""

import dagster as dg

from cdc_lake.resources import build_resources, pinned


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=pinned(build_resources()), executor=dg.in_process_executor)
