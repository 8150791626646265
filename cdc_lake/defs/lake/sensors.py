"""A sensor on new raw CDC objects that requests a refresh of the Hudi table and order items
(a run of the ``lake_refresh`` job, ``cdc_lake/defs/lake/jobs.py``); and one per other captured
table, ``<table>_raw_files_sensor``, on its own topic's objects, requesting its own refresh job.

What counts as new is decided the way the refresh itself decides it: from the lake's own
checkpoint (the last Kafka offset per partition, as the newest Hudi materialization reports it),
each partition listed from the object that held it (``StartAfter``). So the first tick of a
sensor just turned on starts where the lake is, a tick never requests objects the lake already
holds, and a raw object re-cut under the same key (a sink restart) is noticed by its ETag. A
tick costs one delimiter listing plus one listing per partition, whatever the number of objects
already under the prefix (``dagster_aws``'s helpers list the whole prefix each time).

All pending objects of one tick become one run. Its ``run_key`` is derived from them (the
newest key and its ETag), so the same pending work is never requested twice; the cursor keeps
the last key requested. An idle tick returns a ``SkipReason``. So does a tick while a lake
refresh is still queued or running: Hudi takes one writer at a time, so the tick waits. The run
ingests from the Hudi table's own checkpoint, so a run that is skipped or fails loses nothing.

Default state: **stopped**. Turn it on in the Dagster UI (Automation), or start it with
``dagster sensor start raw_cdc_files_sensor``.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.defs.lake.jobs import refresh_jobs
from cdc_lake.defs.unchanged import lake_checkpoint
from cdc_lake.lake.checkpoint import pending
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.streaming import CdcPipelineResource

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

STALE_AFTER = datetime.timedelta(minutes=30)
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


# What the sensor uses; evaluating it needs only these (no Spark).
SENSOR_RESOURCES = ("s3", "cdc")


def raw_files_sensor(k: TableKeys, job: UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    """The sensor of one captured table's raw objects, requesting ``job``."""

    @dg.sensor(
        name=k.sensor,
        job=job,
        # dagster-daemon's sensor loop runs every 5 s: a tick on each loop. A change then waits at
        # most 5 s past its raw object for a tick (end-to-end latency, docs/benchmarks.md); an idle
        # tick costs one delimiter listing plus one per partition.
        minimum_interval_seconds=5,
        default_status=dg.DefaultSensorStatus.STOPPED,
    )
    def _sensor(
        context: dg.SensorEvaluationContext, s3: S3Resource, cdc: CdcPipelineResource
    ) -> dg.SensorResult | dg.SkipReason:
        """Requests a lake refresh when new raw CDC objects land."""
        topic = cdc.topic_of(k.table)
        # A run created long ago that still looks in flight is most likely dead: don't wait on it.
        recent = datetime.datetime.now(datetime.UTC) - STALE_AFTER
        in_flight = context.instance.get_run_records(
            filters=dg.RunsFilter(job_name=job.name, statuses=IN_FLIGHT, created_after=recent),
            limit=1,
        )
        if in_flight:
            return dg.SkipReason(
                f"lake refresh run {in_flight[0].dagster_run.run_id} is still in flight; "
                "new objects wait for the next tick"
            )
        plan = pending(
            s3.get_client(),
            cdc.raw_bucket,
            RawLayout(cdc.raw_prefix, topic),
            lake_checkpoint(context.instance, k.hudi),
        )
        if not plan.objects:
            return dg.SkipReason(
                f"no raw objects past the lake's checkpoint under s3://{cdc.raw_bucket}/"
                f"{cdc.raw_prefix}{topic}/ ({plan.list_requests} LIST requests"
                + (f"; {len(plan.ignored)} keys ignored as not raw objects" if plan.ignored else "")
                + ")"
            )
        newest = max(plan.objects)
        run_key = f"{newest.key}@{newest.etag}"
        previous = json.loads(context.cursor) if context.cursor else {}
        if previous.get("run_key") == run_key:
            return dg.SkipReason(
                f"{len(plan.objects)} raw objects up to {newest.key} were requested already; "
                "waiting for the lake to commit them"
            )
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=run_key,
                    tags={"cdc_lake/new_objects": str(len(plan.objects))},
                )
            ],
            cursor=json.dumps({"run_key": run_key}, sort_keys=True),
        )

    return _sensor


# One per captured table.
table_sensors = {k.table: raw_files_sensor(k, refresh_jobs[k.table]) for k in KEYS}
raw_files_sensors = list(table_sensors.values())
