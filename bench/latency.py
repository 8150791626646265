"""End-to-end latency: from a PostgreSQL commit until the change is visible in the Hudi table,
with the settings a user gets out of the box (**default**) and with tuned ones, in one run.

The full local stack runs the real path: outbox trigger → Debezium → Kafka → S3 sink → the raw
files sensor → a materialization of the Hudi asset. Each profile has a pipeline of its own
(database, topic, replication slot, raw prefix, Hudi table and a persistent Dagster instance),
so the two never share data. The workload commits changes at a steady rate in a background
thread; the profiles take turns, in the same process and on the same warm Spark session, in
rounds ordered A B, B A, A B, ... (each round: ``duration / rounds`` seconds of workload, then
until every change is in the lake), and each round both get the same workload (same seed).

The sensor is evaluated the way ``dagster-daemon`` evaluates it: the daemon's sensor loop runs
every ``MIN_INTERVAL_LOOP_TIME`` (5 s), and a sensor ticks on the first loop at least
``minimum_interval_seconds`` after its last tick; ticks that fall while a run is in flight
are skipped (the sensor itself skips them). When a tick asks for a run, the Hudi asset
(``cdc_events_hudi``, with its checks) is materialized with ``dg.materialize`` on the
profile's instance, so it reads its previous materialization as a Dagster run would. Not
counted: launching a run process and starting its JVM (the Spark session is already up).

Each change is then timed through its stages:
- **debezium**: the PostgreSQL commit (``__source_ts_ms``) to the Kafka record's timestamp;
- **sink**: the Kafka record to the raw object that holds it (LastModified);
- **sensor**: the raw object to the tick that requested the run that ingested it;
- **run**: that tick to the end of the materialization (commit and checks). Which run ingested
  an event is read from the lake's checkpoint (the last Kafka offset per partition) that each
  materialization reports, the one the sensor reads too.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
from confluent_kafka import Consumer, TopicPartition

from bench.harness import Figure, materialize
from bench.outbox import HUDI_KEY, cdc_events_hudi, raw_cdc_files_sensor
from bench.pipeline import BenchPipeline
from bench.refresh_lake import new_commit
from cdc_lake.defs.unchanged import lake_checkpoint
from cdc_lake.lake.checkpoint import Checkpoint, pending
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.source.workload import Change, Workload
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env
from cdc_lake.streaming.topics import end_offsets

try:  # how often dagster-daemon's sensor loop runs: no sensor ticks more often than this
    from dagster._daemon.sensor import MIN_INTERVAL_LOOP_TIME as DAEMON_LOOP_S
except ImportError:  # pragma: no cover - moved in another Dagster version
    DAEMON_LOOP_S = 5

GOALS = {"default": "< 30 s"}
# How long after its PostgreSQL commit the workload may see COMMIT return (machine load).
MATCH_WINDOW_S = 10.0
TUNED_GOAL = "< 15 s"


@dataclass(frozen=True)
class Profile:
    """A set of latency settings. ``None`` means what a user gets out of the box: the S3 sink's
    flush interval as the pipeline resource declares it, the sensor's
    ``minimum_interval_seconds``."""

    name: str
    flush_interval_ms: int | None = None
    sensor_interval_s: float | None = None
    hudi_options: dict[str, str] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_")[:20] or "p"


def default_profiles(
    tuned_flush_ms: int = 2_000,
    tuned_sensor_s: float = 5.0,
    variants: list[dict[str, str]] | None = None,
) -> list[Profile]:
    """Default, tuned, and for each variant the tuned settings plus those Hudi options."""
    profiles = [Profile("default"), Profile("tuned", tuned_flush_ms, tuned_sensor_s)]
    for i, options in enumerate(variants or [], start=1):
        profiles.append(Profile(f"tuned{i}", tuned_flush_ms, tuned_sensor_s, dict(options)))
    return profiles


def tick_period(interval_s: float, loop_s: float = DAEMON_LOOP_S) -> float:
    """Seconds between a sensor's ticks under dagster-daemon: the first loop at least
    ``interval_s`` after the last tick."""
    return max(1, math.ceil(interval_s / loop_s - 1e-9)) * loop_s


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


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


@dataclass
class _Event:
    ts_ms: int  # __source_ts_ms: the PostgreSQL commit
    lsn: int
    modified: float  # the raw object's LastModified
    tick_at: float  # the tick that requested the run that ingested it
    done_at: float  # that run's end


@dataclass
class _Trace:
    total: float
    debezium: float
    sink: float
    sensor: float
    run: float


class _Lane:
    """One profile's own pipeline: database, topic, slot, raw prefix, table and instance."""

    def __init__(
        self,
        stack: LocalStack,
        profile: Profile,
        say: Callable[[str], None],
        spark: str = "in_process",
    ):
        self.stack, self.profile, self.say = stack, profile, say
        s = stack.settings
        slug = profile.slug
        self.database = f"cdc_lake_lat_{slug}"
        pipeline: dict[str, Any] = {
            "database": self.database,
            "topic_prefix": f"lat_{slug}",
            "slot_name": f"lat_{slug}_slot",
            "raw_prefix": f"lat-{slug}-events/",
        }
        if profile.flush_interval_ms is not None:
            pipeline["flush_interval_ms"] = profile.flush_interval_ms
        lake: dict[str, Any] = {"lake_prefix": f"lat/{slug}"}
        if profile.hudi_options:
            lake["hudi_options"] = dict(profile.hudi_options)
        # In process: the benchmark's own session, already warm, and the lake server is not in
        # the figure. "server": the stack's own lake server, warm too.
        self.resources = local_resources(s, lake=lake, spark=spark, **pipeline)
        self.cdc = self.resources["cdc"]
        self.flush_ms: int = self.cdc.flush_interval_ms
        self.interval_s: float = (
            profile.sensor_interval_s
            if profile.sensor_interval_s is not None
            else float(raw_cdc_files_sensor.minimum_interval_seconds or 0)
        )
        self.period = tick_period(self.interval_s)
        home = Path(s.state_dir) / "bench-latency" / slug
        home.mkdir(parents=True, exist_ok=True)
        self.instance = dg.DagsterInstance.local_temp(
            tempdir=str(home), overrides={"telemetry": {"enabled": False}}
        )
        self.s3 = stack.service("s3").client()  # type: ignore[attr-defined]
        self.layout = RawLayout(self.cdc.raw_prefix, self.cdc.topic_of(OUTBOX))
        self.pipeline = BenchPipeline(stack, self.resources, self.instance)
        self.changes: list[Change] = []
        self.events: dict[int, list[_Event]] = {}  # order_id -> its events in the lake
        self.run_seconds: list[float] = []
        self.runs_without_commit = 0

    def describe(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.profile.hudi_options.items())
        return (
            f"flush {self.flush_ms / 1000:g}s, sensor {self.interval_s:g}s "
            f"(ticks every {self.period:g}s){extra}"
        )

    def setup(self) -> None:
        self.say(f"latency [{self.profile.name}]: outbox, topic and raw files ({self.describe()})")
        # The snapshot, before any clock starts (and the first Hudi write in this JVM).
        self.pipeline.setup(self._materialize)

    def close(self) -> None:
        self.instance.dispose()

    def _materialize(self) -> dg.ExecuteInProcessResult:
        result = materialize([cdc_events_hudi], resources=self.resources, instance=self.instance)
        assert result.success
        return result

    def _collect(self, before: dict | None, after: dict | None, tick_at: float, done: float):
        """The events the run moved the lake's checkpoint over, with the raw object of each."""
        if not after:
            return
        old = Checkpoint.from_json(before) if before else Checkpoint(self.layout.topic)
        new = Checkpoint.from_json(after)
        plan = pending(self.s3, self.stack.settings.raw_bucket, self.layout, before)
        for obj in plan.objects:
            if obj.start_offset > new.offset(obj.partition):
                continue
            body = self.s3.get_object(Bucket=self.stack.settings.raw_bucket, Key=obj.key)
            modified = body["LastModified"].timestamp()
            for line in body["Body"].read().decode().splitlines():
                if not line:
                    continue
                ev = json.loads(line)
                p, off = int(ev["__kafka_partition"]), int(ev["__kafka_offset"])
                if old.offset(p) < off <= new.offset(p):
                    self.events.setdefault(ev["order_id"], []).append(
                        _Event(ev["__source_ts_ms"], ev["__lsn"], modified, tick_at, done)
                    )

    def _match(self, ch: Change) -> _Event | None:
        """The change's event: the order's latest PostgreSQL commit at or before the moment the
        workload saw COMMIT return (on a loaded machine that can be seconds later)."""
        found = [
            e
            for e in self.events.get(ch.order_id, [])
            if ch.committed_at - MATCH_WINDOW_S <= e.ts_ms / 1000 <= ch.committed_at + 0.5
        ]
        return max(found, key=lambda e: (e.ts_ms, -e.done_at)) if found else None

    def round(self, duration_s: float, rate: float, seed: int) -> None:
        """``duration_s`` of workload, then ticks until each of its changes is in the lake."""
        s = self.stack.settings
        changes: list[Change] = []
        ended: list[float] = []

        def workload() -> None:
            conn = psycopg2.connect(s.pg_dsn(database=self.database))
            try:
                changes.extend(
                    Workload(conn, seed=seed).run(max(1, int(duration_s * rate)), rate_per_s=rate)
                )
            finally:
                conn.close()
                ended.append(time.time())

        self.say(
            f"latency [{self.profile.name}]: {duration_s:.0f}s of workload at {rate}/s, "
            f"{self.describe()}"
        )
        worker = threading.Thread(target=workload)
        origin = time.time()
        worker.start()
        # Up to this long after the workload for the last changes to reach the lake.
        drain_s = 120 + self.flush_ms / 1000 + 2 * self.period
        k = 1
        while True:
            tick_at = origin + k * self.period
            time.sleep(max(0.0, tick_at - time.time()))
            if self.pipeline.tick():
                before = lake_checkpoint(self.instance, HUDI_KEY)
                outcome = self._materialize()
                done = time.time()
                self.run_seconds.append(done - tick_at)
                if not new_commit(outcome):
                    self.runs_without_commit += 1
                self._collect(before, lake_checkpoint(self.instance, HUDI_KEY), tick_at, done)
                self.say(f"  [{self.profile.name}] run: {done - tick_at:.1f}s after its tick")
                # The ticks that fell while the run was in flight skipped.
                k = max(k + 1, math.ceil((done - origin) / self.period))
            else:
                k += 1
            if worker.is_alive():
                continue
            if all(self._match(ch) for ch in changes):
                break
            # A change no event matches (should not happen) must not hold the round up: stop
            # once the lake has every record Debezium published since the workload ended.
            if ended and time.time() > ended[0] + 15 and self.pipeline.caught_up():
                self.say(f"latency [{self.profile.name}]: caught up; some changes not traced")
                break
            if ended and time.time() > ended[0] + drain_s:
                self.say(f"latency [{self.profile.name}]: gave up waiting for the last changes")
                break
        worker.join()
        self.changes.extend(changes)

    def traces(self) -> list[_Trace]:
        # The records' own times, read as the benchmarks' Kafka user (Dagster's only describes).
        s = self.stack.settings
        kafka_ts = _kafka_times(s.kafka_client_conf(s.kafka_tester_user), self.cdc.topic_of(OUTBOX))
        out = []
        for ch in self.changes:
            e = self._match(ch)
            if e is None:
                continue
            k_ts = kafka_ts.get((ch.order_id, e.lsn), e.ts_ms / 1000)
            out.append(
                _Trace(
                    total=e.done_at - ch.committed_at,
                    debezium=max(0.0, k_ts - e.ts_ms / 1000),
                    sink=max(0.0, e.modified - k_ts),
                    sensor=max(0.0, e.tick_at - e.modified),
                    run=e.done_at - e.tick_at,
                )
            )
        return out


