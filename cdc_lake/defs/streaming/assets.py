"""The Kafka topic ``<prefix>.datalake.cdc_events``, fed by the Debezium PostgreSQL connector.

Materialising checks the source (wal_level, publication, slot), creates or updates the connector
through the Kafka Connect REST API (an unchanged config is left alone, a FAILED task restarted),
waits for the connector and its task to be RUNNING, then for the topic to hold at least the
snapshot. Debezium delivers at least once: a restart can repeat events, which the lake's
ordering by (source ts, LSN) makes harmless.

The connector sends a heartbeat every ``heartbeat_interval_ms``, so its replication slot keeps
up with the WAL even while the outbox is quiet. The metadata reports the slot's lag in bytes
behind ``pg_current_wal_lsn()``: to ``restart_lsn`` (WAL the server retains for it) and to
``confirmed_flush_lsn`` (WAL not yet acknowledged); the ``replication_slot_lag`` check WARNs when
the retained WAL passes ``slot_lag_warn_bytes``.
"""

import dagster as dg

from cdc_lake.defs import PIPELINE_GROUP
from cdc_lake.defs.keys import OUTBOX_KEY, TOPIC_KEY
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource, KafkaResource
from cdc_lake.source.database import outbox_stats
from cdc_lake.source.preflight import check_logical_replication, slot_lag
from cdc_lake.streaming.topics import wait_for_offsets


@dg.asset(
    key=TOPIC_KEY,
    deps=[OUTBOX_KEY],
    group_name=PIPELINE_GROUP,
    kinds={"kafka", "debezium"},
    owners=["team:data-platform"],
    tags={"stage": "streaming"},
)
def cdc_events_topic(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    kafka: KafkaResource,
    kafka_connect: ConnectResource,
    cdc: CdcPipelineResource,
) -> dg.MaterializeResult:
    """Change events of the outbox table, flattened by ExtractNewRecordState: one JSON record per
    change with the row's columns plus __op, __db, __table, __schema, __lsn, __source_ts_ms and
    __deleted (deletes are rewritten, tombstones dropped). JSON without schemas; DATE as days
    since the epoch; decimals as strings."""
    connect = kafka_connect.client()
    name = cdc.source_connector_name
    exists = name in connect.connectors()
    conn = postgres.connect()
    try:
        source = check_logical_replication(conn, cdc.publication, cdc.slot_name, exists)
        rows = outbox_stats(conn).rows
    finally:
        conn.close()
    config = cdc.connector_settings(postgres).debezium()
    action, status = connect.deploy(name, config, cdc.connector_timeout_s, context.log.info)
    ends = wait_for_offsets(
        kafka.client_conf(), cdc.topic, at_least=rows, timeout_s=cdc.connector_timeout_s
    )
    conn = postgres.connect()
    try:
        lag = slot_lag(conn, cdc.slot_name)
    finally:
        conn.close()
    metadata: dict[str, dg.MetadataValue] = {
        "topic": dg.MetadataValue.text(cdc.topic),
        "partitions": dg.MetadataValue.int(len(ends)),
        "end_offsets": dg.MetadataValue.json({str(p): o for p, o in ends.items()}),
        "records": dg.MetadataValue.int(sum(ends.values())),
        "connector": dg.MetadataValue.text(name),
        "connector_action": dg.MetadataValue.text(action),
        "connector_state": dg.MetadataValue.text(status["connector"]["state"]),
        "task_states": dg.MetadataValue.json({str(t["id"]): t["state"] for t in status["tasks"]}),
        "replication_slot": dg.MetadataValue.text(cdc.slot_name),
    }
    # A slot without a position (missing, or invalidated) leaves the entry out: no "None".
    if source["slot_confirmed_flush_lsn"] is not None:
        metadata["slot_confirmed_flush_lsn"] = dg.MetadataValue.text(
            str(source["slot_confirmed_flush_lsn"])
        )
    if lag is not None and lag.restart_lag_bytes is not None:
        metadata["slot_restart_lag_bytes"] = dg.MetadataValue.int(lag.restart_lag_bytes)
    if lag is not None and lag.flush_lag_bytes is not None:
        metadata["slot_flush_lag_bytes"] = dg.MetadataValue.int(lag.flush_lag_bytes)
    return dg.MaterializeResult(metadata=metadata)
