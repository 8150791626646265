"""``replication_slot_lag`` against a PostgreSQL of its own: the server starts with the
stack's cap on retained WAL (``max_slot_wal_keep_size``), the check reports it, and a slot that
falls further behind is invalidated by PostgreSQL, which turns the check into an ERROR that
says how to recover. Its own server, so the session stack's slot is never at risk."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace

import dagster as dg
import pytest

from cdc_lake.defs.streaming.checks import replication_slot_lag
from cdc_lake.resources.local import local_pipeline, local_postgres
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres
from cdc_lake.stack.settings import local_secret_env
from cdc_lake_tests.conftest import TEST_PORT_BASE, make_settings

SLOT = "cap_test_slot"
CAP_MB = 1  # the smallest cap: a few WAL segments put the slot past it


@pytest.fixture(scope="module")
def capped() -> Iterator[LocalStack]:
    settings = replace(make_settings(TEST_PORT_BASE + 900), slot_wal_keep_mb=CAP_MB)
    stack = LocalStack(settings, verbose=False, only=["postgres"])
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        shutil.rmtree(settings.state_dir, ignore_errors=True)


def _admin(stack: LocalStack):
    svc = stack.service("postgres")
    assert isinstance(svc, Postgres)
    conn = svc._connect()
    conn.autocommit = True
    return conn


def _check(stack: LocalStack, monkeypatch) -> dg.AssetCheckResult:
    for name, value in local_secret_env(stack.settings).items():
        monkeypatch.setenv(name, value)
    cdc = local_pipeline(stack.settings, slot_name=SLOT)
    result = replication_slot_lag(postgres=local_postgres(stack.settings), cdc=cdc)
    assert isinstance(result, dg.AssetCheckResult)
    return result


def test_a_slot_past_the_cap_is_invalidated_and_the_check_says_how_to_recover(
    capped: LocalStack, monkeypatch
):
    conn = _admin(capped)
    with conn.cursor() as cur:
        cur.execute("SHOW max_slot_wal_keep_size")
        assert cur.fetchone() == (f"{CAP_MB}MB",)  # from the stack's settings
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (SLOT,))

    fresh = _check(capped, monkeypatch)
    assert fresh.passed, fresh.description
    meta = fresh.metadata
    assert meta["max_slot_wal_keep_size"].value == f"{CAP_MB * 1024 * 1024:,} bytes"
    safe = meta["slot_safe_wal_bytes"].value
    assert isinstance(safe, int) and 0 < safe <= (CAP_MB + 16) * 1024 * 1024  # cap + a segment

    # Nobody reads the slot while WAL moves on past the cap; a checkpoint removes the old WAL.
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE filler (x text)")
        for _ in range(4):
            cur.execute("INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 5000)")
            cur.execute("SELECT pg_switch_wal()")
        cur.execute("CHECKPOINT")
        cur.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s", (SLOT,))
        assert cur.fetchone() == ("lost",)
    conn.close()

    lost = _check(capped, monkeypatch)
    assert not lost.passed and lost.severity == dg.AssetCheckSeverity.ERROR
    text = lost.description or ""
    assert f"{SLOT!r} is invalidated (wal_status lost)" in text
    assert f"max_slot_wal_keep_size ({CAP_MB * 1024 * 1024:,} bytes)" in text
    assert f"pg_drop_replication_slot('{SLOT}')" in text and "offsets" in text
