"""``warm``: what the lake server saves a run. One lake refresh (the Hudi asset with its checks,
then the order items, as ``lake_refresh`` runs them) of ``files`` new raw files, each in a fresh
Python process as a Dagster run is, with Spark in that process (``in_process``: its JVM starts
and Hudi's classes load) and on the stack's warm lake server (``server``), alternately, on one
synthetic table of ``orders`` orders. Figures: the medians of the run process's wall time (from
its start to its exit) and of ``dg.materialize`` alone, per mode, and their ratios.

    python -m bench --only warm --reps 3
    python -m bench --only cluster --reps 3   # the standalone cluster against the lake server
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Figure, materialize, median
from bench.synthetic import SyntheticLake, event
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env

MODES = ("in_process", "server")


def _child(name: str, mode: str) -> None:
    """One refresh in this (fresh) process; prints the materialization's seconds as JSON."""
    import dagster as dg

    from bench.refresh_lake import ASSETS, new_commit
    from cdc_lake.resources.local import local_resources

    t0 = time.monotonic()
    resources = local_resources(
        lake={
            "lake_prefix": f"synthetic/{name}",
            "order_items_prefix": f"synthetic/{name}/order_items",
        },
        raw_prefix=f"synthetic/{name}/",
        spark=mode,
    )
    result = materialize(ASSETS, resources=resources, instance=dg.DagsterInstance.ephemeral())
    assert result.success and new_commit(result)
    # The Hudi asset's step alone: the upsert app with the checks it evaluates.
    upsert = next(e.event_specific_data.duration_ms / 1000 for e in result.all_events
                  if e.is_step_success and str(e.step_key).startswith("hudi__"))  # fmt: skip
    print(json.dumps({"materialize_s": time.monotonic() - t0, "upsert_s": upsert}))


def run_refresh(stack: LocalStack, name: str, mode: str) -> tuple[float, dict[str, float]]:
    """One refresh in a fresh process: its wall time, and what it reports (``_child``)."""
    s = stack.settings
    env = {
        **os.environ,
        **local_secret_env(s),
        "CDC_LAKE_STATE_DIR": str(s.state_dir),
        "CDC_LAKE_PORT_BASE": str(s.port_base),
        "CDC_LAKE_JARS_DIR": str(s.jars_dir),
    }
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.warm_spark", name, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"warm: the {mode} run failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout.splitlines()[-1])


def _alternate(
    stack: LocalStack,
    client: Any,
    name: str,
    modes: tuple[str, str],
    orders: int,
    files: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """A table of ``orders`` orders (built on the lake server, untimed), then ``reps`` rounds
    of one refresh per mode, each of ``files`` new files, the modes' order alternating."""
    s = stack.settings
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket, name=f"{name}-{os.getpid()}")
    per_file = max(1, orders // 10)
    for start in range(0, orders, per_file):
        lake.put([event(i, 100, i + 1) for i in range(start, min(orders, start + per_file))])
    say(f"{name}: building a table of {orders:,} orders")
    run_refresh(stack, lake.name, "server")
    clock = 1_000
    times: dict[str, list[tuple[float, dict[str, float]]]] = {m: [] for m in modes}
    for rep in range(reps):
        for mode in modes if rep % 2 == 0 else modes[::-1]:
            for f in range(files):
                batch = [event((clock + i * 7) % orders, clock + i, clock + i)
                         for i in range(events_per_file)]  # fmt: skip
                clock += events_per_file
                lake.put(batch, partition=f % 2)
            wall, got = run_refresh(stack, lake.name, mode)
            times[mode].append((wall, got))
            say(f"{name}: {mode:<10} run {wall:6.1f}s (materialize {got['materialize_s']:6.1f}s, "
                f"upsert step {got['upsert_s']:5.1f}s)")  # fmt: skip
    return times


def bench_warm_spark(
    stack: LocalStack,
    client: Any,
    orders: int,
    files: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    times = _alternate(stack, client, "warm", MODES, orders, files, events_per_file, reps, say)
    wall = {m: median([w for w, _ in times[m]]) for m in MODES}
    mat = {m: median([t["materialize_s"] for _, t in times[m]]) for m in MODES}
    work = f"{files} files x {events_per_file} changes, {orders:,} orders"
    return [
        Figure("warm", f"run process, Spark in process, {work}", wall["in_process"], "s", ""),
        Figure("warm", f"run process, warm lake server, {work}", wall["server"], "s", ""),
        Figure("warm", "materialize, Spark in process", mat["in_process"], "s", ""),
        Figure("warm", "materialize, warm lake server", mat["server"], "s", ""),
        Figure("warm", "run process: in process / server", wall["in_process"] / wall["server"],
               "x", "", "what the lake server saves a run"),
    ]  # fmt: skip


def bench_cluster(
    stack: LocalStack,
    client: Any,
    orders: int,
    files: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    """``cluster``: the same refreshes on the stack's Spark standalone cluster (each app an
    application of its own: driver and executors start) and on the warm lake server."""
    modes = ("cluster", "server")
    times = _alternate(stack, client, "cluster", modes, orders, files, events_per_file, reps, say)
    mat = {m: median([t["materialize_s"] for _, t in times[m]]) for m in modes}
    upsert = {m: median([t["upsert_s"] for _, t in times[m]]) for m in modes}
    work = f"{files} files x {events_per_file} changes, {orders:,} orders"
    return [
        Figure("cluster", f"upsert step, standalone cluster (2 workers), {work}",
               upsert["cluster"], "s", ""),
        Figure("cluster", f"upsert step, warm lake server, {work}", upsert["server"], "s", ""),
        Figure("cluster", "upsert step: cluster / lake server",
               upsert["cluster"] / upsert["server"], "x", "",
               "each app's JVMs start on the cluster; the server's are warm"),
        Figure("cluster", "refresh (upsert + order items): cluster / lake server",
               mat["cluster"] / mat["server"], "x", ""),
    ]  # fmt: skip


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
