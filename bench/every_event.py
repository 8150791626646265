"""What the every-table guarantees cost, as ratios within one run, sides alternated:

- **fill**: a refresh whose batch holds Debezium's placeholder for unchanged TOASTed values
  (``cdc_lake/lake/unavailable.py``: filled in from the stored rows, a key lookup) against the
  same refresh with the values themselves, on two tables of the same history;
- **wal**: WAL bytes per ``UPDATE`` of a small column next to a large TOASTed value, with the
  table's replica identity FULL (what the source asset sets by default) against DEFAULT; and the
  same for a row without a large value.

    python -m bench.every_event --port-base 18600 --history 20000 --changes 1000 --rounds 5

It starts a stack of its own (S3 and PostgreSQL only) in a fresh state directory and stops it.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.source.captured import OUTBOX, UNAVAILABLE_VALUE

BIG = '{"notes": "%s"}'


def fill_cost(
    spark: Any, client: Any, raw_bucket: str, lake_bucket: str, history: int, changes: int,
    rounds: int, say: Any,
) -> dict[str, Any]:  # fmt: skip
    """Median refresh seconds of ``changes`` updates into ``history`` orders, with the
    placeholder in ``customer`` (filled from the lake) and with the value."""
    from cdc_lake.lake.ingest import ingest_new_files

    big = BIG % ("ab" * 2000)
    sides = {"placeholder": SyntheticLake(client, raw_bucket, lake_bucket),
             "value": SyntheticLake(client, raw_bucket, lake_bucket)}  # fmt: skip
    per_file = 1000
    for lake in sides.values():
        for start in range(0, history, per_file):
            ids = range(start + 1, min(start + per_file, history) + 1)
            lake.put([event(i, 100, i, op="c", customer=big) for i in ids])
        ingest_new_files(
            spark, lake.client, lake.source, lake.table(), captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
    say(f"fill: {history:,} orders in each table")
    times: dict[str, list[float]] = {name: [] for name in sides}
    filled: dict[str, int] = {}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        ts = 1000 + r
        for name in order:
            lake = sides[name]
            value = UNAVAILABLE_VALUE if name == "placeholder" else big
            ids = [1 + (r * changes + k * 7) % history for k in range(changes)]
            lake.put([event(i, ts, history + r * changes + k, customer=value,
                            shipped_date=10_000 + r) for k, i in enumerate(ids)])  # fmt: skip
            res = ingest_new_files(
                spark,
                lake.client,
                lake.source,
                lake.table(),
                captured=OUTBOX,
                declared=OUTBOX_COLUMNS,
            )
            times[name].append(res.seconds)
            filled[name] = res.unavailable_lines
            say(f"  round {r + 1} {name}: {res.seconds:.2f}s ({res.unavailable_lines} filled)")
    p, v = median(times["placeholder"]), median(times["value"])
    return {"history": history, "changes": changes, "rounds": rounds,
            "placeholder_s": round(p, 2), "value_s": round(v, 2), "ratio": round(p / v, 3),
            "filled_per_refresh": filled["placeholder"]}  # fmt: skip


def wal_cost(dsn: str, rows: int, updates: int, rounds: int, say: Any) -> dict[str, Any]:
    """WAL bytes per single-row UPDATE of ``phone``, FULL against DEFAULT, with and without a
    large ``notes`` value beside it."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    sides = [(identity, size) for size in ("large", "small") for identity in ("full", "default")]
    for identity, size in sides:
        name = f"wal_{identity}_{size}"
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        cur.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, phone text, notes text)")
        cur.execute(f"ALTER TABLE {name} REPLICA IDENTITY {identity.upper()}")
        for i in range(rows):
            notes = secrets.token_hex(4000) if size == "large" else "short"
            cur.execute(f"INSERT INTO {name} VALUES (%s, 'p', %s)", (i, notes))
    # The app role may not CHECKPOINT: an untimed pass first, so that each side has written
    # its pages' full-page images once; the median over alternated rounds does the rest.
    for identity, size in sides:
        for k in range(rows):
            cur.execute(f"UPDATE wal_{identity}_{size} SET phone = 'warm' WHERE id = %s", (k,))
    say(f"wal: {rows} rows per table, {updates} updates per side and round")
    per_update: dict[tuple[str, str], list[float]] = {s: [] for s in sides}
    for r in range(rounds):
        for identity, size in sides if r % 2 == 0 else list(reversed(sides)):
            name = f"wal_{identity}_{size}"
            cur.execute("SELECT pg_current_wal_insert_lsn()")
            (before,) = cur.fetchone()  # type: ignore[misc]
            for k in range(updates):
                cur.execute(f"UPDATE {name} SET phone = %s WHERE id = %s",
                            (f"r{r}k{k}", k % rows))  # fmt: skip
            cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (before,))
            (diff,) = cur.fetchone()  # type: ignore[misc]
            per_update[(identity, size)].append(float(diff) / updates)
    conn.close()
    out: dict[str, Any] = {"rows": rows, "updates": updates, "rounds": rounds}
    for size in ("large", "small"):
        full, default = median(per_update[("full", size)]), median(per_update[("default", size)])
        out[f"{size}_full_bytes"] = round(full)
        out[f"{size}_default_bytes"] = round(default)
        out[f"{size}_ratio"] = round(full / default, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.every_event", description=__doc__)
    ap.add_argument("--port-base", type=int, required=True)
    ap.add_argument("--history", type=int, default=20_000)
    ap.add_argument("--changes", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--wal-rows", type=int, default=200)
    ap.add_argument("--wal-updates", type=int, default=2_000)
    args = ap.parse_args(argv)

    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.spark import build_spark_session

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    state = Path(tempfile.mkdtemp(prefix="cdc-lake-every-event-"))
    state.chmod(0o755)  # PostgreSQL runs as the postgres user
    project = StackSettings.from_env()
    settings = StackSettings.from_env(
        state_dir=state, port_base=args.port_base, jars_dir=project.jars_dir
    )
    stack = LocalStack(settings, verbose=False, only=["postgres", "s3"])
    t0 = time.monotonic()
    stack.up()
    try:
        wal = wal_cost(settings.pg_dsn(), args.wal_rows, args.wal_updates, args.rounds, say)
        print(f"wal: {wal}", flush=True)
        spark = build_spark_session(settings, app_name="cdc-lake-bench-every-event")
        spark.sparkContext.setLogLevel("ERROR")
        client = stack.service("s3").client()  # type: ignore[attr-defined]
        fill = fill_cost(spark, client, settings.raw_bucket, settings.lake_bucket, args.history,
                         args.changes, args.rounds, say)  # fmt: skip
        print(f"fill: {fill}", flush=True)
        spark.stop()
    finally:
        stack.down()
    say(f"done in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
