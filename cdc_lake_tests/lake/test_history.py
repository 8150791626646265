"""The history table (``cdc_lake/lake/history.py``, the ``history`` app) on the real S3 server
and the real Hudi bundle, built from the lake table the upsert writes: a change closes the
version it replaces at its own source time, changes one refresh applied collapse as in the lake,
a hard delete and a truncate close the last version, a replay and a build with nothing new
change nothing, a lost change set falls back to a full build that keeps what was closed, and the
current versions always equal the lake's live rows (digests and rows). With soft deletes, a
delete closes the version and a row inserted again opens a new one, over several lake commits
in one build, and a full build closes a soft-deleted row's version at its delete's time."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.change_sets import CHANGE_SETS_DIR
from cdc_lake.lake.digest import spark_digest
from cdc_lake.lake.history import open_versions
from cdc_lake.lake.hudi_timeline import delete_path, latest_commit
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import SourceColumn
from cdc_lake.lake.table_schema import table_schema
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.history import run_history
from cdc_lake.spark_apps.params import HistoryParams, HistoryReport
from cdc_lake_tests.lake.test_truncates import truncate


def _ingest(spark: SparkSession, lake: SyntheticLake, delete_mode: str = "hard", **kw: Any) -> None:
    table = lake.table(delete_mode=delete_mode)
    ingest_new_files(spark, lake.client, lake.source, table, captured=OUTBOX,
                     declared=OUTBOX_COLUMNS, **kw)  # fmt: skip


def _channels(spark: SparkSession, lake: SyntheticLake) -> dict[tuple[int, int], Any]:
    """(order_id, valid_from ms) -> the added column's value (absent: the history lacks it)."""
    rows = read_table(spark, f"{lake.table().base_path}_history")
    if "channel" not in rows.columns:
        return {}
    return {(r["order_id"], r["f"]): r["channel"] for r in rows.select(
        "order_id", F.unix_millis("valid_from").alias("f"), "channel").collect()}  # fmt: skip


def _build(spark: SparkSession, lake: SyntheticLake, **kw: Any) -> dict[str, Any]:
    table = lake.table()
    history = replace(table, base_path=f"{table.base_path}_history",
                      table_name="cdc_events_history", change_sets=False)  # fmt: skip
    report = run_history(spark, HistoryParams(table.base_path, history, OUTBOX, **kw))
    return {k: v["raw_value"] for k, v in report.metadata.items()}


def _versions(spark: SparkSession, lake: SyntheticLake) -> dict[tuple[int, int], tuple]:
    """(order_id, valid_from ms) -> (customer_id, cdc_op, valid_to ms or None)."""
    rows = read_table(spark, f"{lake.table().base_path}_history").select(
        "order_id", "customer_id", "cdc_op",
        F.unix_millis("valid_from").alias("f"), F.unix_millis("valid_to").alias("t"),
    ).collect()  # fmt: skip
    out = {(r["order_id"], r["f"]): (r["customer_id"], r["cdc_op"], r["t"]) for r in rows}
    assert len(out) == len(rows), "two versions share a key and a start"
    return out


def _matches_lake(spark: SparkSession, lake: SyntheticLake, report: dict[str, Any]) -> None:
    """The current versions are the lake's live rows: the reported digest, and the rows."""
    base = lake.table().base_path
    schema = table_schema(spark, base, captured=OUTBOX)
    assert schema is not None
    live = live_rows(read_table(spark, base))
    want = spark_digest(live, schema=schema)
    assert report[HistoryReport.OPEN_DIGEST]["digest"] == want["digest"]
    assert report[HistoryReport.LAKE_COMMIT] == latest_commit(spark, base).instant  # type: ignore[union-attr]
    current = open_versions(read_table(spark, f"{base}_history"), schema)
    columns = [c.name for c in schema.columns] + ["cdc_ordering"]
    assert current.select(*columns).exceptAll(live.select(*columns)).count() == 0
    assert live.select(*columns).exceptAll(current.select(*columns)).count() == 0


