"""Reconcile (``cdc_lake/lake/reconcile.py``) on the real S3 server and the real Hudi bundle: the
live rows whose key the source's snapshot lacks are deleted, in the batch's commit or one of
their own; a row changed after the snapshot began is kept; a second run deletes nothing."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.reconcile import SourceKeys
from cdc_lake.source.captured import OUTBOX


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw: Any) -> IngestResult:
    return ingest_new_files(spark, lake.client, lake.source, lake.table(), captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def _live(spark: SparkSession, lake: SyntheticLake) -> set[int]:
    rows = read_table(spark, lake.table().base_path).where("NOT is_deleted").collect()
    return {r["order_id"] for r in rows}


def _keys(lake: SyntheticLake, keys: list[int], ts_ms: int) -> SourceKeys:
    """The source's keys as ``write_source_keys`` writes them: hex of each key's text."""
    key = f"synthetic/{lake.name}/reconcile.keys"
    body = "".join(str(k).encode().hex() + "\n" for k in keys)
    lake.client.put_object(Bucket=lake.lake_bucket, Key=key, Body=body.encode())
    return SourceKeys(f"s3a://{lake.lake_bucket}/{key}", ts_ms)


def test_rows_the_source_lacks_are_deleted_and_nothing_else(
    spark: SparkSession, lake: SyntheticLake
):
    lake.put([event(i, 100, i, op="c") for i in range(1, 6)])
    _ingest(spark, lake)
    # The source, read at 200, holds 1, 2 and 4. Order 5 changed at 250, after that read (it is
    # not in the key set, but it was read too early to know); 6 is new in this batch.
    keys = _keys(lake, [1, 2, 4], 200)
    lake.put([event(5, 250, 10), event(6, 300, 11, op="c")])
    result = _ingest(spark, lake, reconcile=keys)
    assert result.reconciled_rows == 1  # order 3
    assert _live(spark, lake) == {1, 2, 4, 5, 6}

    # Nothing new: the leftovers alone, in a commit of their own, checkpoint unchanged.
    keys = _keys(lake, [1, 2, 6], 400)
    before = result.checkpoint
    alone = _ingest(spark, lake, reconcile=keys)
    assert alone.reconciled_rows == 2 and alone.committed is not None  # orders 4 and 5
    assert alone.checkpoint == before
    assert _live(spark, lake) == {1, 2, 6}

    # Again: nothing to delete, nothing committed.
    commits = len(list(completed_commits(spark, lake.table().base_path)))
    again = _ingest(spark, lake, reconcile=keys)
    assert again.reconciled_rows == 0 and again.committed is None
    assert len(list(completed_commits(spark, lake.table().base_path))) == commits
