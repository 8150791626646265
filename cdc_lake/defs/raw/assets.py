"""Raw CDC files: each captured table's topic written to S3 as JSON lines by one S3 sink connector,
under a folder of its own, ``{raw prefix}{topic}/`` (one asset per table, in its lineage). One
sink for all the topics: one consumer group, one set of tasks, and each topic's objects and
offsets still apart (the object keys name the topic).

Materialising checks the bucket, creates or updates the sink connector, waits for it to be
RUNNING and for its consumer group to have committed every topic, which the sink does only
after the objects holding those records are uploaded. Object keys increase within each topic
partition (start offset, zero-padded), so readers resume listing after the last key they saw.
A restarted sink rewrites the same key for the same start offset, so redelivery never creates
a second copy of an object.

A sink connector or task left FAILED (for example by a missing bucket: it stays FAILED after the
bucket is back) is restarted once the bucket is there, which the run's log and the
``connector_restarted`` metadata say; the restarted task resumes from its committed offsets, so
nothing is lost, and the wait for the flush follows as usual. While the bucket is missing, the
run fails first with ``MissingBucketError``, naming it.

The metadata reports the sink consumer group's lag in records (topic end offsets minus its
committed offsets); the ``sink_consumer_lag`` check WARNs past ``sink_lag_warn_records``.
"""

import dagster as dg
from botocore.exceptions import ClientError
from dagster_aws.s3 import S3Resource

from cdc_lake.defs import stage_spec
from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.raw.objects import (  # noqa: F401 (MissingBucketError re-exported)
    MissingBucketError,
    RawLayout,
    list_objects,
    missing_bucket_error,
)
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource, KafkaResource
from cdc_lake.streaming.topics import consumer_lag, wait_for_consumer


def _description(k: TableKeys) -> str:
    return (
        f"The change events of the topic of {k.table.source} as JSON-lines objects in the raw "
        "bucket, one event per line, under `{raw prefix}{topic}/partition={p}/`, flushed by "
        "record count and by interval."
    )


@dg.multi_asset(
    name="raw_cdc_files",
    specs=[stage_spec(__name__, k.raw, {"s3", "kafka"}, _description(k), [k.topic]) for k in KEYS],
)
def raw_cdc_files(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    kafka: KafkaResource,
    kafka_connect: ConnectResource,
    s3: S3Resource,
    cdc: CdcPipelineResource,
):
    """Deploys the one S3 sink of every captured table's topic and waits for it to flush them."""
    client = s3.get_client()
    try:
        client.head_bucket(Bucket=cdc.raw_bucket)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code")
        raise missing_bucket_error(cdc.raw_bucket, code) from e
    connect = kafka_connect.client()
    name = cdc.sink_connector_name
    settings = cdc.connector_settings(postgres)
    config = settings.s3_sink_local() if cdc.s3_endpoint else settings.s3_sink_msk()
    # Kafka Connect's REST API restarts failed tasks; MSK Connect restarts its own.
    restarted = connect.restart_failed(name)
    if restarted:
        context.log.warning(
            f"sink connector {name} was FAILED; restarted it ({'; '.join(restarted)}). It "
            "resumes from its committed offsets."
        )
    action, status = connect.deploy(name, config, cdc.connector_timeout_s, context.log.info)
    conf = kafka.client_conf()
    for k in KEYS:
        topic = cdc.topic_of(k.table)
        ends = wait_for_consumer(
            conf, cdc.sink_consumer_group, topic, timeout_s=cdc.connector_timeout_s
        )
        listing = list_objects(client, cdc.raw_bucket, RawLayout(cdc.raw_prefix, topic))
        objects = listing.objects
        last_key = max((o.key for o in objects), default=None)
        cursor = {str(o.partition): o.key for o in sorted(objects)}  # the last key per partition
        metadata: dict[str, dg.MetadataValue] = {
            "location": dg.MetadataValue.path(f"s3://{cdc.raw_bucket}/{cdc.raw_prefix}{topic}/"),
            "objects": dg.MetadataValue.int(len(objects)),
            "bytes": dg.MetadataValue.int(sum(o.size for o in objects)),
            "last_key_per_partition": dg.MetadataValue.json(cursor),
            "ignored_keys": dg.MetadataValue.int(len(listing.ignored)),
            "records_flushed": dg.MetadataValue.int(sum(ends.values())),
            # Measured after the wait: what reached the topic since (see sink_consumer_lag).
            "sink_consumer_lag_records": dg.MetadataValue.int(
                sum(consumer_lag(conf, cdc.sink_consumer_group, topic).values())
            ),
            "connector": dg.MetadataValue.text(name),
            "connector_action": dg.MetadataValue.text(action),
            "connector_restarted": dg.MetadataValue.text(
                ", ".join(r.split(":", 1)[0] for r in restarted) or "none"
            ),
            "connector_state": dg.MetadataValue.text(status["connector"]["state"]),
        }
        if last_key:  # none before the sink's first flush
            metadata["last_object"] = dg.MetadataValue.path(f"s3://{cdc.raw_bucket}/{last_key}")
        yield dg.MaterializeResult(asset_key=k.raw, metadata=metadata)
