"""Each failure names its cause; the connector task's trace is included where there is one."""

from __future__ import annotations

import shutil
import time

import dagster as dg
import pytest

from bench.outbox import RAW_KEY
from cdc_lake.defs.raw.assets import MissingBucketError, raw_cdc_files
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.resources.local import local_resources
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import KafkaConnectResource
from cdc_lake.source.captured import OUTBOX
from cdc_lake.source.preflight import SourceNotReady
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres
from cdc_lake.streaming.connect_client import ConnectClient, ConnectError, failed_components
from cdc_lake.streaming.topics import end_offsets
from cdc_lake_tests.conftest import TEST_PORT_BASE, make_settings
from cdc_lake_tests.ingestion.helpers import metadata, raw_events
from cdc_lake_tests.ingestion.test_reference_dump import create_database


def _materialize(asset, resources):
    return dg.materialize([asset], resources=resources)


def test_connect_unreachable(ingested, resources):
    broken = {**resources, "kafka_connect": KafkaConnectResource(url="http://127.0.0.1:9")}
    with pytest.raises(ConnectError, match=r"Kafka Connect at http://127.0.0.1:9 is unreachable"):
        _materialize(cdc_events_topic, broken)


def test_postgres_unreachable(ingested, resources):
    unreachable = PostgresResource(
        host="127.0.0.1", port=9, database="cdc_lake", user="cdc_lake", password="unused",
        replication_user="cdc_replicator",
    )  # fmt: skip
    broken = {**resources, "postgres": unreachable}
    with pytest.raises(ConnectionError, match=r"PostgreSQL at 127.0.0.1:9/cdc_lake .*unreachable"):
        _materialize(cdc_events_topic, broken)


def test_publication_missing(local_stack: LocalStack, ingested, resources):
    create_database(local_stack, "no_publication")
    broken = local_resources(local_stack.settings, database="no_publication", topic_prefix="np")
    with pytest.raises(SourceNotReady, match=r"publication 'cdc_publication' is missing"):
        _materialize(cdc_events_topic, broken)


def test_slot_missing_for_an_existing_connector(local_stack: LocalStack, ingested, resources):
    connect = resources["kafka_connect"].client()
    lost = local_resources(local_stack.settings, topic_prefix="lost", slot_name="lost_slot")
    # The connector exists (created STOPPED, so it never made its slot); its slot does not.
    config = lost["cdc"].connector_settings(lost["postgres"]).debezium()
    connect.create("lost-debezium-source", config, initial_state="STOPPED")
    try:
        with pytest.raises(SourceNotReady, match=r"replication slot 'lost_slot' is missing"):
            _materialize(cdc_events_topic, lost)
    finally:
        connect.delete("lost-debezium-source")


def test_failed_task_surfaces_its_trace(local_stack: LocalStack, ingested, resources):
    connect: ConnectClient = resources["kafka_connect"].client()
    cdc = resources["cdc"]
    config = {
        **cdc.connector_settings(resources["postgres"]).s3_sink_local(),
        "aws.s3.bucket.name": "no-such-bucket",
    }
    connect.put_config("failing-s3-sink", config)
    try:
        with pytest.raises(ConnectError) as err:
            connect.wait_running("failing-s3-sink", timeout_s=60)
        msg = str(err.value)
        assert "'failing-s3-sink' FAILED: task 0" in msg
        assert "no-such-bucket" in msg and "Exception" in msg  # the worker's stack trace
    finally:
        connect.delete("failing-s3-sink")


def test_missing_bucket(local_stack: LocalStack, ingested, resources):
    broken = local_resources(local_stack.settings, raw_bucket="no-such-bucket")
    with pytest.raises(MissingBucketError, match=r"raw bucket 'no-such-bucket' is missing"):
        _materialize(raw_cdc_files, broken)


def test_wal_level_not_logical(local_stack: LocalStack, ingested, resources):
    settings = make_settings(TEST_PORT_BASE + 700)
    # Same credentials as the session stack, so the resources' EnvVars fit this server too.
    shutil.copy(local_stack.settings.state_dir / "credentials.json", settings.state_dir)
    stack = LocalStack(settings, verbose=False, only=["postgres"])
    try:
        stack.up()
        svc = stack.service("postgres")
        assert isinstance(svc, Postgres)
        admin = svc._connect()
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("ALTER SYSTEM SET wal_level = 'replica'")
        admin.close()
        stack.down()
        stack.up()
        replica = local_resources(settings)
        with pytest.raises(SourceNotReady, match=r"wal_level is 'replica'.*needs 'logical'"):
            _materialize(cdc_events_topic, {**resources, "postgres": replica["postgres"]})
    finally:
        stack.down()
        shutil.rmtree(settings.state_dir, ignore_errors=True)


def test_a_sink_failed_on_a_missing_bucket_is_restarted_and_loses_nothing(
    local_stack: LocalStack, ingested, resources, pg
):
    """The raw bucket goes away (its objects kept aside), a change fails the sink task, the
    bucket comes back: materialising the raw asset restarts the task, says so, and every offset
    of the topic is then in the raw objects."""
    cdc, conf = resources["cdc"], resources["kafka"].client_conf()
    connect: ConnectClient = resources["kafka_connect"].client()
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    bucket, sink = cdc.raw_bucket, cdc.sink_connector_name
    kept = {
        o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    }
    for key in kept:
        s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)
    try:
        with pg.cursor() as cur:
            cur.execute("UPDATE datalake.orders SET freight = freight + 1 WHERE order_id = 10260")
        pg.commit()
        deadline = time.monotonic() + 90
        while not failed_components(connect.status(sink)):
            assert time.monotonic() < deadline, "the sink task never failed"
            time.sleep(0.5)
        # Still missing: the raw asset names the bucket, as before.
        with pytest.raises(MissingBucketError, match=rf"raw bucket '{bucket}' is missing"):
            _materialize(raw_cdc_files, resources)
        assert failed_components(connect.status(sink))
    finally:
        s3.create_bucket(Bucket=bucket)
        for key, body in kept.items():
            s3.put_object(Bucket=bucket, Key=key, Body=body)
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([raw_cdc_files], resources=resources, instance=instance)
    assert result.success
    meta = metadata(result, RAW_KEY)
    assert meta["connector_restarted"] == "task 0" and meta["connector_state"] == "RUNNING"
    said = [e.user_message for e in instance.all_logs(result.run_id)]
    assert [m for m in said if f"sink connector {sink} was FAILED; restarted it (task 0: " in m]
    ends = end_offsets(conf, cdc.topic_of(OUTBOX))
    seen: dict[int, set[int]] = {}
    for event in raw_events(s3, bucket, cdc.raw_prefix, cdc.topic_of(OUTBOX)):
        seen.setdefault(event["__kafka_partition"], set()).add(event["__kafka_offset"])
    assert {p: len(seen.get(p, ())) for p in ends} == ends
    assert all(seen[p] == set(range(ends[p])) for p in ends)