def test_versions_open_close_and_survive_a_lost_change_set(
    spark: SparkSession, lake: SyntheticLake
):
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c"), event(3, 100, 3, op="c")])
    _ingest(spark, lake)
    first = _build(spark, lake)
    assert first["build"] == "full" and first["full_build_reason"] == "no history built yet"
    assert _versions(spark, lake) == {(o, 100): ("ALFKI", "c", None) for o in (1, 2, 3)}
    _matches_lake(spark, lake, first)

    # Two updates of 1 in one refresh collapse to the newer (as in the lake); 2 is deleted.
    lake.put([event(1, 200, 4, customer_id="BONAP"), event(1, 300, 5, customer_id="CHOPS"),
              event(2, 250, 6, op="d", deleted=True)])  # fmt: skip
    _ingest(spark, lake)
    second = _build(spark, lake)
    assert second["build"] == "incremental", second
    assert _versions(spark, lake) == {
        (1, 100): ("ALFKI", "c", 300),
        (1, 300): ("CHOPS", "u", None),
        (2, 100): ("ALFKI", "c", 250),  # a hard delete closes at its own time
        (3, 100): ("ALFKI", "c", None),
    }
    _matches_lake(spark, lake, second)
    # Nothing new in the lake: no build, no commit.
    again = _build(spark, lake)
    assert again["build"] == "none" and again["history_commit_instant"] == "none"

    # A truncate closes every open version at its time; a row inserted after it opens one.
    lake.put([truncate(400, 7), event(4, 500, 8, op="c", customer_id="DUMON")])
    _ingest(spark, lake)
    third = _build(spark, lake)
    versions = _versions(spark, lake)
    assert versions[(1, 300)][2] == 400 and versions[(3, 100)][2] == 400
    assert versions[(4, 500)] == ("DUMON", "c", None)
    _matches_lake(spark, lake, third)

    # A replay of every raw file: the lake commits rows equal to its own; no version changes.
    before = _versions(spark, lake)
    _ingest(spark, lake, replay_from=0)
    replayed = _build(spark, lake)
    assert _versions(spark, lake) == before
    _matches_lake(spark, lake, replayed)

    # The point in time query of the README: the table as it was at 260 ms.
    at = dt.datetime.fromtimestamp(0.26, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    history = read_table(spark, f"{lake.table().base_path}_history")
    as_of = history.where(
        f"valid_from <= timestamp'{at}' AND (valid_to IS NULL OR valid_to > timestamp'{at}')"
    )
    assert sorted((r["order_id"], r["customer_id"]) for r in as_of.collect()) == [
        (1, "ALFKI"), (3, "ALFKI")
    ]  # fmt: skip

    # A lake commit whose change set is lost: a full build against the open versions, which
    # keeps every version closed before and closes 4 at the time the lake's row of it starts.
    lake.put([event(4, 600, 9, customer_id="ERNSH"), event(5, 600, 10, op="c")])
    _ingest(spark, lake)
    commit = latest_commit(spark, lake.table().base_path)
    assert commit is not None
    delete_path(spark, f"{lake.table().base_path}/{CHANGE_SETS_DIR}/{commit.instant}")
    fallback = _build(spark, lake)
    assert fallback["build"] == "full", fallback
    assert "no change set" in fallback["full_build_reason"]
    versions = _versions(spark, lake)
    assert {k: v for k, v in versions.items() if k in before} == {
        **before, (4, 500): ("DUMON", "c", 600)
    }
    assert versions[(4, 600)] == ("ERNSH", "u", None) and versions[(5, 600)][2] is None
    _matches_lake(spark, lake, fallback)
    # Rescanning the digest from the table agrees with the one carried from build to build.
    lake.put([event(5, 700, 11, customer_id="FOLKO")])
    _ingest(spark, lake)
    rescanned = _build(spark, lake, full_scan=True)
    assert rescanned["digest_rescanned"] and rescanned["incremental_matched_rescan"]
    _matches_lake(spark, lake, rescanned)

    # A column added without a default: the lake writes one stored row again as it was, which
    # changes no version. The history's digest is taken over the new columns all the same.
    memo = [*OUTBOX_COLUMNS, SourceColumn("memo", "text", True, 40)]
    _ingest(spark, lake, source_columns=memo)
    untaken = _build(spark, lake)
    assert untaken["build"] == "none" and untaken["digest_rescanned"], untaken
    _matches_lake(spark, lake, untaken)
    # With a default: the lake gives it to every live row, keeping their ordering, and the
    # history to their current versions, in place; a closed version keeps none.
    channel = [*memo, SourceColumn("channel", "text", True, 41, "retail")]
    _ingest(spark, lake, source_columns=channel)
    added = _build(spark, lake)
    assert added["build"] == "incremental" and added["versions_added"] == 0, added
    channels = _channels(spark, lake)
    current = {k for k, v in _versions(spark, lake).items() if v[2] is None}
    assert current and {k for k, v in channels.items() if v == "retail"} == current
    assert all(v is None for k, v in channels.items() if k not in current)
    _matches_lake(spark, lake, added)


def test_soft_deletes_several_commits_in_one_build_and_a_rescan(
    spark: SparkSession, lake: SyntheticLake
):
    soft = "soft"
    # A lake table with no live row (a delete of an order it never held): no version, and the
    # digest of none, which is the lake's.
    lake.put([event(9, 50, 1, op="d", deleted=True)])
    _ingest(spark, lake, soft)
    empty = _build(spark, lake)
    assert empty["build"] == "none" and empty[HistoryReport.OPEN_DIGEST]["rows"] == 0, empty
    base = lake.table().base_path
    schema = table_schema(spark, base, captured=OUTBOX)
    assert schema is not None
    lake_digest = spark_digest(live_rows(read_table(spark, base)), schema=schema)
    assert empty[HistoryReport.OPEN_DIGEST] == {**lake_digest, "rows": 0}

    lake.put([event(1, 100, 2, op="c"), event(2, 100, 3, op="c")])
    _ingest(spark, lake, soft)
    assert _build(spark, lake)["build"] == "full"
    # Two lake commits, one build: 1 deleted (its flagged row stays in the lake) and inserted
    # again, 2 updated.
    lake.put([event(1, 200, 4, op="d", deleted=True), event(2, 150, 5, customer_id="BONAP")])
    _ingest(spark, lake, soft)
    lake.put([event(1, 300, 6, op="c", customer_id="CHOPS")])
    _ingest(spark, lake, soft)
    both = _build(spark, lake)
    assert both["build"] == "incremental", both
    assert _versions(spark, lake) == {
        (1, 100): ("ALFKI", "c", 200),
        (1, 300): ("CHOPS", "c", None),
        (2, 100): ("ALFKI", "c", 150),
        (2, 150): ("BONAP", "u", None),
    }
    _matches_lake(spark, lake, both)

    # A full build (the commit's change set lost) closes 2 at its soft delete's own time.
    lake.put([event(2, 400, 7, op="d", deleted=True)])
    _ingest(spark, lake, soft)
    commit = latest_commit(spark, lake.table().base_path)
    assert commit is not None
    delete_path(spark, f"{lake.table().base_path}/{CHANGE_SETS_DIR}/{commit.instant}")
    full = _build(spark, lake)
    assert full["build"] == "full" and full["incremental_matched_rescan"], full
    assert _versions(spark, lake)[(2, 150)] == ("BONAP", "u", 400)
    _matches_lake(spark, lake, full)
    # A rescan on request with the lake unchanged: read back from the table, and it agrees.
    rescan = _build(spark, lake, full_scan=True)
    assert rescan["build"] == "none" and rescan["digest_rescanned"], rescan
    assert rescan["incremental_matched_rescan"]
    _matches_lake(spark, lake, rescan)
