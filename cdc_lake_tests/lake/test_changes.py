"""What a range of commits changed, per order (``first_and_last``), against the table itself
(real Hudi bundle, real ingestion): an update, a delete, a partition move, and an older delete
and an older update that lose to what the table holds. From each source: the commits' change
sets (the default, COPY_ON_WRITE), and Hudi's change feed on both table types (tables created
with it)."""

from __future__ import annotations

import dataclasses

import pytest

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.change_sets import Span, changes_between
from cdc_lake.lake.changes import read_changes
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_table
from cdc_lake.source.captured import OUTBOX

SOURCES = [
    # Soft deletes with change sets: test_table_state.py's random workload.
    ("change sets", "COPY_ON_WRITE", "hard"),
    ("Hudi's change feed", "COPY_ON_WRITE", "hard"),
    ("Hudi's change feed", "MERGE_ON_READ", "hard"),
    ("Hudi's change feed", "MERGE_ON_READ", "soft"),
]


@pytest.mark.parametrize(("source", "table_type", "delete_mode"), SOURCES)
def test_each_changed_order_is_given_as_the_table_holds_it(
    spark, lake: SyntheticLake, source: str, table_type: str, delete_mode: str
):
    feed = source == "Hudi's change feed"
    table = dataclasses.replace(
        lake.table(),
        table_type=table_type,
        delete_mode=delete_mode,
        change_feed=feed,
        change_sets=not feed,
    )
    lake.put([event(i, 1000, i) for i in range(10)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    lake.put([
        event(1, 2000, 100, customer_id="QUICK"),  # a newer update
        event(2, 500, 50, op="d", deleted=True),  # an older delete: loses
        event(3, 500, 51, customer_id="BONAP"),  # an older update: loses
        event(4, 2000, 101, op="d", deleted=True),  # a newer delete
        event(5, 2000, 102, order_date=12000, customer_id="BONAP"),  # moves to 2002
    ])  # fmt: skip
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    first, second = list(completed_commits(spark, table.base_path))
    if table_type == "MERGE_ON_READ":
        assert second.action == "deltacommit"  # the changes are in log files, inferred from
    if table_type == "MERGE_ON_READ":
        # Exact, but readers do not follow it (its cost there: cdc_lake/lake/changes.py).
        feed_rows = read_changes(
            spark, table.base_path, first.completed, second.completed, OUTBOX_SCHEMA
        )
        changes = Span(feed_rows, False, source, ("order_id",))
    else:
        changes, why = changes_between(
            spark, table.base_path, [second], first.instant, first.completed, second, OUTBOX_SCHEMA
        )
        assert changes is not None and changes.source == source, why
    span = changes.first_and_last()
    before_rows = changes.rows(span, "before", OUTBOX_SCHEMA)
    after_rows = live_rows(changes.rows(span, "after", OUTBOX_SCHEMA))
    before = {r["order_id"]: r.asDict() for r in before_rows.collect()}
    after = {r["order_id"]: r.asDict() for r in after_rows.collect()}
    table_rows = {r["order_id"]: r for r in read_table(spark, table.base_path).collect()}
    live = {k for k, r in table_rows.items() if not r["is_deleted"]}
    # Every order the feed says changed is, after the range, what the table holds.
    for order in before.keys() | after.keys():
        assert (order in after) == (order in live), order
        if order in after:
            row = table_rows[order]
            assert {c: row[c] for c in after[order]} == after[order], order
    assert {1, 4, 5} <= before.keys()  # each existed before
    assert after[1]["customer_id"] == "QUICK" and 4 not in after
    assert after[5]["order_date"].year == 2002 and after[5]["customer_id"] == "BONAP"
    # The changes that lost leave their orders as they were, if the feed names them at all.
    for order in (2, 3):
        assert order in live and after.get(order, before.get(order)) == before.get(order)
    assert before.keys() <= set(range(10))
