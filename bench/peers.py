"""Peers: cdc-lake's upsert against what a user would pick instead, on the same input.

Input per size: the ``scale`` benchmark's N change events over N/5 orders (about 1% of the
orders end deleted) as raw files in the S3 sink's layout, ingested in the same batches of files,
in key order, by four sides:

- A: cdc-lake's upsert (``ingest_new_files`` into a Hudi table with default settings);
- B: Delta Lake ``MERGE INTO`` of the latest change per key;
- C: Iceberg ``MERGE INTO`` (format v2, copy-on-write, Hadoop catalog on s3a) with the same rule;
- D: the plain-Parquet floor: the previous version and the batch, latest per key, written as a
  new version (no index, no transactions, no history);
- A2, only with ``--variant KEY=VALUE``: A with those Hudi options set (or a HudiTableConfig
  field, ``cdc_lake.FIELD``, or a Spark SQL setting for A2's own runs, ``spark.sql.KEY``), a
  tuning step measured against A in the same run.

B, C and D read, parse and keep the latest change per key with the project's own code
(``read_lines``, ``parse_raw_lines``, ``latest_per_key``), so the table format is what differs.
The MERGE rule is ordering.py's: a change replaces the stored row when its ``cdc_ordering`` is not
older, a delete that wins removes the row, and an unmatched change is inserted unless it is a
delete. The batch is cut from its lineage (``localCheckpoint``) first: Iceberg's MERGE refuses a
source whose plan holds ``input_file_name()``, and B does the same so that both MERGEs get the same
source.

All four share one Spark session (same settings, but for A2's ``spark.sql.`` ones; the Delta and
Iceberg extensions are added beside Hudi's, in a worker process of its own, so the pipeline's
sessions never load them) and run alternately, each repetition starting one side later
(A B C D, B C D A, ...); medians are reported. First every side warms up on a throwaway table,
one file per round, until the driver's JIT is quiet (``warm_up``). After the timed batches,
each side's final snapshot is read (timed), one more small batch of updates goes in (timed),
and the live rows of the four tables are compared: the same count, the same digest of
(order_id, cdc_lsn) as the generator's own latest-per-key state, and the same hash of every
column. Spark's event log and the driver JVM's counters tell where each batch's time went.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import peers_large as PL
from bench.event_log import (
    busy_seconds,
    slowest_stages,
    stage_table,
    stages_by_group,
    tasks_label,
)
from bench.harness import Figure, median, rotation
from bench.peers_large import LargeTable
from bench.scale import EVENTS_PER_FILE, PARTITIONS, TOPIC, events_for, write_raw
from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.transforms import lake_columns
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack.warm_up import QUIET_JIT_SHARE, jvm_seconds

SIDES = ("A", "B", "C", "D")
SIDE_NAMES = {
    "A": "cdc-lake upsert (Hudi)",
    "A2": "cdc-lake upsert (Hudi) with the variant",
    "B": "Delta MERGE",
    "B2": "Delta MERGE with change data feed",
    "C": "Iceberg MERGE",
    "D": "Parquet floor",
}
ICEBERG_CATALOG = "peers_iceberg"
DELTA_CDF_DEFAULT = "spark.databricks.delta.properties.defaults.enableChangeDataFeed"
EXTENSIONS = (
    "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "io.delta.sql.DeltaSparkSessionExtension",
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
)
# The columns every side's table holds: the lake row without Hudi's and the delete flag.
COMPARED = tuple(c for c in lake_columns(OUTBOX_SCHEMA, OUTBOX) if c != "is_deleted")
DIGEST_SHIFT = 10**7  # digest = sum(order_id * shift + cdc_lsn): the LSNs stay below it


def extra_events(n_events: int) -> list[dict[str, Any]]:
    """The small batch that follows the N events: updates of partition 1's orders, newer than
    every change before them."""
    from bench.synthetic import event

    n = min(EVENTS_PER_FILE, max(200, n_events // 100))
    orders = [o for o in range(1, max(1, n_events // 5) + 1) if o % PARTITIONS == 1]
    return [
        event(orders[i % len(orders)], ts=1_700_000_000_000 + n_events + i,
              lsn=n_events + i + 1, shipped_date=20_000 + i)
        for i in range(n)
    ]  # fmt: skip


def expected_state(n_events: int) -> dict[int, int]:
    """The generator's own answer: order_id -> LSN of its latest change, for live orders."""
    last: dict[int, tuple[int, bool]] = {}
    for _, ev in events_for(n_events):
        last[ev["order_id"]] = (ev["__lsn"], ev["__deleted"] == "true")
    for ev in extra_events(n_events):
        last[ev["order_id"]] = (ev["__lsn"], ev["__deleted"] == "true")
    return {o: lsn for o, (lsn, deleted) in last.items() if not deleted}


def digest(state: dict[int, int]) -> int:
    return sum(o * DIGEST_SHIFT + lsn for o, lsn in state.items())


