"""Fault 2: the Spark driver killed in the middle of a Hudi commit.

The lake's upsert app runs in a process of its own (``upsert_worker``: its own SparkSession and
JVM). The test polls the table's timeline on S3 every 50 ms and, as soon as a new instant is
inflight (data files being written, the commit not complete), kills the worker's whole process
group, the JVM included, with SIGKILL. It checks that the instant never completed and that no
process of the group is left, then refreshes the lake in-process as the next run would.

Proves: a commit cut short leaves neither data nor checkpoint behind (Hudi rolls the inflight
instant back, and the batch is read again from the last completed commit's checkpoint), so the
lake equals ``datalake.cdc_events`` row for row. A worker that completes its commit before an
inflight instant is seen is a missed window; it is retried with new changes, a bounded number of
times.

The outbox keeps a history table here (declared in this test: ``history=True``), built after
each refresh, and its app is killed the same way in the middle of its own commit. The next build
starts again from the lake commit the history last recorded: every order's versions follow each
other without a gap or an overlap, the open ones are the lake's live rows (the asset's check),
and a deleted order has none open.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg

from bench.outbox import cdc_events_hudi
from cdc_lake.defs.keys import table_keys
from cdc_lake.defs.lake.history import history_table_asset
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_table
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.params import HistoryReport
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import tail
from cdc_lake.stack.settings import project_root
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, process_group

ATTEMPTS = 3
# The outbox with a history table, declared here only.
HISTORY = replace(OUTBOX, history=True)
outbox_history = history_table_asset(table_keys(HISTORY))


@dataclass(frozen=True)
class Killed:
    instant: str
    states: frozenset[str]  # what the timeline holds of the instant after the kill


def kill_upsert_mid_commit(
    pipeline: FaultPipeline,
    stack: LocalStack,
    log: Path,
    timeout_s: float = 300,
    app: str = "upsert",
) -> Killed | None:
    """Run the upsert (or the outbox's ``history`` app) in a worker process; SIGKILL its
    process group once its commit is inflight. None if the commit completed first."""
    suffix = "_history" if app == "history" else ""
    before = set(pipeline.timeline(suffix))
    s = stack.settings
    params = (
        pipeline.lake.history_params(HISTORY) if app == "history"
        else pipeline.lake.upsert_params(pipeline.cdc, table=OUTBOX)
    )  # fmt: skip
    cfg = {
        "state_dir": str(s.state_dir),
        "port_base": s.port_base,
        "jars_dir": str(s.jars_dir),
        "params": params.to_json(),
        "app": app,
    }
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdc_lake_tests.faults.upsert_worker", json.dumps(cfg)],
            cwd=project_root(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the JVM goes with it
        )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pending = [
                i for i, states in pipeline.timeline(suffix).items()
                if i not in before and "inflight" in states and "completed" not in states
            ]  # fmt: skip
            if pending:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                end = time.monotonic() + 30
                while process_group(proc.pid) and time.monotonic() < end:
                    time.sleep(0.2)
                assert process_group(proc.pid) == [], "the worker's JVM outlived the kill"
                states = pipeline.timeline(suffix).get(pending[0], set())
                return Killed(pending[0], frozenset(states))
            if proc.poll() is not None:
                assert proc.returncode == 0, f"{app} worker failed:\n{tail(log)}"
                return None
            time.sleep(0.05)
        raise TimeoutError(f"{app} worker: no inflight commit in {timeout_s:.0f}s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_spark_driver_killed_during_hudi_commit(
    make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, spark, tmp_path: Path
):
    fault_record.fault = "2 spark driver kill -9 during the Hudi commit"
    p: FaultPipeline = make_pipeline("spark_kill")
    with fault_record.phase("start"):
        p.start()
        p.workload(changes=30, rate=5, seed=1)
        p.catch_up()
    with fault_record.phase("first refresh"):
        refresh_with_history(p)  # the tables exist, with a checkpoint to fall back on

    killed = None
    with fault_record.phase("kill"):
        for attempt in range(1, ATTEMPTS + 1):
            p.workload(changes=40 if attempt == 1 else 20, rate=5, seed=10 + attempt)
            p.catch_up()
            killed = kill_upsert_mid_commit(p, local_stack, tmp_path / "upsert-worker.log")
            if killed is not None:
                break
    assert killed is not None, f"no kill landed inside a Hudi commit in {ATTEMPTS} attempts"
    assert "completed" not in killed.states, killed

    history_killed = None
    with fault_record.phase("kill the history"):
        for attempt in range(1, ATTEMPTS + 1):
            p.workload(changes=20, rate=5, seed=30 + attempt)
            p.catch_up()
            p.refresh()
            log = tmp_path / "history-worker.log"
            history_killed = kill_upsert_mid_commit(p, local_stack, log, app="history")
            if history_killed is not None:
                break
    assert history_killed is not None, f"no kill landed in a history commit in {ATTEMPTS} tries"
    assert "completed" not in history_killed.states, history_killed

    with fault_record.phase("catch up"):
        p.workload(changes=20, rate=5, seed=20)
        p.catch_up()
    with fault_record.phase("refresh"):
        history = refresh_with_history(p)
    assert history["build"] == "incremental", history
    diff = p.compare(spark)
    fault_record.done(
        p,
        diff,
        f"killed at instant {killed.instant} ({', '.join(sorted(killed.states))}), "
        f"the history at {history_killed.instant}",
    )
    assert diff.clean, diff.describe()
    versions_follow_each_other(p, spark)


def refresh_with_history(p: FaultPipeline) -> dict[str, Any]:
    """The outbox's Hudi asset and its history, in one run; the history's check must pass.
    The history's metadata."""
    result = dg.materialize([cdc_events_hudi, outbox_history], resources=p.resources)
    assert result.success
    (check,) = [c for c in result.get_asset_check_evaluations()
                if c.check_name == HistoryReport.MATCHES_LAKE_CHECK]  # fmt: skip
    assert check.passed, check.metadata
    (mat,) = [e.materialization for e in result.get_asset_materialization_events()
              if e.asset_key == table_keys(HISTORY).history]  # fmt: skip
    return {k: v.value for k, v in mat.metadata.items()}


def versions_follow_each_other(p: FaultPipeline, spark: Any) -> None:
    """Each order's versions: one after the other (each ends where the next begins), the last
    open exactly when the order is live in the lake, and then it is the lake's row."""
    from pyspark.sql import functions as F

    path = p.lake.table_path_of(OUTBOX)
    rows = read_table(spark, f"{path}_history").select(
        "order_id", "cdc_ordering", F.unix_millis("valid_from").alias("f"),
        F.unix_millis("valid_to").alias("t"),
    ).collect()  # fmt: skip
    by_order: dict[int, list[Any]] = {}
    for r in sorted(rows, key=lambda r: (r["order_id"], r["cdc_ordering"])):
        by_order.setdefault(r["order_id"], []).append(r)
    lake = live_rows(read_table(spark, path)).select("order_id", "cdc_ordering").collect()
    live = {r["order_id"]: r["cdc_ordering"] for r in lake}
    assert set(live) <= set(by_order)
    assert sum(len(v) for v in by_order.values()) > len(by_order)  # the workload made versions
    for order, versions in by_order.items():
        for a, b in zip(versions, versions[1:], strict=False):
            assert a["t"] == b["f"], (order, a, b)
        last = versions[-1]
        if order in live:
            assert last["t"] is None and last["cdc_ordering"] == live[order], (order, last)
        else:
            assert last["t"] is not None, (order, last)
