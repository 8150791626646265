"""Apply the source SQL and load sample data; pure functions of a psycopg2 connection.

``prepare_source`` is what the source asset runs. It is idempotent:
  1. ``sql/*.sql`` in file-name order: the Northwind-shaped schema (existing tables are kept as
     they are), then the outbox table, its triggers and the publication, then Debezium's
     heartbeat and signal tables, which join the publication;
  2. each captured table (``cdc_lake/source/captured.py``: the outbox, the customers) is
     checked first (``preflight.check_capturable``: it exists, the source holds its
     declared key unique, and its replica identity will carry that key; else nothing is
     published), gets ``REPLICA IDENTITY FULL`` unless its
     declaration says ``replica_identity="default"`` (so an update that leaves a large TOASTed
     value alone still carries it), and joins the publication if it is not in it yet;
  3. the replication role gets only what Debezium needs: USAGE on the schema, SELECT on the
     captured tables (for snapshots), UPDATE of the heartbeat's one column (its
     heartbeat.action.query) and INSERT on the signal table (incremental snapshots write
     their watermarks there); it already has LOGIN REPLICATION and CONNECT;
  4. if ``datalake.orders`` is empty, the generator's sample data is loaded; a user's own data
     (such as the original Northwind dump) is used as it is;
  5. ``datalake.load_cdc_events()`` brings the outbox in line with the orders; unchanged rows
     are not rewritten, so a rerun emits no events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from cdc_lake import sql_dir
from cdc_lake.source.captured import TABLES, CapturedTable
from cdc_lake.source.copy_rows import RowStream
from cdc_lake.source.generator import NorthwindGenerator
from cdc_lake.source.preflight import SourceNotReady, check_capturable

SCHEMA = "datalake"
# Created by sql/002_outbox.sql (plain SQL, so it names it too); Debezium reads it.
PUBLICATION = "cdc_publication"
PG_PORT = 5432  # PostgreSQL's default, where no port is given
HEARTBEAT = "cdc_heartbeat"
SIGNAL = "debezium_signal"


def sql_files() -> list[Path]:
    files = sorted(sql_dir().glob("*.sql"))
    if not files:
        raise FileNotFoundError(f"no SQL files in {sql_dir()}")
    return files


def apply_sql(conn: PgConnection) -> list[str]:
    applied = []
    with conn.cursor() as cur:
        for path in sql_files():
            cur.execute(path.read_text())
            applied.append(path.name)
    conn.commit()
    return applied


def _table(name: str) -> sql.Composable:
    schema, _, table = name.rpartition(".")
    return sql.Identifier(schema or SCHEMA, table)


def publish(conn: PgConnection, tables: Sequence[str]) -> list[str]:
    """Adds each of ``tables`` (schema-qualified) to the publication unless it is in it;
    returns the ones it added."""
    added = []
    with conn.cursor() as cur:
        cur.execute(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s",
            (PUBLICATION,),
        )
        published = {r[0] for r in cur.fetchall()}
        for name in tables:
            if name not in published:
                cur.execute(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
                    sql.Identifier(PUBLICATION), _table(name)))  # fmt: skip
                added.append(name)
    conn.commit()
    return added


def set_replica_identity(conn: PgConnection, tables: Sequence[CapturedTable]) -> list[str]:
    """``REPLICA IDENTITY FULL`` on each table declared ``replica_identity="full"`` that does not
    have it yet; returns the ones it changed. A table declared ``default`` is left as it is."""
    changed = []
    with conn.cursor() as cur:
        for table in tables:
            if table.replica_identity != "full":
                continue
            cur.execute("SELECT relreplident FROM pg_class WHERE oid = %s::regclass",
                        (table.source,))  # fmt: skip
            row = cur.fetchone()
            if row and row[0] == "f":
                continue
            try:
                cur.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(
                    _table(table.source)))  # fmt: skip
            except psycopg2.errors.InsufficientPrivilege as e:
                conn.rollback()
                raise SourceNotReady(
                    f"{table.source} needs REPLICA IDENTITY FULL (its declaration's "
                    "replica_identity='full'), and this role may not set it: "
                    f"{str(e).strip()}. Fix: have the table's owner run ALTER TABLE "
                    f"{table.source} REPLICA IDENTITY FULL, or declare replica_identity="
                    "'default' in cdc_lake/source/captured.py (the lake then fills unchanged "
                    "TOASTed values in from the previous ones)."
                ) from e
            changed.append(table.source)
    conn.commit()
    return changed


def grant_replication_role(conn: PgConnection, role: str, tables: Sequence[str]) -> None:
    """What Debezium needs, and no more (module docstring, step 3); ``tables``: the captured
    ones."""
    with conn.cursor() as cur:
        cur.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(SCHEMA), sql.Identifier(role)))  # fmt: skip
        for name in tables:
            cur.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
                _table(name), sql.Identifier(role)))  # fmt: skip
        # Column-level, and no SELECT: the action query is a bare UPDATE of the one row.
        cur.execute(sql.SQL("GRANT UPDATE (beat_at) ON {}.{} TO {}").format(
            sql.Identifier(SCHEMA), sql.Identifier(HEARTBEAT), sql.Identifier(role)))  # fmt: skip
        cur.execute(sql.SQL("GRANT INSERT ON {}.{} TO {}").format(
            sql.Identifier(SCHEMA), sql.Identifier(SIGNAL), sql.Identifier(role)))  # fmt: skip
    conn.commit()


def has_orders(conn: PgConnection) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT EXISTS (SELECT 1 FROM datalake.orders)")
        row = cur.fetchone()
    return bool(row and row[0])


def load_sample(
    conn: PgConnection,
    scale: float = 1.0,
    seed: int = 42,
    progress: Callable[[str], None] = print,
) -> dict[str, int]:
    """Bulk-load generated data into empty Northwind tables; returns rows per table."""
    gen = NorthwindGenerator(scale=scale, seed=seed)
    counts: dict[str, int] = {}
    with conn.cursor() as cur:
        # One set-based outbox load at the end instead of a trigger per row.
        cur.execute("ALTER TABLE datalake.orders DISABLE TRIGGER cdc_events_orders")
        cur.execute("ALTER TABLE datalake.order_details DISABLE TRIGGER cdc_events_order_details")
        for table in gen.tables():
            t0 = time.monotonic()
            columns = sql.SQL(", ").join(sql.Identifier(c) for c in table.columns)
            statement = sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
                sql.Identifier(SCHEMA), sql.Identifier(table.name), columns
            )
            cur.copy_expert(statement.as_string(cur), RowStream(table.rows()))
            counts[table.name] = cur.rowcount
            progress(f"loaded {cur.rowcount:>9,} rows into {table.name} "
                     f"({time.monotonic() - t0:.1f}s)")  # fmt: skip
        cur.execute("ALTER TABLE datalake.orders ENABLE TRIGGER cdc_events_orders")
        cur.execute("ALTER TABLE datalake.order_details ENABLE TRIGGER cdc_events_order_details")
    conn.commit()
    return counts


def load_outbox(conn: PgConnection) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT datalake.load_cdc_events()")
        row = cur.fetchone()
    conn.commit()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class OutboxStats:
    rows: int
    orders: int
    order_lines: int
    last_update: str | None


def outbox_stats(conn: PgConnection) -> OutboxStats:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT (SELECT count(*) FROM datalake.cdc_events),"
            " (SELECT count(*) FROM datalake.orders),"
            " (SELECT count(*) FROM datalake.order_details),"
            " (SELECT max(updated_at) FROM datalake.cdc_events)"
        )
        row = cur.fetchone()
    conn.commit()
    assert row is not None
    return OutboxStats(
        rows=row[0], orders=row[1], order_lines=row[2],
        last_update=row[3].isoformat() if row[3] else None,
    )  # fmt: skip


def table_rows(conn: PgConnection, source: str) -> int:
    """The row count of a captured table (schema-qualified)."""
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT count(*) FROM {}").format(_table(source)))
        row = cur.fetchone()
    conn.commit()
    return int(row[0]) if row else 0


def prepare_source(
    conn: PgConnection,
    replication_role: str,
    scale: float = 1.0,
    seed: int = 42,
    progress: Callable[[str], None] = print,
    captured: Sequence[CapturedTable] = TABLES,
) -> tuple[OutboxStats, bool]:
    """Apply the SQL, load sample data if there is none, fill the outbox; prepare the
    ``captured`` tables for capture (checked, their replica identity, published, readable by
    the replication role).

    Returns the outbox statistics and whether sample data was loaded."""
    tables = [t.source for t in captured]
    apply_sql(conn)
    check_capturable(conn, captured)
    set_replica_identity(conn, captured)
    publish(conn, tables)
    grant_replication_role(conn, replication_role, tables)
    loaded = False
    if not has_orders(conn):
        load_sample(conn, scale=scale, seed=seed, progress=progress)
        loaded = True
    load_outbox(conn)
    return outbox_stats(conn), loaded
