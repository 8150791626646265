"""``policy``: what the column policies (``CapturedTable.exclude``, ``hashed``) cost a refresh.

The upsert does the same work either way: a hashed value is a string like the plain one, and
an excluded column is one column fewer. What the policies add is in ``matches_source``: the
source's digest computes, per row and hashed column, the salted SHA-256 that the source
connector wrote (``cdc_lake/lake/digest.py``). This times that digest over one table of
``rows`` customers-like rows in the stack's PostgreSQL, without policies (A: phone and fax
plain) and with the customers' (B: phone hashed, fax excluded), alternately, ``reps`` times.
The figures are each side's median and their ratio B/A. No timing is asserted anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import psycopg2

from bench.harness import Figure, median, paired
from cdc_lake.lake.digest import source_digest
from cdc_lake.lake.schema import SourceColumn, captured_columns, initial
from cdc_lake.source.captured import CUSTOMERS
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
