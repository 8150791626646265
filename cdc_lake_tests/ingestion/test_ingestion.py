"""Outbox -> Debezium -> Kafka -> S3 sink on the real stack: the sample, the reference
scenarios, and idempotency."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import dagster as dg

from bench.outbox import OUTBOX_KEY, RAW_KEY, TOPIC_KEY
from cdc_lake.defs.keys import KEYS
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake_tests.ingestion.helpers import metadata, raw_events, wait_for_events
from cdc_lake_tests.topic_reader import read_all, reader_conf

EPOCH = dt.date(1970, 1, 1)


def _raw(stack: LocalStack, resources):
    cdc = resources["cdc"]
    client = stack.service("s3").client()  # type: ignore[attr-defined]
    return lambda: raw_events(client, cdc.raw_bucket, cdc.raw_prefix, cdc.topic_of(OUTBOX))


def test_default_sample_829_rows_messages_and_events(local_stack: LocalStack, ingested, resources):
    assert metadata(ingested, OUTBOX_KEY)["dagster/row_count"] == 829
    topic_meta = metadata(ingested, TOPIC_KEY)
    assert topic_meta["connector_state"] == "RUNNING"
    # One connector serves every table: each topic says how it and its slot stand.
    for k in KEYS:
        meta = metadata(ingested, k.topic)
        assert (meta["connector_state"], meta["replication_slot"]) == (
            "RUNNING", resources["cdc"].slot_name
        ), k.topic  # fmt: skip
    records = read_all(reader_conf(local_stack.settings), resources["cdc"].topic_of(OUTBOX))
    # The initial snapshot's reads; ad-hoc snapshot reads (test_resnapshot.py) carry no LSN.
    snapshot = [r for r in records if r and r["__op"] == "r" and r["__lsn"] is not None]
    assert len(snapshot) == 829
    assert len({r["order_id"] for r in snapshot}) == 829
    # Flattened by ExtractNewRecordState, with the added fields.
    first = snapshot[0]
    for field in ("__op", "__db", "__table", "__schema", "__lsn", "__source_ts_ms", "__deleted"):
        assert field in first, field
    assert first["__table"] == "cdc_events" and first["__schema"] == "datalake"
    assert isinstance(first["order_date"], int)  # DATE as days since the epoch
    assert isinstance(json.loads(first["order_items"]), list)  # JSONB as JSON text

    raw_meta = metadata(ingested, RAW_KEY)
    assert raw_meta["objects"] >= 1 and raw_meta["bytes"] > 0
    events = _raw(local_stack, resources)()
    raw_snapshot = [e for e in events if e["__op"] == "r" and e["__lsn"] is not None]
    assert len(raw_snapshot) == 829
    assert Counter(e["order_id"] for e in raw_snapshot) == Counter(r["order_id"] for r in snapshot)


def test_update_shipped_date_gives_one_new_event(local_stack: LocalStack, ingested, resources, pg):
    new_date = dt.date(1998, 6, 15)
    with pg.cursor() as cur:
        cur.execute(
            "UPDATE datalake.orders SET shipped_date = %s WHERE order_id = 11077", (new_date,)
        )
    pg.commit()
    events = wait_for_events(
        _raw(local_stack, resources),
        lambda evs: any(e["order_id"] == 11077 and e["__op"] == "u" for e in evs),
    )
    updates = [e for e in events if e["order_id"] == 11077 and e["__op"] == "u"]
    assert len(updates) == 1
    assert updates[0]["shipped_date"] == (new_date - EPOCH).days
    assert updates[0]["__deleted"] == "false"


def test_insert_order_with_three_lines_in_one_transaction(
    local_stack: LocalStack, ingested, resources, pg
):
    with pg.cursor() as cur:
        cur.execute(
            "INSERT INTO datalake.orders (order_id, customer_id, employee_id, order_date,"
            " required_date, ship_via, freight) SELECT 20001, customer_id, 1, DATE '1998-05-07',"
            " DATE '1998-06-04', 1, 12.5 FROM datalake.customers ORDER BY customer_id LIMIT 1"
        )
        for product_id, qty in ((1, 5), (2, 10), (3, 15)):
            cur.execute(
                "INSERT INTO datalake.order_details SELECT 20001, product_id, unit_price, %s, 0"
                " FROM datalake.products WHERE product_id = %s",
                (qty, product_id),
            )
    pg.commit()

    def mine(evs):
        return sorted((e for e in evs if e["order_id"] == 20001), key=lambda e: e["__lsn"])

    events = wait_for_events(
        _raw(local_stack, resources),
        lambda evs: any(len(json.loads(e["order_items"] or "[]")) == 3 for e in mine(evs)),
    )
    new = mine(events)
    assert new[0]["__op"] == "c" and new[0]["order_items"] is None
    assert len(new) == 4  # the order, then one outbox update per line
    last_items = json.loads(new[-1]["order_items"])
    assert sorted(i["product_id"] for i in last_items) == [1, 2, 3]
    assert len(json.loads(new[-1]["products"])) == 3


def test_delete_order_gives_deleted_event(local_stack: LocalStack, ingested, resources, pg):
    with pg.cursor() as cur:
        cur.execute("DELETE FROM datalake.order_details WHERE order_id = 10250")
        cur.execute("DELETE FROM datalake.orders WHERE order_id = 10250")
    pg.commit()
    events = wait_for_events(
        _raw(local_stack, resources),
        lambda evs: any(e["order_id"] == 10250 and e["__deleted"] == "true" for e in evs),
    )
    deleted = [e for e in events if e["order_id"] == 10250 and e["__deleted"] == "true"]
    assert len(deleted) == 1 and deleted[0]["__op"] == "d"
    # REPLICA IDENTITY FULL: the delete carries the whole old row.
    assert deleted[0]["customer_id"] and deleted[0]["order_date"] is not None
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM datalake.cdc_events WHERE order_id = 10250")
        assert cur.fetchone() == (0,)


def test_materialising_again_creates_no_second_connector_and_no_duplicates(
    local_stack: LocalStack, ingested, resources
):
    again = dg.materialize(
        [cdc_events_outbox, cdc_events_topic, raw_cdc_files], resources=resources
    )
    assert again.success
    assert metadata(again, OUTBOX_KEY)["sample_data_loaded"] is False
    assert metadata(again, TOPIC_KEY)["connector_action"] == "unchanged"
    assert metadata(again, RAW_KEY)["connector_action"] == "unchanged"
    connect = resources["kafka_connect"].client()
    prefix = resources["cdc"].topic_prefix
    assert sorted(c for c in connect.connectors() if c.startswith(f"{prefix}-")) == [
        f"{prefix}-debezium-source",
        f"{prefix}-s3-sink",
    ]
    events = [e for e in _raw(local_stack, resources)() if e["__lsn"] is not None]
    identities = Counter((e["order_id"], e["__lsn"], e["__op"]) for e in events)
    assert [k for k, n in identities.items() if n > 1] == []
    assert sum(1 for e in events if e["__op"] == "r") == 829
