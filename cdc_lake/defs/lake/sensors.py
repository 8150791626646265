"""A sensor on new raw CDC objects that requests a refresh of the Hudi table and order items.

Each tick lists only what is new: for every topic partition it resumes the S3 listing after the
last key it has seen (``StartAfter``). The cursor holds those keys, so a tick costs two
delimiter listings plus one listing per partition, whatever the number of objects already under
the prefix (``dagster_aws``'s helpers list the whole prefix each time; this does not).

All new objects of one tick become one run. Its ``run_key`` is the newest object key in the
batch; keys only grow, so an object is never requested twice. An idle tick returns a
``SkipReason``. So does a tick while a lake refresh is still queued or running: Hudi takes one
writer at a time, so the tick waits and leaves the cursor where it is. The next run picks up
those objects with the rest. The run ingests from the Hudi table's own checkpoint, so a run
that is skipped or fails loses nothing: the next run picks those files up.

Default state: **stopped**. Turn it on in the Dagster UI (Automation), or start it with
``dagster sensor start raw_cdc_files_sensor``.
"""

import datetime
import json

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.defs.lake.assets import HUDI_KEY
from cdc_lake.defs.marts.assets import ORDER_ITEMS_KEY
from cdc_lake.raw.objects import ListingStats, list_new_objects
from cdc_lake.resources import CdcPipelineResource

lake_refresh_job = dg.define_asset_job(
    "lake_refresh",
    selection=dg.AssetSelection.assets(HUDI_KEY, ORDER_ITEMS_KEY),
    description="Upsert new raw CDC files into Hudi, then rebuild the order items.",
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


@dg.sensor(
    job=lake_refresh_job,
    minimum_interval_seconds=10,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def raw_cdc_files_sensor(
    context: dg.SensorEvaluationContext, s3: S3Resource, cdc: CdcPipelineResource
) -> dg.SensorResult | dg.SkipReason:
    """Requests a lake refresh when new raw CDC objects land."""
    # A run created long ago that still looks in flight is most likely dead: don't wait on it.
    recent = datetime.datetime.now(datetime.UTC) - STALE_AFTER
    in_flight = context.instance.get_run_records(
        filters=dg.RunsFilter(
            job_name=lake_refresh_job.name, statuses=IN_FLIGHT, created_after=recent
        ),
        limit=1,
    )
    if in_flight:
        return dg.SkipReason(
            f"lake refresh run {in_flight[0].dagster_run.run_id} is still in flight; "
            "new objects wait for the next tick"
        )
    cursor: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    stats = ListingStats()
    new, advanced = list_new_objects(s3.get_client(), cdc.raw_bucket, cdc.raw_prefix, cursor, stats)
    if not new:
        return dg.SkipReason(
            f"no new objects under s3://{cdc.raw_bucket}/{cdc.raw_prefix} "
            f"({len(cursor)} partitions watched, {stats.list_requests} LIST requests)"
        )
    newest = max(o.key for o in new)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=newest,
                tags={
                    "cdc_lake/new_objects": str(len(new)),
                },
            )
        ],
        cursor=json.dumps(advanced, sort_keys=True),
    )
