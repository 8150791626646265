"""The fault-injection harness: one CDC pipeline per fault, a workload that outlives outages,
catch-up, and a row-for-row comparison of the Hudi lake with the outbox ``datalake.cdc_events``.

A ``FaultPipeline`` has a database, topic prefix, replication slot, connectors, raw prefix and
lake table of its own, so a fault never touches another test's data. Its sink cuts objects often
(short flush interval, few records per object), so faults land between objects, not in one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
from confluent_kafka import Consumer, TopicPartition

from bench.outbox import cdc_events_hudi
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.lake.readers import read_table
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX, TABLES, CapturedTable
from cdc_lake.source.database import prepare_source
from cdc_lake.source.workload import Workload
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import pid_alive, terminate
from cdc_lake.stack.services import Postgres
from cdc_lake.streaming.connect_client import ConnectClient, ConnectError
from cdc_lake.streaming.signals import request_snapshot
from cdc_lake.streaming.topics import end_offsets, wait_for_consumer, wait_for_offsets
from cdc_lake_tests.policies import as_lake_json
from cdc_lake_tests.topic_reader import reader_conf

# <prefix><topic>/partition=<p>/<topic>+<p>+<start offset, 20 digits>.jsonl
RAW_KEY = re.compile(r"\+(?P<partition>\d+)\+(?P<offset>\d{20})\.jsonl$")
JSON_COLUMNS = ("order_items", "products", "customer", "employee", "shipper", "shipment")
SOURCE_SQL = """
SELECT order_id, rtrim(customer_id), order_date::text, required_date::text, shipped_date::text,
       order_items, products, customer, employee, shipper, shipment,
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')
FROM datalake.cdc_events
"""


# --- results -------------------------------------------------------------------------------
@dataclass
class FaultRecord:
    """One fault's figures, for the summary table printed at the end of the run."""

    fault: str
    survived: bool | None = None  # None: the test did not get as far as the comparison
    lost: int | None = None
    duplicated: int | None = None
    extra: int | None = None
    stale: int | None = None
    changes: int = 0
    events: int = 0
    seconds: float = 0.0
    note: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # seconds per named step
    started: float = field(default_factory=time.monotonic, repr=False)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - t0, 1)

    def done(self, pipeline: FaultPipeline, diff: LakeDiff, note: str = "") -> None:
        """The figures, taken before the test asserts, so a failed fault is reported too."""
        diff.fill(self)
        self.changes, self.events = pipeline.changes, pipeline.events()
        self.seconds = round(time.monotonic() - self.started, 1)
        steps = ", ".join(f"{k} {v:.0f}s" for k, v in self.phases.items())
        where = pipeline.in_topic(diff)
        self.note = "; ".join(x for x in (note, diff.describe(), where, steps) if x)


@dataclass
class LakeDiff:
    """The lake against the source outbox, by order_id.

    lost: live source orders missing from the lake; duplicated: order_ids held by more than one
    lake row; extra: lake orders that the source does not have (deleted there); stale: orders on
    both sides whose content differs (any column, JSON compared parsed, or flagged deleted)."""

    lost: list[int]
    duplicated: list[int]
    extra: list[int]
    stale: list[int]
    source_rows: int
    lake_rows: int
    source_updated: dict[int, str] = field(default_factory=dict)  # of lost and stale orders

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.extra or self.stale)

    def describe(self) -> str:
        parts = [f"{self.source_rows} source rows, {self.lake_rows} lake rows"]
        for name in ("lost", "duplicated", "extra", "stale"):
            ids = getattr(self, name)
            if ids:
                parts.append(f"{name} {len(ids)} e.g. {sorted(ids)[:5]}")
        return "; ".join(parts)

    def fill(self, record: FaultRecord) -> None:
        record.survived = self.clean
        record.lost, record.duplicated = len(self.lost), len(self.duplicated)
        record.extra, record.stale = len(self.extra), len(self.stale)


# --- stack faults --------------------------------------------------------------------------
def kill_service(stack: LocalStack, name: str) -> int:
    """``kill -9`` one of the stack's servers at once, with its process group; returns its pid."""
    pidfile = stack.pidfile(stack.service(name))
    pid = pidfile.read()
    if pid is None:
        raise RuntimeError(f"{name} is not running: nothing to kill")
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # a server runs in a session of its own
    deadline = time.monotonic() + 10
    while pid_alive(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} (pid {pid}) survived SIGKILL")
        time.sleep(0.05)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped if this process started it
    pidfile.clear()  # so that LocalStack.up() starts it again
    return pid


