"""Raw CDC files: the topic written to S3 as JSON lines by an S3 sink connector.

Materialising checks the bucket, creates or updates the sink connector, waits for it to be
RUNNING and for its consumer group to have committed the whole topic, which the sink does only
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

from cdc_lake.defs import PIPELINE_GROUP
from cdc_lake.defs.keys import RAW_KEY, TOPIC_KEY
from cdc_lake.raw.objects import (  # noqa: F401 (MissingBucketError re-exported)
    MissingBucketError,
    RawLayout,
    list_objects,
    missing_bucket_error,
)
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource, ConnectResource, KafkaResource
from cdc_lake.streaming.topics import consumer_lag, wait_for_consumer


@dg.asset(
    key=RAW_KEY,
    deps=[TOPIC_KEY],
    group_name=PIPELINE_GROUP,
    kinds={"s3", "kafka"},
    owners=["team:data-platform"],
    tags={"stage": "raw"},
)
def raw_cdc_files(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    kafka: KafkaResource,
    kafka_connect: ConnectResource,
    s3: S3Resource,
    cdc: CdcPipelineResource,
) -> dg.MaterializeResult:
    """The topic's change events as JSON-lines objects in the raw bucket, one event per line,
    under `{raw prefix}{topic}/partition={p}/`, flushed by record count and by interval."""
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
    # Kafka Connect's REST API can restart failed tasks; MSK Connect manages its own.
    restart_failed = getattr(connect, "restart_failed", None)
    restarted = restart_failed(name) if restart_failed else []
    if restarted:
        context.log.warning(
            f"sink connector {name} was FAILED; restarted it ({'; '.join(restarted)}). It "
            "resumes from its committed offsets."
        )
    action, status = connect.deploy(name, config, cdc.connector_timeout_s, context.log.info)
    ends = wait_for_consumer(
        kafka.client_conf(), cdc.sink_consumer_group, cdc.topic, timeout_s=cdc.connector_timeout_s
    )
    listing = list_objects(client, cdc.raw_bucket, RawLayout(cdc.raw_prefix, cdc.topic))
    objects = listing.objects
    last_key = max((o.key for o in objects), default=None)
    cursor = {str(o.partition): o.key for o in sorted(objects)}  # the last key per partition
    metadata: dict[str, dg.MetadataValue] = {
        "location": dg.MetadataValue.path(f"s3://{cdc.raw_bucket}/{cdc.raw_prefix}"),
        "objects": dg.MetadataValue.int(len(objects)),
        "bytes": dg.MetadataValue.int(sum(o.size for o in objects)),
        "last_key_per_partition": dg.MetadataValue.json(cursor),
        "ignored_keys": dg.MetadataValue.int(len(listing.ignored)),
        "records_flushed": dg.MetadataValue.int(sum(ends.values())),
        # Measured after the wait: what reached the topic since (see sink_consumer_lag).
        "sink_consumer_lag_records": dg.MetadataValue.int(
            sum(consumer_lag(kafka.client_conf(), cdc.sink_consumer_group, cdc.topic).values())
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
    return dg.MaterializeResult(metadata=metadata)
