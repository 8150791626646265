"""Raw CDC objects on S3 and how to list only the new ones.

The S3 sink writes ``<prefix><topic>/partition=<p>/<topic>+<p>+<start offset, 20 digits>.jsonl``.
Within one topic partition keys sort in offset order, so a reader that remembers the last key
it saw per partition can ask S3 for the keys after it (``StartAfter``). Its cost then grows with
the new objects, not with everything already under the prefix. Finding the partitions costs
two delimiter listings, whatever the number of objects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

KEY_PATTERN = re.compile(r"(?P<topic>[^/]+)\+(?P<partition>\d+)\+(?P<offset>\d{20})\.jsonl$")


@dataclass(frozen=True, order=True)
class RawObject:
    key: str
    size: int = field(compare=False)

    @property
    def partition_prefix(self) -> str:
        return self.key.rsplit("/", 1)[0] + "/"

    @property
    def start_offset(self) -> int:
        m = KEY_PATTERN.search(self.key)
        if not m:
            raise ValueError(f"not a raw CDC object key: {self.key}")
        return int(m.group("offset"))


@dataclass
class ListingStats:
    list_requests: int = 0


def _list(client: Any, stats: ListingStats, **kwargs: Any):
    token = None
    while True:
        args = dict(kwargs)
        if token:
            args["ContinuationToken"] = token
        page = client.list_objects_v2(**args)
        stats.list_requests += 1
        yield page
        if not page.get("IsTruncated"):
            return
        token = page["NextContinuationToken"]


def partition_prefixes(client: Any, bucket: str, prefix: str, stats: ListingStats) -> list[str]:
    """``<prefix><topic>/partition=<p>/`` for every topic partition that has objects."""
    out = []
    for page in _list(client, stats, Bucket=bucket, Prefix=prefix, Delimiter="/"):
        for topic in page.get("CommonPrefixes", []):
            for sub in _list(client, stats, Bucket=bucket, Prefix=topic["Prefix"], Delimiter="/"):
                out += [p["Prefix"] for p in sub.get("CommonPrefixes", [])]
    return sorted(out)


def list_new_objects(
    client: Any,
    bucket: str,
    prefix: str,
    cursor: dict[str, str],
    stats: ListingStats | None = None,
) -> tuple[list[RawObject], dict[str, str]]:
    """Objects after the cursor's last key in each partition; returns them (in key order per
    partition) and the advanced cursor. An empty cursor lists everything."""
    stats = stats or ListingStats()
    new_cursor = dict(cursor)
    found: list[RawObject] = []
    for part in partition_prefixes(client, bucket, prefix, stats):
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": part}
        if part in cursor:
            kwargs["StartAfter"] = cursor[part]
        for page in _list(client, stats, **kwargs):
            for obj in page.get("Contents", []):
                if KEY_PATTERN.search(obj["Key"]):
                    found.append(RawObject(obj["Key"], int(obj["Size"])))
        mine = [o for o in found if o.key.startswith(part)]
        if mine:
            new_cursor[part] = max(o.key for o in mine)
    return found, new_cursor
