"""What the source asset checks and prepares before it publishes a captured table
(``cdc_lake/source/preflight.py``, ``cdc_lake/source/database.py``), on the real PostgreSQL, in a
database of its own: a table without a primary key, or whose primary key is not its declared
key, is refused before anything is published, and the application's writes to it go on
working; a table declared ``replica_identity="full"`` gets it, one declared ``"default"`` is left
as it is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

from cdc_lake.source.captured import OUTBOX, CapturedTable
from cdc_lake.source.database import PUBLICATION, apply_sql, prepare_source, set_replica_identity
from cdc_lake.source.preflight import SourceNotReady
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres

DATABASE = "preflight_checks"


@pytest.fixture
def conn(local_stack: LocalStack) -> Iterator[Any]:
    pg = local_stack.service("postgres")
    assert isinstance(pg, Postgres)
    pg.create_database(DATABASE, replace=True)
    c = psycopg2.connect(local_stack.settings.pg_dsn(database=DATABASE))
    apply_sql(c)
    yield c
    c.close()


def _published(conn: Any) -> set[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables "
                    "WHERE pubname = %s", (PUBLICATION,))  # fmt: skip
        rows = {r[0] for r in cur.fetchall()}
    conn.commit()
    return rows


def _identity(conn: Any, table: str) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT relreplident FROM pg_class WHERE oid = %s::regclass", (table,))
        row = cur.fetchone()
    conn.commit()
    assert row is not None
    return row[0]


def test_a_table_without_its_key_as_primary_key_is_refused_before_publishing(
    conn: Any, local_stack: LocalStack
):
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE datalake.audit_log (id int, msg text)")
        cur.execute("INSERT INTO datalake.audit_log VALUES (1, 'one'), (2, 'two')")
        cur.execute("CREATE TABLE datalake.keyed (id int PRIMARY KEY, code text UNIQUE)")
    conn.commit()
    role = local_stack.settings.replication_user
    audit = CapturedTable(source="datalake.audit_log", key="id", ddl_file="")
    with pytest.raises(SourceNotReady) as e:
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, audit))
    text = str(e.value)
    assert "datalake.audit_log has no primary key, nor a unique index" in text
    assert "Nothing was published" in text
    assert "ALTER TABLE datalake.audit_log ADD PRIMARY KEY (id)" in text
    assert "datalake.audit_log" not in _published(conn)
    # The application's own writes still work: PostgreSQL refuses them on a published table
    # without a replica identity.
    with conn.cursor() as cur:
        cur.execute("UPDATE datalake.audit_log SET msg = 'changed' WHERE id = 1")
        cur.execute("DELETE FROM datalake.audit_log WHERE id = 2")
        assert cur.rowcount == 1
    conn.commit()

    other = CapturedTable(source="datalake.keyed", key="code", ddl_file="")
    nullable = r"index keyed_code_key on \(code\) may hold NULL.*ALTER COLUMN code SET NOT NULL"
    with pytest.raises(SourceNotReady, match=nullable):
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, other))
    msg = CapturedTable(source="datalake.keyed", key="msg", ddl_file="")
    with pytest.raises(SourceNotReady, match=r"declared with key \(msg\) but its primary key"):
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, msg))
    assert "datalake.keyed" not in _published(conn)
    missing = CapturedTable(source="datalake.nowhere", key="id", ddl_file="")
    with pytest.raises(SourceNotReady, match="datalake.nowhere is declared .* no such table"):
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, missing))

    # A composite primary key: declared with all of its columns, taken; with one, refused.
    half = CapturedTable(source="datalake.order_details", key="order_id", ddl_file="")
    with pytest.raises(
        SourceNotReady, match=r"primary key is \(order_id, product_id\).*key=\('order_id', "
    ):
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, half))
    assert "datalake.order_details" not in _published(conn)
    details = CapturedTable(
        source="datalake.order_details", key=("product_id", "order_id"), ddl_file=""
    )
    prepare_source(conn, role, scale=0.01, captured=(OUTBOX, details))
    assert "datalake.order_details" in _published(conn)


def test_a_unique_index_on_not_null_columns_is_a_key_where_there_is_no_primary_key(
    conn: Any, local_stack: LocalStack
):
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE datalake.audit_log (id int NOT NULL, msg text)")
        cur.execute("CREATE UNIQUE INDEX audit_log_id ON datalake.audit_log (id)")
        cur.execute("INSERT INTO datalake.audit_log VALUES (1, 'one'), (2, 'two')")
    conn.commit()
    role = local_stack.settings.replication_user
    # Declared default and left DEFAULT: no replica identity, so refused, naming the fix.
    left = CapturedTable(
        source="datalake.audit_log", key="id", ddl_file="", replica_identity="default"
    )
    with pytest.raises(SourceNotReady) as e:
        prepare_source(conn, role, scale=0.01, captured=(OUTBOX, left))
    assert "REPLICA IDENTITY DEFAULT carries nothing" in str(e.value)
    assert "ALTER TABLE datalake.audit_log REPLICA IDENTITY USING INDEX audit_log_id" in str(
        e.value
    )
    assert "datalake.audit_log" not in _published(conn)
    # The fix it names: then taken as it is.
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE datalake.audit_log REPLICA IDENTITY USING INDEX audit_log_id")
    conn.commit()
    prepare_source(conn, role, scale=0.01, captured=(OUTBOX, left))
    assert "datalake.audit_log" in _published(conn)
    assert _identity(conn, "datalake.audit_log") == "i"
    # Declared full (the default): the source asset sets FULL.
    full = CapturedTable(source="datalake.audit_log", key="id", ddl_file="")
    prepare_source(conn, role, scale=0.01, captured=(OUTBOX, full))
    assert _identity(conn, "datalake.audit_log") == "f"
    # Published, the application's writes go on working.
    with conn.cursor() as cur:
        cur.execute("UPDATE datalake.audit_log SET msg = 'changed' WHERE id = 1")
        cur.execute("DELETE FROM datalake.audit_log WHERE id = 2")
        assert cur.rowcount == 1
    conn.commit()


def test_replica_identity_follows_the_declaration(conn: Any):
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE datalake.full_one (id int PRIMARY KEY, notes text)")
        cur.execute("CREATE TABLE datalake.left_alone (id int PRIMARY KEY, notes text)")
    conn.commit()
    full = CapturedTable(source="datalake.full_one", key="id", ddl_file="")
    left = CapturedTable(
        source="datalake.left_alone", key="id", ddl_file="", replica_identity="default"
    )
    assert set_replica_identity(conn, [full, left]) == ["datalake.full_one"]
    assert _identity(conn, "datalake.full_one") == "f"
    assert _identity(conn, "datalake.left_alone") == "d"
    assert set_replica_identity(conn, [full, left]) == []  # idempotent
    with pytest.raises(ValueError, match="replica_identity 'nothing' is not one of full, default"):
        CapturedTable(source="datalake.x", key="id", ddl_file="", replica_identity="nothing")  # type: ignore[arg-type]
