"""Scale: events per second of the upsert at 100k, 1M and 5M events, against a plain Parquet
floor, and the Spark driver's peak memory.

Input per scale: N change events over N/5 orders (an insert, then updates; about 1% of the
orders end with a delete), in commit order, spread over 2 topic partitions by order_id, written
as JSON-lines files in the S3 sink's layout (5,000 events a file) on the local S3 server.

Each scale runs in a worker process of its own (``python -m bench.scale worker``), so its
Spark driver (local mode: one JVM, which is also the executor) starts fresh and its peak
resident memory (VmHWM) belongs to that scale alone. The worker alternates:

- A: ``ingest_new_files`` into a new Hudi table (listing, parsing and validation, the latest
  change per key, the Hudi upsert and its commit), as the asset does;
- B: the floor. The same read, parse and latest-per-key, then a plain Parquet overwrite of the
  live rows, with no Hudi.

A warm-up ingests one file first, so neither side pays the JVM's and Hudi's start-up. The peak
memory is read after the first A, before any B. Both sides must end with the same
number of live rows; the figure says so.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.harness import Figure, median
from bench.synthetic import OUTBOX_COLUMNS

EVENTS_PER_FILE = 5_000
PARTITIONS = 2
TOPIC = "bench.datalake.cdc_events"


def events_for(n_events: int, seed: int = 11):
    """(partition, event) in commit order: N events over N/5 orders, ~1% ending deleted."""
    from bench.synthetic import event

    rng = random.Random(seed)
    n_orders = max(1, n_events // 5)
    remaining = {o: 5 for o in range(1, n_orders + 1)}
    deleted_at_end = set(rng.sample(range(1, n_orders + 1), max(1, n_orders // 100)))
    live = list(remaining)
    created: set[int] = set()
    for i in range(n_events):
        if not live:
            break
        j = rng.randrange(len(live))
        order_id = live[j]
        remaining[order_id] -= 1
        last = remaining[order_id] == 0
        if last:
            live[j] = live[-1]
            live.pop()
        op = "u" if order_id in created else "c"
        created.add(order_id)
        deleted = last and order_id in deleted_at_end
        ev = event(
            order_id,
            ts=1_700_000_000_000 + i,
            lsn=i + 1,
            op="d" if deleted else op,
            deleted=deleted,
            shipped_date=10_000 + (i % 300),
            items=[
                {
                    "product_id": 1 + (order_id + k) % 77,
                    "unit_price": 10.0 + k,
                    "quantity": 1 + (i + k) % 9,
                    "discount": 0.05 * (k % 2),
                }
                for k in range(1 + order_id % 4)
            ],  # fmt: skip
        )
        yield order_id % PARTITIONS, ev


def put_updates(
    client: Any, bucket: str, prefix: str, offsets: dict[int, int], n_files: int, changes: int,
    n_orders: int, round_no: int, stride: int, move_every: int = 0,
) -> None:  # fmt: skip
    """``n_files`` more raw files after ``write_raw``'s, of ``changes`` updates each to existing
    orders of the file's partition, newer than every event before them (round ``round_no``;
    ``stride`` keeps the rounds' LSNs apart). With ``move_every``, one update in that many moves
    its order to another ``order_year`` partition (its ``order_date``). ``offsets`` advances."""
    from bench.synthetic import event

    for f in range(n_files):
        p = f % PARTITIONS
        lines = []
        for k in range(changes):
            n = round_no * stride + f * changes + k
            order_id = ((n * 7919) % max(1, n_orders // PARTITIONS)) * PARTITIONS + p or p + 2
            extra = {}
            if move_every:
                extra["order_date"] = 9700 + 366 * (n % 2) if k % move_every == 0 else 9700
            ev = event(order_id, ts=1_800_000_000_000 + n, lsn=10**9 + n, **extra)
            lines.append(json.dumps(ev))
        key = f"{prefix}{TOPIC}/partition={p}/{TOPIC}+{p}+{offsets[p]:020d}.jsonl"
        client.put_object(Bucket=bucket, Key=key, Body=("\n".join(lines) + "\n").encode())
        offsets[p] += len(lines)


def write_raw(
    client: Any, bucket: str, prefix: str, n_events: int, say: Callable[[str], None]
) -> tuple[int, dict[int, int]]:
    """Write the scale's raw files; returns the number of files and the next offset per
    partition."""
    topic = TOPIC
    buffers: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    pending = []
    files = 0
    t0 = time.monotonic()

    def key(p: int, offset: int) -> str:
        return f"{prefix}{topic}/partition={p}/{topic}+{p}+{offset:020d}.jsonl"

    with ThreadPoolExecutor(max_workers=4) as pool:

        def flush(p: int) -> None:
            nonlocal files
            lines = buffers[p]
            body = ("\n".join(lines) + "\n").encode()
            pending.append(
                pool.submit(client.put_object, Bucket=bucket, Key=key(p, offsets[p]), Body=body)
            )
            offsets[p] += len(lines)
            buffers[p] = []
            files += 1

        for i, (p, ev) in enumerate(events_for(n_events)):
            buffers[p].append(json.dumps(ev))
            if len(buffers[p]) >= EVENTS_PER_FILE:
                flush(p)
            if (i + 1) % max(1, n_events // 10) == 0:
                say(f"  generated {i + 1:,}/{n_events:,} events ({time.monotonic() - t0:.0f}s)")
        for p in range(PARTITIONS):
            if buffers[p]:
                flush(p)
        for f in pending:
            f.result()
    return files, offsets


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in its own process: paired A/B runs on one scale's raw files."""
    from pyspark.sql import functions as F

    from bench.synthetic import OUTBOX_SCHEMA
    from cdc_lake.lake import transforms as T
    from cdc_lake.lake.hudi import HudiTableConfig
    from cdc_lake.lake.ingest import ingest_new_files
    from cdc_lake.lake.ordering import latest_per_key
    from cdc_lake.lake.raw_lines import RawSource, read_lines
    from cdc_lake.lake.readers import read_table
    from cdc_lake.raw.objects import RawLayout, list_objects
    from cdc_lake.source.captured import OUTBOX
    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.process import peak_rss_mb
    from cdc_lake.stack.spark import build_spark_session

    settings = StackSettings.from_env(
        state_dir=Path(cfg["state_dir"]), port_base=cfg["port_base"], jars_dir=Path(cfg["jars"])
    )
    spark = build_spark_session(
        settings,
        app_name="cdc-lake-bench-scale",
        extra={
            "spark.driver.memory": cfg["driver_memory"],
            "spark.sql.shuffle.partitions": str(cfg["shuffle_partitions"]),
            "spark.default.parallelism": str(cfg["shuffle_partitions"]),
        },
    )
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    client = LocalStack(settings, verbose=False).service("s3").client()  # type: ignore[attr-defined]
    source = RawSource(settings.raw_bucket, cfg["prefix"], TOPIC)
    base = f"s3a://{settings.lake_bucket}/bench-scale/{uuid.uuid4().hex[:8]}"
    out: dict[str, Any] = {"a": [], "a2": [], "b": [], "peak_mib_after_first_a": None}
    rows: dict[str, int] = {}

    def run_a(rep: int, variant: bool = False) -> None:
        table = HudiTableConfig(
            base_path=f"{base}/hudi-{'v' if variant else ''}{rep}",
            parallelism=cfg["parallelism"],
            extra_options=cfg.get("variant_options", {}) if variant else {},
        )
        t0 = time.perf_counter()
        res = ingest_new_files(
            spark, client, source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
        out["a2" if variant else "a"].append(time.perf_counter() - t0)
        out["events"] = res.events_read
        rows["hudi-variant" if variant else "hudi"] = read_table(spark, table.base_path).count()

    def run_b(rep: int) -> None:
        t0 = time.perf_counter()
        objects = list_objects(client, source.bucket, RawLayout(source.prefix, TOPIC)).objects
        parsed = T.parse_raw_lines(read_lines(spark, source, sorted(objects)), OUTBOX_SCHEMA)
        good, _ = T.split_valid(parsed)
        lake_rows = T.to_lake_rows(good, OUTBOX_SCHEMA, OUTBOX)
        latest = latest_per_key(lake_rows, "order_id").where(~F.col("is_deleted"))
        path = f"{base}/parquet-{rep}"
        latest.write.mode("overwrite").parquet(path)
        out["b"].append(time.perf_counter() - t0)
        rows["parquet"] = spark.read.parquet(path).count()

    # Warm-up (JVM, Hudi's classes, the S3 client) on one file, so that neither side pays it.
    warm = HudiTableConfig(base_path=f"{base}/warm-up", parallelism=cfg["parallelism"])
    ingest_new_files(
        spark, client, source, warm, max_files=1, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    for rep in range(cfg["reps"]):
        run_a(rep)
        if out["peak_mib_after_first_a"] is None:
            out["peak_mib_after_first_a"] = peak_rss_mb(jvm_pid)
        print(f"  rep {rep + 1}: A {out['a'][-1]:.1f}s", file=sys.stderr, flush=True)
        run_b(rep)
        print(f"  rep {rep + 1}: B {out['b'][-1]:.1f}s", file=sys.stderr, flush=True)
        if cfg.get("variant_options"):
            run_a(rep, variant=True)
            print(f"  rep {rep + 1}: A' {out['a2'][-1]:.1f}s", file=sys.stderr, flush=True)
    out["rows"] = rows
    out["peak_mib"] = peak_rss_mb(jvm_pid)
    spark.stop()
    return out


def bench_scale(
    stack: Any,
    client: Any,
    scales: tuple[int, ...],
    reps: int,
    say: Callable[[str], None],
    driver_memory: str = "2g",
    shuffle_partitions: int = 4,
    parallelism: int = 2,
    variant_options: dict[str, str] | None = None,
) -> list[Figure]:
    """``variant_options``: Hudi options of a third side, A', the same upsert with them set,
    alternated with A and B in the same worker; its time and its ratio to A are reported."""
    s = stack.settings
    figures: list[Figure] = []
    knobs = f"driver {driver_memory}, {shuffle_partitions} shuffle partitions"
    for n in scales:
        prefix = f"bench-scale/{n}-{uuid.uuid4().hex[:6]}/"
        say(f"scale: writing {n:,} events under s3://{s.raw_bucket}/{prefix}")
        t0 = time.monotonic()
        files, _ = write_raw(client, s.raw_bucket, prefix, n, say)
        say(f"  {files} raw files in {time.monotonic() - t0:.0f}s")
        cfg = {
            "state_dir": str(s.state_dir),
            "port_base": s.port_base,
            "jars": str(s.jars_dir),
            "prefix": prefix,
            "reps": reps,
            "driver_memory": driver_memory,
            "shuffle_partitions": shuffle_partitions,
            "parallelism": parallelism,
            "variant_options": variant_options or {},
        }
        say(f"scale: {n:,} events, {reps} paired reps (A: cdc-lake upsert, B: Parquet floor)")
        proc = subprocess.run(
            [sys.executable, "-m", "bench.scale", "worker", json.dumps(cfg)],
            stdout=subprocess.PIPE,
            text=True,
        )
        if proc.returncode != 0:
            figures.append(
                Figure(
                    "scale",
                    f"{n:,} events",
                    float("nan"),
                    "",
                    note=f"worker failed (exit {proc.returncode}); see its stderr",
                )  # fmt: skip
            )
            continue
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        a, b = median(res["a"]), median(res["b"])
        same = res["rows"].get("hudi") == res["rows"].get("parquet")
        figures += [
            Figure("scale", f"cdc-lake upsert, {n:,} events ({files} files)", a, "s", "",
                   knobs),
            Figure("scale", f"events/s, {n:,} events", res["events"] / a, "ev/s"),
            Figure("scale", f"Parquet floor, {n:,} events", b, "s"),
            Figure("scale", f"ratio upsert / Parquet, {n:,} events", a / b, "x", "<= 2"),
            Figure("scale", f"driver peak RSS (upsert), {n:,} events",
                   res["peak_mib_after_first_a"], "MiB"),
            Figure("scale", f"live rows, {n:,} events", res["rows"].get("hudi", -1), "",
                   note="Hudi = Parquet" if same else f"DIFFER: {res['rows']}"),
        ]  # fmt: skip
        if res["a2"]:
            a2 = median(res["a2"])
            knob = ", ".join(f"{k}={v}" for k, v in (variant_options or {}).items())
            same2 = res["rows"].get("hudi-variant") == res["rows"].get("hudi")
            figures += [
                Figure("scale", f"upsert with {knob}, {n:,} events", a2, "s"),
                Figure("scale", f"ratio with / without {knob}, {n:,} events", a2 / a, "x", "",
                       "same rows" if same2 else f"DIFFER: {res['rows']}"),
            ]  # fmt: skip
    return figures


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m bench.scale worker <json config> (run by python -m bench)")
