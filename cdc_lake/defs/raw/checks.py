"""Checks of the raw stage: the first and the last of each captured table's raw files; the one
sink connector's on the first declared table's (``CONNECTORS``).

- ``sink_consumer_lag``: the records of the table's topic that the S3 sink's consumer group has not
  committed yet (end offset minus committed offset, summed over partitions) are at most
  ``sink_lag_warn_records``. The sink commits only what it has uploaded, so this is what the
  raw files lack. Past the threshold the check fails with WARN severity: the sink is down, or
  slower than the topic.
- ``sink_connector_running``: the S3 sink connector and its tasks are RUNNING (see
  ``cdc_lake/streaming/connector_health.py``).
- ``pending_raw_objects``: the raw objects past the lake's checkpoint (what the next lake
  refresh will ingest, listed as the refresh lists them) are at most ``pending_objects_warn``.
  Past it the check fails with WARN severity: the lake refresh is not keeping up, or its sensor
  is off. Some pending objects between two refreshes are normal.
"""

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.defs.check_results import at_most, connector_check
from cdc_lake.defs.keys import CONNECTORS, KEYS, TableKeys
from cdc_lake.defs.unchanged import lake_checkpoint
from cdc_lake.lake.checkpoint import pending
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource, KafkaResource
from cdc_lake.streaming.topics import consumer_lag


@dg.asset_check(
    asset=CONNECTORS.raw, description="the S3 sink connector and its tasks are RUNNING"
)
def sink_connector_running(
    kafka_connect: ConnectResource, cdc: CdcPipelineResource
) -> dg.AssetCheckResult:
    name = cdc.sink_connector_name
    return connector_check(name, kafka_connect.client().status(name))


def raw_checks(k: TableKeys) -> list[dg.AssetChecksDefinition]:
    """The checks of one captured table's raw files."""
    topic = f"the topic of {k.table.source}"

    @dg.asset_check(
        asset=k.raw,
        description=f"the S3 sink's consumer group lags {topic} by at most the threshold",
    )
    def sink_consumer_lag(kafka: KafkaResource, cdc: CdcPipelineResource) -> dg.AssetCheckResult:
        lag = consumer_lag(kafka.client_conf(), cdc.sink_consumer_group, cdc.topic_of(k.table))
        total, threshold = sum(lag.values()), cdc.sink_lag_warn_records
        meta = {
            "consumer_group": cdc.sink_consumer_group,
            "sink_consumer_lag_records": total,
            "lag_per_partition": dg.MetadataValue.json({str(p): n for p, n in lag.items()}),
            "threshold_records": threshold,
        }
        return at_most(
            total,
            threshold,
            meta,
            f"the S3 sink has {total:,} records of {cdc.topic_of(k.table)!r} to commit, over "
            f"{threshold:,}",
        )

    @dg.asset_check(
        asset=k.raw,
        description="the raw objects not yet ingested into the lake are at most the threshold",
    )
    def pending_raw_objects(
        context: dg.AssetCheckExecutionContext, s3: S3Resource, cdc: CdcPipelineResource
    ) -> dg.AssetCheckResult:
        plan = pending(
            s3.get_client(),
            cdc.raw_bucket,
            RawLayout(cdc.raw_prefix, cdc.topic_of(k.table)),
            lake_checkpoint(context.instance, k.hudi),
        )
        count, threshold = len(plan.objects), cdc.pending_objects_warn
        meta: dict[str, dg.MetadataValue] = {
            "pending_objects": dg.MetadataValue.int(count),
            "pending_bytes": dg.MetadataValue.int(sum(o.size for o in plan.objects)),
            "threshold_objects": dg.MetadataValue.int(threshold),
        }
        if plan.objects:
            meta["oldest_pending"] = dg.MetadataValue.text(min(plan.objects).key)
        return at_most(
            count,
            threshold,
            meta,
            f"{count:,} raw objects wait for the lake refresh, over {threshold:,}: turn on "
            f"{k.sensor} or run `cdc-lake refresh`",
        )

    return [sink_consumer_lag, pending_raw_objects]


# One pair per captured table.
table_raw_checks = {k.table: raw_checks(k) for k in KEYS}
raw_table_checks = [c for checks in table_raw_checks.values() for c in checks]
