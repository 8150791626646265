"""The order-items app on the real stack's S3 with the real Hudi bundle: after each batch of a
random workload ingested by the real ingestion, the items built from the change feed equal, row
for row, the flattening of the lake's snapshot, and their figures equal those computed from
scratch; a build reads only the orders that changed; a full rebuild gives the same table."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.hudi_timeline import completed_commits
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.readers import read_table
from cdc_lake.marts.figures import customer_figures, customer_rows, totals
from cdc_lake.marts.items_table import ItemsTableConfig
from cdc_lake.marts.order_items import ITEM_COLUMNS, flatten_order_items, read_order_items
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.order_items import run_order_items
from cdc_lake.spark_apps.params import OrderItemsParams
from cdc_lake.spark_apps.report import AppReport
from cdc_lake.stack import LocalStack

CUSTOMERS = ["ALFKI", "BONAP", "CHOPS", "DRACD", "ERNSH", "FOLKO", None]
YEAR_1996, YEAR_1997 = 9700, 10100  # order_date (days): the table is partitioned by year


@pytest.fixture
def lake(local_stack: LocalStack) -> SyntheticLake:
    """A raw prefix and a Hudi table of the test's own, on the session's real S3 server."""
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    return SyntheticLake(client, s.raw_bucket, s.lake_bucket)


def _items_config(lake: SyntheticLake, name: str = "order_items") -> ItemsTableConfig:
    root = f"s3a://{lake.lake_bucket}/synthetic/{lake.name}"
    return ItemsTableConfig(base_path=f"{root}/{name}", figures_root=f"{root}/{name}_figures")


def _build(
    spark: SparkSession, lake: SyntheticLake, items: ItemsTableConfig, rebuild: bool = False
) -> dict[str, Any]:
    params = OrderItemsParams(lake.table().base_path, items, OUTBOX, rebuild=rebuild)
    report: AppReport = run_order_items(spark, params)
    out = {k: v["raw_value"] for k, v in report.metadata.items()}
    out["checks"] = {c["check_name"]: c["passed"] for c in report.checks}
    return out


def _ingest(spark: SparkSession, lake: SyntheticLake) -> None:
    result = ingest_new_files(
        spark, lake.client, lake.source, lake.table(), captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    assert result.committed is not None


def _lines(df) -> Counter:
    return Counter(tuple(r) for r in df.select(*ITEM_COLUMNS).collect())


def _assert_equals_full_flattening(
    spark: SparkSession, lake: SyntheticLake, items: ItemsTableConfig, report: dict[str, Any]
) -> None:
    full = flatten_order_items(read_table(spark, lake.table().base_path))
    assert _lines(read_order_items(spark, items.base_path)) == _lines(full)
    figures = customer_figures(full)
    sums = totals(figures)
    assert report["dagster/row_count"] == sums["rows"]
    assert report["total_revenue_usd"] == round(float(sums["revenue"]), 2)
    assert report["customers"] == sums["customers"]
    assert report["customer_stats"] == customer_rows(figures)
    assert report["checks"] == {"revenue_non_negative": True, "orders_exist_in_lake": True}


class Workload:
    """Random changes to a few dozen orders: inserts, line edits (added, removed, changed),
    customer changes, partition moves (the order's year), hard deletes, re-inserts, orders
    without lines, and older changes delivered after newer ones (which must lose)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.ts, self.lsn = 1_000, 0
        self.orders: dict[int, dict[str, Any]] = {}  # the state each order's latest event set
        self.deleted: set[int] = set()
        self.next_id = 1
        self.kinds: Counter = Counter()  # what the workload did, to show it did all of it

    def _event(self, order_id: int, state: dict[str, Any], op: str, **kw: Any) -> dict[str, Any]:
        self.ts, self.lsn = self.ts + 1, self.lsn + 1
        return event(order_id, self.ts, self.lsn, op=op, **state, **kw)

    def _items(self) -> list[dict[str, Any]]:
        products = self.rng.sample(range(1, 30), self.rng.choice([0, 1, 2, 3, 4]))
        return [self._line(p) for p in sorted(products)]

    def _line(self, product_id: int) -> dict[str, Any]:
        return {
            "product_id": product_id,
            "unit_price": self.rng.choice([9.5, 10.0, 14.25, 18.0]),
            "quantity": self.rng.randint(1, 30),
            "discount": self.rng.choice([0.0, 0.05, 0.25]),
        }

    def batch(self, size: int) -> tuple[list[dict[str, Any]], set[int]]:
        """The events of one batch and the orders it touches."""
        events, touched = [], set()
        live = sorted(self.orders)
        for _ in range(size):
            kind = self.rng.choice(
                ["insert", "insert", "lines", "lines", "customer", "move", "delete", "older",
                 "reinsert"]
            )  # fmt: skip
            if kind in ("lines", "customer", "move", "delete", "older") and not live:
                kind = "insert"
            if kind == "reinsert" and not self.deleted:
                kind = "insert"
            if kind == "insert":
                oid, self.next_id = self.next_id, self.next_id + 1
                state = {"items": self._items(), "customer_id": self.rng.choice(CUSTOMERS[:-1]),
                         "order_date": YEAR_1996}  # fmt: skip
                if self.rng.random() < 0.1:
                    state["customer_id"] = None
                self.orders[oid] = state
                events.append(self._event(oid, state, "c"))
            elif kind == "reinsert":
                oid = self.rng.choice(sorted(self.deleted))
                self.deleted.discard(oid)
                self.orders[oid] = {"items": self._items(), "customer_id": "ALFKI",
                                    "order_date": YEAR_1997}  # fmt: skip
                events.append(self._event(oid, self.orders[oid], "c"))
            elif kind == "delete":
                oid = self.rng.choice(live)
                events.append(self._event(oid, self.orders.pop(oid), "d", deleted=True))
                self.deleted.add(oid)
                live.remove(oid)
            elif kind == "older":
                # An older change of a live order, arriving after a newer one: it must lose.
                oid = self.rng.choice(live)
                stale = {**self.orders[oid], "items": self._items()}
                self.lsn += 1
                events.append(event(oid, 1, self.lsn, op="u", **stale))
            else:
                oid = self.rng.choice(live)
                state = dict(self.orders[oid])
                if kind == "lines":
                    lines = {i["product_id"]: i for i in state["items"]}
                    for p in self.rng.sample(sorted(lines), min(len(lines), 1)):
                        del lines[p]  # a line removed
                    for p in self.rng.sample(sorted(lines), min(len(lines), 1)):
                        lines[p] = {**lines[p], "quantity": lines[p]["quantity"] + 7}  # changed
                    free = sorted(set(range(1, 30)) - set(lines))
                    for p in self.rng.sample(free, self.rng.choice([0, 1, 2])):
                        lines[p] = self._line(p)  # added
                    state["items"] = [lines[p] for p in sorted(lines)]
                elif kind == "customer":
                    state["customer_id"] = self.rng.choice(CUSTOMERS)
                else:
                    moved = state["order_date"] != YEAR_1997
                    state["order_date"] = YEAR_1997 if moved else YEAR_1996
                self.orders[oid] = state
                events.append(self._event(oid, state, "u"))
            self.kinds[kind] += 1
            touched.add(events[-1]["order_id"])
        return events, touched


def _put(lake: SyntheticLake, rng: random.Random, events: list[dict[str, Any]]) -> None:
    """The events over two topic partitions and a few objects, as the sink may cut them."""
    for partition in (0, 1):
        mine = [e for e in events if e["order_id"] % 2 == partition]
        while mine:
            n = rng.randint(1, max(1, len(mine)))
            lake.put(mine[:n], partition=partition)
            mine = mine[n:]


def _snapshot(spark: SparkSession, lake: SyntheticLake) -> dict[int, tuple]:
    cols = ["order_id", "customer_id", "order_date", "order_items", "is_deleted"]
    return {r["order_id"]: tuple(r) for r in read_table(spark, lake.table().base_path)
            .select(*cols).collect()}  # fmt: skip


def test_incremental_items_equal_a_full_flattening_after_a_random_workload(
    spark: SparkSession, lake: SyntheticLake
):
    work, rng = Workload(seed=11), random.Random(5)
    items = _items_config(lake)
    events, _ = work.batch(40)
    _put(lake, rng, events)
    _ingest(spark, lake)
    first = _build(spark, lake, items)
    assert first["build"] == "full" and first["full_build_reason"] == "no order items built yet"
    _assert_equals_full_flattening(spark, lake, items, first)
    table_orders = len(_snapshot(spark, lake))

    for size in (12, 9, 15, 10):
        before = _snapshot(spark, lake)
        events, touched = work.batch(size)
        _put(lake, rng, events)
        _ingest(spark, lake)
        after = _snapshot(spark, lake)
        changed = {o for o in set(before) | set(after) if before.get(o) != after.get(o)}
        report = _build(spark, lake, items)
        assert report["build"] == "incremental", report.get("full_build_reason")
        # Only the orders the commit changed are rebuilt (a change that lost may be logged too).
        assert changed and changed <= touched
        assert len(changed) <= report["orders_rebuilt"] <= len(touched) < table_orders
        assert report["lines_upserted"] + report["lines_deleted"] > 0
        _assert_equals_full_flattening(spark, lake, items, report)

    # Two commits of the Hudi table in one build: the range covers both.
    for size in (6, 7):
        events, _ = work.batch(size)
        _put(lake, rng, events)
        _ingest(spark, lake)
    report = _build(spark, lake, items)
    assert report["build"] == "incremental"
    _assert_equals_full_flattening(spark, lake, items, report)

    assert set(work.kinds) == {"insert", "lines", "customer", "move", "delete", "older",
                               "reinsert"}  # fmt: skip

    # A full rebuild of the same commit gives the same lines and figures.
    again = _build(spark, lake, items, rebuild=True)
    assert again["build"] == "full" and again["full_build_reason"] == "run config rebuild"
    _assert_equals_full_flattening(spark, lake, items, again)
    for key in ("dagster/row_count", "total_revenue_usd", "customers", "customer_stats"):
        assert again[key] == report[key], key


def test_a_delete_removes_the_lines_and_nothing_changed_commits_nothing(
    spark: SparkSession, lake: SyntheticLake
):
    two = [{"product_id": 1, "unit_price": 10.0, "quantity": 2, "discount": 0.0},
           {"product_id": 2, "unit_price": 5.0, "quantity": 1, "discount": 0.5}]  # fmt: skip
    lake.put([event(1, 100, 1, op="c", items=two), event(2, 100, 2, op="c"),
              event(3, 100, 3, op="c", customer_id="BONAP")])  # fmt: skip
    _ingest(spark, lake)
    items = _items_config(lake)
    first = _build(spark, lake, items)
    assert first["dagster/row_count"] == 4 and first["customers"] == 2
    commits = len(list(completed_commits(spark, items.base_path)))

    # Built from the newest commit already: nothing read, nothing committed.
    same = _build(spark, lake, items)
    assert same["build"] == "none" and same["orders_rebuilt"] == 0
    assert same["items_commit_instant"] == "none"
    assert len(list(completed_commits(spark, items.base_path))) == commits
    assert same["dagster/row_count"] == 4 and same["customer_stats"] == first["customer_stats"]

    lake.put([event(1, 200, 4, op="d", deleted=True, items=two),
              event(3, 200, 5, op="d", deleted=True)])  # fmt: skip
    _ingest(spark, lake)
    gone = _build(spark, lake, items)
    assert gone["build"] == "incremental" and gone["orders_rebuilt"] == 2
    assert (gone["lines_upserted"], gone["lines_deleted"]) == (0, 3)
    assert {r["order_id"] for r in read_order_items(spark, items.base_path).collect()} == {2}
    assert gone["customers"] == 1 and gone["dagster/row_count"] == 1
    _assert_equals_full_flattening(spark, lake, items, gone)

    # Only an older change, which loses: the lines are as they were, so no commit.
    commits = len(list(completed_commits(spark, items.base_path)))
    lake.put([event(2, 50, 0, items=two)])
    _ingest(spark, lake)
    stale = _build(spark, lake, items)
    assert stale["build"] == "incremental"
    assert (stale["lines_upserted"], stale["lines_deleted"]) == (0, 0)
    assert len(list(completed_commits(spark, items.base_path))) == commits
    _assert_equals_full_flattening(spark, lake, items, stale)
    # The build after it starts from the commit recorded last, and still applies what follows.
    lake.put([event(2, 300, 6, items=two)])
    _ingest(spark, lake)
    edited = _build(spark, lake, items)
    # Product 1's line is as it was: only product 2's is written.
    assert edited["build"] == "incremental" and edited["lines_upserted"] == 1
    _assert_equals_full_flattening(spark, lake, items, edited)


@pytest.mark.parametrize("case", ["no_changes_kept", "parquet_left_by_an_earlier_release",
                                  "feed_cleaned", "cleaned_with_change_sets"])  # fmt: skip
def test_full_rebuild_when_there_is_nothing_to_start_from(
    spark: SparkSession, lake: SyntheticLake, case: str
):
    # "..._cleaned": the cleaner runs after every commit (the default plans it every 10) and
    # keeps one commit's file versions, and archival three commits. "feed_cleaned": Hudi's
    # change feed (the default); "cleaned_with_change_sets": change sets, no feed.
    short = {"hoodie.clean.max.commits": "1", "hoodie.cleaner.commits.retained": "1",
             "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}  # fmt: skip
    # "no_changes_kept": neither change sets nor Hudi's change feed.
    cleaned = case in ("feed_cleaned", "cleaned_with_change_sets")
    table = lake.table(
        change_sets=case == "cleaned_with_change_sets",
        change_feed=case in ("feed_cleaned", "parquet_left_by_an_earlier_release"),
        extra_options=short if cleaned else {},
    )
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c")])
    assert (
        ingest_new_files(
            spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
        ).committed
        is not None
    )
    items = _items_config(lake)
    if case == "parquet_left_by_an_earlier_release":
        flatten_order_items(read_table(spark, table.base_path)).write.parquet(items.base_path)
    assert _build(spark, lake, items)["build"] == "full"
    for n in range(4 if cleaned else 1):
        lake.put([event(2 + n, 200 + n, 3 + n, deleted=True, op="d"), event(9 + n, 200, 9, op="c")])
        assert (
            ingest_new_files(
                spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
            ).committed
            is not None
        )
    report = _build(spark, lake, items)
    if case == "no_changes_kept":
        assert report["build"] == "full"
        assert report["full_build_reason"] == (
            "a commit since has no change set, and the table has no change feed"
        )
    elif case == "feed_cleaned":
        assert report["build"] == "full"
        assert "cleaner" in report["full_build_reason"] or "timeline" in report["full_build_reason"]
    else:
        # Change sets hold the rows themselves: the cleaner removing file versions after they
        # were written takes nothing from them.
        assert report["build"] == "incremental"
    _assert_equals_full_flattening(spark, lake, items, report)
