"""How far behind the source a lake table is, in seconds: two numbers per captured table.

``applied``
    The source time (``__source_ts_ms``) of the newest change the table has applied, kept in its
    checkpoint (``applied_ts_ms``, ``cdc_lake/lake/checkpoint.py``), against now. It says how
    fresh the lake's newest row is, not how far behind it is: while the source is quiet it
    grows although nothing is missing.
``pending``
    The age of the oldest change not yet in the table: the first line past the checkpoint in
    the raw files, else the oldest record of the topic that the S3 sink has not written yet
    (its Kafka timestamp: when Debezium produced it, ``cdc_lake/streaming/topics.py``). Zero
    when nothing is pending: the lake holds everything the source has published. This is the
    lag a threshold guards (``lake_lag_seconds``, ``cdc_lake/defs/lake/checks.py``).

Both read what exists (the checkpoint the last refresh reported, one raw object per partition
with pending lines, the topic's offsets): no Spark, and nothing is written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_lake.lake.checkpoint import Checkpoint, CheckpointError, load, plan
from cdc_lake.raw.objects import RawLayout, RawObject


@dataclass(frozen=True)
class Lag:
    now_ms: int
    applied_ts_ms: int | None  # the newest change applied (None: no refresh has said yet)
    oldest_pending_ts_ms: int | None  # the oldest change not yet applied (None: none pending)

    @property
    def applied_s(self) -> float | None:
        if self.applied_ts_ms is None:
            return None
        return max(0.0, (self.now_ms - self.applied_ts_ms) / 1000)

    @property
    def pending_s(self) -> float:
        if self.oldest_pending_ts_ms is None:
            return 0.0
        return max(0.0, (self.now_ms - self.oldest_pending_ts_ms) / 1000)


def applied_ts_ms(stored: Mapping[str, Any] | None) -> int | None:
    """The newest source time a table has applied, from the checkpoint a refresh reported."""
    value = (stored or {}).get("applied_ts_ms")
    return None if value is None else int(value)


def oldest_pending_line_ts(
    client: Any, bucket: str, layout: RawLayout, stored: Mapping[str, Any] | None
) -> int | None:
    """The source time of the oldest change in the raw files past the checkpoint ``stored``
    (None: none). Per partition, the first line past the checkpoint of the first object the
    next refresh would read; a line that cannot be read as a change is passed over (the
    refresh itself reports it)."""
    try:
        checkpoint = load(stored, layout, client, bucket)
    except CheckpointError:
        checkpoint = Checkpoint(layout.topic)
    first: dict[int, RawObject] = {}
    for obj in plan(client, bucket, layout, checkpoint).objects:  # sorted: earliest first
        first.setdefault(obj.partition, obj)
    times = [
        ts
        for p, obj in first.items()
        if (ts := _first_ts_past(client, bucket, obj, checkpoint.offset(p))) is not None
    ]
    return min(times, default=None)


def _first_ts_past(client: Any, bucket: str, obj: RawObject, done: int) -> int | None:
    body = client.get_object(Bucket=bucket, Key=obj.key)["Body"].read()
    lines = [ln for ln in body.decode("utf-8", "replace").split("\n") if ln]
    for i, line in enumerate(lines):
        offset = obj.start_offset + i  # the sink writes consecutive offsets into an object
        with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
            event = json.loads(line)
            offset = int(event.get("__kafka_offset", offset))
            if offset > done:
                return int(event["__source_ts_ms"])
    return None
