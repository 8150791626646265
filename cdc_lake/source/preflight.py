"""Checks that the source database can feed Debezium, each failing with the cause and the fix;
that each declared table can be captured (``check_capturable``); and how far the connector's
replication slot lags behind the WAL.

The publication must hold every captured table and Debezium's two tables
(``sql/003_debezium.sql``): the heartbeat table, without which a quiet source pins WAL on
PostgreSQL 15+, and the signal table, without which incremental-snapshot signals are never seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2.extensions import connection as PgConnection

from cdc_lake.source.captured import CapturedTable
from cdc_lake.source.row_key import refusal, unique_indexes

DEBEZIUM_TABLES = ("datalake.cdc_heartbeat", "datalake.debezium_signal")


class SourceNotReady(RuntimeError):
    pass


def check_logical_replication(
    conn: PgConnection,
    publication: str,
    slot: str,
    connector_exists: bool,
    captured: Sequence[str],
) -> dict[str, object]:
    """``captured``: the schema-qualified names of the captured tables, each of which the
    publication must hold."""
    with conn.cursor() as cur:
        cur.execute("SHOW wal_level")
        row = cur.fetchone()
        wal_level = row[0] if row else None
        if wal_level != "logical":
            raise SourceNotReady(
                f"PostgreSQL wal_level is {wal_level!r}, but Debezium needs 'logical'. Fix: set "
                "wal_level = logical (on RDS/Aurora: rds.logical_replication = 1 in the "
                "parameter group) and restart the database."
            )
        cur.execute(
            "SELECT array_agg(schemaname || '.' || tablename) FROM pg_publication_tables "
            "WHERE pubname = %s",
            (publication,),
        )
        row = cur.fetchone()
        tables = row[0] if row and row[0] else None
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,))
        if cur.fetchone() is None:
            raise SourceNotReady(
                f"publication {publication!r} is missing, so Debezium has nothing to stream. "
                "Fix: materialise the source outbox asset, which creates it."
            )
        if missing := [t for t in captured if t not in (tables or ())]:
            raise SourceNotReady(
                f"publication {publication!r} does not publish {', '.join(missing)} "
                f"(it has {tables or 'no tables'}). Fix: materialise the source outbox asset, "
                f"or ALTER PUBLICATION {publication} ADD TABLE {', '.join(missing)}."
            )
        unpublished = [t for t in DEBEZIUM_TABLES if t not in (tables or ())]
        if unpublished:
            raise SourceNotReady(
                f"publication {publication!r} does not publish {', '.join(unpublished)}. "
                "Unpublished, heartbeats never reach Debezium (PostgreSQL 15+ skips transactions "
                "without published changes), so a quiet outbox pins WAL, and snapshot signals are "
                "never seen. Fix: materialise the source outbox asset (sql/003_debezium.sql adds "
                f"them), or ALTER PUBLICATION {publication} ADD TABLE {', '.join(unpublished)}."
            )
        cur.execute(
            "SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (slot,),
        )
        slot_row = cur.fetchone()
    conn.commit()
    if slot_row is None and connector_exists:
        raise SourceNotReady(
            f"replication slot {slot!r} is missing while the Debezium connector already exists: "
            "changes made since the slot was dropped are lost to it. Fix: delete the connector "
            "and its offsets so that it takes a new snapshot, or recreate the slot and accept the "
            "gap."
        )
    return {
        "wal_level": wal_level,
        "publication_tables": tables,
        "slot_exists": slot_row is not None,
        "slot_confirmed_flush_lsn": slot_row[1] if slot_row else None,
    }


@dataclass(frozen=True)
class SlotLag:
    """Bytes of WAL between the server's current position and the slot's positions; None where
    the slot has no such position (an invalidated slot has no restart_lsn)."""

    slot: str
    active: bool
    wal_status: str | None
    restart_lag_bytes: int | None  # WAL the server must keep for this slot
    flush_lag_bytes: int | None  # WAL the consumer has not acknowledged yet
    # max_slot_wal_keep_size in bytes (None: -1, no cap), and what the slot may still fall
    # behind before it is invalidated (None without a cap, or once lost).
    wal_keep_bytes: int | None = None
    safe_wal_bytes: int | None = None

    @property
    def lost(self) -> bool:
        """Invalidated: the WAL it needed is gone, so its consumer can never resume from it."""
        return self.wal_status == "lost"


def slot_lag(conn: PgConnection, slot: str) -> SlotLag | None:
    """The slot's lag behind ``pg_current_wal_lsn()``, or None if there is no such slot."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT active, wal_status, (pg_current_wal_lsn() - restart_lsn)::bigint,"
            " (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint,"
            " pg_size_bytes(current_setting('max_slot_wal_keep_size')), safe_wal_size"
            " FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        row = cur.fetchone()
    conn.commit()
    if row is None:
        return None
    active, wal_status, restart, flush, keep, safe = row
    return SlotLag(
        slot, bool(active), wal_status, restart, flush, keep if keep >= 0 else None, safe
    )


def check_capturable(conn: PgConnection, tables: Sequence[CapturedTable]) -> None:
    """Each declared table exists, the source holds its declared key unique (its primary key,
    or a unique index on ``NOT NULL`` columns), and its replica identity will carry that key in
    every change (``cdc_lake/source/row_key.py``); else ``SourceNotReady`` naming the table and
    what to do, before anything is published.

    Why: PostgreSQL refuses every ``UPDATE`` and ``DELETE`` of a published table that has no
    replica identity (a table without a primary key has none by default), so publishing one
    would break the application's own writes; and Debezium skips such a table in snapshots.
    A key the source does not hold unique would let the lake keep one row per value of a
    column that is not one row's."""
    for table in tables:
        schema, _, name = table.source.rpartition(".")
        with conn.cursor() as cur:
            cur.execute(
                "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
                " AND c.relkind IN ('r', 'p')",
                (schema, name),
            )
            found = cur.fetchone()
        conn.commit()
        if found is None:
            raise SourceNotReady(
                f"{table.source} is declared in cdc_lake/source/captured.py but the source "
                "has no such table. Fix: create it (sql/ or your own migration), or remove "
                "its declaration."
            )
        why = refusal(table, unique_indexes(conn, found[0]), found[1])
        if why is not None:
            raise SourceNotReady(why)
