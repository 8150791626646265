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

With several table types (``--table-type``, COPY_ON_WRITE by default), each gets its own pair
of tables, timed one type after the other; compare each type's ratio. Per step (the Hudi asset
and its checks, the order items), the median seconds are reported too, and a MERGE_ON_READ run
that compacted (every ``compaction_delta_commits`` delta commits) is named in the progress.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from bench.harness import Figure, materialize, median, paired
from bench.outbox import HUDI_KEY
from bench.refresh_lake import ASSETS, new_commit, synthetic_lake
from bench.synthetic import event
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env


def _lake(stack: LocalStack, client: Any, orders: int, table_type: str, say: Callable[[str], None]):
    lake, resources = synthetic_lake(stack, client, orders, "refresh", table_type=table_type)
    instance = dg.DagsterInstance.ephemeral()
    say(f"refresh: building a {table_type} table of {orders:,} orders")
    result = materialize(ASSETS, resources=resources, instance=instance)
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
    table_types: tuple[str, ...] = (HudiTableConfig.table_type,),
) -> list[Figure]:
    os.environ.update(local_secret_env(stack.settings))
    figures: list[Figure] = []
    for table_type in table_types:
        figures += _one_type(
            stack, client, small, big, files, events_per_file, reps, say, table_type
        )
    return figures


def _compactions(resources: dict[str, Any]) -> int:
    spark = SparkSession.getActiveSession()
    assert spark is not None
    base_path = resources["lake"].table_config(OUTBOX).base_path
    return sum(c.action == "commit" for c in completed_commits(spark, base_path))


def _one_type(
    stack: LocalStack,
    client: Any,
    small: int,
    big: int,
    files: int,
    events_per_file: int,
    reps: int,
    say: Callable[[str], None],
    table_type: str,
) -> list[Figure]:
    rng = random.Random(7)
    sides = {n: _lake(stack, client, n, table_type, say) for n in (small, big)}
    clock = {n: 1_000 for n in sides}
    steps: dict[tuple[int, str], list[float]] = {}
    mor = table_type == "MERGE_ON_READ"

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
            before = _compactions(resources) if mor else 0
            result = materialize(ASSETS, resources=resources, instance=instance)
            assert result.success and new_commit(result)
            for stat in instance.get_run_step_stats(result.run_id):
                if stat.start_time is not None and stat.end_time is not None:
                    took = stat.end_time - stat.start_time
                    steps.setdefault((orders, stat.step_key), []).append(took)
            hudi = next(
                e.materialization.metadata
                for e in result.get_asset_materialization_events()
                if e.materialization.asset_key == HUDI_KEY
            )
            # The upsert alone (the step's rest is its checks and the step's overhead).
            steps.setdefault((orders, "upsert (write only)"), []).append(
                float(hudi["seconds"].value)  # type: ignore[arg-type]
            )
            if mor and _compactions(resources) > before:
                say(f"  {orders:,} orders: this run compacted the table")

        return run

    say(
        f"refresh ({table_type}): {files} new files of {events_per_file} changes, "
        f"{small:,} (A) vs {big:,} (B)"
    )
    ta, tb = paired(refresh(small), refresh(big), reps, say)
    a, b = median(ta), median(tb)
    work = f"{files} files x {events_per_file} changes"
    # The default type's figures keep the names they had before there was a choice.
    kind = "" if table_type == HudiTableConfig.table_type else f" {table_type}"
    figures = [
        Figure("refresh", f"whole refresh{kind}, {work}, {small:,} orders", a, "s", "",
               "Hudi + checks + order items"),
        Figure("refresh", f"whole refresh{kind}, {work}, {big:,} orders", b, "s", ""),
        Figure("refresh", f"ratio{kind} {big:,} / {small:,} orders", b / a, "x", "<= 1.2x"),
    ]  # fmt: skip
    for (orders, step), took in sorted(steps.items()):
        figures.append(
            Figure("refresh", f"step {step}{kind}, {orders:,} orders", median(took), "s", "")
        )
    return figures
