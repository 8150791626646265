"""``refresh``: the whole lake refresh (what the ``lake_refresh`` job runs: the Hudi asset with
its checks, then the order items with theirs) for the same small batch, into a small and a big
table.

Two synthetic tables of ``small`` and ``big`` orders are built first. Each repetition then puts
``files`` new raw objects of ``events_per_file`` changes to existing orders (about 1% of them
deletes) into each table's raw prefix, and runs the refresh through ``dg.materialize`` with the
local resources: small (A) and big (B) alternately. The figure is B/A, the goal <= 1.2x: a run
should cost what its new work costs, not what the table holds. Both sides run in one process
whose Spark session is already up (a fresh run process adds its JVM start to both). No timing
is asserted anywhere.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import dagster as dg

from bench.harness import Figure, median, paired
from bench.refresh_lake import ASSETS, new_commit, synthetic_lake
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env
from cdc_lake.testing.synthetic import event


def _lake(stack: LocalStack, client: Any, orders: int, say: Callable[[str], None]):
    lake, resources = synthetic_lake(stack, client, orders, "refresh")
    instance = dg.DagsterInstance.ephemeral()
    say(f"refresh: building a table of {orders:,} orders")
    result = dg.materialize(ASSETS, resources=resources, instance=instance)
    assert result.success
    return lake, resources, instance


def bench_refresh_cost(
    stack: LocalStack,
    client: Any,
    small: int,
    big: int,
    files: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    os.environ.update(local_secret_env(stack.settings))
    rng = random.Random(7)
    sides = {n: _lake(stack, client, n, say) for n in (small, big)}
    clock = {n: 1_000 for n in sides}

    def refresh(orders: int) -> Callable[[], None]:
        lake, resources, instance = sides[orders]

        def run() -> None:
            for _ in range(files):
                batch = []
                for _ in range(events_per_file):
                    clock[orders] += 1
                    order = rng.randrange(orders)
                    batch.append(
                        event(order, clock[orders], clock[orders], deleted=rng.random() < 0.01)
                    )
                lake.put(batch)
            result = dg.materialize(ASSETS, resources=resources, instance=instance)
            assert result.success and new_commit(result)

        return run

    say(f"refresh: {files} new files of {events_per_file} changes, {small:,} (A) vs {big:,} (B)")
    ta, tb = paired(refresh(small), refresh(big), reps, say)
    a, b = median(ta), median(tb)
    work = f"{files} files x {events_per_file} changes"
    return [
        Figure("refresh", f"whole refresh, {work}, {small:,} orders", a, "s", "",
               "Hudi + checks + order items"),
        Figure("refresh", f"whole refresh, {work}, {big:,} orders", b, "s", ""),
        Figure("refresh", f"ratio {big:,} / {small:,} orders", b / a, "x", "<= 1.2x"),
    ]  # fmt: skip
