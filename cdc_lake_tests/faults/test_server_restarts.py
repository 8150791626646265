"""Faults 3 to 5: a server of the stack restarted in the middle of a steady workload.

- 3, ``kafka``: the broker stops (SIGTERM, a controlled shutdown) and starts again. Debezium's
  producer and the sink's consumer lose their broker; Connect's group and its config, offset and
  status topics are served again only after the restart.
- 4, ``s3``: S3Proxy stops and starts. The sink's uploads fail meanwhile and are retried.
- 5, ``postgres``: PostgreSQL stops (fast shutdown) and starts. Debezium's replication
  connection drops and resumes from its slot; the workload reconnects and goes on.

Each server stays down for a few seconds while the workload keeps trying, and
``LocalStack.up()`` restarts it. Proves: once the workload is done and everything is caught up,
the lake equals ``datalake.cdc_events`` row for row, with both connectors RUNNING again without
anyone's help.
"""

from __future__ import annotations

import time

import pytest

from cdc_lake.stack import LocalStack
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, stop_service

DOWN_S = 4.0
BEFORE = 20  # changes made before the server goes down
NAMES = {"kafka": "3 kafka broker restart", "s3": "4 s3 server restart",
         "postgres": "5 postgresql restart"}  # fmt: skip


@pytest.mark.parametrize("service", ["kafka", "s3", "postgres"])
def test_server_restarted_mid_workload(
    service: str, make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, spark
):
    fault_record.fault = NAMES[service]
    p: FaultPipeline = make_pipeline(f"restart_{service}")
    with fault_record.phase("start"):
        p.start()
    workload = p.workload(changes=60, rate=4, seed=3)
    deadline = time.monotonic() + 60
    while workload.steps < BEFORE and workload.is_alive():
        assert time.monotonic() < deadline, "the workload did not get going"
        time.sleep(0.1)

    with fault_record.phase("restart"):
        stop_service(local_stack, service)
        time.sleep(DOWN_S)  # down for a while, with the workload still trying
        local_stack.up()
        p.wait_running()
    with fault_record.phase("catch up"):
        p.catch_up()
    with fault_record.phase("refresh"):
        p.refresh()
    diff = p.compare(spark)
    fault_record.done(
        p,
        diff,
        f"{service} down {DOWN_S:.0f}s after {BEFORE} changes; workload reconnects "
        f"{workload.reconnects}",
    )
    assert diff.clean, diff.describe()
