"""Connect-Iceberg: Apache Iceberg's Kafka Connect sink on the same topic as cdc-lake, end to end.

What runs, in one worker process (its Spark session adds Iceberg's runtime to Hudi's):

- a database, Debezium connector, topic and S3 sink of the benchmark's own (names carry a run
  id), set up as the pipeline's assets do;
- Iceberg's sink (``org.apache.iceberg.connect.IcebergSinkConnector``, 1.10.1, the jars
  ``plugins/iceberg`` that ``cdc_lake/stack/maven/iceberg-connect`` resolves) on the stack's
  Connect worker under a connector name of its own, ``<prefix>-iceberg-sink``, reading the
  same topic. It auto-creates its table (schema inferred from the JSON records, evolving as
  columns first appear non-null) with ``order_id`` as the table's identifier field, and commits
  every ``commit_interval_ms``. Catalog: Iceberg's JDBC catalog in a SQLite file under the
  state directory (no password anywhere), data files on the stack's S3 through ``S3FileIO``,
  whose keys come from the worker's environment (the AWS SDK's default chain), like the S3
  sink's. Records carry their Kafka partition and offset (Connect's ``InsertField``), as the
  raw lines do;
- cdc-lake's side: the S3 sink and ``ingest_new_files`` into a Hudi table every
  ``refresh_interval_s`` (what the raw-files sensor requests; the sensor's own tick is in the
  ``latency`` benchmark, not here).

The sink is **append-only**: its ``ConfigDef`` (read from the running worker, reported as a
figure) has no upsert, CDC-operation or delete setting; the pre-donation Tabular sink's
``iceberg.tables.upsert-mode-enabled`` and ``iceberg.tables.cdc-field`` were not carried over to
Apache Iceberg. ``iceberg.tables.default-id-columns`` only marks identifier fields on the table
it creates. So it cannot be run "in upsert mode keyed by order_id with ``__deleted`` mapped to
deletes": every change becomes a row, deletes included. The benchmark runs it in that only mode
and measures what that means, as a failing case, not hidden:

- **latency**: a workload commits ``changes`` changes at ``rate`` per second (ending with a
  delete if it made none). A change's commit time
  is its ``__source_ts_ms`` (PostgreSQL's commit time, as Debezium reports it). It is visible in
  Hudi when the refresh that read it has committed (its end time), and in Iceberg at the commit
  time of the snapshot that added its data file (``snapshots.committed_at`` joined with
  ``entries``; the snapshot's timestamp is taken just before its metadata is swapped in the
  catalog, so Iceberg's side is a few milliseconds early). p50 and p95 over the changes seen on
  both sides; same workload, same topic, same run.
- **out-of-order delivery**: after the workload, for up to ``redeliver`` orders that have
  several changes and are still live, an older change is produced to the topic again after the
  newest (what a producer replaying from an earlier offset does). Both sinks receive it.
- **the end state against the source** (``datalake.cdc_events``, per-row hashes with the
  ``matches_source`` digest's canonical text, ``cdc_lake/lake/digest.py``):
  - Hudi's live rows: equal or not;
  - Iceberg, a plain read: rows against source rows, orders with more than one row, deleted
    orders still present, rows that are not their order's source row;
  - Iceberg, the latest change per key by ``(__source_ts_ms, __lsn)`` with deletes dropped (the
    view a reader must write over the append table, ordering.py's rule): equal or not;
  - Iceberg, the last change per key *as delivered* (by Kafka offset), deletes dropped: what an
    upsert sink keyed by order_id holds, since it replaces a row with whatever arrives next.
    The redelivered older changes make it differ from the source on those orders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import Figure, materialize
from bench.synthetic import OUTBOX_COLUMNS

SINK_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
PLUGIN = "plugins/iceberg"  # the classpath directory under the jars directory
CATALOG = "bench_ice"  # the sink's JDBC catalog's name (it keeps tables per catalog name)
TABLE = "orders"
NAMESPACE = "bench"
# Settings the pre-donation (Tabular) sink had for CDC; looked for in the running ConfigDef.
CDC_SETTINGS = ("upsert", "cdc", "delete")


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def sink_config(
    *,
    topic: str,
    table: str,
    control_topic: str,
    catalog_uri: str,
    warehouse: str,
    s3_endpoint: str,
    region: str,
    commit_interval_ms: int,
) -> dict[str, str]:
    """The Iceberg sink's connector config. No secret: S3FileIO reads the worker's AWS_*
    variables, and the SQLite catalog has no password."""
    return {
        "connector.class": SINK_CLASS,
        "tasks.max": "1",
        "topics": topic,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "kafkaPosition",
        "transforms.kafkaPosition.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.kafkaPosition.partition.field": "__kafka_partition",
        "transforms.kafkaPosition.offset.field": "__kafka_offset",
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.tables.default-id-columns": "order_id",
        "iceberg.control.topic": control_topic,
        "iceberg.control.commit.interval-ms": str(commit_interval_ms),
        "iceberg.catalog": CATALOG,
        "iceberg.catalog.type": "jdbc",
        "iceberg.catalog.uri": catalog_uri,
        "iceberg.catalog.warehouse": warehouse,
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.s3.endpoint": s3_endpoint,
        "iceberg.catalog.s3.path-style-access": "true",
        "iceberg.catalog.client.region": region,
        "iceberg.catalog.http-client.type": "urlconnection",
    }


def ensure_plugin(stack: Any, say: Callable[[str], None]) -> None:
    """Resolve the sink's jars if missing, and restart the stack's Connect worker if it was
    started without them (a worker scans its plugin path only when it starts)."""
    from cdc_lake.stack import LocalStack
    from cdc_lake.stack.install import install_optional

    install_optional(stack.settings, "iceberg-connect")
    client = stack.service("connect").client()
    if not any(p["class"] == SINK_CLASS for p in client.plugins()):
        say("connect-iceberg: restarting Connect so that it loads plugins/iceberg")
        worker = LocalStack(stack.settings, verbose=False, only=["connect"])
        worker.down()
        worker.up()
        if not any(p["class"] == SINK_CLASS for p in client.plugins()):
            raise RuntimeError(
                f"connect-iceberg: Connect does not list {SINK_CLASS} after a restart with "
                f"{stack.settings.classpath_dir(PLUGIN)} in its plugin path"
            )


def _topic_records(conf: dict[str, Any], topic: str) -> list[tuple[int, bytes | None, bytes]]:
    """(offset, key, value) of every record of the one-partition topic."""
    from confluent_kafka import Consumer, TopicPartition

    from cdc_lake.streaming.topics import end_offsets

    end = end_offsets(conf, topic).get(0, 0)
    consumer = Consumer({**conf, "group.id": f"bench-ice-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})  # fmt: skip
    out: list[tuple[int, bytes | None, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while len(out) < end:
            msg = consumer.poll(2.0)
            if msg is None or msg.error():
                continue
            offset, value = msg.offset(), msg.value()
            if value and offset is not None:
                out.append((offset, msg.key(), value))
            if offset is not None and offset + 1 >= end:
                break
    finally:
        consumer.close()
    return out


def _redeliver(conf: dict[str, Any], topic: str, live: set[int], n: int) -> list[int]:
    """Produce again, after the newest, an older change of up to ``n`` live orders with several
    changes on the topic; returns those orders."""
    from confluent_kafka import Producer

    by_order: dict[int, list[tuple[int, bytes | None, bytes]]] = {}
    for offset, key, value in _topic_records(conf, topic):
        ev = json.loads(value)
        if ev.get("__deleted") != "true":
            by_order.setdefault(ev["order_id"], []).append((offset, key, value))
    chosen = sorted(o for o, recs in by_order.items() if len(recs) >= 2 and o in live)[-n:]
    producer = Producer(conf)
    for order in chosen:
        _, key, value = by_order[order][-2]  # the change before the newest
        producer.produce(topic, value=value, key=key)
    producer.flush(30)
    return chosen


def _source_rows(conn: Any, salt: str) -> dict[int, int]:
    """order_id -> the row hash of ``cdc_lake/lake/digest.py`` for every outbox row (its field
    policies applied with the connector's ``salt``, as the topic holds the rows)."""
    # The digest's own canonical text and hash, per row instead of per bucket.
    from bench.synthetic import OUTBOX_SCHEMA
    from cdc_lake.lake.digest import column_salt, sql_row_hash

    sql = f"SELECT order_id, {sql_row_hash(OUTBOX_SCHEMA)} FROM datalake.cdc_events"
    with column_salt(conn, salt, OUTBOX_SCHEMA), conn.cursor() as cur:
        cur.execute(sql)
        return {int(o): int(h) for o, h in cur.fetchall()}


def _metadata_location(catalog_file: Path) -> str | None:
    """The sink's table's current metadata file, from its JDBC catalog (None before it exists)."""
    import sqlite3
    from contextlib import closing

    if not catalog_file.exists():
        return None
    with closing(sqlite3.connect(catalog_file, timeout=30)) as db:
        try:
            row = db.execute(
                "SELECT metadata_location FROM iceberg_tables "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                (CATALOG, NAMESPACE, TABLE),
            ).fetchone()
        except sqlite3.OperationalError:  # the catalog's tables are not created yet
            return None
    return row[0] if row else None


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in its own process: see the module docstring."""
    import psycopg2
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from bench.synthetic import OUTBOX_SCHEMA
    from cdc_lake.defs.raw.assets import raw_cdc_files
    from cdc_lake.defs.source.assets import cdc_events_outbox
    from cdc_lake.defs.streaming.assets import cdc_events_topic
    from cdc_lake.lake import transforms as T
    from cdc_lake.lake.digest import spark_row_hash
    from cdc_lake.lake.ingest import ingest_new_files
    from cdc_lake.lake.ordering import live_rows
    from cdc_lake.lake.raw_lines import RawSource
    from cdc_lake.lake.readers import read_table
    from cdc_lake.resources.local import local_resources
    from cdc_lake.source.captured import OUTBOX
    from cdc_lake.source.workload import Workload
    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.services import Postgres
    from cdc_lake.stack.settings import local_secret_env
    from cdc_lake.stack.spark import build_spark_session
    from cdc_lake.streaming.topics import end_offsets, wait_for_consumer

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    s = StackSettings.from_env(
        state_dir=Path(cfg["state_dir"]), port_base=cfg["port_base"], jars_dir=Path(cfg["jars"])
    )
    os.environ.update(local_secret_env(s))
    stack = LocalStack(s, verbose=False)
    run = uuid.uuid4().hex[:6]
    database, prefix = f"cdc_lake_ice_{run}", f"ice{run}"
    pg = stack.service("postgres")
    assert isinstance(pg, Postgres)
    pg.create_database(database)
    resources = local_resources(
        s,
        database=database,
        topic_prefix=prefix,
        slot_name=f"ice_{run}_slot",
        raw_prefix=f"ice-{run}/",
        flush_interval_ms=cfg["flush_interval_ms"],
        lake={"lake_prefix": f"bench-connect-iceberg/{run}"},
    )
    cdc = resources["cdc"]
    kafka_conf = resources["kafka"].client_conf()
    connect = stack.service("connect").client()  # type: ignore[attr-defined]
    s3 = stack.service("s3").client()  # type: ignore[attr-defined]
    out: dict[str, Any] = {"run": run, "commit_interval_ms": cfg["commit_interval_ms"]}

    # What the sink can be told: its ConfigDef, from the running worker.
    defs = connect._ok("GET", f"/connector-plugins/{SINK_CLASS}/config")
    names = sorted(d["name"] for d in defs)
    out["config_keys"] = len(names)
    out["cdc_keys"] = [n for n in names if any(w in n for w in CDC_SETTINGS)]
    out["version"] = next(
        (p.get("version") for p in connect.plugins() if p["class"] == SINK_CLASS), "?"
    )

    peer_jars = sorted(s.classpath_dir("peers").glob("iceberg-spark-runtime*.jar"))
    if not peer_jars:
        raise SystemExit("connect-iceberg: no Iceberg Spark runtime in the peers classpath")
    catalog_dir = s.state_dir / "bench-connect-iceberg" / run
    catalog_dir.mkdir(parents=True, exist_ok=True)
    catalog_file = catalog_dir / "catalog.db"
    # WAL: a reader never blocks the sink's commits (SQLite refuses them with SQLITE_BUSY while
    # a read transaction is open in the default journal mode).
    catalog_uri = f"jdbc:sqlite:{catalog_file}?journal_mode=WAL&busy_timeout=30000"
    warehouse = f"s3a://{s.lake_bucket}/bench-connect-iceberg/{run}/iceberg"
    spark = build_spark_session(
        s,
        app_name="cdc-lake-bench-connect-iceberg",
        extra={
            "spark.jars": ",".join(str(j) for j in [*s.spark_jars(), *peer_jars]),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")

    def ice(what: str = "") -> Any:
        """The sink's table as it is now (``what``: a metadata table, ``#snapshots``): the
        catalog's current metadata file, read with a fresh SQLite connection each time (a
        long-lived one in WAL mode would keep reading the snapshot it started with), and
        loaded by path, so Spark needs no catalog."""
        location = _metadata_location(catalog_file)
        if location is None:
            return None
        return spark.read.format("iceberg").load(location + what)

    say("connect-iceberg: materialising outbox, topic and raw files")
    assert materialize(
        [cdc_events_outbox, cdc_events_topic, raw_cdc_files], resources=resources
    ).success
    sink_name = f"{prefix}-iceberg-sink"
    config = sink_config(
        topic=cdc.topic_of(OUTBOX),
        table=f"{NAMESPACE}.{TABLE}",
        control_topic=f"{prefix}-iceberg-control",
        catalog_uri=catalog_uri,
        warehouse=warehouse,
        s3_endpoint=s.s3_endpoint,
        region=s.region,
        commit_interval_ms=cfg["commit_interval_ms"],
    )
    try:
        connect.deploy(sink_name, config, timeout_s=120, log=say)
        source = RawSource(s.raw_bucket, cdc.raw_prefix, cdc.topic_of(OUTBOX))
        table = resources["lake"].table_config(OUTBOX)
        hudi_seen: dict[tuple[int, int], float] = {}  # (order_id, lsn) -> refresh end

        def refresh() -> int:
            res = ingest_new_files(
                spark, s3, source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
            )
            done = time.time()
            for f in res.files:  # what the refresh read: the objects as they are now
                body = s3.get_object(Bucket=s.raw_bucket, Key=f.key)["Body"].read().decode()
                for line in body.splitlines():
                    if line:
                        ev = json.loads(line)
                        hudi_seen.setdefault((ev["order_id"], ev["__lsn"] or 0), done)
            return len(res.files)

        def iceberg_rows() -> int:
            now = ice()  # None until the sink creates it, with its first records
            return 0 if now is None else now.count()

        def caught_up(timeout_s: float) -> None:
            """Both sides hold every record the topic has now."""
            ends = end_offsets(kafka_conf, cdc.topic_of(OUTBOX))
            total = sum(ends.values())
            wait_for_consumer(kafka_conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX), timeout_s)
            refresh()
            deadline = time.monotonic() + timeout_s
            while (n := iceberg_rows()) < total:
                if time.monotonic() > deadline:
                    status = json.dumps(connect.status(sink_name))
                    raise TimeoutError(f"connect-iceberg: {n} of {total} rows after {timeout_s}s: "
                                       f"{status}")  # fmt: skip
                time.sleep(1.0)

        say("connect-iceberg: both sides take the snapshot before the clock starts")
        caught_up(cfg["timeout_s"])
        changes: list[Any] = []

        def workload() -> None:
            conn = psycopg2.connect(s.pg_dsn(database=database))
            try:
                changes.extend(Workload(conn, seed=15).run(cfg["changes"], rate_per_s=cfg["rate"]))
                if not any(c.kind == "delete" for c in changes):  # at least one delete
                    changes.extend(Workload(conn, seed=15, mix={"delete": 1.0}).run(1, 0))
            finally:
                conn.close()

        say(
            f"connect-iceberg: {cfg['changes']} changes at {cfg['rate']}/s; Hudi refresh every "
            f"{cfg['refresh_interval_s']}s, Iceberg commit every {cfg['commit_interval_ms']} ms"
        )
        started = time.time()
        thread = threading.Thread(target=workload)
        thread.start()
        while thread.is_alive():
            time.sleep(cfg["refresh_interval_s"])
            refresh()
        caught_up(cfg["timeout_s"])
        out["changes"] = len(changes)

        conn = psycopg2.connect(s.pg_dsn(database=database))
        try:
            source_rows = _source_rows(conn, s.credentials.column_salt)
        finally:
            conn.close()
        redelivered = _redeliver(
            s.kafka_client_conf(s.kafka_tester_user),
            cdc.topic_of(OUTBOX),
            set(source_rows),
            cfg["redeliver"],
        )
        out["redelivered"] = len(redelivered)
        caught_up(cfg["timeout_s"])
        connect.delete(sink_name)  # the sink runs only while the benchmark asks

        # Latency: commit -> visible, per change of the workload, on both sides.
        snap = ice()
        files = (
            ice("#entries")
            .join(ice("#snapshots"), "snapshot_id")
            .select(F.col("data_file.file_path").alias("_file"),
                    (F.unix_millis("committed_at") / 1000).alias("visible"))
            .groupBy("_file").agg(F.min("visible").alias("visible"))
        )  # fmt: skip
        ice_seen: dict[tuple[int, int], float] = {}
        for r in snap.select("order_id", "__lsn", "_file").join(files, "_file").collect():
            key = (int(r["order_id"]), int(r["__lsn"] or 0))
            ice_seen[key] = min(ice_seen.get(key, r["visible"]), r["visible"])
        commits: dict[tuple[int, int], float] = {}
        for r in snap.select("order_id", "__lsn", "__source_ts_ms", "__op").collect():
            if r["__op"] in ("c", "u", "d") and r["__source_ts_ms"] / 1000 >= started - 1:
                commits[(int(r["order_id"]), int(r["__lsn"] or 0))] = r["__source_ts_ms"] / 1000
        both = [k for k in commits if k in hudi_seen and k in ice_seen]
        out["latency_hudi"] = [hudi_seen[k] - commits[k] for k in both]
        out["latency_iceberg"] = [ice_seen[k] - commits[k] for k in both]
        out["workload_events"] = len(commits)

        # The end state against the source.
        row_hash = spark_row_hash(OUTBOX_SCHEMA)
        hudi_live = {
            int(r["order_id"]): int(r["h"])
            for r in live_rows(read_table(spark, table.base_path))
            .select("order_id", row_hash.alias("h")).collect()
        }  # fmt: skip
        out["hudi_equal"] = hudi_live == source_rows
        raw = snap.select(
            *[
                (F.col(f.name) if f.name in snap.columns else F.lit(None))
                .cast(f.dataType)
                .alias(f.name)
                for f in T.raw_event_schema(OUTBOX_SCHEMA).fields
                if f.name != T.CORRUPT_COLUMN
            ]
        )
        rows = [
            (int(r["order_id"]), int(r["h"]), r["cdc_ordering"], r["is_deleted"])
            for r in T.to_lake_rows(raw, OUTBOX_SCHEMA, OUTBOX)
            .select("order_id", row_hash.alias("h"), "cdc_ordering", "is_deleted")
            .collect()
        ]
        # Per key, the row delivered last (greatest Kafka offset; one partition).
        last = F.max("__kafka_offset").over(Window.partitionBy("order_id"))
        arrived_raw = (
            raw.withColumn("_last", last).where(F.col("__kafka_offset") == F.col("_last"))
        ).drop("_last")
        arrived = {
            int(r["order_id"]): (int(r["h"]), bool(r["is_deleted"]))
            for r in T.to_lake_rows(arrived_raw, OUTBOX_SCHEMA, OUTBOX)
            .select("order_id", row_hash.alias("h"), "is_deleted")
            .collect()
        }
        per_key: dict[int, list[tuple[int, str, bool]]] = {}
        for order, h, ordering, deleted in rows:
            per_key.setdefault(order, []).append((h, ordering, deleted))
        # ordering.py's rule: the greatest cdc_ordering, (source ts, LSN), wins.
        latest = {o: (x[0], x[2]) for o, v in per_key.items() for x in [max(v, key=lambda y: y[1])]}

        def live(view: dict[int, tuple[int, bool]]) -> dict[int, int]:
            return {o: h for o, (h, deleted) in view.items() if not deleted}

        def differing(view: dict[int, int]) -> int:
            return sum(view.get(o) != source_rows.get(o) for o in set(view) | set(source_rows))

        out["source_rows"] = len(source_rows)
        out["ice_rows"] = len(rows)
        out["ice_keys"] = len(per_key)
        out["several_rows"] = sum(len(v) > 1 for v in per_key.values())
        out["deleted_present"] = sum(o not in source_rows for o in per_key)
        out["stale_rows"] = sum(h != source_rows.get(o) for o, h, *_ in rows)
        out["latest_differs"] = differing(live(latest))
        out["arrival_differs"] = differing(live(arrived))
        out["arrival_differs_redelivered"] = sum(
            live(arrived).get(o) != source_rows.get(o) for o in redelivered
        )
        return out
    finally:
        # The sink runs only while the benchmark asks; the source and the S3 sink end with it.
        for name in (sink_name, cdc.source_connector_name, cdc.sink_connector_name):
            connect.delete(name)
        spark.stop()


def bench_connect_iceberg(
    stack: Any,
    say: Callable[[str], None],
    changes: int = 240,
    rate: float = 2.0,
    refresh_interval_s: float = 2.0,
    flush_interval_ms: int = 2000,
    commit_interval_ms: int = 2000,
    redeliver: int = 5,
    timeout_s: float = 180.0,
) -> list[Figure]:
    s = stack.settings
    ensure_plugin(stack, say)
    cfg = {
        "state_dir": str(s.state_dir),
        "port_base": s.port_base,
        "jars": str(s.jars_dir),
        "changes": changes,
        "rate": rate,
        "refresh_interval_s": refresh_interval_s,
        "flush_interval_ms": flush_interval_ms,
        "commit_interval_ms": commit_interval_ms,
        "redeliver": redeliver,
        "timeout_s": timeout_s,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "bench.connect_iceberg", "worker", json.dumps(cfg)],
        stdout=subprocess.PIPE,
        text=True,
    )
    b = "connect-iceberg"
    if proc.returncode != 0:
        return [Figure(b, "run", float("nan"), "", note=f"worker failed (exit {proc.returncode})")]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    lh, li = r["latency_hudi"], r["latency_iceberg"]
    setup = (
        f"{changes} changes at {rate}/s; Hudi: S3 sink flush {flush_interval_ms} ms, refresh "
        f"every {refresh_interval_s}s; Iceberg: commit interval {commit_interval_ms} ms"
    )
    p95_h, p95_i = _percentile(lh, 0.95), _percentile(li, 0.95)
    verdict = "equal" if r["latest_differs"] == 0 else f"{r['latest_differs']} orders differ"
    return [
        Figure(b, f"p50 commit -> Hudi ({setup})", _percentile(lh, 0.5), "s"),
        Figure(b, "p95 commit -> Hudi", p95_h, "s", "<= Iceberg sink's p95"),
        Figure(b, "p50 commit -> Iceberg sink's table", _percentile(li, 0.5), "s"),
        Figure(b, "p95 commit -> Iceberg sink's table", p95_i, "s"),
        Figure(b, "ratio p95 Hudi / Iceberg sink", p95_h / p95_i if li else float("nan"), "x",
               "<= 1"),
        Figure(b, "changes timed on both sides", len(lh), "",
               note=f"of {r['workload_events']} workload events in the Iceberg table"),
        Figure(b, "sink's CDC settings (upsert, cdc, delete) in its ConfigDef",
               len(r["cdc_keys"]), "", note=f"Iceberg {r['version']}, {r['config_keys']} "
               f"settings: {', '.join(r['cdc_keys']) or 'none: append only'}"),
        Figure(b, "source rows", r["source_rows"], "", note="datalake.cdc_events at the end"),
        Figure(b, "Hudi live rows equal to the source", float(r["hudi_equal"]), "",
               note="1 = equal (per-row hashes of matches_source's canonical text)"),
        Figure(b, "Iceberg rows (plain read)", r["ice_rows"], "",
               note=f"source has {r['source_rows']} rows; every change is a row"),
        Figure(b, "orders with more than one row", r["several_rows"], ""),
        Figure(b, "deleted orders still present", r["deleted_present"], ""),
        Figure(b, "rows that are not their order's source row", r["stale_rows"], ""),
        Figure(b, "latest per key by (ts, lsn), deletes dropped: orders differing from source",
               r["latest_differs"], "", note=f"a reader's view over the append table: {verdict}"),
        Figure(b, "last delivered per key (an upsert sink's rule): orders differing from source",
               r["arrival_differs"], "",
               note=f"{r['redelivered']} older changes delivered again; "
               f"{r['arrival_differs_redelivered']} of those orders differ"),
    ]  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m bench.connect_iceberg worker <json config> (run by bench)")
