"""The raw layout and incremental listing, on the real S3 server: which keys count, few LISTs."""

from __future__ import annotations

from cdc_lake.raw.objects import RawLayout, list_objects
from cdc_lake.stack import LocalStack

LAYOUT = RawLayout("listing-test/", "t.datalake.cdc_events")


def test_layout_parses_only_its_own_topics_keys():
    key = LAYOUT.key(3, 1200)
    assert key == (
        "listing-test/t.datalake.cdc_events/partition=3/"
        "t.datalake.cdc_events+3+00000000000000001200.jsonl"
    )
    assert LAYOUT.parse(key) == (3, 1200)
    folder = "listing-test/t.datalake.cdc_events/partition=0/"
    for stray in [
        folder + "zzz+0+00000000000000000001.jsonl",  # another topic's name
        folder + "t.datalake.cdc_events+1+00000000000000000001.jsonl",  # another partition
        folder + "t.datalake.cdc_events+0+1.jsonl",  # not 20 digits
        folder + "t.datalake.cdc_events+0+00000000000000000001.json",
        folder + "sub/t.datalake.cdc_events+0+00000000000000000001.jsonl",
        "listing-test/t.datalake.cdc_events/partition=x/t.datalake.cdc_events+0+"
        "00000000000000000001.jsonl",
        "listing-test/other.topic/partition=0/other.topic+0+00000000000000000001.jsonl",
    ]:
        assert LAYOUT.parse(stray) is None, stray


def test_listing_resumes_after_a_key_and_reports_strays(local_stack: LocalStack):
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    bucket = local_stack.settings.raw_bucket
    for p in (0, 1):
        for offset in (0, 1000, 2000):
            client.put_object(Bucket=bucket, Key=LAYOUT.key(p, offset), Body=b"{}\n")
    stray = LAYOUT.partition_prefix(0) + "zzz+0+00000000000000000001.jsonl"
    client.put_object(Bucket=bucket, Key=stray, Body=b"{}\n")
    client.put_object(Bucket=bucket, Key=LAYOUT.topic_prefix + "README", Body=b"x")

    first = list_objects(client, bucket, LAYOUT)
    assert [o.key for o in first.objects] == [LAYOUT.key(p, o) for p in (0, 1)
                                              for o in (0, 1000, 2000)]  # fmt: skip
    assert first.partitions == [0, 1]
    assert sorted(first.ignored) == sorted([stray, LAYOUT.topic_prefix + "README"])
    assert first.objects[1].start_offset == 1000 and first.objects[4].partition == 1
    assert all(o.etag for o in first.objects)
    # One delimiter listing finds the partitions, then one LIST per partition.
    assert first.list_requests == 1 + 2

    after = {0: LAYOUT.key(0, 999), 1: LAYOUT.key(1, 2000)}
    again = list_objects(client, bucket, LAYOUT, after)
    assert [o.key for o in again.objects] == [LAYOUT.key(0, 1000), LAYOUT.key(0, 2000)]
    assert again.ignored == [LAYOUT.topic_prefix + "README", stray]
    assert again.list_requests == 3
