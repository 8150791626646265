"""Checks of the raw stage.

- ``sink_consumer_lag``: the records of the topic that the S3 sink's consumer group has not
  committed yet (end offset minus committed offset, summed over partitions) are at most
  ``sink_lag_warn_records``. The sink commits only what it has uploaded, so this is what the
  raw files lack. Past the threshold the check fails with WARN severity: the sink is down, or
  slower than the topic.
"""

import dagster as dg

from cdc_lake.defs.raw.assets import RAW_KEY
from cdc_lake.resources import CdcPipelineResource, KafkaResource
from cdc_lake.streaming.topics import consumer_lag


@dg.asset_check(
    asset=RAW_KEY,
    description="the S3 sink's consumer group lags the topic by at most the threshold",
)
def sink_consumer_lag(kafka: KafkaResource, cdc: CdcPipelineResource) -> dg.AssetCheckResult:
    lag = consumer_lag(kafka.client_conf(), cdc.sink_consumer_group, cdc.topic)
    total, threshold = sum(lag.values()), cdc.sink_lag_warn_records
    meta = {
        "consumer_group": cdc.sink_consumer_group,
        "sink_consumer_lag_records": total,
        "lag_per_partition": dg.MetadataValue.json({str(p): n for p, n in lag.items()}),
        "threshold_records": threshold,
    }
    if total <= threshold:
        return dg.AssetCheckResult(passed=True, metadata=meta)
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=meta,
        description=(
            f"the S3 sink has {total:,} records of {cdc.topic!r} to commit, over {threshold:,}"
        ),
    )