def stop_service(stack: LocalStack, name: str) -> None:
    """Stop one server the way ``down`` does (its own stop signal, SIGKILL after 30 s)."""
    svc = stack.service(name)
    if not terminate(stack.pidfile(svc), svc.stop_signal):
        raise RuntimeError(f"{name} was not running")


def process_group(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(proc.name))
    return found


def same_instant(debezium: str | None, source: str) -> bool:
    """Debezium's ISO instant ("...T10:40:53.1234Z") against the source's UTC text."""
    if debezium is None:
        return False
    parse = dt.datetime.fromisoformat
    return parse(debezium).replace(tzinfo=None) == parse(source)


def start_offset(key: str) -> tuple[int, int]:
    """(partition, start offset) of a raw object key."""
    m = RAW_KEY.search(key)
    if not m:
        raise ValueError(f"not a raw CDC object key: {key}")
    return int(m.group("partition")), int(m.group("offset"))


# --- workload ------------------------------------------------------------------------------
class WorkloadThread(threading.Thread):
    """``Workload`` steps at a bounded rate and count in a thread of its own. A lost connection
    (a PostgreSQL restart) is not an error: the step is retried on a new connection, with the
    same random stream, until ``timeout_s``. Any other error is raised again by ``finish``."""

    def __init__(self, dsn: str, changes: int, rate: float, seed: int, timeout_s: float = 300):
        super().__init__(name=f"workload-{seed}", daemon=True)
        self.dsn, self.changes, self.rate, self.seed = dsn, changes, rate, seed
        self.timeout_s = timeout_s
        self.steps = 0
        self.reconnects = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        workload: Workload | None = None
        conn = None
        try:
            while self.steps < self.changes and not self._halt.is_set():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"workload: {self.steps}/{self.changes} changes made")
                try:
                    if conn is None:
                        conn = psycopg2.connect(self.dsn, connect_timeout=3)
                        if workload is None:
                            workload = Workload(conn, seed=self.seed)
                        workload.conn = conn
                    assert workload is not None
                    workload.step()
                    self.steps += 1
                except (psycopg2.OperationalError, psycopg2.InterfaceError):
                    # The server went away: that change was rolled back; the source stays the
                    # truth the lake is compared with.
                    self.reconnects += 1
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            conn.close()
                    conn = None
                self._halt.wait(1.0 / self.rate)
        except BaseException as e:  # handed to the test by finish()
            self.error = e
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def stop(self) -> None:
        self._halt.set()

    def finish(self, timeout_s: float = 300) -> int:
        """Wait for the last change; returns the number of changes made."""
        self.join(timeout_s)
        if self.is_alive():
            self.stop()
            raise TimeoutError(f"workload still running after {timeout_s:.0f}s")
        if self.error is not None:
            raise self.error
        return self.steps