def sides_of(cfg: dict[str, Any]) -> tuple[str, ...]:
    """A B C D; A2 after A when a variant of the Hudi options is asked for (the same upsert with
    those options); B2 after B with ``delta_cdf`` (Delta's MERGE with its change data feed on,
    the peer that, like A's default, logs what each commit changed). All alternate with the
    others, so their ratios are paired."""
    a = ("A", "A2") if cfg.get("variant_options") else ("A",)
    b = ("B", "B2") if cfg.get("delta_cdf") else ("B",)
    return (*a, *b, "C", "D")


# A variant's key with this prefix sets a field of HudiTableConfig (cdc_lake.change_sets=false),
# one with SESSION_PREFIX a Spark SQL setting for the variant's own runs (``session_settings``);
# any other key is a Hudi option.
FIELD_PREFIX = "cdc_lake."
SESSION_PREFIX = "spark.sql."


@contextmanager
def session_settings(spark: Any, variant: dict[str, str]) -> Iterator[None]:
    """A side's Spark SQL settings (its variant's ``spark.sql.`` keys) for its own runs only:
    set before, and the session's own values put back after."""
    conf = {k: v for k, v in variant.items() if k.startswith(SESSION_PREFIX)}
    before = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():  # a refused one (a static setting) undoes those set before
            spark.conf.set(k, v)
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def variant_table(base_path: str, variant: dict[str, str]) -> HudiTableConfig:
    """A's table config with a variant's settings."""
    fields = {
        k.removeprefix(FIELD_PREFIX): json.loads(v)
        for k, v in variant.items()
        if k.startswith(FIELD_PREFIX)
    }
    hudi = {
        k: v
        for k, v in variant.items()
        if not k.startswith(FIELD_PREFIX) and not k.startswith(SESSION_PREFIX)
    }
    return HudiTableConfig(base_path=base_path, extra_options=hudi, **fields)


