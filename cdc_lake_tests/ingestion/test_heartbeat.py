"""Heartbeats keep the replication slot moving while the outbox is quiet and other tables write
WAL, because the heartbeat table is published; unpublished, PostgreSQL 15+ decodes its updates
to nothing and the slot stays pinned."""

from __future__ import annotations

import time
from typing import Any

import dagster as dg
import psycopg2

from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets, wait_for_offsets
from cdc_lake_tests.ingestion.test_reference_dump import create_database

SLOT_SQL = """
SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, confirmed_flush_lsn - '0/0'::pg_lsn,
       restart_lsn - '0/0'::pg_lsn
FROM pg_replication_slots WHERE slot_name = %s
"""


def _slot(conn: Any, slot: str) -> tuple[int, int, int]:
    """(current WAL, confirmed_flush, restart) as byte positions."""
    with conn.cursor() as cur:
        cur.execute(SLOT_SQL, (slot,))
        row = cur.fetchone()
    conn.commit()
    assert row is not None, f"no slot {slot}"
    return int(row[0]), int(row[1]), int(row[2])


def _write_wal(conn: Any, seconds: float) -> None:
    """About 1 MB of WAL a second into an unpublished table."""
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS datalake.wal_scratch (id bigserial, v text)")
        conn.commit()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            cur.execute(
                "INSERT INTO datalake.wal_scratch (v) SELECT repeat('x', 1000)"
                " FROM generate_series(1, 200)"
            )
            conn.commit()
            time.sleep(0.2)


def _wal_until(conn: Any, slot: str, past: int, timeout_s: float) -> tuple[int, int, int]:
    """Write WAL until the slot confirms a position after ``past`` or the time is up."""
    deadline = time.monotonic() + timeout_s
    now = _slot(conn, slot)
    while time.monotonic() < deadline and now[1] <= past:
        _write_wal(conn, 1.0)
        now = _slot(conn, slot)
    return now


def _beat_at(conn: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute("SELECT beat_at FROM datalake.cdc_heartbeat")
        row = cur.fetchone()
    conn.commit()
    assert row is not None
    return row[0]


def test_quiet_outbox_slot_follows_wal_thanks_to_heartbeats(ingested, resources, pg):
    cdc = resources["cdc"]
    conf = resources["kafka"].client_conf()
    first_beat = _beat_at(pg)
    topic_before = end_offsets(conf, cdc.topic_of(OUTBOX))
    _write_wal(pg, 1.0)
    start, _, _ = _slot(pg, cdc.slot_name)
    t0 = time.monotonic()
    # The slot confirms a position past WAL written only to an unpublished table...
    mid, confirmed, _ = _wal_until(pg, cdc.slot_name, start, timeout_s=30)
    assert confirmed > start, "the slot did not follow the WAL while the outbox was quiet"
    # ...and keeps doing so, so what it holds stays bounded by a few heartbeats' worth.
    current, confirmed, restart = _wal_until(pg, cdc.slot_name, mid, timeout_s=30)
    assert confirmed > mid
    written = current - start
    print(f"{written:,} B of WAL in {time.monotonic() - t0:.1f}s; the slot has "
          f"{current - confirmed:,} B unconfirmed, {current - restart:,} B retained")  # fmt: skip
    assert current - confirmed < written
    assert _beat_at(pg) > first_beat  # the action query runs with the role's grants
    # Nothing came from the outbox meanwhile: the progress is the heartbeats'.
    assert end_offsets(conf, cdc.topic_of(OUTBOX)) == topic_before


def test_unpublished_heartbeat_table_leaves_the_slot_pinned(
    local_stack: LocalStack, ingested, resources
):
    name, slot, prefix = "hb_unpublished", "hbu_slot", "hbu"
    create_database(local_stack, name)
    mine = local_resources(
        local_stack.settings,
        database=name,
        topic_prefix=prefix,
        slot_name=slot,
        raw_prefix=f"{prefix}-events/",
        heartbeat_interval_ms=1000,
    )
    assert dg.materialize([cdc_events_outbox], resources=mine).success
    conn = psycopg2.connect(local_stack.settings.pg_dsn(database=name))
    cdc = mine["cdc"]
    connect = resources["kafka_connect"].client()
    try:
        with conn.cursor() as cur:
            cur.execute("ALTER PUBLICATION cdc_publication DROP TABLE datalake.cdc_heartbeat")
        conn.commit()
        # Deployed directly: the topic asset's preflight refuses this publication.
        config = cdc.connector_settings(mine["postgres"]).debezium()
        connect.deploy(cdc.source_connector_name, config, 120, print)
        wait_for_offsets(
            mine["kafka"].client_conf(), cdc.topic_of(OUTBOX), at_least=829, timeout_s=120
        )
        first_beat = _beat_at(conn)
        start, _, _ = _slot(conn, slot)
        _write_wal(conn, 12.0)
        current, confirmed, _ = _slot(conn, slot)
        assert _beat_at(conn) > first_beat  # heartbeats ran...
        assert confirmed < start  # ...yet the slot stayed behind the WAL written meanwhile
        print(f"unpublished: {current - confirmed:,} B unconfirmed after 12s")

        with conn.cursor() as cur:
            cur.execute("ALTER PUBLICATION cdc_publication ADD TABLE datalake.cdc_heartbeat")
        conn.commit()
        start, _, _ = _slot(conn, slot)
        current, confirmed, _ = _wal_until(conn, slot, start, timeout_s=30)
        assert confirmed >= start  # published again: it follows
    finally:
        connect.delete(cdc.source_connector_name)
        _drop_slot(local_stack, conn, slot)
        conn.close()


def _drop_slot(local_stack: LocalStack, conn: Any, slot: str) -> None:
    # The replication role may drop it once the deleted connector's task has let go of it.
    repl = psycopg2.connect(local_stack.settings.pg_dsn(user=local_stack.settings.replication_user))
    repl.autocommit = True
    try:
        deadline = time.monotonic() + 60
        with repl.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
                row = cur.fetchone()
                if row is None:
                    return
                if not row[0]:
                    cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    return
                time.sleep(1)
    finally:
        repl.close()
