"""Whole-topic reads for tests: small topics only, everything held in memory."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import TopicPartition

from cdc_lake.stack.settings import StackSettings
from cdc_lake.streaming.topics import end_offsets, inspector


def reader_conf(settings: StackSettings) -> dict[str, Any]:
    """librdkafka settings of the tests' and benchmarks' Kafka user, which may read records;
    the Dagster side's (``resources["kafka"]``) may only describe (cdc_lake/stack/kafka_acls.py)."""
    return settings.kafka_client_conf(settings.kafka_tester_user)


def read_all(
    conf: Mapping[str, Any], topic: str, timeout_s: float = 60.0, keys: bool = False
) -> list[Any]:
    """Every record of the topic as parsed JSON (None for tombstones), partition by partition;
    with ``keys``, each record's key instead (None for a record without one). Raises
    TimeoutError if the records up to the end offsets it saw first are not all read within
    ``timeout_s``."""
    ends = end_offsets(conf, topic)
    consumer = inspector(conf)
    out: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        remaining = {p: e for p, e in ends.items() if e > 0}
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            value = msg.key() if keys else msg.value()
            out.append(json.loads(value) if value else None)
            part, offset = msg.partition(), msg.offset()
            if part is not None and offset is not None and offset + 1 >= remaining.get(part, 0):
                remaining.pop(part, None)
        if remaining:
            raise TimeoutError(f"could not read all of {topic!r} in {timeout_s:.0f}s")
        return out
    finally:
        consumer.close()
