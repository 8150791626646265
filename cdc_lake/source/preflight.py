"""Checks that the source database can feed Debezium, each failing with the cause and the fix."""

from __future__ import annotations

from psycopg2.extensions import connection as PgConnection


class SourceNotReady(RuntimeError):
    pass


def check_logical_replication(
    conn: PgConnection, publication: str, slot: str, connector_exists: bool
) -> dict[str, object]:
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
        if not tables or "datalake.cdc_events" not in tables:
            raise SourceNotReady(
                f"publication {publication!r} does not publish datalake.cdc_events "
                f"(it has {tables or 'no tables'}). Fix: ALTER PUBLICATION {publication} "
                "ADD TABLE datalake.cdc_events."
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
