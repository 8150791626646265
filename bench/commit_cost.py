"""Commit cost: what one small Hudi commit costs, and the same commit with other options, paired.

``python -m bench.commit_cost --port-base 19600 [--variant NAME:KEY=VALUE[,KEY=VALUE]] ...``
(a key ``cdc_lake.FIELD`` with a JSON value sets a field of HudiTableConfig, as in the peers
benchmark: ``--variant 'part:cdc_lake.partition_field="order_year"'``; a key ``spark.sql.KEY`` is
a Spark SQL setting for that side's runs only) starts an S3 server of
its own, a warm local Spark session with its event log on, and one Hudi table per side (the
defaults, then one per ``--variant``), each seeded with the same history (``--history`` events over
history/5 orders, the scale benchmark's generator). Each round puts
``--files`` new raw files of ``--changes`` updates each, then runs the upsert app's work on
every table in a rotating order: ``ingest_new_files`` and the checks (``table_state.evaluate``
from the previous round's state, as the lake asset does). Medians per side and their ratio to
the defaults; the tables must end with the same live rows (digest), or the figure says so.

The session's JVM names are pinned, as ``run_app`` pins them for every app
(``cdc_lake/spark_apps/jvm_names.py``); ``--unpinned`` leaves them to py4j, to measure that.

The first table created in a run is slower in every round, whatever its options: pass a
control (``--variant ctrl:``, the defaults again) and compare the variants with it.

The Spark event log gives, per side, the Spark jobs and stages per commit and where their
seconds go (by call site); what the jobs do not cover is driver-only work (timeline, markers,
commit metadata, S3 calls). The time is wall clock, so read only the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from bench.event_log import read_event_log, union_ms
from bench.harness import rotation
from bench.peers import FIELD_PREFIX, session_settings, variant_table
from bench.scale import TOPIC, put_updates, write_raw
from bench.synthetic import OUTBOX_COLUMNS
from cdc_lake.lake.hudi import HudiTableConfig


def changed_fields(table: HudiTableConfig) -> dict[str, Any]:
    """The table's settings that differ from HudiTableConfig's defaults (its path aside)."""
    default = HudiTableConfig(base_path=table.base_path)
    return {
        f.name: getattr(table, f.name)
        for f in dataclass_fields(table)
        if getattr(table, f.name) != getattr(default, f.name)
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commit_cost", description=__doc__)
    ap.add_argument("--port-base", type=int, required=True)
    ap.add_argument("--history", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=3)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variant", action="append", default=[],
                    metavar="NAME:KEY=VALUE[,KEY=VALUE]")  # fmt: skip
    ap.add_argument("--spark", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark session settings for every side")  # fmt: skip
    ap.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="NAME:FIELD=INT",
        help="a HudiTableConfig field of one variant (e.g. parallelism)",
    )
    ap.add_argument("--hudi-log", default="", help="log level for org.apache.hudi (e.g. INFO)")
    ap.add_argument("--unpinned", action="store_true",
                    help="leave the JVM names to py4j (run_app pins them)")  # fmt: skip
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)

    from bench.synthetic import OUTBOX_SCHEMA
    from cdc_lake.lake.ingest import ingest_new_files
    from cdc_lake.lake.raw_lines import RawSource
    from cdc_lake.lake.table_state import evaluate
    from cdc_lake.source.captured import OUTBOX
    from cdc_lake.spark_apps import jvm_names
    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.install import install
    from cdc_lake.stack.spark import build_spark_session

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    state = Path(tempfile.mkdtemp(prefix="cdc-lake-commit-"))
    log_dir = state / "events"
    log_dir.mkdir()
    project = StackSettings.from_env()
    settings = StackSettings.from_env(
        state_dir=state, port_base=args.port_base, jars_dir=project.jars_dir
    )
    install(settings)
    stack = LocalStack(settings, verbose=False, only=["s3"])
    stack.up()
    try:
        spark = build_spark_session(settings, app_name="cdc-lake-commit-cost", extra={
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": log_dir.as_uri(),
            **dict(kv.split("=", 1) for kv in args.spark),
        })  # fmt: skip
        if not args.unpinned:
            jvm_names.pin(spark)  # as run_app does on the lake server
        if args.hudi_log:
            jvm: Any = spark.sparkContext._jvm
            level = jvm.org.apache.logging.log4j.Level.toLevel(args.hudi_log)
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel("org.apache.hudi", level)
        client = stack.service("s3").client()  # type: ignore[attr-defined]
        prefix = f"bench-commit/{uuid.uuid4().hex[:6]}/"
        _, offsets = write_raw(client, settings.raw_bucket, prefix, args.history, say)
        source = RawSource(settings.raw_bucket, prefix, TOPIC)
        sides: dict[str, dict[str, str]] = {"default": {}}
        for v in args.variant:
            name, _, kvs = v.partition(":")
            sides[name] = dict(kv.split("=", 1) for kv in kvs.split(",") if kv)
        for t in args.table:  # NAME:FIELD=INT is --variant NAME:cdc_lake.FIELD=INT
            name, _, kv = t.partition(":")
            field, value = kv.split("=", 1)
            sides.setdefault(name, {})[FIELD_PREFIX + field] = value
        base = f"s3a://{settings.lake_bucket}/{prefix}"
        tables = {name: variant_table(f"{base}{name}", opts) for name, opts in sides.items()}
        states: dict[str, Any] = {}
        for name, table in tables.items():
            with session_settings(spark, sides[name]):
                res = ingest_new_files(
                    spark, client, source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
                )
                st = evaluate(spark, table, None, schema=OUTBOX_SCHEMA)
            assert st is not None
            states[name] = st.digest
            say(f"{name}: history of {res.events_read:,} events in {res.seconds:.1f}s")
        marks: dict[str, list[tuple[int, int, float, float]]] = defaultdict(list)
        names = list(tables)
        for r in range(args.rounds):
            # One update in 20 changes its order's year: a move in a partitioned table.
            put_updates(client, settings.raw_bucket, prefix, offsets, args.files, args.changes,
                        args.history // 5, r, stride=10_000, move_every=20)  # fmt: skip
            for name in rotation(tuple(names), r):
                table = tables[name]
                with session_settings(spark, sides[name]):
                    t0 = time.time()
                    res = ingest_new_files(
                        spark, client, source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
                    )
                    t1 = time.time()
                    st = evaluate(spark, table, states[name], schema=OUTBOX_SCHEMA)
                    t2 = time.time()
                assert st is not None and res.committed is not None
                states[name] = st.digest
                marks[name].append((int(t0 * 1000), int(t2 * 1000), t1 - t0, t2 - t1))
                say(f"round {r + 1}: {name}: ingest {t1 - t0:.2f}s checks {t2 - t1:.2f}s "
                    f"({res.events_upserted} upserted, checks {st.mode})")  # fmt: skip
        spark.stop()
    finally:
        stack.down()
    jobs, stages = read_event_log(log_dir)
    shutil.rmtree(state, ignore_errors=True)
    out: dict[str, Any] = {"sides": {}}
    ref = states["default"]
    base_ingest = statistics.median(m[2] for m in marks["default"])
    base_run = statistics.median(m[2] + m[3] for m in marks["default"])
    for name in names:
        per_round = []
        by_site: dict[str, list[float]] = defaultdict(list)
        for start, end, _, _ in marks[name]:
            js = [j for j in jobs if start <= j["start"] <= end]
            ss = [s for s in stages if start <= s["start"] <= end]
            busy = union_ms([(j["start"], j["end"]) for j in js])
            per_round.append({"jobs": len(js), "stages": len(ss),
                              "tasks": sum(s["tasks"] for s in ss),
                              "job_s": busy / 1000, "wall_s": (end - start) / 1000})  # fmt: skip
            site: dict[str, float] = defaultdict(float)
            for s in ss:
                site[s["name"]] += (s["end"] - s["start"]) / 1000
            for k, v in site.items():
                by_site[k].append(v)
        start, end, _, _ = marks[name][-1]
        timeline = [
            (round((j["start"] - start) / 1000, 2), round((j["end"] - j["start"]) / 1000, 2),
             j["site"])
            for j in sorted(jobs, key=lambda j: j["start"]) if start <= j["start"] <= end
        ]  # fmt: skip
        ingest = statistics.median(m[2] for m in marks[name])
        run = statistics.median(m[2] + m[3] for m in marks[name])
        same = (states[name]["digest"], states[name]["rows"]) == (ref["digest"], ref["rows"])
        out["sides"][name] = {
            "options": sides[name], "fields": changed_fields(tables[name]),
            "ingest_s": ingest, "checks_s": statistics.median(m[3] for m in marks[name]),
            "run_s": run, "ingest_ratio": ingest / base_ingest, "run_ratio": run / base_run,
            "same_rows": same, "last_round_jobs": timeline,
            "jobs_per_run": statistics.median(p["jobs"] for p in per_round),
            "stages_per_run": statistics.median(p["stages"] for p in per_round),
            "tasks_per_run": statistics.median(p["tasks"] for p in per_round),
            "job_s_per_run": statistics.median(p["job_s"] for p in per_round),
            "top_stages": sorted(((k, statistics.median(v), len(v)) for k, v in by_site.items()),
                                 key=lambda x: -x[1])[:25],
        }  # fmt: skip
        s = out["sides"][name]
        say(f"{name}: ingest {ingest:.2f}s ({s['ingest_ratio']:.2f}x) run {run:.2f}s "
            f"({s['run_ratio']:.2f}x), {s['jobs_per_run']} jobs, {s['stages_per_run']} stages, "
            f"{s['tasks_per_run']} tasks, in jobs {s['job_s_per_run']:.2f}s, "
            f"{'same rows' if same else 'ROWS DIFFER'}")  # fmt: skip
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
