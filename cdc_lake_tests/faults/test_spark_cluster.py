"""The lake's Spark apps on a Spark standalone cluster, a worker killed included.

A master and two workers (``CDC_LAKE_LOCAL_SPARK=cluster``) start beside the session's stack,
once for this module. The apps run there as EMR runs them: packaged, started by spark-submit
with the Pipes context, the driver here and an executor in a JVM of its own on each worker
(``SparkClusterLauncher``). One pipeline of the fault suite (its own database, connectors and
raw prefix) feeds both tests.

Proves:
- the Hudi table and the order items the cluster writes equal, row for row and content
  included, what the lake server writes from the same raw files, and ``matches_source`` passes;
- ``kill -9`` of a worker (its JVM and its executor's) while a Hudi commit is inflight: Spark
  carries on with the other worker, or the run fails; either way the next run leaves the lake
  equal to the source, and the killed commit is either complete or rolled back, never left half;
- every socket of the cluster's daemons refuses another local user, and no process on the
  machine (the cluster's executors included, while they write) has one of the stack's secrets
  in its command line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from typing import Any

import dagster as dg
import pytest

from bench.outbox import cdc_events_hudi, matches_source
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.lake.readers import read_table
from cdc_lake.marts.order_items import read_order_items
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.spark_cluster import SparkClusterLauncher
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import pid_alive
from cdc_lake.stack.spark_cluster import master_state, worker_names
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, kill_service
from cdc_lake_tests.second_user import descendants
from cdc_lake_tests.stack.test_every_socket import probe_every_socket, spark_cluster_probes
from cdc_lake_tests.stack.test_spark import all_cmdlines

ATTEMPTS = 3
CLUSTER = ["spark_master", *worker_names()]
HUDI_META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


@pytest.fixture(scope="module")
def cluster(local_stack: LocalStack) -> Iterator[LocalStack]:
    """The standalone cluster, on the session stack's settings and credentials."""
    stack = LocalStack(replace(local_stack.settings, spark_mode="cluster"), False, CLUSTER)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


@pytest.fixture(scope="module")
def pipeline(local_stack: LocalStack, secret_env: dict[str, str], spark: Any):
    p = FaultPipeline(local_stack, "cluster", sample_scale=0.1)
    try:
        p.start()
        p.workload(changes=30, rate=10, seed=1)
        p.catch_up()
        yield p
    finally:
        p.close()


def on_cluster(p: FaultPipeline, cluster: LocalStack) -> dict[str, Any]:
    return {**p.resources, "spark_jobs": SparkClusterLauncher.of(cluster.settings)}


def checks_of(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {c.check_name: c.passed for c in result.get_asset_check_evaluations()}


def lake_rows(spark: Any, lake: LakeResource) -> tuple[list[tuple], list[tuple]]:
    table = read_table(spark, lake.table_path_of(OUTBOX)).drop(*HUDI_META)
    items = read_order_items(spark, lake.order_items_path)
    return sorted(tuple(r) for r in table.collect()), sorted(tuple(r) for r in items.collect())


def test_the_cluster_writes_what_the_lake_server_writes(
    pipeline: FaultPipeline, cluster: LocalStack, spark: Any
):
    p = pipeline
    server_lake = LakeResource(
        lake_bucket=p.lake.lake_bucket,
        lake_prefix=f"{p.lake.lake_prefix}-server",
        order_items_prefix=f"{p.lake.order_items_prefix}-server",
        quarantine_prefix=f"{p.lake.quarantine_prefix}-server",
    )
    written = {}
    for name, resources in (
        ("cluster", on_cluster(p, cluster)),
        ("server", {**p.resources, "lake": server_lake}),
    ):
        result = dg.materialize(
            [cdc_events_hudi, order_items, matches_source],
            resources=resources,
            instance=dg.DagsterInstance.ephemeral(),
        )
        assert result.success, name
        checks = checks_of(result)
        assert checks.get("matches_source") is True and all(checks.values()), (name, checks)
        written[name] = lake_rows(spark, resources["lake"])
    table, items = written["cluster"]
    assert len(table) > 50 and len(items) > len(table)
    assert written["cluster"] == written["server"]
    # They ran on the cluster, as applications of their own.
    apps = {a["name"] for a in master_state(cluster.settings)["completedapps"]}
    assert {"cdc-lake-upsert", "cdc-lake-order_items"} <= apps, apps


def rollbacks(p: FaultPipeline) -> list[str]:
    """The rollback instants in the outbox table's timeline."""
    prefix = f"{p.lake.table_prefix_of(OUTBOX)}/.hoodie/timeline/"
    listed = p.s3.list_objects_v2(Bucket=p.lake.lake_bucket, Prefix=prefix, Delimiter="/")
    return [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".rollback")]


