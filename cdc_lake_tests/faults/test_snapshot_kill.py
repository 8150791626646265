"""Fault 6: Connect killed with ``kill -9`` during Debezium's initial snapshot.

A fresh connector on a database with a few thousand orders takes seconds to snapshot the
outbox, while a workload changes it. The test polls the topic's end offsets every 50 ms and
kills the worker once part of the snapshot is in Kafka; the topic then holds fewer records than
the outbox has rows, which proves the snapshot was cut short. ``LocalStack.up()`` restarts
Connect: Debezium finds an unfinished snapshot and takes it again, then streams from its slot.
If the deployment that was waiting for the snapshot failed with the worker, it is run again, as
an operator would.

Proves: a snapshot cut short and taken again (duplicates and changes made in between included)
loses no order, duplicates none and leaves none stale. Debezium takes the interrupted snapshot
again from a new point and streams from there, so an order deleted between the two snapshots
gets no delete event; the lake removes it because the completed second snapshot no longer holds
it (``cdc_lake/lake/snapshots.py``), and ``matches_source`` passes.
"""

from __future__ import annotations

import threading
import time

import dagster as dg
import psycopg2

from bench.outbox import cdc_events_hudi, matches_source
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, kill_service

SCALE = 5  # about 4,100 orders
CHANGES = 60


def outbox_rows(pipeline: FaultPipeline) -> int:
    conn = psycopg2.connect(pipeline.dsn, connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM datalake.cdc_events")
            row = cur.fetchone()
            assert row is not None
            return int(row[0])
    finally:
        conn.close()


def test_connect_killed_during_initial_snapshot(
    make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, spark
):
    fault_record.fault = "6 connect kill -9 during the initial snapshot"
    p: FaultPipeline = make_pipeline("snapshot_kill", sample_scale=SCALE, flush_records=500)
    with fault_record.phase("source"):
        p.create_source()
    rows = outbox_rows(p)

    results: list[dg.ExecuteInProcessResult] = []
    deploy = threading.Thread(
        target=lambda: results.append(
            dg.materialize(
                [cdc_events_topic, raw_cdc_files], resources=p.resources, raise_on_error=False
            )
        ),
        daemon=True,
    )
    p.workload(changes=CHANGES, rate=4, seed=6)
    deploy.start()
    at_kill = 0
    with fault_record.phase("kill"):
        deadline = time.monotonic() + 180
        while at_kill < rows // 4:
            assert time.monotonic() < deadline, f"the snapshot did not start ({at_kill} records)"
            time.sleep(0.05)
            try:
                at_kill = sum(
                    end_offsets(p.kafka_conf, p.cdc.topic_of(OUTBOX), timeout_s=2).values()
                )
            except KeyError:
                continue  # no topic yet
        kill_service(local_stack, "connect")
        after_kill = sum(end_offsets(p.kafka_conf, p.cdc.topic_of(OUTBOX)).values())
    # Even if every change deleted a row, a complete snapshot would hold more.
    assert after_kill < rows - CHANGES, f"snapshot complete ({after_kill}/{rows}) at the kill"

    with fault_record.phase("restart"):
        local_stack.up()
        deploy.join(600)
        assert not deploy.is_alive(), "the connectors' deployment did not finish"
        if not results[0].success:
            p.deploy_connectors()  # it failed with the worker; run it again
    with fault_record.phase("catch up"):
        p.catch_up()
    with fault_record.phase("refresh"):
        swept = p.refresh()["orders_absent_from_snapshot"]
    diff = p.compare(spark)
    fault_record.done(
        p, diff, f"killed with {after_kill} of {rows} snapshot records in Kafka; {swept} orders"
        " absent from the completed snapshot deleted",
    )  # fmt: skip
    assert diff.clean, diff.describe()
    checked = dg.materialize(
        [cdc_events_hudi, matches_source], resources=p.resources, raise_on_error=False
    )
    verdict = next(e for e in checked.get_asset_check_evaluations()
                   if e.check_name == "matches_source")  # fmt: skip
    assert verdict.passed, verdict.metadata
