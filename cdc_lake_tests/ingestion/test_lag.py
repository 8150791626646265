"""Lag as metadata on the topic and raw assets, and the checks that WARN past a threshold."""

from __future__ import annotations

import time
from typing import Any

import dagster as dg
from confluent_kafka import TopicPartition

from bench.outbox import RAW_KEY, TOPIC_KEY, sink_consumer_lag
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.raw.checks import sink_connector_running
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.defs.streaming.checks import replication_slot_lag, source_connector_running
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.connect_client import ConnectClient
from cdc_lake.streaming.topics import (
    committed_offsets,
    end_offsets,
    inspector,
    oldest_unconsumed_ts,
    wait_for_consumer,
)
from cdc_lake_tests.ingestion.helpers import metadata
from cdc_lake_tests.topic_reader import reader_conf


def _wait_state(connect: ConnectClient, name: str, state: str) -> None:
    deadline = time.monotonic() + 60
    while (connect.status(name) or {})["tasks"][0]["state"] != state:
        assert time.monotonic() < deadline, f"{name} never became {state}"
        time.sleep(0.5)


def _first_unconsumed_time(conf: dict[str, Any], cdc: Any, topic: str) -> int:
    """The Kafka timestamp of the first record the sink has not committed (read as the tests'
    user, which may read records), in the one partition that has one."""
    ends = end_offsets(conf, topic)
    done = committed_offsets(conf, cdc.sink_consumer_group, topic, list(ends))
    (p,) = [p for p, end in ends.items() if done.get(p, 0) < end]
    consumer = inspector(conf)
    try:
        consumer.assign([TopicPartition(topic, p, done.get(p, 0))])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                return msg.timestamp()[1]
        raise TimeoutError(f"no record at {topic} [{p}] offset {done.get(p, 0)}")
    finally:
        consumer.close()


def _evaluate(check: Any, **resources: Any) -> dg.AssetCheckResult:
    """The check invoked directly with these resources, as a run would evaluate it."""
    result = check(**resources)
    assert isinstance(result, dg.AssetCheckResult)
    return result


def test_lag_metadata_and_checks_pass_when_caught_up(ingested, resources):
    checks = [replication_slot_lag, source_connector_running, sink_consumer_lag,
              sink_connector_running]  # fmt: skip
    result = dg.materialize([cdc_events_topic, raw_cdc_files, *checks], resources=resources)
    assert result.success
    topic = metadata(result, TOPIC_KEY)
    restart, flush = topic["slot_restart_lag_bytes"], topic["slot_flush_lag_bytes"]
    print(f"slot lag: {restart:,} B retained, {flush:,} B unconfirmed")
    # restart_lsn <= confirmed_flush_lsn <= current WAL.
    assert isinstance(flush, int) and isinstance(restart, int) and 0 <= flush <= restart
    raw = metadata(result, RAW_KEY)
    print(f"sink lag: {raw['sink_consumer_lag_records']} records")
    assert raw["sink_consumer_lag_records"] == 0  # nothing changed since the sink caught up
    evaluated = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {n: c.passed for n, c in evaluated.items()} == {
        "replication_slot_lag": True,
        "source_connector_running": True,
        "sink_consumer_lag": True,
        "sink_connector_running": True,
    }
    states = evaluated["sink_connector_running"].metadata["states"].value
    assert states == {"connector": "RUNNING", "task 0": "RUNNING"}
    slot_meta = {k: v.value for k, v in evaluated["replication_slot_lag"].metadata.items()}
    assert slot_meta["threshold_bytes"] == resources["cdc"].slot_lag_warn_bytes == 2**30
    assert slot_meta["active"] is True


def test_slot_lag_check_warns_past_a_tiny_threshold(local_stack: LocalStack, ingested, pg):
    with pg.cursor() as cur:  # some WAL the slot has not confirmed yet
        cur.execute("CREATE TABLE IF NOT EXISTS datalake.wal_scratch (id bigserial, v text)")
        cur.execute("INSERT INTO datalake.wal_scratch (v) VALUES (repeat('x', 1000))")
    pg.commit()
    tiny = local_resources(local_stack.settings, slot_lag_warn_bytes=1)
    result = _evaluate(replication_slot_lag, postgres=tiny["postgres"], cdc=tiny["cdc"])
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    lag = result.metadata["slot_restart_lag_bytes"].value
    assert isinstance(lag, int) and lag > 1
    assert result.description and "retains" in result.description


def test_sink_lag_check_warns_while_the_sink_is_paused(
    local_stack: LocalStack, ingested, resources, pg
):
    cdc, conf = resources["cdc"], resources["kafka"].client_conf()
    connect: ConnectClient = resources["kafka_connect"].client()
    sink = cdc.sink_connector_name
    tiny = local_resources(local_stack.settings, sink_lag_warn_records=0)
    before = sum(end_offsets(conf, cdc.topic_of(OUTBOX)).values())
    connect.pause(sink)
    try:
        _wait_state(connect, sink, "PAUSED")
        with pg.cursor() as cur:
            cur.execute("UPDATE datalake.orders SET freight = freight + 1 WHERE order_id = 10255")
        pg.commit()
        deadline = time.monotonic() + 60
        while sum(end_offsets(conf, cdc.topic_of(OUTBOX)).values()) == before:
            assert time.monotonic() < deadline, "the change never reached the topic"
            time.sleep(0.5)
        paused = _evaluate(sink_consumer_lag, kafka=tiny["kafka"], cdc=tiny["cdc"])
        assert not paused.passed and paused.severity == dg.AssetCheckSeverity.WARN
        assert paused.metadata["sink_consumer_lag_records"].value == 1
        # The lag in seconds of that one record, from offsets alone (Dagster's user may not
        # read a record): its Kafka time, to the second, never later than it is.
        now = int(time.time() * 1000)
        topic = cdc.topic_of(OUTBOX)
        oldest = oldest_unconsumed_ts(conf, cdc.sink_consumer_group, topic, now)
        written = _first_unconsumed_time(reader_conf(local_stack.settings), cdc, topic)
        assert oldest is not None and written - 1_000 <= oldest <= written, (oldest, written)
        state = _evaluate(sink_connector_running, kafka_connect=resources["kafka_connect"], cdc=cdc)
        assert not state.passed and state.severity == dg.AssetCheckSeverity.WARN
        assert state.description == f"{sink}: connector PAUSED, task 0 PAUSED"
    finally:
        connect.resume(sink)
    wait_for_consumer(conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX), timeout_s=60)
    resumed = _evaluate(sink_consumer_lag, kafka=tiny["kafka"], cdc=tiny["cdc"])
    assert resumed.passed  # caught up: 0 records, not over a threshold of 0
    now = int(time.time() * 1000)
    assert oldest_unconsumed_ts(conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX), now) is None
    assert resumed.metadata["sink_consumer_lag_records"].value == 0
    assert _evaluate(
        sink_connector_running, kafka_connect=resources["kafka_connect"], cdc=cdc
    ).passed
