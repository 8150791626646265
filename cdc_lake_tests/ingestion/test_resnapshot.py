"""Ad-hoc incremental snapshots through the signal table, on the real stack: exactly the chosen
orders (or all of them) appear again on the topic, as the outbox holds them now, and each re-sent
event sorts after the order's earlier events by the lake's (__source_ts_ms, __lsn)."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pytest

from cdc_lake.ops.cli import main
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets
from cdc_lake_tests.ingestion.helpers import wait_for_events
from cdc_lake_tests.topic_reader import read_all, reader_conf

EPOCH = dt.date(1970, 1, 1)
OUTBOX_SQL = (
    "SELECT order_id, customer_id, shipped_date, order_items, updated_at FROM datalake.cdc_events"
)


def _records(stack: LocalStack, resources: dict) -> list[dict[str, Any]]:
    conf, topic = reader_conf(stack.settings), resources["cdc"].topic_of(OUTBOX)
    assert len(end_offsets(conf, topic)) == 1  # one partition: list position = offset
    return [r for r in read_all(conf, topic) if r is not None]


def _after(stack: LocalStack, resources: dict, before: int, done) -> list[dict[str, Any]]:
    """The records after offset ``before`` once ``done`` holds and the topic has settled."""
    wait_for_events(lambda: _records(stack, resources)[before:], done, timeout_s=120)
    stable, last = 0, None
    while stable < 3:  # no stragglers: nothing more arrives for three seconds
        count = len(_records(stack, resources))
        stable, last = (stable + 1 if count == last else 0), count
        time.sleep(1)
    return _records(stack, resources)[before:]


def _outbox(pg, order_ids: list[int] | None = None) -> dict[int, tuple]:
    with pg.cursor() as cur:
        if order_ids is None:
            cur.execute(OUTBOX_SQL)
        else:
            cur.execute(OUTBOX_SQL + " WHERE order_id = ANY(%s)", (order_ids,))
        rows = {r[0]: r for r in cur.fetchall()}
    pg.commit()
    return rows


def _assert_is_current_row(event: dict[str, Any], row: tuple) -> None:
    order_id, customer_id, shipped_date, order_items, updated_at = row
    assert event["customer_id"] == customer_id
    assert event["shipped_date"] == (None if shipped_date is None else (shipped_date - EPOCH).days)
    assert json.loads(event["order_items"]) == order_items, order_id
    sent = dt.datetime.fromisoformat(event["updated_at"].replace("Z", "+00:00"))
    assert sent == updated_at, order_id


def _now_ms(pg) -> int:
    with pg.cursor() as cur:
        cur.execute("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
        row = cur.fetchone()
    pg.commit()
    assert row is not None
    return int(row[0])


def _resnapshot(local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch, *choice: str) -> None:
    # The CLI as a user runs it: settings from the state directory, no secret on the command line.
    monkeypatch.setenv("CDC_LAKE_PORT_BASE", str(local_stack.settings.port_base))
    state_dir = str(local_stack.settings.state_dir)
    assert main(["--state-dir", state_dir, "source", "resnapshot", *choice]) == 0


def test_resnapshot_of_three_orders_resends_exactly_them_and_sorts_after_their_past(
    local_stack: LocalStack, ingested, resources, pg, monkeypatch, capsys
):
    chosen = [10251, 10300, 11000]
    # A streamed change first, so one order's history holds an update with a real LSN.
    with pg.cursor() as cur:
        cur.execute("UPDATE datalake.orders SET freight = freight + 1 WHERE order_id = 10300")
    pg.commit()
    wait_for_events(
        lambda: _records(local_stack, resources),
        lambda evs: any(e["order_id"] == 10300 and e["__op"] == "u" for e in evs),
    )
    history = _records(local_stack, resources)
    requested_ms = _now_ms(pg)

    _resnapshot(local_stack, monkeypatch, "--orders", ",".join(map(str, chosen)))
    said = capsys.readouterr().out
    assert (
        "requested an incremental snapshot of 3 row(s) of datalake.cdc_events by order_id: " in said
    )
    new = _after(
        local_stack,
        resources,
        len(history),
        lambda evs: {e["order_id"] for e in evs if e["__op"] == "r"} >= set(chosen),
    )

    assert sorted(e["order_id"] for e in new) == chosen  # exactly these, once each
    current = _outbox(pg, chosen)
    for event in new:
        order_id = event["order_id"]
        assert (event["__op"], event["__deleted"], event["__lsn"]) == ("r", "false", None)
        _assert_is_current_row(event, current[order_id])
        # __source_ts_ms is when the connector emitted it: after the request, after every
        # earlier event of the order; the null LSN counts as 0 in the lake's ordering.
        assert event["__source_ts_ms"] >= requested_ms
        past = [(e["__source_ts_ms"], e["__lsn"]) for e in history if e["order_id"] == order_id]
        assert past and (event["__source_ts_ms"], 0) > max(past)
        print(f"{order_id}: re-sent at ts {event['__source_ts_ms']} (request {requested_ms}), "
              f"last before: {max(past)}")  # fmt: skip


def test_resnapshot_all_resends_every_order(
    local_stack: LocalStack, ingested, resources, pg, monkeypatch
):
    before = len(_records(local_stack, resources))
    current = _outbox(pg)
    _resnapshot(local_stack, monkeypatch, "--all")
    new = _after(
        local_stack,
        resources,
        before,
        lambda evs: {e["order_id"] for e in evs if e["__op"] == "r"} >= set(current),
    )
    assert len(new) == len(current)  # every order once, nothing else
    assert {e["order_id"] for e in new} == set(current)
    for event in new:
        assert (event["__op"], event["__lsn"]) == ("r", None)
        _assert_is_current_row(event, current[event["order_id"]])
