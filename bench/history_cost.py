"""``history``: what a history table (``CapturedTable.history``) costs a refresh.

One synthetic outbox table of ``rows`` orders (its first commit, and the history's first, full
build, are not timed), then ``rounds`` refreshes, each of ``changes`` new changes (updates of
random orders, one in ten a delete, one in ten a new order) in one raw file: the upsert (A,
the refresh without a history) and then the history app's incremental build from the commit's
change set (B). The figures are medians: A, B, and the ratio (A + B) / A, the cost of a refresh
with a history against the same refresh without it. Both run on the same table in each round,
so the load is the same for both. No timing is asserted anywhere.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bench.harness import Figure, median
from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.history import run_history
from cdc_lake.spark_apps.params import HistoryParams


def bench_history_cost(
    spark: Any,
    client: Any,
    raw_bucket: str,
    lake_bucket: str,
    rows: int,
    changes: int,
    rounds: int,
    say: Callable[[str], None],
    history_type: str = "COPY_ON_WRITE",
) -> list[Figure]:
    lake = SyntheticLake(client, raw_bucket, lake_bucket)
    table = lake.table()
    declared = replace(OUTBOX, history=True)
    history = replace(table, base_path=f"{table.base_path}_history", table_type=history_type,
                      table_name="cdc_events_history", change_sets=False)  # fmt: skip
    params = HistoryParams(table.base_path, history, declared)
    rng = random.Random(7)
    ts, lsn, top = 1_000, 1, rows

    def ingest() -> None:
        ingest_new_files(spark, client, lake.source, table, captured=declared,
                         declared=OUTBOX_COLUMNS)  # fmt: skip

    say(f"history: {rows:,} orders, then {rounds} refreshes of {changes:,} changes each; the "
        f"history table {history_type}")
    lake.put([event(o, ts, o, op="c") for o in range(1, rows + 1)])
    ingest()
    run_history(spark, params)  # the first build: full
    upserts: list[float] = []
    builds: list[float] = []
    for r in range(rounds):
        ts += 1_000
        batch = []
        for _ in range(changes):
            lsn += 1
            pick = rng.random()
            if pick < 0.1:
                top += 1
                batch.append(event(top, ts, lsn, op="c"))
            elif pick < 0.2:
                batch.append(event(rng.randint(1, top), ts, lsn, op="d", deleted=True))
            else:
                batch.append(event(rng.randint(1, top), ts, lsn, customer_id=f"C{lsn % 997:04d}"))
        lake.put(batch)
        t0 = time.perf_counter()
        ingest()
        upserts.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        report = run_history(spark, params)
        builds.append(time.perf_counter() - t0)
        build = report.metadata["build"]["raw_value"]
        say(f"  round {r + 1}/{rounds}: upsert {upserts[-1]:.2f}s, history {builds[-1]:.2f}s "
            f"({build})")  # fmt: skip
    a, b = median(upserts), median(builds)
    work = f"{changes:,} changes into {rows:,} orders"
    kind = "" if history_type == "COPY_ON_WRITE" else f" ({history_type})"
    return [
        Figure("history", f"refresh without a history (upsert), {work}", a, "s", ""),
        Figure("history", f"the history's incremental build{kind}, {work}", b, "s", ""),
        Figure("history", f"ratio refresh with / without a history{kind}", (a + b) / a, "x", ""),
    ]
