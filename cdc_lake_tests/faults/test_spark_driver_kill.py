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
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import tail
from cdc_lake.stack.settings import project_root
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord, process_group

ATTEMPTS = 3


@dataclass(frozen=True)
class Killed:
    instant: str
    states: frozenset[str]  # what the timeline holds of the instant after the kill


def timeline(pipeline: FaultPipeline) -> dict[str, set[str]]:
    """Instant -> states (requested, inflight, completed) in the table's active timeline.

    Hudi 1.x keeps it under ``.hoodie/timeline/``: ``<t>.commit.requested``, ``<t>.inflight``
    and ``<t>_<completion time>.commit``; the metadata table's own timeline lies deeper."""
    out: dict[str, set[str]] = {}
    bucket = pipeline.lake.lake_bucket
    for prefix in (".hoodie/timeline/", ".hoodie/"):
        page = pipeline.s3.list_objects_v2(
            Bucket=bucket, Prefix=f"{pipeline.lake.table_prefix_of(OUTBOX)}/{prefix}", Delimiter="/"
        )
        for obj in page.get("Contents", []):
            name = obj["Key"].rsplit("/", 1)[-1]
            instant = name.split(".", 1)[0].split("_", 1)[0]
            if not instant.isdigit() or "rollback" in name or "clean" in name:
                continue
            state = name.rsplit(".", 1)[-1]
            state = state if state in ("requested", "inflight") else "completed"
            out.setdefault(instant, set()).add(state)
    return out


def kill_upsert_mid_commit(
    pipeline: FaultPipeline, stack: LocalStack, log: Path, timeout_s: float = 300
) -> Killed | None:
    """Run the upsert in a worker process; SIGKILL its process group once its commit is
    inflight. None if the commit completed first."""
    before = set(timeline(pipeline))
    s = stack.settings
    cfg = {
        "state_dir": str(s.state_dir),
        "port_base": s.port_base,
        "jars_dir": str(s.jars_dir),
        "params": pipeline.lake.upsert_params(pipeline.cdc, table=OUTBOX).to_json(),
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
                i for i, states in timeline(pipeline).items()
                if i not in before and "inflight" in states and "completed" not in states
            ]  # fmt: skip
            if pending:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                end = time.monotonic() + 30
                while process_group(proc.pid) and time.monotonic() < end:
                    time.sleep(0.2)
                assert process_group(proc.pid) == [], "the worker's JVM outlived the kill"
                return Killed(pending[0], frozenset(timeline(pipeline).get(pending[0], set())))
            if proc.poll() is not None:
                assert proc.returncode == 0, f"upsert worker failed:\n{tail(log)}"
                return None
            time.sleep(0.05)
        raise TimeoutError(f"upsert worker: no inflight commit in {timeout_s:.0f}s")
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
        p.refresh()  # the table exists, with a checkpoint to fall back on

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

    with fault_record.phase("catch up"):
        p.workload(changes=20, rate=5, seed=20)
        p.catch_up()
    with fault_record.phase("refresh"):
        p.refresh()
    diff = p.compare(spark)
    fault_record.done(
        p, diff, f"killed at instant {killed.instant} ({', '.join(sorted(killed.states))})"
    )
    assert diff.clean, diff.describe()
