"""The raw files sensor, through build_sensor_context on the real S3 server."""

from __future__ import annotations

import json

import dagster as dg

from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES, raw_cdc_files_sensor
from cdc_lake.raw.synthetic import SyntheticLake, event
from cdc_lake.resources import local_resources
from cdc_lake.stack import LocalStack


def test_sensor_batches_new_files_skips_seen_ones_and_advances(local_stack: LocalStack, secret_env):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(s, raw_prefix=lake.raw_prefix)
    resources = {k: resources[k] for k in SENSOR_RESOURCES}  # no Spark for a tick
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor: str | None):
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
        return raw_cdc_files_sensor(ctx), ctx

    idle, _ = tick(None)
    assert isinstance(idle, dg.SkipReason)

    keys = [lake.put([event(i, 100, i)], partition=i % 2) for i in range(5)]
    first, _ = tick(None)
    assert isinstance(first, dg.SensorResult)
    assert len(first.run_requests or []) == 1  # five objects, one run
    request = (first.run_requests or [])[0]
    assert request.run_key == max(keys)
    assert request.tags["cdc_lake/new_objects"] == "5"
    cursor = first.cursor
    assert cursor is not None
    assert sorted(json.loads(cursor).values()) == sorted([max(keys[0::2]), max(keys[1::2])])

    seen, _ = tick(cursor)
    assert isinstance(seen, dg.SkipReason)  # already-seen files request nothing

    newer = lake.put([event(9, 100, 9)], partition=1)
    # While a refresh is in flight, the tick waits (Hudi takes one writer at a time).
    busy = instance.add_run(
        dg.DagsterRun(job_name="lake_refresh", status=dg.DagsterRunStatus.STARTED)
    )
    waiting, _ = tick(cursor)
    assert isinstance(waiting, dg.SkipReason) and busy.run_id in (waiting.skip_message or "")
    instance.report_run_canceled(busy)
    second, _ = tick(cursor)
    assert isinstance(second, dg.SensorResult)
    assert [r.run_key for r in second.run_requests or []] == [newer]
    assert second.cursor is not None
    assert json.loads(second.cursor)[newer.rsplit("/", 1)[0] + "/"] == newer
