"""The lake server's warm-up: the upsert app itself, run on a throwaway table of its own until the
driver JVM's JIT compiler is quiet, so that a user's first refreshes after ``cdc-lake stack up``
cost what the later ones do.

Why: a JVM compiles the code it runs hot, and on 2 cores that compiling takes time from the
work. When the warm-up was two local writes of 100 rows (they load Hudi's classes, but not
s3a's, the raw lines' parsing, the merge, the checks or a commit on S3), a user's first app
after the warm-up, the build of a 2,000-order table, took 16.9 s and the next small refreshes
6.7, 6.0, 6.0 s; after this warm-up 7.0 s, then 5.1, 4.4, 4.5 s (issue 52; single runs minutes
apart, idle). The JIT still compiles for most of a round after 8 of them, so the warm-up
usually ends at ``MAX_ROUNDS`` (about a minute), unless an app comes first.

What it runs (``run``): rounds of the ``upsert`` app through ``run_app``, as a Dagster run sends
it, on raw files it writes itself into the stack's own S3 under ``_warm_up/`` of a raw bucket,
into a Hudi table under ``_warm_up/`` of a lake bucket: buckets of its own
(``StackSettings.warm_up_buckets``), so its deletes never reach a user's data, whatever
prefixes the user sets; never a table of the lake. Round 1
creates the table from ``ORDERS`` orders; each next round upserts ``FILES`` files of ``CHANGES``
changes, as a small refresh does. It ends once the JIT compiled for less than
``QUIET_JIT_SHARE`` of a round, or after ``MAX_ROUNDS``, and then deletes both prefixes (which
the next start deletes too, if a kill came first).

Ordering: each round holds the lake server's app lock. The warm-up gives way to the user: once
an app is asked for, no round starts, so an app waits at most for the round in progress (round
1, the table's creation, ~20 s on 2 cores) and pays the rest of the JIT's work itself, as it
would without a warm-up. A failure is logged and changes nothing else.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.schema.columns import KIND_VALUES
from cdc_lake.lake.tables import declared_columns, declared_schema
from cdc_lake.source.captured import TABLES, CapturedTable
from cdc_lake.spark_apps.params import UpsertParams, UpsertReport

PREFIX = "_warm_up/"
TOPIC = "warm_up"
ORDERS = 200
FILES, CHANGES = 2, 5  # per round after the first: a small refresh
MAX_ROUNDS = 8
# The JIT is quiet once it compiled for less than this share of a round's wall time.
QUIET_JIT_SHARE = 0.25


def jvm_seconds(spark: Any) -> dict[str, float]:
    """The driver JVM's seconds of JIT compilation (all compiler threads) and of GC so far. A
    cold JVM compiles for minutes, and on 2 cores that time is taken from the tasks
    (docs/benchmarks-log.md, Tuning log, "The first rep is the JIT's")."""
    mf: Any = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    gc = sum(b.getCollectionTime() for b in mf.getGarbageCollectorMXBeans())
    return {"jit_s": mf.getCompilationMXBean().getTotalCompilationTime() / 1000, "gc_s": gc / 1000}


def sample_table() -> CapturedTable | None:
    """The table whose shape the warm-up writes: the first declared with ``warm_up``."""
    return next((t for t in TABLES if t.warm_up), None)


@functools.cache
def kinds(table: CapturedTable) -> dict[str, str]:
    """Every column ``table`` declares (``sql/``, read once), and its kind."""
    return {c.name: c.kind for c in declared_schema(table).columns}


def event(table: CapturedTable, key: int, n: int, partition: int, offset: int) -> dict[str, Any]:
    """The warm-up's change number ``n``, to the row ``key`` of ``table``, in the raw line's
    shape: every declared column at its kind's sample value, the key's columns from ``key`` (a
    number, or its text), then Debezium's and the sink's fields. Later changes have higher LSNs,
    so each round's win."""
    columns = kinds(table)
    row = {name: KIND_VALUES[kind] for name, kind in columns.items()}
    keys = {k: key if columns[k] == "int" else f"k{key}" for k in table.keys}
    return row | keys | {
        "__deleted": "false", "__op": "u" if n >= ORDERS else "c",
        "__lsn": 1_000_000 + n, "__source_ts_ms": 1_700_000_000_000 + n,
        "__kafka_topic": TOPIC, "__kafka_partition": partition, "__kafka_offset": offset,
    }  # fmt: skip


def delete_prefix(s3: Any, bucket: str, prefix: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def run(
    spark: Any,
    s3: Any,
    raw: str,
    lake: str,
    run_app: Callable[[str, dict[str, Any]], Any],
    say: Callable[[str], None],
    stop: Callable[[], bool],
) -> list[dict[str, float]]:
    """The rounds (module docstring) in the buckets ``raw`` and ``lake``, through
    ``run_app(app, params)``, which returns the app's report, or None when it gave way to an app
    asked for meanwhile; no round starts once ``stop()``. Each round's wall and JIT seconds.
    Whatever happens, both ``_warm_up/`` prefixes are empty on the way out."""
    for bucket in (raw, lake):
        delete_prefix(s3, bucket, PREFIX)
    table = sample_table()
    if table is None:
        return []
    source = RawSource(raw, PREFIX, TOPIC)
    offset = 0  # the raw lines' Kafka offsets, one partition; also the change's number
    previous: dict[str, Any] | None = None
    rounds: list[dict[str, float]] = []
    try:
        for r in range(MAX_ROUNDS):
            if stop():
                break
            for size in [ORDERS] if r == 0 else [CHANGES] * FILES:
                # Round 1 inserts every order; the later ones update orders spread over them.
                lines = [
                    json.dumps(event(table, n if r == 0 else n * 7919 % ORDERS, n, 0, n))
                    for n in range(offset, offset + size)
                ]
                key = source.layout.key(0, offset)
                s3.put_object(Bucket=raw, Key=key, Body=("\n".join(lines) + "\n").encode())
                offset += size
            params = UpsertParams(
                captured=table,
                raw_bucket=raw,
                raw_prefix=PREFIX,
                topic=TOPIC,
                table=HudiTableConfig(base_path=f"s3a://{lake}/{PREFIX}{TOPIC}"),
                declared_columns=tuple(declared_columns(table)),
                previous_state=previous,
            )
            jit0, t0 = jvm_seconds(spark)["jit_s"], time.monotonic()
            report = run_app(UpsertParams.APP, params.to_json())
            if report is None:  # an app came first: the round gave way to it
                break
            wall, jit = time.monotonic() - t0, jvm_seconds(spark)["jit_s"] - jit0
            previous = report.metadata[UpsertReport.LIVE_KEY_DIGEST]["raw_value"]
            rounds.append({"wall_s": wall, "jit_s": jit})
            say(f"warm-up round {r + 1}: {wall:.1f}s, {jit:.1f}s of it compiling")
            if r and jit < QUIET_JIT_SHARE * wall:
                break
    finally:
        for bucket in (raw, lake):
            delete_prefix(s3, bucket, PREFIX)
    return rounds
