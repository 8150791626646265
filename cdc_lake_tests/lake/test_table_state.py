"""The table's CDC invariants kept from the commits' change sets (or, on tables created with it,
Hudi's change feed) equal a rescan of the whole table, after a random workload on the real
ingestion (S3 server, Hudi bundle): inserts, updates, partition moves, hard deletes, re-inserts
and changes that arrive after newer ones. Hudi's feed on both table types:
MERGE_ON_READ's feed is exact too (delta commits, compactions), but ``evaluate`` rescans it (the
feed's cost there, see ``cdc_lake/lake/table_state.py``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.change_sets import Span, change_set_path, list_change_sets
from cdc_lake.lake.changes import read_changes
from cdc_lake.lake.digest import compare_digests
from cdc_lake.lake.hudi_timeline import completed_commits, has_change_feed, latest_commit
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.table_state import evaluate, full_state, incremental_state
from cdc_lake.source.captured import OUTBOX

ORDERS = 60


def _random_batch(rng: random.Random, clock: list[int], n: int) -> list[dict]:
    batch = []
    for _ in range(n):
        clock[0] += 1
        order = rng.randrange(ORDERS)
        roll = rng.random()
        # Out of order: an older change, which must lose to whatever the table holds.
        ts = clock[0] - rng.randrange(50, 200) if roll < 0.1 else clock[0]
        items = [
            {"product_id": p, "unit_price": rng.choice([1.5, 10.0, 99.9]), "quantity": 1 + p,
             "discount": 0.0}
            for p in rng.sample(range(1, 9), rng.randrange(1, 4))
        ]  # fmt: skip
        batch.append(
            event(
                order,
                ts,
                ts,
                op="c" if roll < 0.3 else "u",
                deleted=0.1 <= roll < 0.25,
                # Orders move between year partitions now and then.
                order_date=rng.choice([9700, 9700, 12000]),
                items=items,
                customer_id=rng.choice(["ALFKI", "BONAP", "QUICK"]),
            )
        )
    return batch


def _assert_same(kept, rescanned) -> None:
    assert compare_digests(rescanned.digest, kept.digest).equal
    assert kept.digest["rows"] == rescanned.digest["rows"]
    assert (kept.table_rows, kept.flagged_rows) == (rescanned.table_rows, rescanned.flagged_rows)
    assert kept.duplicated_keys == rescanned.duplicated_keys == 0


@pytest.mark.parametrize(
    ("source", "table_type", "delete_mode"),
    [
        ("change sets", "COPY_ON_WRITE", "hard"),
        ("change sets", "COPY_ON_WRITE", "soft"),
        ("Hudi's change feed", "COPY_ON_WRITE", "hard"),
        # Soft deletes are the change sets' (above); the feed's MERGE_ON_READ soft case took a
        # minute of the suite and followed the same path as its hard one.
        ("Hudi's change feed", "MERGE_ON_READ", "hard"),
    ],
)
def test_the_state_kept_from_the_changes_equals_a_rescan(
    spark, lake: SyntheticLake, source: str, delete_mode: str, table_type: str
):
    rng = random.Random(11 if delete_mode == "hard" else 12)
    # MERGE_ON_READ: updates go to log files (delta commits); every second one compacts, so
    # the ranges followed hold compactions too.
    feed = source == "Hudi's change feed"
    table = dataclasses.replace(
        lake.table(),
        delete_mode=delete_mode,
        table_type=table_type,
        compaction_delta_commits=2,
        change_feed=feed,
        change_sets=not feed,
    )
    clock = [1_000]
    state = None
    kept = None  # followed from the feed whatever the table type
    modes = []
    for _ in range(3):  # a full scan, then two commits followed (or rescanned)
        for _ in range(rng.randrange(1, 3)):
            lake.put(_random_batch(rng, clock, rng.randrange(5, 25)))
        result = ingest_new_files(
            spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
        assert result.committed is not None
        previous = state.digest if state is not None else None
        state = evaluate(spark, table, previous, full_scan_every=50, schema=OUTBOX_SCHEMA)
        assert state is not None
        modes.append(state.mode)
        commit = latest_commit(spark, table.base_path)
        assert commit is not None and state.digest["instant"] == commit.instant
        rescan = full_state(spark, table, commit, OUTBOX_SCHEMA)
        if kept is None:
            kept = rescan
        else:
            span = None
            if table_type == "MERGE_ON_READ":  # followed here, though evaluate does not
                after = kept.digest["completed"]
                feed_rows = read_changes(
                    spark, table.base_path, after, commit.completed, OUTBOX_SCHEMA
                )
                span = Span(feed_rows, False, "Hudi's change feed", ("order_id",))
            kept = incremental_state(
                spark, table, kept.digest, commit, [commit], OUTBOX_SCHEMA, span
            )
            assert kept.digest["followed"] == source
        # Every batch: what was kept from the feed equals the whole table, read afresh.
        _assert_same(kept, rescan)
        _assert_same(state, rescan)
        if delete_mode == "soft":
            assert state.flagged_rows >= 0
        else:
            assert state.flagged_rows == 0
    # The first state is a full scan; every later one followed the change feed, on
    # COPY_ON_WRITE. MERGE_ON_READ is rescanned every time.
    follows = table_type == "COPY_ON_WRITE"
    assert modes == ["full"] + ["incremental" if follows else "full"] * 2
    if not follows:
        actions = [c.action for c in completed_commits(spark, table.base_path)]
        assert "deltacommit" in actions and "commit" in actions  # both kinds were followed
    if delete_mode == "soft":
        assert state is not None and state.flagged_rows > 0  # the workload deleted some orders


def test_nothing_new_carries_the_state_and_a_full_scan_compares(spark, lake: SyntheticLake):
    table = lake.table()
    lake.put([event(i, 100, i) for i in range(20)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    first = evaluate(spark, table, None, schema=OUTBOX_SCHEMA)
    assert first is not None and first.mode == "full"
    # Nothing committed since: the same state, and nothing read.
    carried = evaluate(spark, table, first.digest, schema=OUTBOX_SCHEMA)
    assert carried is not None and carried.mode == "carried"
    assert carried.digest["digest"] == first.digest["digest"]
    # A full scan asked for with nothing new (the nightly job on a quiet day) still compares.
    nightly = evaluate(spark, table, carried.digest, full_scan=True, schema=OUTBOX_SCHEMA)
    assert nightly is not None and nightly.incremental_matches_rescan is True

    lake.put([event(3, 200, 50, deleted=True, op="d"), event(4, 200, 51, customer_id="QUICK")])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    # Asked for a full scan: it rescans and reports that the feed's state agrees.
    scanned = evaluate(spark, table, first.digest, full_scan=True, schema=OUTBOX_SCHEMA)
    assert scanned is not None and scanned.mode == "full"
    assert scanned.incremental_matches_rescan is True
    assert scanned.digest["rows"] == 19

    # A state that lies about the table (a row it does not hold) is caught by the rescan.
    wrong = {**first.digest, "table_rows": first.table_rows + 1}
    lake.put([event(5, 300, 60, customer_id="BONAP")])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    caught = evaluate(spark, table, wrong, full_scan=True, schema=OUTBOX_SCHEMA)
    assert caught is not None and caught.incremental_matches_rescan is False


def test_every_n_commits_the_state_is_rescanned(spark, lake: SyntheticLake):
    table = lake.table()
    state = None
    modes = []
    for n in range(4):
        lake.put([event(n, 100 + n, 10 + n)])
        ingest_new_files(
            spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
        previous = state.digest if state else None
        state = evaluate(spark, table, previous, full_scan_every=2, schema=OUTBOX_SCHEMA)
        assert state is not None
        modes.append((state.mode, state.digest["commits_since_full"]))
    assert modes == [("full", 0), ("incremental", 1), ("full", 0), ("incremental", 1)]


def test_a_commit_without_a_trusted_change_set_is_rescanned(spark, lake: SyntheticLake):
    # As a crash after the commit and before its change set's marker leaves it.
    table = lake.table(change_sets=True, change_feed=False)
    lake.put([event(1, 100, 1), event(2, 100, 2)])
    created = ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    # The table's first commit has none (a reader with no state scans the table).
    assert created.committed is not None and created.change_set_rows is None
    assert created.change_set_text() == "none: the table's first commit (readers scan it in full)"
    assert list_change_sets(spark, table.base_path) == []
    first = evaluate(spark, table, None, schema=OUTBOX_SCHEMA)
    assert first is not None and first.mode == "full"
    lake.put([event(1, 200, 3, customer_id="QUICK")])
    result = ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    assert first is not None and result.committed is not None
    assert result.change_set_rows == 2  # order 1, before and after
    marker = f"{change_set_path(table.base_path, result.committed.instant)}/_SUCCESS"
    lake.client.delete_object(Bucket=lake.lake_bucket, Key=marker.split(lake.lake_bucket + "/")[1])
    second = evaluate(spark, table, first.digest, schema=OUTBOX_SCHEMA)
    assert second is not None and second.mode == "full" and second.digest["rows"] == 2
    assert second.incremental_matches_rescan is None  # nothing it could be compared with
    # A table with neither change sets nor Hudi's feed is rescanned at every commit too.
    bare = dataclasses.replace(table, change_sets=False)
    lake.put([event(3, 300, 4)])
    assert (
        ingest_new_files(
            spark, lake.client, lake.source, bare, captured=OUTBOX, declared=OUTBOX_COLUMNS
        ).change_set_rows
        is None
    )
    third = evaluate(spark, bare, second.digest, schema=OUTBOX_SCHEMA)
    assert third is not None and third.mode == "full" and third.digest["rows"] == 3


def test_a_table_created_with_hudis_feed_goes_on_with_change_sets(spark, lake: SyntheticLake):
    # Tables an earlier release created with the feed on (its default then), written with
    # today's defaults: the feed stays on (a table property) and change sets come in.
    earlier = lake.table(change_feed=True, change_sets=False)
    now = lake.table()
    assert (now.change_sets, now.change_feed) == (True, False)
    lake.put([event(i, 100, i) for i in range(1, 6)])
    ingest_new_files(
        spark, lake.client, lake.source, earlier, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    first = evaluate(spark, earlier, None, schema=OUTBOX_SCHEMA)
    lake.put([event(1, 200, 10, customer_id="QUICK"), event(2, 200, 11, deleted=True, op="d")])
    assert (
        ingest_new_files(
            spark, lake.client, lake.source, earlier, captured=OUTBOX, declared=OUTBOX_COLUMNS
        ).change_set_rows
        is None
    )
    lake.put([event(3, 300, 12, customer_id="BONAP"), event(6, 300, 13)])
    result = ingest_new_files(
        spark, lake.client, lake.source, now, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    assert result.committed is not None and result.change_set_rows == 3  # 3 before/after, 6
    assert has_change_feed(spark, now.base_path)
    # The two commits since: the earlier one has no change set, so the feed is followed, and
    # it covers the later one too.
    assert first is not None
    spanned = evaluate(spark, now, first.digest, schema=OUTBOX_SCHEMA)
    assert spanned is not None and spanned.mode == "incremental"
    assert spanned.digest["followed"] == "Hudi's change feed"
    rescan = full_state(spark, now, result.committed, OUTBOX_SCHEMA)
    _assert_same(spanned, rescan)
    assert rescan.digest["rows"] == 5  # 1, 3, 4, 5, 6
    # From then on, the change sets.
    lake.put([event(4, 400, 14, customer_id="ALFKI")])
    ingest_new_files(spark, lake.client, lake.source, now, captured=OUTBOX, declared=OUTBOX_COLUMNS)
    followed = evaluate(spark, now, spanned.digest, schema=OUTBOX_SCHEMA)
    assert followed is not None and followed.mode == "incremental"
    assert followed.digest["followed"] == "change sets"
    commit = latest_commit(spark, now.base_path)
    assert commit is not None
    _assert_same(followed, full_state(spark, now, commit, OUTBOX_SCHEMA))
