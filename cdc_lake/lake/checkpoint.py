"""The lake's progress through the topic: the last Kafka offset ingested per partition.

What it holds
    Per topic partition: ``offset``, the greatest Kafka offset whose line is in the table;
    ``start`` and ``etag``, the start offset and S3 ETag of the raw object that held it when it
    was read. It is stored as JSON in the extra metadata of the Hudi commit that wrote those
    lines, so data and progress are committed atomically: a commit that fails leaves neither.

Why offsets and not object keys
    A sink that restarts before committing its consumer offsets redelivers records and cuts the
    batch again, often under the same key with more records. Progress by key would never read
    that key again and lose the extra records. By offset, a refresh reads every object that may
    hold a greater offset and skips the lines at or below the checkpoint, so overwritten,
    re-cut, overlapping or duplicated objects change nothing.

The newest change applied
    ``applied_ts_ms``: the greatest source time (``__source_ts_ms``) of a change the table has
    applied: how far the lake has come in the source's time (``cdc_lake/lake/lag.py``). It only
    grows; a replay keeps it. Absent from checkpoints written before it was tracked (None).

The newest truncate
    ``truncated``: the ``cdc_ordering`` of the newest ``TRUNCATE`` the table has applied ("" for
    none). A change older than it that is read later (from another partition, or in a replay,
    which rewinds the offsets but keeps this) lost to the truncate and is dropped
    (``cdc_lake/lake/ordering.py``). It is absent from checkpoints written before truncates
    reached the lake, which read as "".

What a refresh reads (``plan``)
    Per partition, the listing starts at the object that held the checkpoint (``StartAfter`` the
    key just before it): a re-cut keeps that key, and every later object starts after it. That
    object itself is read again only if its ETag changed. Objects followed by one that starts at
    or below ``offset + 1`` hold nothing new and are skipped. Keys that are not raw objects of
    the configured topic are reported, never read.

Upgrade from version 1
    Tables written before offsets were tracked hold ``{partition prefix: last key}``. The first
    refresh converts it: the last line of that object gives the offset (its ``__kafka_offset``,
    or the object's start offset plus its line count minus one, since the sink writes
    consecutive offsets). If that object is gone, or the key is not a raw object of the topic,
    the refresh stops with an error naming the key and the fix (``cdc-lake lake replay``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cdc_lake.raw.objects import Listing, RawLayout, RawObject, list_objects

CHECKPOINT_KEY = "_cdc_lake_checkpoint"  # the Hudi commit's extra-metadata key
VERSION = 2


class CheckpointError(RuntimeError):
    """The stored checkpoint cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class PartitionProgress:
    offset: int  # greatest offset ingested; -1: none yet
    start: int  # start offset of the raw object that held it
    etag: str = ""  # that object's ETag when read


@dataclass(frozen=True)
class Checkpoint:
    topic: str
    partitions: dict[int, PartitionProgress] = field(default_factory=dict)
    truncated: str = ""  # the newest truncate's cdc_ordering ("": none)
    applied_ts_ms: int | None = None  # the newest source time applied (None: not tracked yet)

    def offset(self, partition: int) -> int:
        p = self.partitions.get(partition)
        return p.offset if p else -1

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "topic": self.topic,
            "partitions": {
                str(p): {"offset": v.offset, "start": v.start, "etag": v.etag}
                for p, v in sorted(self.partitions.items())
            },
            **({"truncated": self.truncated} if self.truncated else {}),
            **({"applied_ts_ms": self.applied_ts_ms} if self.applied_ts_ms is not None else {}),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Checkpoint:
        return Checkpoint(
            topic=str(data["topic"]),
            partitions={
                int(p): PartitionProgress(int(v["offset"]), int(v["start"]), str(v["etag"]))
                for p, v in data["partitions"].items()
            },
            truncated=str(data.get("truncated", "")),
            applied_ts_ms=None if data.get("applied_ts_ms") is None else int(data["applied_ts_ms"]),
        )

    def advanced(self, progress: Mapping[int, PartitionProgress]) -> Checkpoint:
        """This checkpoint moved forward by ``progress``; a partition never moves back."""
        merged = dict(self.partitions)
        for p, new in progress.items():
            if new.offset > self.offset(p):
                merged[p] = new
        return replace(self, partitions=merged)

    def truncated_at(self, ordering: str | None) -> Checkpoint:
        """This checkpoint after a truncate at ``ordering`` (None: none); the newest is kept."""
        if ordering is None or ordering <= self.truncated:
            return self
        return replace(self, truncated=ordering)

    def applied_until(self, ts_ms: int | None) -> Checkpoint:
        """This checkpoint after applying changes up to source time ``ts_ms`` (None: none);
        the newest is kept, so an older batch (a replay) never moves it back."""
        if ts_ms is None or (self.applied_ts_ms is not None and ts_ms <= self.applied_ts_ms):
            return self
        return replace(self, applied_ts_ms=ts_ms)

    def rewound(self, from_offset: int, partitions: list[int] | None = None) -> Checkpoint:
        """The progress a replay starts from: offsets from ``from_offset`` on are unread again
        (in the given partitions, or all)."""
        out = dict(self.partitions)
        for p in partitions if partitions is not None else list(self.partitions):
            if from_offset > 0:
                out[p] = PartitionProgress(from_offset - 1, -1)  # start -1: list it all
            else:
                out.pop(p, None)
        return replace(self, partitions=out)