def batches_of(objects: list[Any], n_batches: int) -> list[list[Any]]:
    size = -(-len(objects) // n_batches)
    return [objects[i : i + size] for i in range(0, len(objects), size)]


def _failure(e: Exception) -> str:
    """A side's error as the report shows it: its type and first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in its own process: the four sides, alternated, on one size's raw files."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from cdc_lake.lake import transforms as T
    from cdc_lake.lake.checkpoint import Checkpoint
    from cdc_lake.lake.checkpoint import plan as read_plan
    from cdc_lake.lake.hudi import SESSION_CONF
    from cdc_lake.lake.ingest import ingest_new_files
    from cdc_lake.lake.ordering import ORDERING_FIELD, latest_per_key
    from cdc_lake.lake.raw_lines import RawSource, read_lines
    from cdc_lake.lake.readers import read_table
    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.spark import DRIVER_JAVA_OPTIONS, build_spark_session

    settings = StackSettings.from_env(
        state_dir=Path(cfg["state_dir"]), port_base=cfg["port_base"], jars_dir=Path(cfg["jars"])
    )
    peer_jars = sorted(settings.classpath_dir("peers").glob("*.jar"))
    if not peer_jars:
        raise SystemExit(
            f"peers: no Delta/Iceberg jars in {settings.classpath_dir('peers')}. "
            "Fix: run `cdc-lake stack install`."
        )
    run_id = uuid.uuid4().hex[:8]
    base = f"s3a://{settings.lake_bucket}/bench-peers/{run_id}"
    # Spark's event log: each stage's task count per side and batch (``tagged``, below).
    events = settings.state_dir / f"peers-events-{run_id}"
    events.mkdir(parents=True)
    spark = build_spark_session(
        settings,
        app_name="cdc-lake-bench-peers",
        extra={
            "spark.jars": ",".join(str(j) for j in [*settings.spark_jars(), *peer_jars]),
            "spark.driver.memory": cfg["driver_memory"],
            "spark.sql.shuffle.partitions": str(cfg["shuffle_partitions"]),
            "spark.default.parallelism": str(cfg["shuffle_partitions"]),
            "spark.driver.extraJavaOptions": " ".join(
                [*DRIVER_JAVA_OPTIONS, *cfg.get("jvm_options", [])]
            ),
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.sql.extensions": ",".join(EXTENSIONS),
            "spark.sql.catalog.spark_catalog": SESSION_CONF["spark.sql.catalog.spark_catalog"],
            f"spark.sql.catalog.{ICEBERG_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{ICEBERG_CATALOG}.type": "hadoop",
            f"spark.sql.catalog.{ICEBERG_CATALOG}.warehouse": f"{base}/iceberg",
        },
    )
    spark.sparkContext.setCheckpointDir(str(settings.state_dir / f"peers-checkpoints-{run_id}"))
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.bench")
    client = LocalStack(settings, verbose=False).service("s3").client()  # type: ignore[attr-defined]
    source = RawSource(settings.raw_bucket, cfg["prefix"], TOPIC)
    everything = read_plan(client, source.bucket, source.layout, Checkpoint(TOPIC)).objects
    large = cfg.get("large")
    changes: dict[str, Any] = {}
    if large:
        changes = {o.key: o for o in everything if o.key in large["batch_keys"]}
        main = [o for o in everything if o.key not in changes]
        batches = batches_of(main, max(1, -(-len(main) // large["load_chunk_files"])))
        extra = []
    else:
        extra_key = source.layout.key(PARTITIONS - 1, cfg["extra_offset"])
        main = [o for o in everything if o.key != extra_key]
        extra = [o for o in everything if o.key == extra_key]
        assert len(extra) == 1, f"peers: the extra batch {extra_key} is missing"
        batches = batches_of(main, cfg["batches"])

    def batch_latest(objects: list[Any]) -> DataFrame:
        """B's, C's and D's batch: the latest change per key, cut from its lineage."""
        lines = read_lines(spark, source, objects)
        good, _ = T.split_valid(T.parse_raw_lines(lines, OUTBOX_SCHEMA))
        lake_rows = T.to_lake_rows(good, OUTBOX_SCHEMA, OUTBOX)
        return latest_per_key(lake_rows, "order_id").localCheckpoint(eager=True)

    on = f"t.{OUTBOX.key} = s.{OUTBOX.key}"
    merge_rule = (
        f"ON {on} "
        f"WHEN MATCHED AND s.{ORDERING_FIELD} >= t.{ORDERING_FIELD} AND s.is_deleted THEN DELETE "
        f"WHEN MATCHED AND s.{ORDERING_FIELD} >= t.{ORDERING_FIELD} THEN UPDATE SET * "
        "WHEN NOT MATCHED AND NOT s.is_deleted THEN INSERT *"
    )

    class Side:
        def __init__(self, name: str, tag: str) -> None:
            self.name, self.tag = name, tag
            self.version = 0

        def target(self) -> str:
            if self.name == "C":
                return f"{ICEBERG_CATALOG}.bench.t_{self.tag}"
            return f"{base}/{self.name.lower()}-{self.tag}"

        def location(self) -> str:
            if self.name == "C":
                return f"{base}/iceberg/bench/t_{self.tag}"
            return self.target()

        def load(self, objects: list[Any]) -> None:
            """Inserts only, untimed (the large-table mode): A through its upsert, which also
            moves its checkpoint past them; the others append."""
            if self.name in ("A", "A2"):
                self.ingest(objects)
                return
            rows = batch_latest(objects)
            if self.name == "D":
                rows.write.mode("append").parquet(f"{self.target()}/v0")
            elif self.name in ("B", "B2"):
                # The peers' layout is by year, cdc-lake's default until 2026-11-29.
                rows.write.format("delta").partitionBy("order_year").mode("append").save(
                    self.target()
                )
            elif self.version == 0:
                rows.writeTo(self.target()).using("iceberg").partitionedBy(
                    F.col("order_year")
                ).tableProperty("format-version", "2").create()
            else:
                rows.writeTo(self.target()).append()
            self.version = 1

        def ingest(self, objects: list[Any]) -> None:
            if self.name in ("A", "A2"):
                extra = cfg["variant_options"] if self.name == "A2" else {}
                table = variant_table(self.target(), extra)
                with session_settings(spark, extra):
                    ingest_new_files(
                        spark,
                        client,
                        source,
                        table,
                        max_files=len(objects),
                        captured=OUTBOX,
                        declared=OUTBOX_COLUMNS,
                    )
                return
            latest = batch_latest(objects)
            if self.name == "D":
                path = f"{self.target()}/v{self.version}"
                if self.version:
                    latest = latest_per_key(
                        spark.read.parquet(f"{self.target()}/v{self.version - 1}")
                        .unionByName(latest),
                        "order_id",
                    )  # fmt: skip
                latest.where(~F.col("is_deleted")).write.parquet(path)
                self.version += 1
                return
            if self.version == 0:  # the table, empty, with the batch's schema
                if self.name in ("B", "B2"):
                    # A path-based write takes no table properties: the session's default for
                    # new tables, for this one only.
                    spark.conf.set(DELTA_CDF_DEFAULT, str(self.name == "B2").lower())
                    try:
                        latest.limit(0).write.format("delta").partitionBy("order_year").save(
                            self.target()
                        )
                    finally:
                        spark.conf.unset(DELTA_CDF_DEFAULT)
                    if self.name == "B2":
                        jvm_: Any = spark.sparkContext._jvm
                        detail = DataFrame(
                            jvm_.io.delta.tables.DeltaTable.forPath(
                                spark._jsparkSession, self.target()
                            ).detail(),
                            spark,
                        ).first()
                        props = dict(detail["properties"]) if detail else {}
                        if props.get("delta.enableChangeDataFeed") != "true":
                            raise RuntimeError(f"B2's change data feed is not on: {props}")
                else:
                    latest.limit(0).writeTo(self.target()).using("iceberg").partitionedBy(
                        F.col("order_year")
                    ).tableProperty("format-version", "2").create()
            self.version += 1
            if self.name in ("B", "B2"):
                # Path-based SQL on Delta needs DeltaCatalog as spark_catalog, which is Hudi's
                # here: Delta's own MERGE builder (io.delta.tables), with the same rule.
                jvm: Any = spark.sparkContext._jvm
                table = jvm.io.delta.tables.DeltaTable.forPath(spark._jsparkSession, self.target())
                newer = f"s.{ORDERING_FIELD} >= t.{ORDERING_FIELD}"
                table.alias("t").merge(latest.alias("s")._jdf, on).whenMatched(
                    f"{newer} AND s.is_deleted"
                ).delete().whenMatched(newer).updateAll().whenNotMatched(
                    "NOT s.is_deleted"
                ).insertAll().execute()
                return
            latest.createOrReplaceTempView("peers_batch")
            spark.sql(f"MERGE INTO {self.target()} t USING peers_batch s {merge_rule}")
            spark.catalog.dropTempView("peers_batch")

        def snapshot(self) -> DataFrame:
            if self.name in ("A", "A2"):
                df = read_table(spark, self.target())
            elif self.name in ("B", "B2"):
                df = spark.read.format("delta").load(self.target())
            elif self.name == "C":
                df = spark.table(self.target())
            else:
                df = spark.read.parquet(f"{self.target()}/v{self.version - 1}")
            return df.select(*COMPARED)

    def size_of(side: Side) -> tuple[int, int, int]:
        """Files and bytes of the table, and of those the bytes of its change log (A's change
        sets, and Hudi's CDC log files, ``*.cdc``, where its feed is on; Delta's
        ``_change_data/``)."""
        prefix = side.location().split(f"{settings.lake_bucket}/", 1)[1] + "/"
        if side.name == "D":
            prefix += f"v{side.version - 1}/"
        n, total, feed = 0, 0, 0
        pages = client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=settings.lake_bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                n, total = n + 1, total + obj["Size"]
                k = obj["Key"]
                if "/_change_data/" in k or k.endswith(".cdc") or "/.cdc_lake/change_sets/" in k:
                    feed += obj["Size"]
        return n, total, feed

    def fingerprint(df: DataFrame) -> dict[str, Any]:
        dec = "decimal(38,0)"
        row = df.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.col("order_id").cast(dec) * DIGEST_SHIFT + F.col("cdc_lsn")).alias("digest"),
            F.sum(F.xxhash64(*COMPARED).cast(dec)).alias("hash"),
        ).first()
        assert row is not None
        return {"rows": row["rows"], "digest": str(row["digest"]), "hash": str(row["hash"])}

    sides = sides_of(cfg)
    out: dict[str, Any] = {s: {"t": [], "read": [], "extra": [], "batch_s": []} for s in sides}
    out["batches"] = [len(b) for b in batches]

    def tagged(group: str) -> None:
        """The job group of the Spark jobs that follow (the event log's key, ``stages_of``)."""
        spark.sparkContext.setJobGroup(group, group)

    def stages_of(groups: dict[str, list[dict[str, Any]]], prefix: str) -> dict[str, Any]:
        """The slowest stages per timed batch whose job group (of ``groups``, the event log's)
        starts with ``prefix``, with their task counts, the seconds in which any stage ran per
        batch, and every stage of the last such batch."""
        mine = [v for k, v in sorted(groups.items()) if k.startswith(prefix)]
        return {
            "slowest": slowest_stages(mine),
            "busy_s": median([busy_seconds(g) for g in mine]) if mine else 0.0,
            "last_batch": stage_table(mine[-1]) if mine else [],
        }

    def file_groups(side: Side) -> int:
        """A's base file groups in its latest snapshot (a COPY_ON_WRITE upsert rewrites each
        touched one in one task)."""
        if side.name not in ("A", "A2"):
            return 0
        snap = spark.read.format("hudi").load(side.target())
        return snap.select(F.substring_index("_hoodie_file_name", "_", 1)).distinct().count()

    def run_side(side: Side, rep: int) -> None:
        name = side.name
        before = jvm_seconds(spark)  # the JIT's and GC's seconds around the side's rep
        t0 = time.perf_counter()
        for i, objects in enumerate(batches):
            tagged(f"{name}/batch/{rep:03d}/{i:03d}")
            t1 = time.perf_counter()
            side.ingest(objects)
            out[name]["batch_s"].append(time.perf_counter() - t1)
        tagged("untimed")
        out[name]["t"].append(time.perf_counter() - t0)
        after = jvm_seconds(spark)
        out[name].setdefault("jvm", []).append({k: after[k] - before[k] for k in after})
        t0 = time.perf_counter()
        side.snapshot().write.format("noop").mode("overwrite").save()
        out[name]["read"].append(time.perf_counter() - t0)
        if rep == cfg["reps"] - 1:  # untimed, after the timed read: it reads the table too
            out[name]["file_groups"] = file_groups(side)
        out[name]["files"], out[name]["bytes"], out[name]["feed_bytes"] = size_of(side)
        t0 = time.perf_counter()
        side.ingest(extra)
        out[name]["extra"].append(time.perf_counter() - t0)
        out[name]["state"] = fingerprint(side.snapshot())
        print(
            f"  rep {rep + 1}: {name} {out[name]['t'][-1]:.1f}s "
            f"(JIT {out[name]['jvm'][-1]['jit_s']:.1f}s, GC {out[name]['jvm'][-1]['gc_s']:.1f}s) "
            f"(read {out[name]['read'][-1]:.1f}s, one more batch "
            f"{out[name]['extra'][-1]:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    failed, out["warm_up"] = (
        warm_up(sides, Side, main, lambda: jvm_seconds(spark)) if cfg["warm_up"] else ({}, [])
    )
    def add_stages(res: dict[str, Any], kinds: list[str] | None = None) -> None:
        """Each side's stages from the event log, read once after ``spark.stop`` flushed it:
        per timed batch, or per kind of batch (``kinds``, the large-table mode's).
        A log that cannot be read costs these figures only."""
        try:
            groups = stages_by_group(events)
        except Exception as e:
            print(f"  the event log could not be read: {_failure(e)}", file=sys.stderr)
            return
        for name in sides:
            if kinds is None:
                res[name]["stages"] = stages_of(groups, f"{name}/batch/")
            else:
                res[name]["stages"] = {
                    k: stages_of(groups, f"{name}/{k}/") for k in kinds
                }

    try:
        if large:
            res = run_large(sides, Side, batches, changes, large, fingerprint, size_of, spark,
                            failed, tagged)  # fmt: skip
            res["warm_up"] = out["warm_up"]
            add_stages(res, list(dict.fromkeys(b["kind"] for b in large["batches"])))
            return res
        for name, why in failed.items():
            out[name]["error"] = why
        for rep in range(cfg["reps"]):
            for name in rotation(sides, rep):
                if "error" in out[name]:
                    continue
                try:
                    run_side(Side(name, str(rep)), rep)
                except Exception as e:  # one side failing still reports the others
                    out[name]["error"] = _failure(e)
                    print(f"  rep {rep + 1}: {name} failed: {out[name]['error']}",
                          file=sys.stderr)  # fmt: skip
        spark.stop()  # flushes the event log
        add_stages(out)
        return out
    finally:
        shutil.rmtree(events, ignore_errors=True)


