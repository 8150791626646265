"""A completed snapshot is authoritative, on the real S3 server and the real Hudi bundle: orders
that a snapshot taken again no longer holds leave the lake, and nothing else does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.snapshots import completed_snapshot_ts
from cdc_lake.lake.transforms import lines_from_text, parse_raw_lines, split_valid
from cdc_lake.source.captured import OUTBOX


def read(order_id: int, ts: int, lsn: int, marker: str, **kw: Any) -> dict[str, Any]:
    """A snapshot read, as Debezium marks it (every read of one snapshot has the same ts)."""
    return {**event(order_id, ts, lsn, op="r", **kw), "__source_snapshot": marker}


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw: Any) -> IngestResult:
    table = lake.table(**{k: kw.pop(k) for k in ("delete_mode",) if k in kw})
    return ingest_new_files(spark, lake.client, lake.source, table, captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def _live(spark: SparkSession, lake: SyntheticLake, **table: Any) -> dict[int, int | None]:
    """order_id -> shipped_date (days) of the live rows."""
    rows = read_table(spark, lake.table(**table).base_path).where("NOT is_deleted").collect()
    return {r["order_id"]: r["shipped_date"].toordinal() if r["shipped_date"] else None
            for r in rows}  # fmt: skip


def test_only_the_last_read_of_a_table_snapshot_completes_it(spark):
    lines = [
        read(1, 100, 5, "first"),
        read(2, 100, 5, "incremental"),  # an ad-hoc snapshot never completes a table
        {**event(3, 300, 9), "__source_snapshot": "false"},
    ]
    texts = "\n".join(json.dumps(x) for x in lines)
    good, _ = split_valid(parse_raw_lines(lines_from_text(spark, [("k", texts)]), OUTBOX_SCHEMA))
    assert completed_snapshot_ts(good) is None
    ended = texts + "\n" + json.dumps(read(4, 200, 7, "last"))
    good, _ = split_valid(parse_raw_lines(lines_from_text(spark, [("k", ended)]), OUTBOX_SCHEMA))
    assert completed_snapshot_ts(good) == 200


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_orders_absent_from_a_snapshot_taken_again_are_deleted(
    spark, lake: SyntheticLake, delete_mode: str
):
    # The first snapshot (ts 100) is cut short after orders 1-4; the lake ingests it.
    lake.put([read(n, 100, 5, "first" if n == 1 else "true") for n in (1, 2, 3, 4)])
    first = _ingest(spark, lake, delete_mode=delete_mode)
    assert first.absent_from_snapshot == 0 and first.snapshot_ts_ms is None
    # Order 4 is deleted, the connector restarts and snapshots again at ts 200 (no delete event
    # for 4 reaches Kafka). A stray older change of order 5 sits in the same batch; order 3 is
    # changed after the snapshot began, so its newer change wins over its read.
    lake.put(
        [
            {**event(5, 150, 6, op="c"), "__source_snapshot": "false"},
            read(1, 200, 8, "first", shipped_date=11),
            read(2, 200, 8, "true", shipped_date=12),
            read(3, 200, 8, "last", shipped_date=13),
            event(3, 250, 9, shipped_date=14),
        ]
    )
    second = _ingest(spark, lake, delete_mode=delete_mode)
    assert second.snapshot_ts_ms == 200 and second.absent_from_snapshot == 2  # orders 4 and 5
    epoch = 719163  # date(1970, 1, 1).toordinal()
    expected = {1: epoch + 11, 2: epoch + 12, 3: epoch + 14}
    assert _live(spark, lake, delete_mode=delete_mode) == expected

    # A replay of everything changes nothing. Hard deletes left no row to order against, so the
    # replayed reads of 4 and 5 are deleted again; soft-deleted rows already outrank them.
    replay = _ingest(spark, lake, delete_mode=delete_mode, replay_from=0)
    assert replay.snapshot_ts_ms == 200
    assert replay.absent_from_snapshot == (2 if delete_mode == "hard" else 0)
    assert _live(spark, lake, delete_mode=delete_mode) == expected

    # The delete sits just below the snapshot: a read of order 4 by the same snapshot that comes
    # late (another partition) wins over it; an older change does not revive order 2's row.
    lake.put([read(4, 200, 8, "true", shipped_date=15), event(2, 120, 7, shipped_date=16)],
             partition=1)  # fmt: skip
    _ingest(spark, lake, delete_mode=delete_mode)
    assert _live(spark, lake, delete_mode=delete_mode) == {**expected, 4: epoch + 15}


def test_a_complete_snapshot_into_an_empty_lake_deletes_nothing(spark, lake: SyntheticLake):
    lake.put([read(1, 100, 5, "first"), read(2, 100, 5, "last"), event(1, 130, 6, deleted=True)])
    result = _ingest(spark, lake)
    assert result.snapshot_ts_ms == 100 and result.absent_from_snapshot == 0
    assert set(_live(spark, lake)) == {2}
