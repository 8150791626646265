"""The topic asset on the real stack: a table added to the capture list of a connector that has
already run its snapshot is sent by an incremental snapshot, which Debezium does not do by
itself (``cdc_lake/defs/streaming/assets.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import dagster as dg
import psycopg2
import pytest

from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.source.captured import CUSTOMERS, OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import wait_for_offsets
from cdc_lake_tests.faults.harness import FaultPipeline
from cdc_lake_tests.topic_reader import read_all


@pytest.fixture
def pipeline(local_stack: LocalStack, secret_env: dict[str, str]) -> Iterator[FaultPipeline]:
    """A pipeline of its own (database, slot, connectors, topics), torn down afterwards."""
    made = FaultPipeline(local_stack, "added_table", sample_scale=0.05)
    try:
        yield made
    finally:
        made.close()


def test_a_table_added_to_a_running_connector_is_snapshotted(pipeline: FaultPipeline):
    pipeline.create_source()
    cdc, postgres = pipeline.cdc, pipeline.resources["postgres"]
    # The connector as it was before the customers were declared: the outbox alone.
    config = replace(cdc.connector_settings(postgres), tables=(OUTBOX,)).debezium()
    assert config["table.include.list"] == OUTBOX.source
    pipeline.connect.deploy(cdc.source_connector_name, config, 180, lambda _: None)
    outbox_rows = len(_column(pipeline.dsn, "order_id", "cdc_events"))
    customers = len(_column(pipeline.dsn, "customer_id", "customers"))
    wait_for_offsets(pipeline.kafka_conf, cdc.topic_of(OUTBOX), at_least=outbox_rows, timeout_s=180)
    assert customers > 0

    # Now with the declaration: the asset updates the connector and sends the table once.
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([cdc_events_topic], resources=pipeline.resources, instance=instance)
    assert result.success
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    # Once, or again when a task still on the old config dropped the first signal.
    assert any("Requested an incremental snapshot" in m for m in logs), logs
    events = [e for e in read_all(pipeline.reader_conf, cdc.topic_of(CUSTOMERS)) if e]
    assert {e["customer_id"] for e in events} >= set(
        _column(pipeline.dsn, "customer_id", "customers")
    )
    assert {e["__op"] for e in events} == {"r"}

    # Materialised again, the table is being captured: nothing more is requested.
    again = dg.materialize([cdc_events_topic], resources=pipeline.resources, instance=instance)
    assert again.success
    assert not any(
        "Requested an incremental snapshot" in e.user_message
        for e in instance.all_logs(again.run_id)
    )


def _column(dsn: str, column: str, table: str) -> list[object]:
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT btrim({column}::text) FROM datalake.{table}")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()
