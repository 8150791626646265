"""Kafka Connect with two workers in one group, and the one running the S3 sink killed.

A second worker (``connect_2``, ``CDC_LAKE_CONNECT_WORKERS=2``) joins the session stack's
Connect group for this test, as MSK Connect runs several; the group assigns connectors and tasks
to both (the session's other connectors too, which wait up to ``REBALANCE_DELAY_MS`` for a
worker again when ``connect_2`` stops at the end). While a workload runs and the sink's consumer
group is behind the topic (records not yet committed by the sink), the worker that runs the
sink's task is killed with ``kill -9``, with its process group.

Proves: the group notices (session timeout), holds the dead worker's tasks for
``scheduled.rebalance.max.delay.ms``, then runs them on the other worker, which resumes the sink
from its group's last committed offsets. The killed worker starts again and rejoins. After
catch-up the lake equals the source with 0 lost, 0 duplicated and 0 stale: a record the dead
task had written to S3 without committing its offset is written again, the same change twice,
which the upsert's merge rule applies once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import KafkaConnect
from cdc_lake.streaming.connect_client import ConnectClient
from cdc_lake.streaming.topics import committed_offsets, end_offsets
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, kill_service

BEFORE = 15  # changes made before the kill


@pytest.fixture
def second_worker(local_stack: LocalStack) -> Iterator[LocalStack]:
    stack = LocalStack(replace(local_stack.settings, connect_workers=2), False, ["connect_2"])
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def workers_of(client: ConnectClient, name: str) -> set[str]:
    """The workers (host:port) running the connector's tasks."""
    status = client.status(name) or {}
    return {t["worker_id"] for t in status.get("tasks", []) if t.get("state") == "RUNNING"}


def test_the_sink_s_worker_killed_while_changes_flow(
    make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, second_worker: LocalStack,
    spark: Any,
):  # fmt: skip
    fault_record.fault = "kafka connect worker kill -9 (of 2), tasks move, restart"
    p: FaultPipeline = make_pipeline("connect_worker")
    workers = {
        svc.name: (stack, svc)
        for stack in (local_stack, second_worker)
        for svc in stack.services
        if isinstance(svc, KafkaConnect)
    }
    assert len(workers) == 2
    by_id = {f"{s.s.host}:{s.s.port(name)}": name for name, (_, s) in workers.items()}
    with fault_record.phase("start"):
        p.start()
    sink, topic = p.cdc.sink_connector_name, p.cdc.topic_of(OUTBOX)
    workload = p.workload(changes=60, rate=4, seed=5)
    deadline = time.monotonic() + 90
    behind = 0
    while workload.steps < BEFORE or behind == 0:
        assert time.monotonic() < deadline and workload.is_alive(), "no changes in flight"
        ends = end_offsets(p.kafka_conf, topic)
        done = committed_offsets(p.kafka_conf, p.cdc.sink_consumer_group, topic, list(ends))
        behind = sum(max(0, e - done.get(part, 0)) for part, e in ends.items())
        time.sleep(0.1)

    with fault_record.phase("kill"):
        running = workers_of(workers["connect"][1].client(), sink)
        assert len(running) == 1, running
        victim = by_id[running.pop()]
        survivor = next(n for n in workers if n != victim)
        stack, _ = workers[victim]
        kill_service(stack, victim)
    with fault_record.phase("tasks move"):
        client = workers[survivor][1].client()
        target = {i for i, n in by_id.items() if n == survivor}
        killed_at = time.monotonic()
        while workers_of(client, sink) != target:
            assert time.monotonic() < killed_at + 120, (
                f"the task never moved: {client.status(sink)}"
            )
            time.sleep(1)
        moved_after = time.monotonic() - killed_at
    with fault_record.phase("restart"):
        stack.up()
        p.wait_running()
    with fault_record.phase("catch up"):
        p.catch_up()
    with fault_record.phase("refresh"):
        p.refresh()
    diff = p.compare(spark)
    fault_record.done(
        p, diff, f"{victim} killed with the sink's task, {behind} records uncommitted; the task "
        f"ran on {survivor} {moved_after:.0f}s later"
    )  # fmt: skip
    assert diff.clean, diff.describe()
