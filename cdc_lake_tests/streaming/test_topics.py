"""end_offsets: a partition whose leader is being elected is asked again; other errors are not."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from cdc_lake.streaming import topics


class _Consumer:
    """Answers list_topics with two partitions; the watermark query fails ``fails`` times."""

    def __init__(self, fails: list[int]) -> None:
        self.fails = fails
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        part = SimpleNamespace()
        info = SimpleNamespace(error=None, partitions={0: part, 1: part})
        return SimpleNamespace(topics={topic: info})

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.fails:
            raise KafkaException(KafkaError(self.fails.pop(0)))
        return 0, 10 + tp.partition

    def poll(self, timeout: float) -> None:  # serves the error callback: none here
        return None

    def close(self) -> None:
        pass


def test_a_moving_leader_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Consumer([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    monkeypatch.setattr(topics, "inspector", lambda conf, errors=None: fake)
    assert topics.end_offsets({}, "t", timeout_s=5) == {0: 10, 1: 11}
    assert fake.asked == 4


def test_a_leader_that_never_comes_fails_at_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Consumer([KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    monkeypatch.setattr(topics, "inspector", lambda conf, errors=None: fake)
    with pytest.raises(ConnectionError, match="Not leader|NOT_LEADER"):
        topics.end_offsets({"bootstrap.servers": "b:1"}, "t", timeout_s=1)
    assert 2 <= fake.asked < 20


def test_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Consumer([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    monkeypatch.setattr(topics, "inspector", lambda conf, errors=None: fake)
    with pytest.raises(ConnectionError, match="b:1"):
        topics.end_offsets({"bootstrap.servers": "b:1"}, "t", timeout_s=5)
    assert fake.asked == 1