# --- topic ---------------------------------------------------------------------------------
class TopicWatcher:
    """Reads a topic incrementally: records seen, the highest ``__lsn``, each order's latest
    change (by ``__source_ts_ms`` then ``__lsn``, as the lake orders them)."""

    def __init__(self, conf: Mapping[str, Any], topic: str):
        self.conf, self.topic = dict(conf), topic
        self.consumer = Consumer(
            {
                **self.conf,
                "group.id": f"faults-watch-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        self.positions: dict[int, int] = {}
        self.max_lsn = -1
        self.records = 0
        # order_id -> ((__source_ts_ms, __lsn), deleted, updated_at) of its latest change
        self.latest: dict[int, tuple[tuple[int, int], bool, str | None]] = {}

    def read(self, timeout_s: float = 20) -> None:
        ends = end_offsets(self.conf, self.topic)
        if set(ends) - set(self.positions):
            self.positions = {p: self.positions.get(p, 0) for p in ends}
            self.consumer.assign(
                [TopicPartition(self.topic, p, off) for p, off in self.positions.items()]
            )
        deadline = time.monotonic() + timeout_s
        while any(self.positions[p] < e for p, e in ends.items()):
            if time.monotonic() > deadline:
                return
            for msg in self.consumer.consume(500, timeout=0.5):
                part, off = msg.partition(), msg.offset()
                if msg.error() or part is None or off is None:
                    continue
                self.positions[part] = off + 1
                self.records += 1
                value = msg.value()
                if value:
                    self._track(json.loads(value))

    def _track(self, event: dict[str, Any]) -> None:
        lsn = int(event.get("__lsn") or -1)
        self.max_lsn = max(self.max_lsn, lsn)
        order_id = event.get("order_id")
        if order_id is None:
            return
        order = (int(event.get("__source_ts_ms") or -1), lsn)
        seen = self.latest.get(int(order_id))
        if seen is None or order >= seen[0]:
            deleted = str(event.get("__deleted")).lower() == "true" or event.get("__op") == "d"
            self.latest[int(order_id)] = (order, deleted, event.get("updated_at"))

    def close(self) -> None:
        self.consumer.close()


class CommittedOffsets:
    """The sink's committed offsets, read on one open consumer (fast enough to poll)."""

    def __init__(self, conf: Mapping[str, Any], group: str, topic: str):
        self.topic = topic
        self.consumer = Consumer(
            {**conf, "group.id": group, "enable.auto.commit": False, "log_level": 0}
        )

    def read(self, partitions: list[int], timeout_s: float = 5) -> dict[int, int]:
        got = self.consumer.committed(
            [TopicPartition(self.topic, p) for p in partitions], timeout=timeout_s
        )
        return {tp.partition: max(tp.offset, 0) for tp in got}

    def close(self) -> None:
        self.consumer.close()


class PartitionHolder:
    """A stand-in member of the sink's consumer group that takes its partitions and commits
    nothing, so the sink cannot consume until ``release``. Its client id sorts before
    Connect's ("connector-consumer-..."), so the range assignor gives it a lone partition."""

    def __init__(self, conf: Mapping[str, Any], group: str, topic: str):
        self.consumer = Consumer(
            {
                **conf,
                "group.id": group,
                "client.id": "aaa-faults-partition-holder",
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
                "log_level": 0,
            }
        )
        self.consumer.subscribe([topic])
        self.assigned: set[int] = set()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="partition-holder", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        # Polling keeps the member alive and takes part in rebalances; records are ignored.
        while not self._halt.is_set():
            self.consumer.poll(0.2)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}

    def wait_assigned(self, partitions: set[int], timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not partitions <= self.assigned:
            if time.monotonic() > deadline:
                raise TimeoutError(f"holder got partitions {self.assigned}, wanted {partitions}")
            time.sleep(0.2)

    def release(self) -> None:
        self._halt.set()
        self._thread.join(10)
        self.consumer.close()  # leaves the group; nothing was committed


# --- the pipeline --------------------------------------------------------------------------
class FaultPipeline:
    """Source database, connectors, raw prefix and lake table of one fault."""

    def __init__(
        self,
        stack: LocalStack,
        name: str,
        sample_scale: float = 0.25,
        flush_records: int = 50,
        flush_interval_ms: int = 1000,
    ):
        self.stack, self.name = stack, name
        self.database = f"faults_{name}"
        slug = name.replace("_", "-")
        self.resources = local_resources(
            stack.settings,
            lake={
                "lake_prefix": f"faults/{slug}",
                "order_items_prefix": f"faults/{slug}/order_items",
                "quarantine_prefix": f"faults/{slug}/quarantine",
            },
            database=self.database,
            topic_prefix=f"faults-{slug}",
            slot_name=f"faults_{name}_slot",
            raw_prefix=f"faults/{slug}/",
            flush_records=flush_records,
            flush_interval_ms=flush_interval_ms,
            sample_scale=sample_scale,
        )
        self.cdc = self.resources["cdc"]
        self.lake = self.resources["lake"]
        # Offsets and lag as the Dagster side reads them; records as the tests' reader.
        self.kafka_conf: dict[str, Any] = self.resources["kafka"].client_conf()
        self.reader_conf = reader_conf(stack.settings)
        self.connect = ConnectClient(
            stack.settings.connect_url, timeout_s=10, auth=stack.settings.connect_auth
        )
        self.s3: Any = stack.service("s3").client()  # type: ignore[attr-defined]
        self.changes = 0  # committed by this pipeline's workloads and markers
        self.workloads: list[WorkloadThread] = []
        self._watcher: TopicWatcher | None = None

    # --- setup -----------------------------------------------------------------------------
    @property
    def dsn(self) -> str:
        return self.stack.settings.pg_dsn(database=self.database)

    def sql(self, *statements: str, args: tuple = ()) -> list[tuple]:
        """Runs the statements in one transaction on the pipeline's database; the last one's
        rows."""
        conn = psycopg2.connect(self.dsn, connect_timeout=5)
        try:
            rows: list[tuple] = []
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement, args)
                    rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows
        finally:
            conn.close()

    def create_source(self) -> None:
        pg = self.stack.service("postgres")
        assert isinstance(pg, Postgres)
        pg.create_database(self.database, replace=True)
        assert dg.materialize([cdc_events_outbox], resources=self.resources).success

    def start(self) -> None:
        """Source, Debezium, sink: the snapshot in S3, committed."""
        self.create_source()
        self.deploy_connectors()

    def deploy_connectors(self) -> dg.ExecuteInProcessResult:
        result = dg.materialize([cdc_events_topic, raw_cdc_files], resources=self.resources)
        assert result.success
        return result

    def capture_more(self, tables: Sequence[CapturedTable], timeout_s: float = 180) -> None:
        """Adds ``tables`` (declared in a test, not in ``TABLES``) to the running pipeline, as a
        user adds a table: prepared and published, in both connectors' configs, and sent by an
        incremental snapshot (Debezium's way for a table added after its initial snapshot),
        re-signalled while its topic stays empty (a task on the old config drops a signal)."""
        postgres = self.resources["postgres"]
        every = (*TABLES, *tables)
        conn = psycopg2.connect(self.dsn, connect_timeout=5)
        try:
            prepare_source(conn, postgres.replication_user, progress=lambda _: None,
                           captured=every)  # fmt: skip
        finally:
            conn.close()
        settings = replace(self.cdc.connector_settings(postgres), tables=every)
        for name, config in ((self.cdc.source_connector_name, settings.debezium()),
                             (self.cdc.sink_connector_name, settings.s3_sink_local())):  # fmt: skip
            self.connect.deploy(name, config, timeout_s)
        deadline = time.monotonic() + timeout_s
        for table in tables:
            topic = self.cdc.topic_of(table)

            def held(topic: str = topic) -> int:
                with contextlib.suppress(KeyError, ConnectionError):
                    return sum(end_offsets(self.kafka_conf, topic).values())
                return 0

            while held() == 0:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}: no snapshot of {table.source} in {timeout_s}s")
                conn = psycopg2.connect(self.dsn, connect_timeout=5)
                try:
                    request_snapshot(conn, None, self.cdc.publication, table=table)
                finally:
                    conn.close()
                wait_until = min(deadline, time.monotonic() + 20)
                while held() == 0 and time.monotonic() < wait_until:
                    time.sleep(1.0)
            # The whole table: an incremental snapshot sends it in chunks.
            (rows,) = self.sql(f"SELECT count(*) FROM {table.source}")
            wait_for_offsets(self.kafka_conf, topic, at_least=rows[0],
                             timeout_s=max(10.0, deadline - time.monotonic()))  # fmt: skip

    def wait_running(self, timeout_s: float = 180) -> None:
        for name in (self.cdc.source_connector_name, self.cdc.sink_connector_name):
            self.connect.wait_running(name, timeout_s=timeout_s)

    # --- workload and catch-up -------------------------------------------------------------
    def workload(self, changes: int, rate: float, seed: int) -> WorkloadThread:
        thread = WorkloadThread(self.dsn, changes, rate, seed)
        self.workloads.append(thread)
        thread.start()
        return thread

    def finish_workloads(self, timeout_s: float = 300) -> None:
        for thread in self.workloads:
            if thread.is_alive() or thread.error is not None:
                thread.finish(timeout_s)
        self.changes += sum(t.steps for t in self.workloads)
        self.workloads = []

    def marker(self) -> int:
        """A new order committed after everything else; returns a WAL position below its
        change, so the topic holds everything once it holds an event at or past it."""
        conn = psycopg2.connect(self.dsn, connect_timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_wal_insert_lsn() - '0/0'")
                row = cur.fetchone()
                assert row is not None
                Workload(conn, seed=99).new_order(cur)
            conn.commit()
        finally:
            conn.close()
        self.changes += 1
        return int(row[0])

    @property
    def watcher(self) -> TopicWatcher:
        if self._watcher is None:
            self._watcher = TopicWatcher(self.reader_conf, self.cdc.topic_of(OUTBOX))
        return self._watcher

    def publish_backlog(self, timeout_s: float = 240) -> None:
        """Workloads done, and Debezium has published their last commit (a marker after it)."""
        deadline = time.monotonic() + timeout_s
        self.finish_workloads(timeout_s)
        lsn = self.marker()
        while self.watcher.max_lsn < lsn:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.cdc.topic_of(OUTBOX)}: Debezium did not publish the marker (LSN "
                    f"{lsn}) in {timeout_s:.0f}s; highest __lsn seen {self.watcher.max_lsn}"
                )
            with contextlib.suppress(ConnectionError, KeyError):
                self.watcher.read()
            time.sleep(0.5)

    def catch_up(self, timeout_s: float = 240) -> None:
        """Workload done; Debezium has published the last commit; the sink has committed the
        whole topic (so it is all in S3)."""
        deadline = time.monotonic() + timeout_s
        self.publish_backlog(timeout_s)
        wait_for_consumer(
            self.kafka_conf,
            self.cdc.sink_consumer_group,
            self.cdc.topic_of(OUTBOX),
            max(10.0, deadline - time.monotonic()),
        )

    def events(self) -> int:
        """Records in the topic (snapshot, changes, and any redelivered duplicates)."""
        return sum(end_offsets(self.kafka_conf, self.cdc.topic_of(OUTBOX)).values())

    # --- lake ------------------------------------------------------------------------------
    def refresh(self) -> dict[str, Any]:
        """The Hudi asset, as the sensor's run would materialise it; returns its metadata."""
        result = dg.materialize([cdc_events_hudi], resources=self.resources)
        assert result.success
        mats = result.get_asset_materialization_events()
        meta = mats[0].materialization.metadata if mats else {}
        return {k: v.value for k, v in meta.items()}

    def timeline(self, suffix: str = "") -> dict[str, set[str]]:
        """Instant -> states (requested, inflight, completed) in the active timeline of the
        outbox's table (of its history table: ``suffix`` "_history").

        Hudi 1.x keeps it under ``.hoodie/timeline/``: ``<t>.commit.requested``, ``<t>.inflight``
        and ``<t>_<completion time>.commit``; the metadata table's own timeline lies deeper."""
        out: dict[str, set[str]] = {}
        for prefix in (".hoodie/timeline/", ".hoodie/"):
            page = self.s3.list_objects_v2(
                Bucket=self.lake.lake_bucket,
                Prefix=f"{self.lake.table_prefix_of(OUTBOX)}{suffix}/{prefix}",
                Delimiter="/",
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

    def compare(self, spark: Any) -> LakeDiff:
        from pyspark.sql import functions as F

        conn = psycopg2.connect(self.dsn, connect_timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute(SOURCE_SQL)
                source = {r[0]: tuple(r[1:]) for r in cur.fetchall()}
        finally:
            conn.close()
        table = read_table(spark, self.lake.table_path_of(OUTBOX)).select(
            F.col("order_id").cast("long").alias("order_id"),
            F.rtrim("customer_id").alias("customer_id"),
            *[F.col(c).cast("string").alias(c) for c in ("order_date", "required_date",
                                                          "shipped_date")],
            *JSON_COLUMNS,
            F.date_format("updated_at", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("updated_at"),
            F.coalesce(F.col("is_deleted"), F.lit(False)).alias("is_deleted"),
        )  # fmt: skip
        lake: dict[int, list[tuple]] = {}
        for r in table.collect():
            lake.setdefault(int(r["order_id"]), []).append(tuple(r))

        salt = self.stack.settings.credentials.column_salt

        def content(row: tuple, json_text: bool) -> tuple:
            # customer_id, 3 dates, 6 JSON columns, updated_at; the source's JSON under the
            # outbox's field policies (the customer's phone hashed, fax left out).
            docs = [json.loads(v) if json_text and v is not None else v for v in row[4:10]]
            if not json_text:
                pairs = zip(JSON_COLUMNS, docs, strict=True)
                docs = [as_lake_json(OUTBOX, c, d, salt) for c, d in pairs]
            return (*row[0:4], *docs, row[10])

        stale = []
        for order_id, rows in lake.items():
            if order_id not in source:
                continue
            want = content(source[order_id], json_text=False)
            if any(r[-1] or content(r[1:-1], json_text=True) != want for r in rows):
                stale.append(order_id)
        lost = [o for o in source if o not in lake]
        return LakeDiff(
            lost=lost,
            duplicated=[o for o, rows in lake.items() if len(rows) > 1],
            extra=[o for o in lake if o not in source],
            stale=stale,
            source_rows=len(source),
            lake_rows=sum(len(rows) for rows in lake.values()),
            source_updated={o: source[o][-1] for o in lost + stale},
        )

    def in_topic(self, diff: LakeDiff) -> str:
        """Where the wrong rows went wrong: how many of them have their final change (the
        source's state) in Kafka. All of them: lost between Kafka and the lake; none: Debezium
        never published it."""
        wrong = diff.lost + diff.extra + diff.stale
        if not wrong:
            return ""
        with contextlib.suppress(ConnectionError, KeyError):
            self.watcher.read()
        latest = self.watcher.latest

        def final_in_topic(order_id: int) -> bool:
            if order_id not in latest:
                return False
            _, deleted, updated = latest[order_id]
            if order_id in diff.extra:
                return deleted
            return not deleted and same_instant(updated, diff.source_updated[order_id])

        n = sum(final_in_topic(o) for o in wrong)
        return f"the topic holds the final change of {n} of the {len(wrong)} wrong orders"

    # --- raw objects -----------------------------------------------------------------------
    def raw_keys(self, start_after: str | None = None) -> list[str]:
        """The outbox topic's raw object keys, in order (the customers' have a folder of their
        own, which sorts after it)."""
        keys: list[str] = []
        prefix = f"{self.cdc.raw_prefix}{self.cdc.topic_of(OUTBOX)}/"
        kwargs: dict[str, Any] = {"Bucket": self.cdc.raw_bucket, "Prefix": prefix}
        if start_after:
            kwargs["StartAfter"] = start_after
        while True:
            page = self.s3.list_objects_v2(**kwargs)
            keys += [o["Key"] for o in page.get("Contents", []) if RAW_KEY.search(o["Key"])]
            if not page.get("IsTruncated"):
                return sorted(keys)
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def raw_lines(self, key: str) -> list[str]:
        body = self.s3.get_object(Bucket=self.cdc.raw_bucket, Key=key)["Body"].read()
        return [line for line in body.decode().split("\n") if line.strip()]

    # --- teardown --------------------------------------------------------------------------
    def close(self) -> None:
        """Leave the shared stack as it was: servers up, connectors gone, slot dropped."""
        for thread in self.workloads:
            thread.stop()
        for thread in self.workloads:
            thread.join(30)
        if self._watcher is not None:
            self._watcher.close()
        self.stack.up()  # whatever the fault left down
        self._delete_connectors()
        self._drop_slot_and_database()

    def _delete_connectors(self, timeout_s: float = 60) -> None:
        names = {self.cdc.sink_connector_name, self.cdc.source_connector_name}
        deadline = time.monotonic() + timeout_s
        while names & set(self.connect.connectors()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"connectors {sorted(names)} still there after {timeout_s}s")
            for name in names:
                # A worker in the middle of a rebalance answers 409: ask again.
                with contextlib.suppress(ConnectError):
                    self.connect.delete(name)
            time.sleep(0.5)

    def _drop_slot_and_database(self, timeout_s: float = 60) -> None:
        s = self.stack.settings
        deadline = time.monotonic() + timeout_s
        while True:
            # The walsender of the deleted connector exits soon after; until then the slot is
            # active and cannot be dropped.
            conn = psycopg2.connect(s.pg_dsn(s.replication_user, database=self.database))
            conn.autocommit = True
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE slot_name = %s",
                        (self.cdc.slot_name,),
                    )
                break
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
            finally:
                conn.close()
        conn = psycopg2.connect(s.pg_dsn(database="postgres"))
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        finally:
            conn.close()
