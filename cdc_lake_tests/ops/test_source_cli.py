"""``cdc-lake source resnapshot`` (``cdc_lake/ops/source_cli.py``): which rows it asks Debezium
to re-send, for any captured table, and what it refuses before requesting anything: no choice,
a key value that could not go into Debezium's SQL filter as it is, picking rows of a
composite-key table, and keys the table lacks.

The first tests need no stack: the connection is a stand-in and ``request_snapshot`` is
recorded. The last ones run against the stack's PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_lake.ops import source_cli
from cdc_lake.ops.cli import main
from cdc_lake.ops.source_cli import key_values, missing_keys
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, CapturedTable

# Not declared: a table whose key is two columns.
COMPOSITE = CapturedTable(
    source="datalake.order_details", key=("order_id", "product_id"), ddl_file="001_northwind.sql"
)


class FakeCursor:
    def __init__(self, conn: FakeConn):
        self.conn = conn

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, query: Any, params: Any = None) -> None:
        self.conn.executed.append((query, params))

    def fetchall(self) -> list[tuple[str]]:
        return [(v,) for v in self.conn.missing]

    def fetchone(self) -> tuple[str]:
        return (self.conn.key_type,)


class FakeConn:
    """PostgreSQL as the resnapshot sees it: the values it lacks, and the key column's type."""

    def __init__(self, key_type: str, missing: tuple[str, ...] = ()):
        self.key_type, self.missing = key_type, missing
        self.executed: list[tuple[Any, Any]] = []
        self.closed = False

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def requested(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, CapturedTable]]:
    """The snapshots requested, as (keys, table); none is inserted anywhere."""
    calls: list[tuple[Any, CapturedTable]] = []

    def record(conn: Any, keys: Any, publication: str = "", *, table: CapturedTable) -> str:
        calls.append((keys, table))
        return "signal-1"

    monkeypatch.setattr(source_cli, "request_snapshot", record)
    return calls


def use(monkeypatch: pytest.MonkeyPatch, conn: FakeConn | None) -> None:
    """``conn`` as the stack's connection; None: the command must not connect."""

    def connect(settings: Any) -> FakeConn:
        assert conn is not None, "the command connected although it had refused"
        return conn

    monkeypatch.setattr(source_cli, "connect", connect)


def test_resnapshot_needs_a_choice(capsys):
    assert main(["source", "resnapshot"]) == 2
    assert "--keys K1,K2 (or --orders 1,2,3) or --all" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["source", "resnapshot", "--orders", "1,2", "--all"])
    with pytest.raises(SystemExit):
        main(["source", "resnapshot", "--keys", "ALFKI", "--all"])


@pytest.mark.parametrize("value", ["O'Brien", "1);DROP TABLE x;--", "a\\b", "ALF/KI", 'x"y'])
def test_an_unsafe_key_value_is_refused_and_named(value: str, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["source", "resnapshot", "--table", CUSTOMERS.source, "--keys", f"ALFKI,{value}"])
    assert exit_.value.code == 2
    assert repr(value) in capsys.readouterr().err


def test_no_key_value_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["source", "resnapshot", "--keys", " , "])
    assert "no key values given" in capsys.readouterr().err


def test_a_text_key_picks_rows_of_a_table_other_than_the_first(monkeypatch, requested, capsys):
    conn = FakeConn("bpchar")
    use(monkeypatch, conn)
    argv = ["source", "resnapshot", "--table", "datalake.customers", "--keys", "ANATR, ALFKI"]
    assert main(argv) == 0
    assert requested == [(["ANATR", "ALFKI"], CUSTOMERS)]
    assert conn.executed[0][1] == (["ALFKI", "ANATR"],)  # what missing_keys looked up
    assert conn.closed
    out = capsys.readouterr().out
    assert "2 row(s) of datalake.customers by customer_id: signal signal-1" in out


def test_orders_is_the_keys_option_and_an_integer_key_stays_integer(monkeypatch, requested):
    use(monkeypatch, FakeConn("bigint"))
    assert main(["source", "resnapshot", "--orders", "10300,10248"]) == 0
    assert requested == [([10300, 10248], OUTBOX)]  # the default table: the first declared


def test_keys_the_table_lacks_are_named_and_nothing_is_requested(monkeypatch, requested, capsys):
    conn = FakeConn("bpchar", missing=("ZZZZZ",))
    use(monkeypatch, conn)
    argv = ["source", "resnapshot", "--table", "datalake.customers", "--keys", "ALFKI,ZZZZZ"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "1 customer_id value(s) not in datalake.customers: ZZZZZ" in err
    assert "nothing was requested" in err and "lake reconcile --table datalake.customers" in err
    assert requested == [] and conn.closed


def test_a_composite_key_takes_all_only(monkeypatch, requested, capsys):
    monkeypatch.setattr(source_cli, "captured", lambda source: COMPOSITE)
    use(monkeypatch, None)
    assert main(["source", "resnapshot", "--keys", "10248"]) == 2
    err = capsys.readouterr().err
    assert "datalake.order_details's key is composite (order_id, product_id)" in err
    assert "--all" in err and requested == []
    use(monkeypatch, FakeConn("bigint"))
    assert main(["source", "resnapshot", "--all"]) == 0
    assert requested == [(None, COMPOSITE)]


def test_missing_keys_and_key_values_on_the_source(ingested, pg):
    with pg.cursor() as cur:
        cur.execute("SELECT min(order_id) FROM datalake.cdc_events")
        (order,) = cur.fetchone()
        cur.execute("SELECT min(customer_id)::text FROM datalake.customers")
        (customer,) = cur.fetchone()
    pg.commit()
    assert missing_keys(pg, OUTBOX, [str(order), "99999999", "x"]) == ["99999999", "x"]
    assert missing_keys(pg, CUSTOMERS, [customer, "ZZZZZ"]) == ["ZZZZZ"]
    assert key_values(pg, OUTBOX, [str(order)]) == [order]
    assert key_values(pg, CUSTOMERS, [customer]) == [customer]
    pg.rollback()


def test_resnapshot_refuses_orders_the_outbox_lacks(ingested, local_stack, pg, monkeypatch, capsys):
    settings = local_stack.settings
    monkeypatch.setenv("CDC_LAKE_PORT_BASE", str(settings.port_base))
    with pg.cursor() as cur:
        cur.execute("SELECT min(order_id), count(*) FROM datalake.cdc_events")
        known, _ = cur.fetchone()
        cur.execute("SELECT count(*) FROM datalake.debezium_signal")
        signals = cur.fetchone()[0]
    pg.commit()
    rc = main(["--state-dir", str(settings.state_dir), "source", "resnapshot", "--orders",
               f"{known},99999999"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    assert "1 order_id value(s) not in datalake.cdc_events: 99999999" in err and "nothing" in err
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM datalake.debezium_signal")
        assert cur.fetchone()[0] == signals  # no signal inserted
    pg.commit()
