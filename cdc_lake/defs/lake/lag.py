"""Lag in seconds, per captured table (``cdc_lake/lake/lag.py`` says what the two numbers are).

- ``lake_lag_seconds`` on each Hudi table: the age of the oldest change not yet in the table
  (in the topic or the raw files) is at most ``CdcPipelineResource.lag_warn_seconds``; past it
  the check fails with WARN severity, past ``lag_error_seconds`` with ERROR. The metadata also
  gives the source time of the newest change the table has applied, and its age. It reads the
  checkpoint of the table's latest materialization, one raw object per partition with pending
  lines and the topic's offsets: no Spark.
- The Hudi asset carries the applied time and its age in its own metadata
  (``applied_metadata``), so the UI's asset page shows both.
"""

import time
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.defs.unchanged import checkpoint_of, latest_materialization
from cdc_lake.lake.lag import Lag, applied_ts_ms, oldest_pending_line_ts
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.streaming import CdcPipelineResource, KafkaResource
from cdc_lake.streaming.topics import oldest_unconsumed_ts

LAG_CHECK = "lake_lag_seconds"


def applied_metadata(lag: Lag) -> dict[str, dg.MetadataValue]:
    """The newest change applied and its age, as metadata (none before a refresh says)."""
    if lag.applied_ts_ms is None or lag.applied_s is None:
        return {}
    return {
        "newest_change_applied": dg.MetadataValue.timestamp(lag.applied_ts_ms / 1000),
        "applied_lag_seconds": dg.MetadataValue.float(round(lag.applied_s, 1)),
    }


def applied_lag(stored: Mapping[str, Any] | None) -> Lag:
    """The applied side alone, from a checkpoint a refresh reported (for the asset itself)."""
    return Lag(int(time.time() * 1000), applied_ts_ms(stored), None)


def lag_result(lag: Lag, warn_s: float, error_s: float) -> dg.AssetCheckResult:
    """Pass at or under ``warn_s`` of pending lag; WARN past it; ERROR past ``error_s``."""
    metadata: dict[str, Any] = {
        "pending_lag_seconds": dg.MetadataValue.float(round(lag.pending_s, 1)),
        "lag_warn_seconds": dg.MetadataValue.float(float(warn_s)),
        "lag_error_seconds": dg.MetadataValue.float(float(error_s)),
        **applied_metadata(lag),
    }
    if lag.oldest_pending_ts_ms is not None:
        oldest = dg.MetadataValue.timestamp(lag.oldest_pending_ts_ms / 1000)
        metadata["oldest_pending_change"] = oldest
    if lag.pending_s <= warn_s:
        return dg.AssetCheckResult(passed=True, metadata=metadata)
    severity, limit = (
        (dg.AssetCheckSeverity.ERROR, error_s)
        if lag.pending_s > error_s
        else (dg.AssetCheckSeverity.WARN, warn_s)
    )
    return dg.AssetCheckResult(
        passed=False,
        severity=severity,
        metadata=metadata,
        description=f"the oldest change not yet in the lake is {lag.pending_s:,.0f} s old, over "
        f"{limit:,.0f} s: the sink or the lake refresh is behind (turn the sensor on, or run "
        "`cdc-lake refresh`)",
    )


def lag_check(k: TableKeys) -> dg.AssetChecksDefinition:
    """``lake_lag_seconds`` of one captured table's Hudi table."""

    @dg.asset_check(
        asset=k.hudi,
        name=LAG_CHECK,
        description="the oldest change of the table not yet in the lake (in the topic or the raw "
        "files) is younger than the lag thresholds, in seconds",
    )
    def _lag(
        context: dg.AssetCheckExecutionContext,
        s3: S3Resource,
        kafka: KafkaResource,
        cdc: CdcPipelineResource,
    ) -> dg.AssetCheckResult:
        latest = latest_materialization(context.instance, k.hudi)
        stored = checkpoint_of(latest[1]) if latest else None
        now = int(time.time() * 1000)
        topic = cdc.topic_of(k.table)
        layout = RawLayout(cdc.raw_prefix, topic)
        waiting = [
            ts
            for ts in (
                oldest_pending_line_ts(s3.get_client(), cdc.raw_bucket, layout, stored),
                oldest_unconsumed_ts(kafka.client_conf(), cdc.sink_consumer_group, topic, now),
            )
            if ts is not None
        ]
        lag = Lag(now, applied_ts_ms(stored), min(waiting, default=None))
        return lag_result(lag, cdc.lag_warn_seconds, cdc.lag_error_seconds)

    return _lag


# One per captured table.
lake_lag_checks = [lag_check(k) for k in KEYS]