# The warm-up's rounds: at most this many, until the driver JVM's JIT is quiet (it compiled for
# less than QUIET_JIT_SHARE of the round's wall time). A cold JVM's JIT compiles for most of the
# first minutes (Hudi's code most of all: 41 s of JIT in A's first 43 s rep at 200,000 events),
# and on 2 cores that time is taken from the tasks. At 1M events the rounds' JIT went 120, 60,
# 34, 18, 14, 10.5, 10.4, ... 7 s, never quiet. It shrinks the first rep's excess without
# removing it: after 12 rounds A's first rep took 0.98x and 1.14x its last in two runs, after 5
# 1.10x, after one file 1.09-1.44x (docs/benchmarks-log.md, Tuning log, "The first rep is the
# JIT's"); the report gives each run's ratio.
WARM_UP_ROUNDS = 12


def warm_up(
    sides: tuple[str, ...],
    side_of: Callable[[str, str], Any],
    objects: list[Any],
    jvm_counters: Callable[[], dict[str, float]] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, str], list[dict[str, float]]]:
    """Untimed rounds in which each side ingests one more of ``objects`` (one file per round)
    into a throwaway table of its own, so that the worker JVM's first writes of each format
    (class loading, the S3 client, the JIT) fall on no timed figure. With ``jvm_counters``, the
    rounds go on until the JIT is quiet, or ``WARM_UP_ROUNDS``; without, one round. Returns the
    sides that failed, with why, and each round's seconds and JIT seconds."""
    failed: dict[str, str] = {}
    tables = {name: side_of(name, "warmup") for name in sides}
    rounds: list[dict[str, float]] = []
    n = min(len(objects), WARM_UP_ROUNDS if jvm_counters else 1)
    for obj in objects[:n]:
        before = jvm_counters() if jvm_counters else {"jit_s": 0.0}
        t0 = clock()
        for name in (x for x in sides if x not in failed):
            try:
                tables[name].ingest([obj])
            except Exception as e:
                failed[name] = _failure(e)
        wall = clock() - t0
        jit = (jvm_counters()["jit_s"] - before["jit_s"]) if jvm_counters else 0.0
        rounds.append({"s": wall, "jit_s": jit})
        print(f"  warm-up round {len(rounds)}: {wall:.1f}s, JIT {jit:.1f}s", file=sys.stderr)
        if jit < QUIET_JIT_SHARE * wall:
            break
    return failed, rounds


