"""``empty``: the wall time of a lake refresh that finds nothing new.

The refresh is what the ``lake_refresh`` job runs, the Hudi asset and the order items, through
``dg.materialize`` with the local resources on a synthetic table of ``orders`` orders. Paired,
alternately, with the same run on an instance that has no earlier materialization: that one
cannot carry anything forward, so it takes the Spark path every empty run took before (the
upsert app commits nothing, then scans the table for its checks and digest, and the order items
are rebuilt). Both run in a process whose Spark session is already up, so the Spark side leaves
out the JVM start of a fresh run process (about 25 s): its figure and the ratio understate
what an empty run saves. No timing is asserted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import dagster as dg

from bench.harness import Figure, materialize, median, paired
from bench.refresh_lake import ASSETS, new_commit, synthetic_lake
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env


def bench_empty_run(
    stack: LocalStack, client: Any, orders: int, reps: int, say: Callable[[str], None]
) -> list[Figure]:
    os.environ.update(local_secret_env(stack.settings))
    _, resources = synthetic_lake(stack, client, orders, "empty")
    instance = dg.DagsterInstance.ephemeral()
    say(f"empty: first refresh of {orders:,} orders")
    assert new_commit(materialize(ASSETS, resources=resources, instance=instance))

    def carried() -> None:
        assert not new_commit(materialize(ASSETS, resources=resources, instance=instance))

    def spark_path() -> None:
        fresh = dg.DagsterInstance.ephemeral()
        assert not new_commit(materialize(ASSETS, resources=resources, instance=fresh))

    say("empty: nothing new, carried forward (A) vs the Spark path (B)")
    t_carried, t_spark = paired(carried, spark_path, reps, say)
    a, b = median(t_carried), median(t_spark)
    size = f"{orders:,} orders"
    return [
        Figure("empty run", f"lake refresh with nothing new, {size}", a, "s", "< 5 s",
               "Hudi + order items; no Spark app"),
        Figure("empty run", f"same run through Spark (as before), {size}", b, "s", "",
               "Spark session already up: no JVM start counted"),
        Figure("empty run", "ratio carried / Spark path", a / b, "x", ""),
    ]  # fmt: skip