def bench_latency(
    stack: LocalStack,
    duration_s: float,
    rate: float,
    profiles: list[Profile],
    rounds: int,
    say: Callable[[str], None],
    stacks: dict[str, LocalStack] | None = None,
    spark: str = "in_process",
) -> list[Figure]:
    """``stacks``: a profile's own stack, by its name (the others run on ``stack``); their
    credentials must be ``stack``'s, as the resources read them from one environment."""
    os.environ.update(local_secret_env(stack.settings))
    lanes = [_Lane((stacks or {}).get(p.name, stack), p, say, spark) for p in profiles]
    try:
        for lane in lanes:
            lane.setup()
        rounds = max(1, rounds)
        order: list[str] = []
        for r in range(rounds):
            for lane in lanes if r % 2 == 0 else lanes[::-1]:
                order.append(lane.profile.name)
                lane.round(duration_s / rounds, rate, seed=11 + r)
        how = (
            f"{rate}/s for {duration_s:.0f}s per profile in {rounds} rounds "
            f"({' '.join(order)}), one after the other in one process"
        )
        say(f"latency: {how}")
        return _figures(lanes, how)
    finally:
        for lane in lanes:
            lane.close()


def _figures(lanes: list[_Lane], how: str) -> list[Figure]:
    figures: list[Figure] = []
    p50: dict[str, float] = {}
    p95: dict[str, float] = {}
    for lane in lanes:
        name = lane.profile.name
        traces = lane.traces()
        totals = [t.total for t in traces]
        p50[name], p95[name] = _percentile(totals, 0.5), _percentile(totals, 0.95)
        goal = GOALS.get(name, TUNED_GOAL)
        figures += [
            Figure("e2e latency", f"{name}: p50 commit -> Hudi", p50[name], "s", "",
                   lane.describe()),
            Figure("e2e latency", f"{name}: p95 commit -> Hudi", p95[name], "s", goal, how),
        ]  # fmt: skip
        for part in ("debezium", "sink", "sensor", "run"):
            xs = [getattr(t, part) for t in traces]
            figures.append(Figure("e2e latency", f"{name}: median {part} share", _median(xs), "s"))
        figures += [
            Figure("e2e latency", f"{name}: median Hudi run (tick -> materialized)",
                   _median(lane.run_seconds), "s", "",
                   f"{len(lane.run_seconds)} runs, {lane.runs_without_commit} without a commit"),
            Figure("e2e latency", f"{name}: changes traced", len(traces), "",
                   note=f"of {len(lane.changes)}"),
        ]  # fmt: skip
    base = lanes[0].profile.name
    for lane in lanes[1:]:
        other = lane.profile.name
        for q, values in (("p50", p50), ("p95", p95)):
            ratio = values[base] / values[other] if values[other] else math.nan
            figures.append(
                Figure("e2e latency", f"ratio {base} / {other}, {q}", ratio, "x", "", "same run")
            )
        runs = _median(lanes[0].run_seconds) / _median(lane.run_seconds)
        figures.append(
            Figure("e2e latency", f"ratio {base} / {other}, median Hudi run", runs, "x", "",
                   "tick -> materialized, checks included")
        )  # fmt: skip
    return figures
