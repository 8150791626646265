"""Raw CDC objects on S3: their layout, which keys count, and incremental listing.

Layout
    The S3 sink writes ``<prefix><topic>/partition=<p>/<topic>+<p>+<start offset>.jsonl``, the
    start offset zero-padded to 20 digits, so within one topic partition keys sort in offset
    order. Every line carries its Kafka coordinates (``__kafka_topic``, ``__kafka_partition``,
    ``__kafka_offset``, added by Connect's ``InsertField`` transform); progress is tracked by
    those offsets, not by keys (see ``cdc_lake/lake/checkpoint.py``).

Which keys count
    Only keys of the configured topic, under a numeric ``partition=<p>/`` folder, whose file
    name repeats the same topic and partition, are raw objects. Anything else under the topic's
    prefix (a stray upload, another tool's file) is returned as *ignored*, so callers can report
    it; it is never read, and it can never become progress.

Listing
    Partitions are found with one delimiter listing of ``<prefix><topic>/``. Each partition is
    then listed from a caller-given ``StartAfter`` key, so a listing costs what the new objects
    cost, not what the prefix holds.

Failures
    A missing raw bucket is a ``MissingBucketError`` naming the bucket and the setting, for the
    raw asset and for every listing (the lake refresh, its sensor), not botocore's bare
    ``NoSuchBucket``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

OFFSET_DIGITS = 20
PARTITION_DIR = re.compile(r"partition=(\d+)/$")


class MissingBucketError(RuntimeError):
    pass


def missing_bucket_error(bucket: str, code: str | None) -> MissingBucketError:
    return MissingBucketError(
        f"raw bucket {bucket!r} is missing or not accessible ({code}). Fix: create it "
        "(`cdc-lake stack up` creates the local buckets) or correct the raw_bucket setting."
    )


@dataclass(frozen=True, order=True)
class RawObject:
    key: str
    size: int = field(compare=False)
    partition: int = field(default=-1, compare=False)
    start_offset: int = field(default=-1, compare=False)
    # The ETag S3 returned when listed: it changes when the object is rewritten.
    etag: str = field(default="", compare=False)


@dataclass(frozen=True)
class RawLayout:
    """Where one topic's raw objects live, and how their keys are spelled."""

    prefix: str
    topic: str

    @property
    def topic_prefix(self) -> str:
        return f"{self.prefix}{self.topic}/"

    def partition_prefix(self, partition: int) -> str:
        return f"{self.topic_prefix}partition={partition}/"

    def key(self, partition: int, start_offset: int) -> str:
        return (
            f"{self.partition_prefix(partition)}{self.topic}+{partition}+"
            f"{start_offset:0{OFFSET_DIGITS}d}.jsonl"
        )

    def parse(self, key: str) -> tuple[int, int] | None:
        """``(partition, start offset)`` of a raw object of this topic, or None for any other
        key."""
        if not key.startswith(self.topic_prefix):
            return None
        folder, _, name = key[len(self.topic_prefix) :].partition("/")
        m = PARTITION_DIR.match(folder + "/")
        if not m or "/" in name:
            return None
        partition = int(m.group(1))
        stem = f"{self.topic}+{partition}+"
        digits = name[len(stem) : -len(".jsonl")]
        if (
            not name.startswith(stem)
            or not name.endswith(".jsonl")
            or len(digits) != OFFSET_DIGITS
            or not digits.isdigit()
        ):
            return None
        return partition, int(digits)


@dataclass
class Listing:
    objects: list[RawObject] = field(default_factory=list)  # key order within a partition
    ignored: list[str] = field(default_factory=list)  # keys under the topic that are not raw
    partitions: list[int] = field(default_factory=list)
    list_requests: int = 0


def _pages(client: Any, listing: Listing, **kwargs: Any):
    token = None
    while True:
        args = dict(kwargs)
        if token:
            args["ContinuationToken"] = token
        try:
            page = client.list_objects_v2(**args)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code == "NoSuchBucket":
                raise missing_bucket_error(kwargs["Bucket"], code) from e
            raise
        listing.list_requests += 1
        yield page
        if not page.get("IsTruncated"):
            return
        token = page["NextContinuationToken"]


def list_objects(
    client: Any,
    bucket: str,
    layout: RawLayout,
    start_after: Mapping[int, str | None] | None = None,
) -> Listing:
    """The raw objects of every partition of the topic, each partition listed after its
    ``start_after`` key (from its beginning when absent or None)."""
    start_after = start_after or {}
    out = Listing()
    for page in _pages(client, out, Bucket=bucket, Prefix=layout.topic_prefix, Delimiter="/"):
        out.ignored += [o["Key"] for o in page.get("Contents", [])]
        for sub in page.get("CommonPrefixes", []):
            m = PARTITION_DIR.search(sub["Prefix"])
            if m and sub["Prefix"] == layout.partition_prefix(int(m.group(1))):
                out.partitions.append(int(m.group(1)))
            else:
                out.ignored.append(sub["Prefix"])
    out.partitions.sort()
    for partition in out.partitions:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": layout.partition_prefix(partition)}
        if start_after.get(partition):
            kwargs["StartAfter"] = start_after[partition]
        for page in _pages(client, out, **kwargs):
            for obj in page.get("Contents", []):
                parsed = layout.parse(obj["Key"])
                if parsed is None or parsed[0] != partition:
                    out.ignored.append(obj["Key"])
                    continue
                out.objects.append(
                    RawObject(
                        obj["Key"],
                        int(obj["Size"]),
                        partition=partition,
                        start_offset=parsed[1],
                        etag=str(obj.get("ETag", "")).strip('"'),
                    )
                )
    return out
