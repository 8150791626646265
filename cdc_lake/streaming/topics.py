"""Read-only views of a Kafka topic: partitions, offsets and a consumer group's lag."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# Errors of a partition whose leader is being elected: they pass once it is.
_LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)
# The group the inspector consumers name: they never join it or commit to it, but librdkafka may
# still look up its coordinator, so the Dagster role may describe it.
INSPECTOR_GROUP = "cdc-lake-inspector"
# These consumers live for one call, and a failure raises from the call itself, naming the
# broker and the client's own errors (a refused login says so). librdkafka's error lines stay
# out of the output: closing one while its group coordinator's SASL handshake is under way
# prints one ("SASL authentication error ... Broker transport failure") on most calls, about
# nothing.
_QUIET = 2  # syslog levels: 2 is critical only


def inspector(conf: Mapping[str, Any], errors: list[str] | None = None) -> Consumer:
    """A consumer that only looks: it never commits, and starts at the earliest offset. The
    client's errors go to ``errors`` (served by ``poll``)."""
    sink = errors if errors is not None else []
    return Consumer(
        {
            **conf,
            "group.id": INSPECTOR_GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": _QUIET,
            "error_cb": lambda err: sink.append(err.str()),
        }
    )


def end_offsets(conf: Mapping[str, Any], topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """High watermark per partition. Raises KeyError if the topic does not exist.

    A partition whose leader is being elected (a topic just created, a broker just restarted)
    answers with a retriable error; it is asked again until ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    errors: list[str] = []
    consumer = inspector(conf, errors)
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s)
        info = meta.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise KeyError(f"Kafka topic {topic!r} does not exist")
        out = {}
        for p in sorted(info.partitions):
            while True:
                left = max(deadline - time.monotonic(), 0.5)
                try:
                    _, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=left
                    )
                    break
                except KafkaException as e:
                    err = e.args[0]
                    moving = err.retriable() or err.code() in _LEADER_MOVING
                    if not moving or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.2)
            out[p] = high
        return out
    except KafkaException as e:
        consumer.poll(0.1)  # serves the error callback
        # "... SASL authentication error: ... (after 250ms in state AUTH_REQ)", once each.
        said = list(dict.fromkeys(m.split(" (after ")[0] for m in errors))[:2]
        raise ConnectionError(
            f"Kafka at {conf.get('bootstrap.servers')}: {e}" + "".join(f"; {m}" for m in said)
        ) from e
    finally:
        consumer.close()


def wait_for_offsets(
    conf: Mapping[str, Any], topic: str, at_least: int, timeout_s: float = 120.0
) -> dict[int, int]:
    """Wait until the topic holds ``at_least`` records in total; returns the end offsets."""
    deadline = time.monotonic() + timeout_s
    last: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            last = end_offsets(conf, topic)
        except KeyError:
            last = {}
        if sum(last.values()) >= at_least:
            return last
        time.sleep(1.0)
    raise TimeoutError(
        f"topic {topic!r} holds {sum(last.values())} records after {timeout_s:.0f}s; "
        f"expected at least {at_least}"
    )


def committed_offsets(
    conf: Mapping[str, Any], group: str, topic: str, partitions: list[int], timeout_s: float = 10.0
) -> dict[int, int]:
    """The consumer group's committed offset per partition (0 where it has none)."""
    consumer = Consumer(
        {**conf, "group.id": group, "enable.auto.commit": False, "log_level": _QUIET}
    )
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout_s)
        return {tp.partition: max(tp.offset, 0) for tp in got}
    finally:
        consumer.close()


def consumer_lag(
    conf: Mapping[str, Any], group: str, topic: str, timeout_s: float = 10.0
) -> dict[int, int]:
    """Records per partition that the group has not committed yet: the end offset minus the
    committed one (a group that never committed lags by the whole partition)."""
    ends = end_offsets(conf, topic, timeout_s)
    done = committed_offsets(conf, group, topic, list(ends), timeout_s)
    return {p: max(0, end - done.get(p, 0)) for p, end in ends.items()}


def wait_for_consumer(
    conf: Mapping[str, Any], group: str, topic: str, timeout_s: float = 120.0
) -> dict[int, int]:
    """Wait until the group has committed up to the topic's current end in every partition."""
    ends = end_offsets(conf, topic)
    deadline = time.monotonic() + timeout_s
    done: dict[int, int] = {}
    while time.monotonic() < deadline:
        done = committed_offsets(conf, group, topic, list(ends))
        if all(done.get(p, 0) >= end for p, end in ends.items()):
            return ends
        time.sleep(1.0)
    raise TimeoutError(
        f"consumer group {group!r} committed {done} of {topic!r} after {timeout_s:.0f}s; "
        f"the topic ends at {ends}"
    )


def oldest_unconsumed_ts(
    conf: Mapping[str, Any],
    group: str,
    topic: str,
    now_ms: int,
    timeout_s: float = 10.0,
    horizon_ms: int = 30 * 86_400_000,
) -> int | None:
    """The Kafka timestamp (when the producer, Debezium, wrote it) of the oldest record of
    ``topic`` that ``group`` has not committed yet, to the second and never later than it is;
    None when the group has committed everything. Older than ``horizon_ms`` reads as that old.

    It asks only for offsets (ListOffsets by time: Describe on the topic, no Read), so a
    describe-only user can ask: per partition behind, a search over time for the newest
    instant whose first record at or after it is still at or before the committed offset. A
    topic that does not exist yet holds nothing: None."""
    try:
        ends = end_offsets(conf, topic, timeout_s)
    except KeyError:
        return None
    done = committed_offsets(conf, group, topic, list(ends), timeout_s)
    behind = [p for p, end in ends.items() if done.get(p, 0) < end]
    if not behind:
        return None
    consumer = inspector(conf)
    try:

        def first_at(p: int, ts: int) -> int:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, p, ts)], timeout=timeout_s)
            return ends[p] if tp.offset < 0 else tp.offset  # -1: no record at or after ts

        oldest = []
        for p in behind:
            c = done.get(p, 0)
            lo, hi = now_ms - horizon_ms, now_ms + 1_000
            if first_at(p, lo) > c:
                oldest.append(lo)  # older than the horizon
                continue
            while hi - lo > 1_000:  # first_at(lo) <= c < first_at(hi)
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if first_at(p, mid) <= c else (lo, mid)
            oldest.append(lo)
        return min(oldest)
    finally:
        consumer.close()