def is_legacy(stored: Mapping[str, Any]) -> bool:
    return bool(stored) and "version" not in stored


def load(
    stored: Mapping[str, Any] | None, layout: RawLayout, client: Any, bucket: str
) -> Checkpoint:
    """The checkpoint of a table's newest commit (``{}``/None: nothing ingested yet), upgraded
    from version 1 when needed."""
    if not stored:
        return Checkpoint(layout.topic)
    if not is_legacy(stored):
        cp = Checkpoint.from_json(stored)
        if cp.topic != layout.topic:
            raise CheckpointError(
                f"the lake's checkpoint is for topic {cp.topic!r}, but the raw files configured "
                f"are topic {layout.topic!r}. Fix: point the lake at its own topic's files, or "
                "start a new table (LakeResource lake_prefix)."
            )
        return cp
    progress: dict[int, PartitionProgress] = {}
    for key in stored.values():
        parsed = layout.parse(str(key))
        if parsed is None:
            raise CheckpointError(
                f"the lake's version-1 checkpoint names {key!r}, which is not a raw object of "
                f"topic {layout.topic!r}; nothing tells which offsets were ingested. Fix: "
                "`cdc-lake lake replay --from-offset 0` re-ingests the raw files (the latest "
                "change still wins, so a replay is safe)."
            )
        partition, start = parsed
        try:
            body = client.get_object(Bucket=bucket, Key=key)
        except Exception as e:  # botocore's NoSuchKey and friends
            raise CheckpointError(
                f"the lake's version-1 checkpoint names s3://{bucket}/{key}, which cannot be "
                f"read ({e}). Fix: `cdc-lake lake replay --from-offset {start}` re-ingests from "
                "that object's first offset (the latest change still wins, so a replay is safe)."
            ) from e
        lines = [ln for ln in body["Body"].read().decode("utf-8", "replace").split("\n") if ln]
        offset = start + len(lines) - 1
        with contextlib.suppress(ValueError, AttributeError, IndexError):
            offset = int(json.loads(lines[-1]).get("__kafka_offset", offset))
        progress[partition] = PartitionProgress(offset, start, str(body.get("ETag", "")).strip('"'))
    return Checkpoint(layout.topic, progress)


@dataclass
class ReadPlan:
    objects: list[RawObject]
    ignored: list[str]
    list_requests: int


def plan(client: Any, bucket: str, layout: RawLayout, checkpoint: Checkpoint) -> ReadPlan:
    """The raw objects that may hold offsets past the checkpoint (see the module docstring)."""
    start_after = {
        p: layout.key(p, v.start - 1) if v.start > 0 else None
        for p, v in checkpoint.partitions.items()
    }
    listing: Listing = list_objects(client, bucket, layout, start_after)
    by_partition: dict[int, list[RawObject]] = {}
    for obj in listing.objects:
        by_partition.setdefault(obj.partition, []).append(obj)
    chosen: list[RawObject] = []
    for p, objs in by_partition.items():
        objs.sort()
        done = checkpoint.partitions.get(p)
        for i, obj in enumerate(objs):
            nxt = objs[i + 1] if i + 1 < len(objs) else None
            if done and nxt is not None and nxt.start_offset <= done.offset + 1:
                continue  # everything in it is at or below the checkpoint
            if done and obj.start_offset == done.start and obj.etag == done.etag:
                continue  # the object that held the checkpoint, unchanged since
            chosen.append(obj)
    return ReadPlan(sorted(chosen), listing.ignored, listing.list_requests)


def pending(
    client: Any, bucket: str, layout: RawLayout, stored: Mapping[str, Any] | None
) -> ReadPlan:
    """What the next refresh would read after a stored checkpoint (for sensors and checks,
    which see the checkpoint in the lake asset's metadata rather than in Hudi). A checkpoint
    that cannot be used counts as none: everything is pending, and the refresh itself then
    reports why."""
    try:
        checkpoint = load(stored, layout, client, bucket)
    except CheckpointError:
        checkpoint = Checkpoint(layout.topic)
    return plan(client, bucket, layout, checkpoint)
