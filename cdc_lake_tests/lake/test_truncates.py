"""TRUNCATE in the merge rule (``cdc_lake/lake/ordering.py``), on the real S3 server and the real
Hudi bundle, with raw files as the sink writes Debezium's truncate marker: every row older than
the truncate leaves the lake, a change after it survives (in the same batch, or in another
partition), a change older than it that arrives later stays out, and a replay changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import ordering_text
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.transforms import lines_from_text, parse_raw_lines, split_valid
from cdc_lake.source.captured import OUTBOX


def truncate(ts: int, lsn: int) -> dict[str, Any]:
    """Debezium's truncate of the outbox, as ``TruncateMarker`` and the sink write it."""
    return {"__op": "t", "__lsn": lsn, "__source_ts_ms": ts, "__db": "cdc_lake",
            "__schema": "datalake", "__table": "cdc_events"}  # fmt: skip


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw: Any) -> IngestResult:
    table = lake.table(**{k: kw.pop(k) for k in ("delete_mode",) if k in kw})
    return ingest_new_files(spark, lake.client, lake.source, table, captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def _live(spark: SparkSession, lake: SyntheticLake, **table: Any) -> dict[int, str]:
    rows = read_table(spark, lake.table(**table).base_path).where("NOT is_deleted").collect()
    return {r["order_id"]: r["customer_id"] for r in rows}


def test_a_truncate_marker_is_a_good_line_without_a_key(spark: SparkSession):
    import json

    text = json.dumps(truncate(100, 7)) + "\n" + json.dumps({**truncate(100, 8), "__lsn": None})
    good, bad = split_valid(parse_raw_lines(lines_from_text(spark, [("k", text)]), OUTBOX_SCHEMA))
    assert [r["__op"] for r in good.collect()] == ["t"]
    # Like any change that is not a snapshot read, it needs its LSN: its place in the order.
    assert [r["error"] for r in bad.collect()] == ["missing or null: __lsn"]


# Soft deletes take the same sweep (``ordering.swept``), which the snapshot tests run soft too
# (``test_snapshots.py``); here the hard default only, for CI time.
@pytest.mark.parametrize("delete_mode", ["hard"])
def test_a_truncate_deletes_what_is_older_and_keeps_what_is_newer(
    spark: SparkSession, lake: SyntheticLake, delete_mode: str
):
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c"), event(3, 100, 3, op="c")])
    _ingest(spark, lake, delete_mode=delete_mode)

    # Inside one batch: before the truncate (4, and 7 in the other partition) and after it (2
    # again, 5, and 6 in the other partition).
    lake.put([event(4, 110, 4, op="c"), truncate(120, 10), event(5, 130, 11, op="c"),
              event(2, 125, 12, op="c", customer_id="AFTER")], partition=0)  # fmt: skip
    lake.put([event(7, 119, 9, op="c"), event(6, 121, 11, op="c")], partition=1)
    result = _ingest(spark, lake, delete_mode=delete_mode)
    assert result.truncated_rows == 4  # 1, 3 stored; 4, 7 in the batch; 2 has a newer change
    assert result.checkpoint["truncated"] == ordering_text(120, 10)
    assert _live(spark, lake, delete_mode=delete_mode) == {2: "AFTER", 5: "ALFKI", 6: "ALFKI"}
    if delete_mode == "soft":
        flagged = read_table(spark, lake.table(delete_mode="soft").base_path).where("is_deleted")
        assert {r["order_id"] for r in flagged.collect()} == {1, 3, 4, 7}

    # A change older than the truncate read later (its partition lagged) stays out; a newer one
    # goes in.
    lake.put([event(8, 115, 8, op="c"), event(9, 140, 20, op="c")], partition=1)
    late = _ingest(spark, lake, delete_mode=delete_mode)
    assert late.truncated_rows == 0
    assert set(_live(spark, lake, delete_mode=delete_mode)) == {2, 5, 6, 9}

    # Between batches: a batch of the truncate alone, then a change after it.
    lake.put([truncate(150, 30)], partition=1)
    alone = _ingest(spark, lake, delete_mode=delete_mode)
    assert alone.truncated_rows == 4 and _live(spark, lake, delete_mode=delete_mode) == {}
    lake.put([event(10, 160, 31, op="c")], partition=0)
    _ingest(spark, lake, delete_mode=delete_mode)
    assert set(_live(spark, lake, delete_mode=delete_mode)) == {10}

    # A replay of everything changes nothing: the newest truncate stays in the checkpoint.
    commits = len(list(completed_commits(spark, lake.table().base_path)))
    replay = _ingest(spark, lake, delete_mode=delete_mode, replay_from=0)
    assert set(_live(spark, lake, delete_mode=delete_mode)) == {10}
    assert replay.checkpoint["truncated"] == ordering_text(150, 30)
    assert len(list(completed_commits(spark, lake.table().base_path))) == commits + 1
