"""The raw files sensor, through build_sensor_context on the real S3 server, with the lake
materialised for real in between: it starts from the lake's checkpoint, requests each piece
of work once, notices a re-cut object, and waits while a refresh is in flight."""

from __future__ import annotations

import json

import dagster as dg

from bench.outbox import cdc_events_hudi, raw_cdc_files_sensor
from bench.synthetic import SyntheticLake, event
from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES
from cdc_lake.resources.local import local_resources
from cdc_lake.stack import LocalStack


def test_sensor_requests_what_the_lake_lacks_once(local_stack: LocalStack, secret_env):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    resources = local_resources(
        s, lake={"lake_prefix": f"synthetic/{lake.name}"}, raw_prefix=lake.raw_prefix
    )
    sensor_resources = {k: resources[k] for k in SENSOR_RESOURCES}  # no Spark for a tick
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor: str | None):
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=sensor_resources)
        return raw_cdc_files_sensor(ctx)

    def refresh() -> None:
        assert dg.materialize([cdc_events_hudi], resources=resources, instance=instance).success

    idle = tick(None)
    assert isinstance(idle, dg.SkipReason) and "no raw objects" in (idle.skip_message or "")

    keys = [lake.put([event(i, 100, i)], partition=i % 2) for i in range(5)]
    first = tick(None)
    assert isinstance(first, dg.SensorResult)
    assert len(first.run_requests or []) == 1  # five objects, one run
    request = (first.run_requests or [])[0]
    assert request.run_key is not None and request.run_key.startswith(max(keys) + "@")
    assert request.tags["cdc_lake/new_objects"] == "5"
    assert first.cursor is not None
    assert json.loads(first.cursor) == {"run_key": request.run_key}

    again = tick(first.cursor)  # the same work is not requested twice
    assert isinstance(again, dg.SkipReason) and "requested already" in (again.skip_message or "")

    refresh()
    # The lake holds everything: nothing is pending, even for a sensor just turned on.
    for cursor in (first.cursor, None):
        caught_up = tick(cursor)
        assert isinstance(caught_up, dg.SkipReason)
        assert "no raw objects past the lake's checkpoint" in (caught_up.skip_message or "")

    newer = lake.put([event(9, 200, 9)], partition=1)
    # While a refresh is in flight, the tick waits (Hudi takes one writer at a time).
    busy = instance.add_run(
        dg.DagsterRun(job_name="lake_refresh", status=dg.DagsterRunStatus.STARTED)
    )
    waiting = tick(first.cursor)
    assert isinstance(waiting, dg.SkipReason) and busy.run_id in (waiting.skip_message or "")
    instance.report_run_canceled(busy)
    second = tick(first.cursor)
    assert isinstance(second, dg.SensorResult)
    assert [r.tags["cdc_lake/new_objects"] for r in second.run_requests or []] == ["1"]
    assert (second.run_requests or [])[0].run_key.startswith(newer + "@")  # type: ignore[union-attr]

    refresh()
    assert isinstance(tick(second.cursor), dg.SkipReason)
    # The sink re-cuts that object under the same key with one more record: new work.
    position = lake.source.layout.parse(newer)
    assert position is not None
    lake.put([event(9, 200, 9), event(10, 300, 10)], partition=1, start=position[1])
    recut = tick(second.cursor)
    assert isinstance(recut, dg.SensorResult)
    recut_key = (recut.run_requests or [])[0].run_key
    assert recut_key is not None and recut_key.startswith(newer + "@")
    assert recut_key != (second.run_requests or [])[0].run_key