def run_large(
    sides: tuple[str, ...],
    side_of: Callable[[str, str], Any],
    load: list[list[Any]],
    changes: dict[str, Any],
    large: dict[str, Any],
    fingerprint: Callable[[Any], dict[str, Any]],
    size_of: Callable[[Any], tuple[int, int, int]],
    spark: Any,
    failed: dict[str, str] | None = None,
    tag: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The large-table mode (``bench/peers_large.py``): every side loads the table, chunk by
    chunk, then ingests each change batch, timed alone. The sides' order rotates per load chunk
    and per batch, so a drift of the machine's load spreads over all of them. Each side has
    usually warmed up before (``warm_up``; ``failed``: the sides whose warm-up failed, left
    out), so the JVM's first write of each format is off the load; A's first chunk still creates
    its table (1.4x its second chunk at 500,000 orders, docs/benchmarks-log.md)."""
    out: dict[str, Any] = {s: {"batches": [], "load_s": 0.0} for s in sides}
    for s, why in (failed or {}).items():
        out[s]["error"] = why
    tables = {s: side_of(s, "large") for s in sides}
    for i, objects in enumerate(load):
        for s in rotation(sides, i):
            if "error" in out[s]:
                continue
            t0 = time.perf_counter()
            try:
                tables[s].load(objects)
            except Exception as e:
                out[s]["error"] = _failure(e)
            out[s]["load_s"] += time.perf_counter() - t0
        done = ", ".join(f"{s} {out[s]['load_s']:.1f}s" for s in sides)
        print(f"  load {i + 1}/{len(load)}: {done}", file=sys.stderr, flush=True)
    for i, b in enumerate(large["batches"]):
        for s in rotation(sides, i):
            if "error" in out[s]:
                continue
            tag(f"{s}/{b['kind']}/{i:03d}")  # the event log's key for the batch's stages
            t0 = time.perf_counter()
            try:
                tables[s].ingest([changes[b["key"]]])
            except Exception as e:
                out[s]["error"] = _failure(e)
                continue
            finally:
                tag("untimed")
            out[s]["batches"].append(time.perf_counter() - t0)
        times = ", ".join(
            f"{s} {out[s]['batches'][-1]:.1f}s" for s in sides if "error" not in out[s]
        )
        print(f"  batch {i + 1} ({b['kind']}): {times}", file=sys.stderr, flush=True)
    for s in sides:
        if "error" not in out[s]:
            out[s]["state"] = fingerprint(tables[s].snapshot())
            out[s]["files"], out[s]["bytes"], out[s]["feed_bytes"] = size_of(tables[s])
    spark.stop()
    return out


def warm_up_figures(res: dict[str, Any], label: str) -> list[Figure]:
    """The warm-up's own row: its untimed seconds, rounds, and the JIT's first and last."""
    wu = res.get("warm_up") or []
    if not wu:
        return []
    return [
        Figure("peers", f"warm-up (untimed), {label}", sum(r["s"] for r in wu), "s", "",
               f"{len(wu)} rounds of one file per side; the driver's JIT compiled "
               f"{wu[0]['jit_s']:.1f} s in the first, {wu[-1]['jit_s']:.1f} s in the last")
    ]  # fmt: skip


def _run_worker(cfg: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """One worker process's results, or (None, why) when it failed."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.peers", "worker", json.dumps(cfg)],
        stdout=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"worker failed (exit {proc.returncode}); see its stderr"
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


def _agreement(
    sides: tuple[str, ...], res: dict[str, Any], expected: dict[int, int]
) -> tuple[dict[str, bool], dict[str, Any], str]:
    """Which sides ran, their final states, and the note saying whether every one equals the
    generator's own answer (``expected``: order -> LSN of its latest change, live orders)."""
    ok = {x: "error" not in res[x] for x in sides}
    states = {x: res[x]["state"] for x in sides if ok[x]}
    want = {"rows": len(expected), "digest": str(digest(expected))}
    same = all(st == states.get("A") for st in states.values())
    right = all({k: st[k] for k in want} == want for st in states.values())
    note = (
        f"{' = '.join(sides)} = the generator's latest per key"
        if same and right and all(ok.values())
        else f"DIFFER or failed: expected {want}, got {states}"
    )
    return ok, states, note


def bench_peers(
    stack: Any,
    client: Any,
    sizes: tuple[int, ...],
    reps: int,
    say: Callable[[str], None],
    batches: int = 10,
    driver_memory: str = "2g",
    shuffle_partitions: int = 4,
    warm_up: bool = True,
    variant_options: dict[str, str] | None = None,
    delta_cdf: bool = False,
    large: LargeTable | None = None,
    jvm_options: tuple[str, ...] = (),
) -> list[Figure]:
    """``warm_up``: each side first ingests files into a throwaway table until the JIT is quiet
    (off for the smoke size, where it would double the time). ``variant_options``: the
    settings of one more side, A2, cdc-lake's upsert with them set (``variant_table``,
    ``session_settings``): a tuning step, paired with A in the same run.
    ``delta_cdf``: one more side, B2, Delta's MERGE with its change data feed on. ``large``:
    also the large-table mode (``bench/peers_large.py``), after the sizes."""
    from cdc_lake.raw.objects import RawLayout

    s = stack.settings
    figures: list[Figure] = []
    knobs = f"driver {driver_memory}, {shuffle_partitions} shuffle partitions"
    knobs += "".join(f", {o}" for o in jvm_options)
    for n in sizes:
        prefix = f"bench-peers/{n}-{uuid.uuid4().hex[:6]}/"
        say(f"peers: writing {n:,} events under s3://{s.raw_bucket}/{prefix}")
        files, offsets = write_raw(client, s.raw_bucket, prefix, n, say)
        extra = extra_events(n)
        key = RawLayout(prefix, TOPIC).key(PARTITIONS - 1, offsets[PARTITIONS - 1])
        body = "".join(json.dumps(ev) + "\n" for ev in extra).encode()
        client.put_object(Bucket=s.raw_bucket, Key=key, Body=body)
        expected = expected_state(n)
        cfg = {
            "state_dir": str(s.state_dir),
            "port_base": s.port_base,
            "jars": str(s.jars_dir),
            "prefix": prefix,
            "extra_offset": offsets[PARTITIONS - 1],
            "reps": reps,
            "batches": batches,
            "driver_memory": driver_memory,
            "shuffle_partitions": shuffle_partitions,
            "warm_up": warm_up,
            "variant_options": variant_options or {},
            "delta_cdf": delta_cdf,
            "jvm_options": list(jvm_options),
        }
        sides = sides_of(cfg)
        order = " ".join(sides)
        say(f"peers: {n:,} events in {files} files, {reps} reps of {order} ({batches} batches)")
        res, failed = _run_worker(cfg)
        if res is None:
            figures.append(Figure("peers", f"{n:,} events", float("nan"), "", note=failed))
            continue
        nan = float("nan")
        ok, states, note = _agreement(sides, res, expected)
        t = {x: median(res[x]["t"]) if ok[x] else nan for x in sides}
        label = f"{n:,} events"
        nb = len(res["batches"])
        figures.append(
            Figure("peers", f"{SIDE_NAMES['A']}, {label} ({files} files, {nb} batches)", t["A"],
                   "s", "", knobs if ok["A"] else res["A"]["error"])
        )  # fmt: skip
        figures += [
            Figure("peers", f"{SIDE_NAMES[x]}, {label}", t[x], "s", "",
                   "" if ok[x] else res[x]["error"])
            for x in sides if x not in ("A", "A2")
        ]  # fmt: skip
        figures += warm_up_figures(res, label)
        # A side that is warm takes about as long in its first rep as in its last (the rotation
        # moves each side to another position); how far each was from that, and the JIT's
        # seconds in each rep, tell how warm the JVM was (not fully: docs/benchmarks-log.md).
        figures += [
            Figure("peers", f"first rep / last rep, {SIDE_NAMES[x]}, {label}",
                   res[x]["t"][0] / res[x]["t"][-1], "x", "",
                   f"JIT {res[x]['jvm'][0]['jit_s']:.1f} s and {res[x]['jvm'][-1]['jit_s']:.1f} s")
            for x in sides if ok[x] and len(res[x]["t"]) > 1
        ]  # fmt: skip
        goal_bc = "<= 0.8 x min(B, C) at 1M"
        figures += [
            Figure("peers", f"ratio A/B, {label}", t["A"] / t["B"], "x", goal_bc),
            Figure("peers", f"ratio A/C, {label}", t["A"] / t["C"], "x", goal_bc),
            Figure("peers", f"ratio A/D, {label}", t["A"] / t["D"], "x", "<= 1.5"),
        ]
        if "B2" in sides:
            figures += [
                Figure("peers", f"ratio A/B2, {label}", t["A"] / t["B2"], "x", "",
                       "B2: Delta MERGE with its change data feed"),
                Figure("peers", f"ratio B2/B, {label}", t["B2"] / t["B"], "x", "",
                       "what Delta's change data feed costs its MERGE"),
            ]  # fmt: skip
        if "A2" in sides:
            knob = ", ".join(f"{k}={v}" for k, v in cfg["variant_options"].items())
            figures += [
                Figure("peers", f"{SIDE_NAMES['A2']}, {label}", t["A2"], "s", "", knob),
                Figure("peers", f"ratio A2/A ({knob}), {label}", t["A2"] / t["A"], "x", "",
                       "same run, alternated"),
                Figure("peers", f"ratio A2/B, {label}", t["A2"] / t["B"], "x"),
                Figure("peers", f"ratio A2/C, {label}", t["A2"] / t["C"], "x"),
                Figure("peers", f"ratio A2/D, {label}", t["A2"] / t["D"], "x"),
            ]  # fmt: skip
        for x in (x for x in sides if ok[x]):
            r = res[x]
            figures += [
                Figure("peers", f"table size, {SIDE_NAMES[x]}, {label}", r["bytes"] / 2**20,
                       "MiB", "", f"{r['files']} files"),
                Figure("peers", f"change log size, {SIDE_NAMES[x]}, {label}",
                       r["feed_bytes"] / 2**20, "MiB", "", "part of the table size"),
                Figure("peers", f"read final snapshot, {SIDE_NAMES[x]}, {label}",
                       median(r["read"]), "s"),
                Figure("peers", f"one more batch ({len(extra)} events), {SIDE_NAMES[x]}, "
                       f"{label}", median(r["extra"]), "s"),
            ]  # fmt: skip
            # The event log: how much of a batch Spark's tasks fill, and how many tasks share
            # the slowest stages. Every stage of the last batch goes to stderr.
            st = r.get("stages") or {}
            figures += [
                Figure("peers", f"batch, {SIDE_NAMES[x]}, {label}", median(r["batch_s"]), "s",
                       "", f"of which some Spark stage ran {st.get('busy_s', nan):.2f} s"),
            ] + [
                Figure("peers", f"stage {i + 1} by time per batch, {SIDE_NAMES[x]}, {label}",
                       s["seconds"], "s", "", f"{tasks_label(s['tasks'])}: {s['stage']}")
                for i, s in enumerate(st.get("slowest", [])[:2])
            ]  # fmt: skip
            for name_, tasks, secs in st.get("last_batch", []):
                say(f"  {x} last batch: {secs:6.2f}s {tasks:4d} tasks  {name_}")
            if r.get("file_groups"):
                figures.append(
                    Figure("peers", f"base file groups, {SIDE_NAMES[x]}, {label}",
                           r["file_groups"], "", "", "in the final snapshot")
                )  # fmt: skip
        rows = states["A"]["rows"] if "A" in states else nan
        figures.append(Figure("peers", f"live rows, {label}", rows, "", "", note))
    if large is not None:
        figures += _bench_large(stack, client, large, say, driver_memory, shuffle_partitions,
                                variant_options or {}, delta_cdf, warm_up, jvm_options)  # fmt: skip
    return figures


def _bench_large(
    stack: Any,
    client: Any,
    large: LargeTable,
    say: Callable[[str], None],
    driver_memory: str,
    shuffle_partitions: int,
    variant_options: dict[str, str],
    delta_cdf: bool,
    warm_up: bool,
    jvm_options: tuple[str, ...] = (),
) -> list[Figure]:
    s = stack.settings
    prefix = f"bench-peers/large-{large.orders}-{uuid.uuid4().hex[:6]}/"
    say(f"peers: writing a table of {large.orders:,} orders and its change batches under "
        f"s3://{s.raw_bucket}/{prefix}")  # fmt: skip
    load_files, batches = PL.write(client, s.raw_bucket, prefix, large, say)
    cfg = {
        "state_dir": str(s.state_dir),
        "port_base": s.port_base,
        "jars": str(s.jars_dir),
        "prefix": prefix,
        "driver_memory": driver_memory,
        "shuffle_partitions": shuffle_partitions,
        "variant_options": variant_options,
        "delta_cdf": delta_cdf,
        "warm_up": warm_up,
        "jvm_options": list(jvm_options),
        "large": {
            "batch_keys": [k for _, k in batches],
            "batches": [{"key": k, "kind": b.kind} for b, k in batches],
            "load_chunk_files": large.load_chunk_files,
        },
    }
    sides = sides_of(cfg)
    label = f"{large.orders:,} orders"
    say(f"peers: {label} ({load_files} files, loaded untimed), then {len(batches)} batches, "
        f"each into {' '.join(sides)} in turn")  # fmt: skip
    res, failed = _run_worker(cfg)
    if res is None:
        return [Figure("peers", f"large table, {label}", float("nan"), "", note=failed)]
    ok, states, note = _agreement(sides, res, PL.expected(large.orders, [b for b, _ in batches]))
    nan = float("nan")
    figures = warm_up_figures(res, label) + [
        Figure("peers", f"large table: load (untimed for the ratios), {SIDE_NAMES[x]}, {label}",
               res[x]["load_s"], "s", "", "" if ok[x] else res[x]["error"])
        for x in sides
    ]  # fmt: skip
    kinds = list(dict.fromkeys(b.kind for b, _ in batches))
    for kind in kinds:
        at = [i for i, (b, _) in enumerate(batches) if b.kind == kind]
        t = {x: median([res[x]["batches"][i] for i in at]) if ok[x] else nan for x in sides}
        where = f"{kind}, into {label}"
        figures += [
            Figure("peers", f"large table: {SIDE_NAMES[x]}, {where}", t[x], "s", "",
                   f"median of {len(at)} batches")
            for x in sides
        ]  # fmt: skip
        goal = "<= 1.0 (1,000 into 1M); <= 0.5 x min(B, C) (10,000 into 5M)"
        figures += [
            Figure("peers", f"large table: ratio A/B, {where}", t["A"] / t["B"], "x"),
            Figure("peers", f"large table: ratio A/C, {where}", t["A"] / t["C"], "x", goal),
            Figure("peers", f"large table: ratio A/min(B, C), {where}",
                   t["A"] / min(t["B"], t["C"]), "x", goal),
            Figure("peers", f"large table: ratio A/D, {where}", t["A"] / t["D"], "x"),
        ]  # fmt: skip
        if "A2" in sides:
            figures.append(
                Figure("peers", f"large table: ratio A2/A, {where}", t["A2"] / t["A"], "x", "",
                       ", ".join(f"{k}={v}" for k, v in variant_options.items()))
            )  # fmt: skip
        for x in (x for x in sides if ok[x]):
            st = (res[x].get("stages") or {}).get(kind) or {}
            top = (st.get("slowest") or [{}])[0]
            if top:
                figures.append(
                    Figure("peers", f"large table: slowest stage, {SIDE_NAMES[x]}, {where}",
                           top["seconds"], "s", "",
                           f"{tasks_label(top['tasks'])}: {top['stage']}; some Spark stage ran "
                           f"{st['busy_s']:.2f} s of the batch")
                )  # fmt: skip
            for name_, tasks, secs in st.get("last_batch", []):
                say(f"  {x} last batch of {kind}: {secs:6.2f}s {tasks:4d} tasks  {name_}")
    for x in (x for x in sides if ok[x]):
        r = res[x]
        figures.append(
            Figure("peers", f"large table: table size, {SIDE_NAMES[x]}, {label}",
                   r["bytes"] / 2**20, "MiB", "",
                   f"{r['files']} files; change log {r['feed_bytes'] / 2**20:.1f} MiB")
        )  # fmt: skip
    rows = states["A"]["rows"] if "A" in states else nan
    figures.append(Figure("peers", f"large table: live rows, {label}", rows, "", "", note))
    return figures


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m bench.peers worker <json config> (run by python -m bench)")
