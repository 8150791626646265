"""The Kafka topics ``<prefix>.<schema>.<table>``, one per captured table
(``cdc_lake/source/captured.py``: ``cdc.datalake.cdc_events``, ``cdc.datalake.customers``), fed
by one Debezium PostgreSQL connector.

One connector for all the captured tables, because each connector holds a replication slot: one
slot is one walsender and one position that retains WAL, whatever the number of tables, and one
snapshot covers them all. Its ``table.include.list`` is the declared tables.

Materialising checks the source (wal_level, publication, slot), creates or updates the connector
through the Kafka Connect REST API (an unchanged config is left alone, a FAILED task restarted),
waits for the connector and its task to be RUNNING (and, for a table added to a connector that
already ran its snapshot, requests an incremental snapshot of it), then for each topic to hold
at least its table's snapshot. Each topic is an asset of its own, in its table's lineage.
Debezium delivers at least once: a restart can repeat events, which the lake's ordering by
(source ts, LSN) makes harmless.

The connector sends a heartbeat every ``heartbeat_interval_ms``, so its replication slot keeps
up with the WAL even while the outbox is quiet. The metadata reports the slot's lag in bytes
behind ``pg_current_wal_lsn()``: to ``restart_lsn`` (WAL the server retains for it) and to
``confirmed_flush_lsn`` (WAL not yet acknowledged); the ``replication_slot_lag`` check WARNs when
the retained WAL passes ``slot_lag_warn_bytes``.
"""

import time

import dagster as dg

from cdc_lake.defs import stage_spec
from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource, KafkaResource
from cdc_lake.source.captured import CapturedTable
from cdc_lake.source.database import table_rows
from cdc_lake.source.preflight import check_logical_replication, slot_lag
from cdc_lake.streaming.signals import request_snapshot
from cdc_lake.streaming.topics import end_offsets, wait_for_offsets

# How long a snapshot signal may go unanswered (an empty topic) before it is sent again.
RESIGNAL_S = 20.0

def _description(k: TableKeys) -> str:
    return (
        f"Change events of {k.table.source}, flattened by ExtractNewRecordState: one JSON record "
        "per change with the row's columns plus __op, __db, __table, __schema, __lsn, "
        "__source_ts_ms and __deleted (deletes are rewritten, tombstones dropped). JSON without "
        "schemas; DATE as days since the epoch; decimals as strings."
    )


@dg.multi_asset(
    name="cdc_events_topic",
    specs=[
        stage_spec(__name__, k.topic, {"kafka", "debezium"}, _description(k), [k.source])
        for k in KEYS
    ],
)
def cdc_events_topic(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    kafka: KafkaResource,
    kafka_connect: ConnectResource,
    cdc: CdcPipelineResource,
):
    """Deploys the one Debezium connector of every captured table and waits for each topic to
    hold its table's snapshot."""
    connect = kafka_connect.client()
    name = cdc.source_connector_name
    exists = name in connect.connectors()
    conn = postgres.connect()
    try:
        captured = [k.table.source for k in KEYS]
        source = check_logical_replication(
            conn, cdc.publication, cdc.slot_name, exists, captured
        )
        rows = {k.table: table_rows(conn, k.table.source) for k in KEYS}
    finally:
        conn.close()
    config = cdc.connector_settings(postgres).debezium()
    action, status = connect.deploy(name, config, cdc.connector_timeout_s, context.log.info)
    if exists:
        _snapshot_added_tables(context, postgres, kafka, cdc, rows)
    topics = {
        k.table: wait_for_offsets(
            kafka.client_conf(),
            cdc.topic_of(k.table),
            at_least=rows[k.table],
            timeout_s=cdc.connector_timeout_s,
        )
        for k in KEYS
    }
    conn = postgres.connect()
    try:
        lag = slot_lag(conn, cdc.slot_name)
    finally:
        conn.close()
    # The one connector and its slot serve every table: each topic says how they stand.
    connector = {
        "connector_action": dg.MetadataValue.text(action),
        "connector_state": dg.MetadataValue.text(status["connector"]["state"]),
        "task_states": dg.MetadataValue.json({str(t["id"]): t["state"] for t in status["tasks"]}),
        "replication_slot": dg.MetadataValue.text(cdc.slot_name),
    }
    # A slot without a position (missing, or invalidated) leaves the entry out: no "None".
    if source["slot_confirmed_flush_lsn"] is not None:
        connector["slot_confirmed_flush_lsn"] = dg.MetadataValue.text(
            str(source["slot_confirmed_flush_lsn"])
        )
    if lag is not None and lag.restart_lag_bytes is not None:
        connector["slot_restart_lag_bytes"] = dg.MetadataValue.int(lag.restart_lag_bytes)
    if lag is not None and lag.flush_lag_bytes is not None:
        connector["slot_flush_lag_bytes"] = dg.MetadataValue.int(lag.flush_lag_bytes)
    for k in KEYS:
        metadata = _topic(cdc, k, topics[k.table]) | connector
        yield dg.MaterializeResult(asset_key=k.topic, metadata=metadata)


def _held(conf: dict, topic: str) -> int:
    try:
        return sum(end_offsets(conf, topic).values())
    except KeyError:  # no topic yet
        return 0


def _snapshot_added_tables(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    kafka: KafkaResource,
    cdc: CdcPipelineResource,
    rows: dict[CapturedTable, int],
) -> None:
    """A connector whose initial snapshot is done does not snapshot a table added to its
    ``table.include.list`` later (Debezium's documented way is an incremental snapshot). So a
    captured table with rows whose topic holds none (or does not exist) is sent by an
    ``execute-snapshot`` signal (``cdc_lake/streaming/signals.py``). A topic that holds some
    records is being captured: nothing is sent for it.

    The signal is sent again while the topic stays empty (every ``RESIGNAL_S``): a task still
    running the old config when the new one was saved reads the signal and drops it (the table
    is not in its list). A second snapshot of the same rows changes nothing in the lake."""
    conf = kafka.client_conf()
    deadline = time.monotonic() + cdc.connector_timeout_s
    for k in KEYS:
        topic = cdc.topic_of(k.table)
        if rows[k.table] == 0 or _held(conf, topic) > 0:
            continue
        while _held(conf, topic) == 0 and time.monotonic() < deadline:
            conn = postgres.connect()
            try:
                signal = request_snapshot(conn, None, cdc.publication, table=k.table)
            finally:
                conn.close()
            context.log.warning(
                f"{topic} holds no record, {k.table.source} has {rows[k.table]:,} rows: the "
                "connector has not snapshotted it (a table added to an existing connector). "
                f"Requested an incremental snapshot of it (signal {signal})."
            )
            wait_until = min(deadline, time.monotonic() + RESIGNAL_S)
            while _held(conf, topic) == 0 and time.monotonic() < wait_until:
                time.sleep(1.0)


def _topic(
    cdc: CdcPipelineResource, k: TableKeys, ends: dict[int, int]
) -> dict[str, dg.MetadataValue]:
    return {
        "topic": dg.MetadataValue.text(cdc.topic_of(k.table)),
        "partitions": dg.MetadataValue.int(len(ends)),
        "end_offsets": dg.MetadataValue.json({str(p): o for p, o in ends.items()}),
        "records": dg.MetadataValue.int(sum(ends.values())),
        "connector": dg.MetadataValue.text(cdc.source_connector_name),
    }
