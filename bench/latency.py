"""End-to-end latency: from a PostgreSQL commit until the change is visible in the Hudi table.

The full local stack runs the real path: outbox trigger → Debezium → Kafka → S3 sink → the raw
files sensor → the Hudi upsert. The workload commits changes at a steady rate in a background
thread. Every ``sensor_interval_s`` the main loop evaluates the real sensor, and when the sensor
asks for a run it runs the upsert. Each change is then timed through its stages:
- **debezium**: the PostgreSQL commit (``__source_ts_ms``) to the Kafka record's timestamp;
- **sink**: the Kafka record to the raw object that holds it (LastModified);
- **sensor**: the raw object to the tick that picked it up;
- **spark**: that tick to the completed Hudi commit.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import dagster as dg
import psycopg2
from confluent_kafka import Consumer, TopicPartition

from bench.harness import Figure
from cdc_lake.defs.keys import HUDI_KEY
from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES, raw_cdc_files_sensor
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.lake.ingest import RawSource, ingest_new_files
from cdc_lake.resources.local import local_resources
from cdc_lake.source.workload import Change, Workload
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres
from cdc_lake.stack.settings import local_secret_env
from cdc_lake.streaming.topics import end_offsets


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _kafka_times(conf: dict[str, Any], topic: str) -> dict[tuple[int, int], float]:
    """(order_id, __lsn) -> the record's Kafka timestamp, in seconds."""
    ends = end_offsets(conf, topic)
    consumer = Consumer({**conf, "group.id": "bench-latency", "enable.auto.commit": False})
    out: dict[tuple[int, int], float] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        remaining = {p for p, e in ends.items() if e > 0}
        while remaining:
            msg = consumer.poll(2.0)
            if msg is None or msg.error():
                continue
            value = msg.value()
            if value:
                rec = json.loads(value)
                out[(rec["order_id"], rec["__lsn"])] = msg.timestamp()[1] / 1000
            part, off = msg.partition(), msg.offset()
            if part is not None and off is not None and off + 1 >= ends[part]:
                remaining.discard(part)
    finally:
        consumer.close()
    return out


def bench_latency(
    stack: LocalStack,
    spark: Any,
    duration_s: float,
    rate: float,
    sensor_interval_s: float,
    flush_interval_ms: int,
    say: Callable[[str], None],
) -> list[Figure]:
    s = stack.settings
    os.environ.update(local_secret_env(s))
    # A database of its own: the workload's changes never touch anyone else's data.
    pg = stack.service("postgres")
    assert isinstance(pg, Postgres)
    pg.create_database("cdc_lake_latency")
    resources = local_resources(
        s,
        database="cdc_lake_latency",
        topic_prefix="lat",
        slot_name="lat_slot",
        raw_prefix="lat-events/",
        flush_interval_ms=flush_interval_ms,
        lake={"table_prefix": "lat/cdc_events"},
        spark="in_process",  # the benchmark's own session
    )
    cdc = resources["cdc"]
    say("latency: materialising outbox, topic and raw files")
    assert dg.materialize(
        [cdc_events_outbox, cdc_events_topic, raw_cdc_files], resources=resources
    ).success
    s3 = stack.service("s3").client()  # type: ignore[attr-defined]
    source = RawSource(s.raw_bucket, cdc.raw_prefix, cdc.topic)
    table = resources["lake"].table_config()
    instance = dg.DagsterInstance.ephemeral()

    def ingest():
        res = ingest_new_files(spark, s3, source, table)
        # What the Hudi asset reports after a run: the sensor starts from this checkpoint.
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                HUDI_KEY, metadata={"checkpoint": dg.MetadataValue.json(res.checkpoint)}
            )
        )
        return res

    ingest()  # the snapshot, before the clock starts
    sensor_resources = {k: resources[k] for k in SENSOR_RESOURCES}
    ctx = dg.build_sensor_context(instance=instance, resources=sensor_resources)
    first = raw_cdc_files_sensor(ctx)
    cursor = first.cursor if isinstance(first, dg.SensorResult) else None

    changes: list[Change] = []

    def workload() -> None:
        conn = psycopg2.connect(s.pg_dsn(database="cdc_lake_latency"))
        try:
            n = int(duration_s * rate)
            changes.extend(Workload(conn, seed=11).run(n, rate_per_s=rate))
        finally:
            conn.close()

    say(f"latency: {duration_s:.0f}s of workload at {rate}/s, sensor every {sensor_interval_s}s")
    worker = threading.Thread(target=workload)
    worker.start()
    ticks: list[tuple[float, float, list[str]]] = []  # (tick time, commit done, object keys)
    idle_after_done = 0
    while worker.is_alive() or idle_after_done < 3:
        time.sleep(sensor_interval_s)
        ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=sensor_resources)
        tick_at = time.time()
        result = raw_cdc_files_sensor(ctx)
        if isinstance(result, dg.SensorResult) and result.run_requests:
            cursor = result.cursor
            res = ingest()
            ticks.append((tick_at, time.time(), [f.key for f in res.files]))
            say(f"  tick: {len(res.files)} objects, {res.events_read} events, {res.seconds:.1f}s")
            idle_after_done = 0
        elif not worker.is_alive():
            idle_after_done += 1

    # Where each change's event landed: raw object (and its LastModified), then the tick.
    kafka_ts = _kafka_times(resources["kafka"].client_conf(), cdc.topic)
    seen: dict[int, list[tuple[int, int, float, float, float]]] = {}
    for tick_at, done_at, keys in ticks:
        for key in keys:
            obj = s3.get_object(Bucket=s.raw_bucket, Key=key)
            modified = obj["LastModified"].timestamp()
            for line in obj["Body"].read().decode().splitlines():
                if line:
                    ev = json.loads(line)
                    seen.setdefault(ev["order_id"], []).append(
                        (ev["__source_ts_ms"], ev["__lsn"], modified, tick_at, done_at)
                    )
    totals, parts = [], {"debezium": [], "sink": [], "sensor": [], "spark": []}
    for ch in changes:
        candidates = [e for e in seen.get(ch.order_id, []) if e[0] / 1000 <= ch.committed_at + 1]
        candidates = [e for e in candidates if e[0] / 1000 >= ch.committed_at - 1]
        if not candidates:
            continue
        ts_ms, lsn, modified, tick_at, done_at = min(candidates, key=lambda e: e[4])
        totals.append(done_at - ch.committed_at)
        k_ts = kafka_ts.get((ch.order_id, lsn), ts_ms / 1000)
        parts["debezium"].append(max(0.0, k_ts - ts_ms / 1000))
        parts["sink"].append(max(0.0, modified - k_ts))
        parts["sensor"].append(max(0.0, tick_at - modified))
        parts["spark"].append(done_at - tick_at)
    say(f"latency: {len(totals)} of {len(changes)} changes traced")
    name = (
        f"{rate}/s for {duration_s:.0f}s, sensor {sensor_interval_s}s, flush {flush_interval_ms}ms"
    )
    figures = [
        Figure("e2e latency", f"p50 commit -> Hudi ({name})", _percentile(totals, 0.5), "s"),
        Figure("e2e latency", "p95 commit -> Hudi", _percentile(totals, 0.95), "s", "< 30 s"),
    ]
    for part, xs in parts.items():
        figures.append(Figure("e2e latency", f"median {part} share", _percentile(xs, 0.5), "s"))
    figures.append(
        Figure("e2e latency", "changes traced", len(totals), "", note=f"of {len(changes)}")
    )
    return figures
