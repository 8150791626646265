"""``lag``: what the lag check (``lake_lag_seconds``) adds to a refresh.

One synthetic table of ``orders`` orders. Each repetition puts one raw object of
``events_per_file`` changes into its raw prefix and runs the refresh the ``lake_refresh`` job
runs (the Hudi asset, then the order items), without (A) and with (B) the table's
``lake_lag_seconds`` check, alternately. The check reads the checkpoint of the asset's latest
materialization, one raw object per partition with pending lines (none right after the
refresh) and the topic's offsets, with no Spark. The figures are the median refresh of each
side, their ratio B/A (goal <= 1.05x) and the check's own step. No timing is asserted anywhere.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import dagster as dg

from bench.harness import Figure, materialize, median, paired
from bench.outbox import OUTBOX_KEYS
from bench.refresh_lake import ASSETS, new_commit, synthetic_lake
from bench.synthetic import event
from cdc_lake.defs.lake.lag import LAG_CHECK, lag_check
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env


def bench_lag_cost(
    stack: LocalStack,
    client: Any,
    orders: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    os.environ.update(local_secret_env(stack.settings))
    lake, resources = synthetic_lake(stack, client, orders, "lag")
    instance = dg.DagsterInstance.ephemeral()
    say(f"lag: building a table of {orders:,} orders")
    assert materialize(ASSETS, resources=resources, instance=instance).success
    rng, clock = random.Random(11), [1_000]
    check = lag_check(OUTBOX_KEYS)
    check_steps: list[float] = []

    def refresh(with_check: bool) -> Callable[[], None]:
        def run() -> None:
            batch = []
            for _ in range(events_per_file):
                clock[0] += 1
                batch.append(event(rng.randrange(orders), clock[0], clock[0]))
            lake.put(batch)
            assets = [*ASSETS, check] if with_check else ASSETS
            result = materialize(assets, resources=resources, instance=instance)
            assert result.success and new_commit(result)
            if with_check:
                (evaluation,) = [
                    e for e in result.get_asset_check_evaluations() if e.check_name == LAG_CHECK
                ]
                assert evaluation.passed, evaluation.description
                for stat in instance.get_run_step_stats(result.run_id):
                    if "lake_lag" in stat.step_key and stat.end_time and stat.start_time:
                        check_steps.append(stat.end_time - stat.start_time)

        return run

    say(f"lag: one file of {events_per_file} changes per refresh, without (A) and with (B)")
    ta, tb = paired(refresh(False), refresh(True), reps, say)
    a, b = median(ta), median(tb)
    work = f"{events_per_file} changes into {orders:,} orders"
    return [
        Figure("lag", f"refresh without lake_lag_seconds, {work}", a, "s", ""),
        Figure("lag", f"refresh with lake_lag_seconds, {work}", b, "s", ""),
        Figure("lag", "ratio with / without the lag check", b / a, "x", "<= 1.05x"),
        Figure("lag", "the lag check's own step", median(check_steps), "s", ""),
    ]