def secrets_in_command_lines(stack: LocalStack) -> list[int]:
    """Pids of the processes whose command line holds one of the stack's secrets."""
    secrets = list(asdict(stack.settings.credentials).values())
    return [pid for pid, c in all_cmdlines().items() if any(s in c for s in secrets)]


def test_a_worker_killed_during_a_hudi_commit(
    pipeline: FaultPipeline, cluster: LocalStack, spark: Any, fault_record: FaultRecord
):
    fault_record.fault = "spark worker kill -9 during the Hudi commit (standalone cluster)"
    p = pipeline
    resources = on_cluster(p, cluster)
    killed: str | None = None
    outcome: dict[str, dg.ExecuteInProcessResult] = {}
    with fault_record.phase("kill"):
        for attempt in range(1, ATTEMPTS + 1):
            p.workload(changes=40, rate=10, seed=10 + attempt)
            p.catch_up()
            before = set(p.timeline())

            def refresh() -> None:
                outcome["run"] = dg.materialize(
                    [cdc_events_hudi], resources=resources, raise_on_error=False
                )

            run = threading.Thread(target=refresh)
            run.start()
            while run.is_alive() and killed is None:
                pending = [
                    i for i, states in p.timeline().items()
                    if i not in before and "inflight" in states and "completed" not in states
                ]  # fmt: skip
                if pending:
                    # Executors are up and writing: none has a secret in its command line.
                    assert secrets_in_command_lines(cluster) == []
                    worker = cluster.pidfile(cluster.service("spark_worker_1")).read()
                    assert worker is not None
                    lines = all_cmdlines()
                    executors = [p for p in descendants(worker) if "Executor" in lines.get(p, "")]
                    assert executors, "worker 1 held no executor of the app"
                    kill_service(cluster, "spark_worker_1")  # its process group: the executor too
                    gone_by = time.monotonic() + 10
                    while [pid for pid in executors if pid_alive(pid)]:
                        assert time.monotonic() < gone_by, "worker 1's executor outlived the kill"
                        time.sleep(0.05)
                    killed = pending[0]
                time.sleep(0.05)
            run.join(600)
            assert not run.is_alive(), "the run outlived the kill by 10 minutes"
            if killed is not None:
                break
    assert killed is not None, f"no kill landed inside a Hudi commit in {ATTEMPTS} attempts"
    survived = outcome["run"].success

    with fault_record.phase("restart and refresh"):
        cluster.up()  # the killed worker again
        result = dg.materialize([cdc_events_hudi, matches_source], resources=resources)
        assert result.success
        assert checks_of(result)["matches_source"] is True
    # The killed commit completed (Spark ran its tasks again on worker 2), or the next write
    # rolled it back: never left inflight, never half there.
    states = p.timeline().get(killed, set())
    assert "completed" in states or (states == set() and rollbacks(p)), (killed, states)
    diff = p.compare(spark)
    fault_record.done(
        p,
        diff,
        f"worker 1 killed at instant {killed}: the run "
        + ("completed on worker 2" if survived else "failed, the next one caught up"),
    )
    assert diff.clean, diff.describe()


def test_every_socket_of_the_cluster_refuses_another_local_user(cluster: LocalStack):
    seen = probe_every_socket(cluster, spark_cluster_probes(CLUSTER))
    # The master's and each worker's RPC and web UI.
    assert len(seen) >= 2 * len(CLUSTER), seen
