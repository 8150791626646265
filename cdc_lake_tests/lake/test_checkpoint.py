"""Progress by Kafka offset, on the real S3 server and the real Hudi bundle: re-cut, rewritten,
deleted and stray raw objects, the upgrade from key checkpoints, and replays."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake import transforms as T
from cdc_lake.lake.checkpoint import (
    Checkpoint,
    CheckpointError,
    PartitionProgress,
    load,
    plan,
)
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.hudi_timeline import completed_commits, latest_checkpoint
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import latest_per_key
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import SCHEMA_KEY
from cdc_lake.source.captured import OUTBOX


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw) -> IngestResult:
    return ingest_new_files(spark, lake.client, lake.source, lake.table(), captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def _shipped(spark: SparkSession, lake: SyntheticLake) -> dict[int, int | None]:
    """order_id -> shipped_date in days since the epoch, as the events carry it."""
    rows = read_table(spark, lake.table().base_path).select("order_id", "shipped_date").collect()
    epoch = dt.date(1970, 1, 1)
    return {r["order_id"]: (r["shipped_date"] - epoch).days if r["shipped_date"] else None
            for r in rows}  # fmt: skip


def test_checkpoint_json_round_trip_and_never_moves_back():
    cp = Checkpoint("t", {0: PartitionProgress(10, 8, "e1")})
    assert Checkpoint.from_json(json.loads(json.dumps(cp.to_json()))) == cp
    moved = cp.advanced({0: PartitionProgress(5, 4, "old"), 1: PartitionProgress(3, 0, "e2")})
    assert moved.partitions == {0: PartitionProgress(10, 8, "e1"), 1: PartitionProgress(3, 0, "e2")}
    assert cp.rewound(4).partitions == {0: PartitionProgress(3, -1)}
    assert cp.rewound(0).partitions == {} and cp.rewound(0).offset(0) == -1


def test_checkpoint_holds_offsets_and_resumes_per_partition(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1), event(2, 100, 2)], partition=0)
    lake.put([event(3, 100, 3)], partition=1)
    first = _ingest(spark, lake)
    cp = latest_checkpoint(spark, lake.table().base_path)
    assert cp["version"] == 2 and first.checkpoint == cp
    assert {p: v["offset"] for p, v in cp["partitions"].items()} == {"0": 1, "1": 0}
    k1b = lake.put([event(4, 100, 4)], partition=1)
    result = _ingest(spark, lake)
    assert [f.key for f in result.files] == [k1b]  # only the new object was read
    assert result.checkpoint["partitions"]["1"]["offset"] == 1
    assert result.checkpoint["partitions"]["0"] == cp["partitions"]["0"]


def test_a_recut_object_under_the_same_key_is_read_again_past_the_checkpoint(
    spark, lake: SyntheticLake
):
    # The defect: the sink uploads 0..2, dies before committing, redelivers and re-cuts the
    # batch under the same key with more records. By key, 3..4 would never be read.
    first = [event(1, 100, 1, op="c"), event(2, 100, 2, op="c"), event(1, 200, 3, shipped_date=1)]
    key = lake.put(first, start=0)
    _ingest(spark, lake)
    recut = [*first, event(2, 300, 4, shipped_date=2), event(1, 400, 5, deleted=True, op="d")]
    assert lake.put(recut, start=0) == key
    result = _ingest(spark, lake)
    assert [f.key for f in result.files] == [key]
    assert result.lines_skipped == 3 and result.events_read == 2
    assert _shipped(spark, lake) == {2: 2}  # order 1 deleted, order 2 updated
    # Unchanged since: nothing to read, nothing committed.
    commits = len(list(completed_commits(spark, lake.table().base_path)))
    idle = _ingest(spark, lake)
    assert idle.files == [] and idle.committed is None
    assert len(list(completed_commits(spark, lake.table().base_path))) == commits


def test_one_pass_counts_skipped_lines_gaps_and_events(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c")], partition=0)  # offsets 0, 1
    k1 = lake.put([event(3, 100, 3, op="c")], partition=1)  # offset 0
    first = _ingest(spark, lake)
    assert (first.lines_skipped, first.offset_gaps, first.events_read) == (0, 0, 3)
    # Partition 0 resumes at 5 (2..4 missing) and goes on at 7 (6 missing); partition 1's
    # object is rewritten with its line twice: read again, nothing past its checkpoint.
    lake.put([event(1, 200, 4)], partition=0, start=5)
    lake.put([event(2, 200, 5), "not json"], partition=0, start=7)
    body = lake.client.get_object(Bucket=lake.raw_bucket, Key=k1)["Body"].read()
    lake.client.put_object(Bucket=lake.raw_bucket, Key=k1, Body=body + body)
    result = _ingest(spark, lake, quarantine_path=lake.quarantine_path)
    assert (result.lines_skipped, result.offset_gaps) == (2, 4)
    assert (result.events_read, result.quarantined) == (2, 1)
    assert result.checkpoint["partitions"]["0"]["offset"] == 8
    assert result.checkpoint["partitions"]["1"] == first.checkpoint["partitions"]["1"]


def test_gaps_count_a_redelivered_offset_once_across_bitmap_buckets(spark, lake: SyntheticLake):
    # The count is kept per bucket of 32,768 offsets (1-32,768, 32,769-65,536, ...), as a bitmap
    # of positions in the bucket: offsets 2 and 32,770 share a position, in two buckets. The
    # third object delivers 32,767 again; 0, 1, 3-32,765 and 32,769 never come (the table is
    # new: the checkpoint is -1).
    lake.put([event(5, 100, 5, op="c")], partition=0, start=2)
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c")], partition=0, start=32_766)
    lake.put([event(2, 100, 2, op="c"), event(3, 100, 3, op="c")], partition=0, start=32_767)
    lake.put([event(4, 100, 4, op="c")], partition=0, start=32_770)
    result = _ingest(spark, lake)
    assert result.offset_gaps == 2 + 32_763 + 1
    assert result.events_read == 6 and result.events_upserted == 5
    assert result.checkpoint["partitions"]["0"]["offset"] == 32_770


def test_rewritten_duplicated_and_deleted_objects_change_nothing(spark, lake: SyntheticLake):
    k0 = lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c")])
    k1 = lake.put([event(3, 100, 3, op="c")])
    _ingest(spark, lake)
    before = _shipped(spark, lake)
    # Rewritten with its lines twice (same offsets), the other deleted, a stale copy of old
    # offsets under a new key: all at or below the checkpoint.
    body = lake.client.get_object(Bucket=lake.raw_bucket, Key=k1)["Body"].read()
    lake.client.put_object(Bucket=lake.raw_bucket, Key=k1, Body=body + body)
    lake.client.delete_object(Bucket=lake.raw_bucket, Key=k0)
    again = _ingest(spark, lake)
    assert again.lines_skipped == 2 and again.committed is None
    assert _shipped(spark, lake) == before
    new = lake.put([event(3, 200, 4, shipped_date=7)])
    result = _ingest(spark, lake)
    assert new in [f.key for f in result.files] and result.events_read == 1
    assert _shipped(spark, lake)[3] == 7


def test_a_stray_key_is_reported_and_never_becomes_progress(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1, op="c")])
    stray = lake.source.layout.partition_prefix(0) + "zzz+0+00000000000000000001.jsonl"
    lake.client.put_object(
        Bucket=lake.raw_bucket, Key=stray, Body=json.dumps(event(99, 999, 999)).encode() + b"\n"
    )
    first = _ingest(spark, lake)
    assert first.ignored_keys == [stray] and set(_shipped(spark, lake)) == {1}
    lake.put([event(2, 200, 2, op="c")])
    second = _ingest(spark, lake)
    assert second.ignored_keys == [stray] and set(_shipped(spark, lake)) == {1, 2}


def test_lines_disagreeing_with_their_object_are_bad_input(spark, lake: SyntheticLake):
    key = lake.put([{**event(1, 100, 1), "__kafka_topic": "other", "__kafka_partition": 0},
                    {**event(2, 100, 2), "__kafka_partition": 5}], kafka_fields=False)  # fmt: skip
    with pytest.raises(ValueError) as err:
        _ingest(spark, lake)
    msg = str(err.value)
    assert f"{key} line 1: __kafka_topic 'other' is not the configured topic" in msg
    assert f"{key} line 2: __kafka_partition 5 is not its object's partition 0" in msg


def _write_legacy_commit(spark: SparkSession, lake: SyntheticLake, key: str, text: str) -> None:
    """What the previous release committed: rows plus a checkpoint of the last key."""
    lines = T.lines_from_text(spark, [(key, text)])
    good, _ = T.split_valid(T.parse_raw_lines(lines, OUTBOX_SCHEMA))
    rows = latest_per_key(T.to_lake_rows(good, OUTBOX_SCHEMA, OUTBOX), "order_id")
    rows = rows.withColumn("_hoodie_is_deleted", F.lit(False))
    legacy = {lake.source.layout.partition_prefix(0): key}
    options = lake.table().write_options(legacy, schema=OUTBOX_SCHEMA)
    del options[SCHEMA_KEY]  # that release recorded no schema with its checkpoint
    rows.write.format("hudi").options(**options).mode("append").save(lake.table().base_path)


def test_a_key_checkpoint_upgrades_without_a_rebuild(spark, lake: SyntheticLake):
    old = [event(1, 100, 1, op="c"), event(2, 100, 2, op="c"), event(3, 100, 3, op="c")]
    key = lake.put(old, kafka_fields=False)  # written before the sink added offsets
    text = lake.client.get_object(Bucket=lake.raw_bucket, Key=key)["Body"].read().decode()
    _write_legacy_commit(spark, lake, key, text)
    upgraded = load(
        latest_checkpoint(spark, lake.table().base_path), lake.source.layout, lake.client,
        lake.raw_bucket,
    )  # fmt: skip
    assert upgraded.offset(0) == 2 and upgraded.partitions[0].start == 0
    new = lake.put([event(2, 200, 4, shipped_date=9)])
    result = _ingest(spark, lake)
    assert [f.key for f in result.files] == [new] and result.events_read == 1
    assert result.checkpoint["version"] == 2 and result.checkpoint["partitions"]["0"]["offset"] == 3
    assert _shipped(spark, lake)[2] == 9


def test_a_key_checkpoint_whose_object_is_gone_names_the_fix(spark, lake: SyntheticLake):
    key = lake.put([event(1, 100, 1, op="c")], kafka_fields=False)
    text = lake.client.get_object(Bucket=lake.raw_bucket, Key=key)["Body"].read().decode()
    _write_legacy_commit(spark, lake, key, text)
    lake.client.delete_object(Bucket=lake.raw_bucket, Key=key)
    with pytest.raises(CheckpointError) as err:
        _ingest(spark, lake)
    assert key in str(err.value) and "cdc-lake lake replay --from-offset 0" in str(err.value)


def test_replay_from_an_offset_repairs_a_broken_table(spark, lake: SyntheticLake):
    lake.put([event(i, 100, i, op="c", shipped_date=i) for i in range(1, 6)])
    lake.put([event(2, 200, 10, shipped_date=50), event(3, 200, 11, deleted=True, op="d")])
    _ingest(spark, lake)
    good = _shipped(spark, lake)
    assert set(good) == {1, 2, 4, 5}
    # Break it behind the checkpoint's back: order 4 removed, order 2 set back to its first
    # version (deleted, then written again with its old content and ordering).
    table = lake.table()
    options = table.write_options(schema=OUTBOX_SCHEMA)
    snapshot = read_table(spark, table.base_path)
    broken = snapshot.where("order_id in (2, 4)").drop(
        *[c for c in snapshot.columns if c.startswith("_hoodie")]
    )
    broken.write.format("hudi").options(
        **{**options, "hoodie.datasource.write.operation": "delete"}
    ).mode("append").save(table.base_path)
    stale = (
        broken.where("order_id = 2")
        .withColumn("shipped_date", F.date_from_unix_date(F.lit(2)))
        .withColumn("cdc_ordering", F.lit(f"{100:015d}{2:020d}"))
        .withColumn("_hoodie_is_deleted", F.lit(False))
    )
    stale.write.format("hudi").options(**options).mode("append").save(table.base_path)
    assert _shipped(spark, lake) != good
    assert _ingest(spark, lake).files == []  # the checkpoint says nothing is new
    repaired = _ingest(spark, lake, replay_from=0)
    assert repaired.events_read == 7 and repaired.committed is not None
    assert _shipped(spark, lake) == good
    assert repaired.checkpoint["partitions"]["0"]["offset"] == 6


def test_plan_skips_objects_wholly_behind_the_checkpoint(lake: SyntheticLake):
    keys = [lake.put([event(i, 100, i)] * 3) for i in range(4)]  # offsets 0-2, 3-5, 6-8, 9-11
    objs = {o: plan(lake.client, lake.raw_bucket, lake.source.layout,
                    Checkpoint(lake.source.topic, {0: PartitionProgress(o, -1)})).objects
            for o in (-1, 2, 4, 11)}  # fmt: skip
    assert [o.key for o in objs[-1]] == keys
    assert [o.key for o in objs[2]] == keys[1:]
    assert [o.key for o in objs[4]] == keys[1:]
    assert [o.key for o in objs[11]] == keys[3:]  # the last one: its ETag is unknown
