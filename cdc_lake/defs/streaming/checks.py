"""Checks of the streaming stage.

- ``replication_slot_lag``: the WAL that PostgreSQL retains for the connector's replication slot
  (``pg_current_wal_lsn() - restart_lsn``) is at most ``slot_lag_warn_bytes``. Past it the check
  fails with WARN severity: the connector is down or behind, or heartbeats are not reaching it,
  and the server's disk is filling. A missing or invalidated slot is an ERROR: the changes it
  would have kept are gone for the connector. The server's cap, ``max_slot_wal_keep_size``
  (``slot_wal_keep_mb`` locally; the parameter group on RDS), and what the slot may still fall
  behind before PostgreSQL invalidates it (``safe_wal_size``) are in the metadata; an
  invalidated slot's ERROR says how to recover.
- ``source_connector_running``: the Debezium connector and every task of it are RUNNING
  (``cdc_lake/defs/check_results.py``: FAILED is an ERROR quoting its trace, PAUSED or
  UNASSIGNED a WARN). Materialising the topic asset restarts a failed task.
"""

from typing import Any

import dagster as dg

from cdc_lake.defs.check_results import at_most, connector_check
from cdc_lake.defs.keys import CONNECTORS
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource
from cdc_lake.source.preflight import slot_lag


@dg.asset_check(
    asset=CONNECTORS.topic,
    description="the WAL retained for the connector's replication slot is under the threshold",
)
def replication_slot_lag(
    postgres: PostgresResource, cdc: CdcPipelineResource
) -> dg.AssetCheckResult:
    conn = postgres.connect()
    try:
        lag = slot_lag(conn, cdc.slot_name)
    finally:
        conn.close()
    threshold = cdc.slot_lag_warn_bytes
    if lag is None:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"replication slot {cdc.slot_name!r} is missing",
            metadata={"slot": cdc.slot_name},
        )
    cap = "unlimited" if lag.wal_keep_bytes is None else f"{lag.wal_keep_bytes:,} bytes"
    meta: dict[str, Any] = {
        "slot": cdc.slot_name,
        "active": lag.active,
        "wal_status": lag.wal_status or "",
        "max_slot_wal_keep_size": cap,
    }
    if lag.lost or lag.restart_lag_bytes is None:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=(
                f"replication slot {cdc.slot_name!r} is invalidated (wal_status "
                f"{lag.wal_status}): it fell more than max_slot_wal_keep_size ({cap}) behind, "
                "and the WAL it needed is gone, so the changes in that gap are lost to the "
                f"connector. Fix: drop the slot (SELECT pg_drop_replication_slot("
                f"'{cdc.slot_name}')), delete the source connector and its offsets "
                f"({cdc.source_connector_name}: Connect's PUT .../stop, DELETE .../offsets, "
                "DELETE), then materialise the topic asset: the connector comes back with a "
                "new slot and a full snapshot, and matches_source shows what the gap left."
            ),
            metadata=meta,
        )
    meta |= {
        "slot_restart_lag_bytes": lag.restart_lag_bytes,
        "slot_flush_lag_bytes": lag.flush_lag_bytes or 0,
        "threshold_bytes": threshold,
    }
    if lag.safe_wal_bytes is not None:
        meta["slot_safe_wal_bytes"] = lag.safe_wal_bytes
    return at_most(
        lag.restart_lag_bytes,
        threshold,
        meta,
        f"slot {cdc.slot_name!r} retains {lag.restart_lag_bytes:,} bytes of WAL, over "
        f"{threshold:,}{'' if lag.active else '; no connector is reading it'}",
    )


@dg.asset_check(
    asset=CONNECTORS.topic,
    description="the Debezium source connector and its tasks are RUNNING",
)
def source_connector_running(
    kafka_connect: ConnectResource, cdc: CdcPipelineResource
) -> dg.AssetCheckResult:
    name = cdc.source_connector_name
    return connector_check(name, kafka_connect.client().status(name))
