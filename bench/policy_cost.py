"""``policy``: what the column policies (``CapturedTable.exclude``, ``hashed``) cost a refresh.

For whole columns the upsert does the same work either way: a hashed value is a string like the
plain one, and an excluded column is one column fewer. What they add is in ``matches_source``:
the source's digest computes, per row and hashed column, the salted SHA-256 that the source
connector wrote (``cdc_lake/lake/digest.py``). ``bench_policy_cost`` times that digest over one
table of ``rows`` customers-like rows in the stack's PostgreSQL, without policies (A: phone and
fax plain) and with the customers' (B: phone hashed, fax excluded), alternately, ``reps`` times.

Field policies on a jsonb column (the outbox's ``customer.phone`` and ``customer.fax``) add work
to the upsert too: every fresh raw line's JSON is checked for a plain phone or a fax field
(``raw_lines.policy_breaches``). ``bench_field_policy_upsert`` times the upsert of the same new
raw files into two outbox tables of the same history, declared without (A) and with (B) the
outbox's field policies, alternately. The figures are each side's median and their ratio B/A.
No timing is asserted anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg2

from bench.harness import Figure, median, paired
from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.digest import source_digest
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.schema import SourceColumn, captured_columns, initial
from cdc_lake.source.captured import CUSTOMERS, OUTBOX
from cdc_lake.stack import LocalStack

TABLE = "public.bench_policy"
COLUMNS = [
    SourceColumn("customer_id", "character varying(5)", False),
    SourceColumn("company_name", "character varying(40)"),
    SourceColumn("city", "character varying(15)"),
    SourceColumn("phone", "character varying(24)"),
    SourceColumn("fax", "character varying(24)"),
]


def bench_policy_cost(
    stack: LocalStack, rows: int, reps: int, say: Callable[[str], None]
) -> list[Figure]:
    s = stack.settings
    declared = replace(CUSTOMERS, source=TABLE)
    plain = initial(TABLE, "customer_id", COLUMNS)
    policed = initial(TABLE, "customer_id", captured_columns(declared, COLUMNS))
    conn = psycopg2.connect(s.pg_dsn())
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
            cur.execute(
                f"CREATE TABLE {TABLE} (customer_id varchar(5) PRIMARY KEY, "
                "company_name varchar(40), city varchar(15), phone varchar(24), fax varchar(24))"
            )
            cur.execute(
                f"INSERT INTO {TABLE} SELECT to_hex(i), 'Company ' || i, 'City ' || (i %% 500), "
                "'+33 1 ' || lpad(i::text, 8, '0'), CASE WHEN i %% 3 = 0 THEN NULL "
                "ELSE '+33 2 ' || lpad(i::text, 8, '0') END FROM generate_series(1, %s) AS i",
                (rows,),
            )
            cur.execute(f"ANALYZE {TABLE}")
        conn.commit()
        say(f"policy: the source digest of {rows:,} rows, without (A) and with (B) policies")
        salt = s.credentials.column_salt
        a, b = paired(
            lambda: source_digest(conn, schema=plain),
            lambda: source_digest(conn, schema=policed, salt=salt),
            reps,
            say,
        )
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE {TABLE}")
        conn.commit()
    finally:
        conn.close()
    work = f"{rows:,} rows"
    return [
        Figure("policy", f"source digest without policies, {work}", median(a), "s", ""),
        Figure("policy", f"source digest with phone hashed, fax excluded, {work}", median(b),
               "s", ""),  # fmt: skip
        Figure("policy", "ratio with / without column policies", median(b) / median(a), "x", ""),
    ]


def _customer(order_id: int, version: int) -> str:
    """A customer row as the outbox's JSON holds it after the connector: the phone hashed, no
    fax, and the other fields of Northwind's customers."""
    phone = hashlib.sha256(f"salt+33 1 {order_id:08d}".encode()).hexdigest()
    return json.dumps({
        "city": f"City {order_id % 500}", "phone": phone, "region": None,
        "address": f"{order_id} Rue du Bench, v{version}", "country": "France",
        "customer_id": f"C{order_id % 9000:04d}", "postal_code": "75001",
        "company_name": f"Company {order_id}", "contact_name": f"Contact {order_id}",
        "contact_title": "Owner",
    })  # fmt: skip


def bench_field_policy_upsert(
    spark: Any,
    client: Any,
    raw_bucket: str,
    lake_bucket: str,
    orders: int,
    changes: int,
    reps: int,
    say: Callable[[str], None],
    warm_up: bool = True,
) -> list[Figure]:
    """The upsert of ``changes`` updates (in 2 files) into ``orders`` orders, per rep, into a
    table declared without field policies (A) and one with the outbox's (B); first an untimed
    round of both unless not ``warm_up`` (the smoke size)."""
    sides = {
        "A": (SyntheticLake(client, raw_bucket, lake_bucket), replace(OUTBOX, hashed=(),
                                                                       exclude=())),
        "B": (SyntheticLake(client, raw_bucket, lake_bucket), OUTBOX),
    }  # fmt: skip

    def ingest(side: str) -> float:
        lake, declared = sides[side]
        res = ingest_new_files(spark, client, lake.source, lake.table(), captured=declared,
                               declared=OUTBOX_COLUMNS)  # fmt: skip
        return res.seconds

    history = [event(o, 1_000, o, op="c", customer=_customer(o, 0)) for o in range(1, orders + 1)]
    for side, (lake, _) in sides.items():
        lake.put(history)
        say(f"policy: {orders:,} orders into {side} in {ingest(side):.1f}s")
    a: list[float] = []
    b: list[float] = []
    # Round 0 is a warm-up of both sides, untimed: the JVM's first upserts of a shape pay for
    # their compilation (issue 52), which would fall on whichever side runs first.
    for r in range(0 if warm_up else 1, reps + 1):
        step = max(1, orders // changes)
        picked = [1 + (i * step + r) % orders for i in range(changes)]
        lsn = orders + r * changes
        lines = [event(o, 2_000 + r, lsn + i, customer=_customer(o, r + 1))
                 for i, o in enumerate(picked)]  # fmt: skip
        for lake, _ in sides.values():
            lake.put(lines[: changes // 2])
            lake.put(lines[changes // 2 :])
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            seconds = ingest(side)
            if r:
                (a if side == "A" else b).append(seconds)
            say(f"  {f'rep {r}/{reps}' if r else 'warm-up'}: {side} {seconds:.2f}s")
    work = f"{changes:,} changes into {orders:,} orders"
    return [
        Figure("policy", f"upsert without field policies, {work}", median(a), "s", ""),
        Figure("policy", f"upsert with customer.phone hashed, customer.fax excluded, {work}",
               median(b), "s", ""),  # fmt: skip
        Figure("policy", "upsert ratio with / without field policies", median(b) / median(a),
               "x", ""),  # fmt: skip
    ]
