"""Faults 3 to 5: a server of the stack crashes (``kill -9``, with its process group) in the
middle of a steady workload, and starts again.

- 3, ``kafka``: the broker dies without a controlled shutdown. Debezium's producer and the
  sink's consumer lose their broker; the broker recovers its logs on restart, and Connect's
  group and its config, offset and status topics are served again only then.
- 4, ``s3``: S3Proxy dies. Uploads in flight are lost and the sink retries them.
- 5, ``postgres``: the postmaster and every backend die. PostgreSQL runs crash recovery on
  restart; Debezium's replication connection drops and resumes from its slot; the workload
  reconnects and goes on.

Each server stays down for a few seconds while the workload keeps trying, and
``LocalStack.up()`` starts it again. A crash is the harder case of a restart: nothing is flushed
or handed over on the way down. Proves: once the workload is done and everything is caught up,
the lake equals ``datalake.cdc_events`` row for row, with both connectors RUNNING again without
anyone's help.
"""

from __future__ import annotations

import time

import pytest

from cdc_lake.stack import LocalStack
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, kill_service

DOWN_S = 4.0
BEFORE = 20  # changes made before the server goes down
NAMES = {"kafka": "3 kafka broker kill -9, restart", "s3": "4 s3 server kill -9, restart",
         "postgres": "5 postgresql kill -9, restart"}  # fmt: skip


@pytest.mark.parametrize("service", ["kafka", "s3", "postgres"])
def test_server_killed_mid_workload(
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
        kill_service(local_stack, service)
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
