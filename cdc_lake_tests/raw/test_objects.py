"""Incremental listing of raw objects on the real S3 server: new objects only, few LISTs."""

from __future__ import annotations

from cdc_lake.raw.objects import ListingStats, list_new_objects
from cdc_lake.stack import LocalStack


def _key(prefix: str, partition: int, offset: int) -> str:
    topic = "t.datalake.cdc_events"
    return f"{prefix}{topic}/partition={partition}/{topic}+{partition}+{offset:020d}.jsonl"


def test_listing_resumes_after_the_cursor(local_stack: LocalStack):
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    bucket, prefix = local_stack.settings.raw_bucket, "listing-test/"
    for p in (0, 1):
        for offset in (0, 1000, 2000):
            client.put_object(Bucket=bucket, Key=_key(prefix, p, offset), Body=b"{}\n")
    stats = ListingStats()
    first, cursor = list_new_objects(client, bucket, prefix, {}, stats)
    assert len(first) == 6
    assert cursor == {
        f"{prefix}t.datalake.cdc_events/partition=0/": _key(prefix, 0, 2000),
        f"{prefix}t.datalake.cdc_events/partition=1/": _key(prefix, 1, 2000),
    }
    # Two delimiter listings find the partitions, then one LIST per partition.
    assert stats.list_requests == 2 + 2

    again, same = list_new_objects(client, bucket, prefix, cursor)
    assert again == [] and same == cursor

    client.put_object(Bucket=bucket, Key=_key(prefix, 1, 3000), Body=b"{}\n")
    new, advanced = list_new_objects(client, bucket, prefix, cursor)
    assert [o.key for o in new] == [_key(prefix, 1, 3000)]
    assert new[0].start_offset == 3000
    assert advanced[f"{prefix}t.datalake.cdc_events/partition=1/"] == _key(prefix, 1, 3000)
