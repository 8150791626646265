"""The order-items app: the order items kept in step with the Hudi table, then their checks.

The items are a Hudi table keyed by (order_id, product_id) (``cdc_lake/marts/items_table.py``)
whose every commit records the ``cdc_events`` commit it was built from. A build targets the
table's newest commit, read first: a commit landing during the build is left to the next one.

- **Incremental** (the usual case): the change sets of the commits after the one built from, up
  to the newest (``cdc_lake/lake/change_sets.py``; Hudi's change feed on a table created with
  it, ``cdc_lake/lake/changes.py``), give per changed order its state before and after;
  ``flatten_order_items`` of the before images are its old lines, of the after images its new
  lines. One Hudi commit upserts the new lines that differ and deletes the old lines no new line
  replaces: a deleted order (hard or soft) has no after lines, so its lines go. It reads the
  changes only, never the ``cdc_events`` snapshot nor the items table.
- **Full**, when there is nothing to start from: no items table yet (or one left by a release
  that wrote Parquet there, which is removed first), a commit since without a trusted change set
  and no usable change feed (``changes_between``: none, MERGE_ON_READ, cleaned), the built-from
  commit archived, changes that cannot be read, or ``rebuild``. It flattens the snapshot *as of*
  the newest commit (time travel, so the lines match the commit recorded) and replaces the whole
  table in one commit.
- **Nothing to do**: the newest commit is the one built from, or the changes leave every line
  as it was (a change that lost to a newer one). No commit; the figures are the stored ones.

Either way the lines equal ``flatten_order_items`` of the snapshot at the recorded commit, and
a failed build commits nothing (Hudi rolls the write back; the next build starts from the last
recorded commit again), so a rerun is safe.

Figures and checks cost what the change costs: per-customer sums (``cdc_lake/marts/figures.py``)
updated from the old and new lines, stored per build beside the table. ``revenue_non_negative``
reads their count of negative or null revenues. ``orders_exist_in_lake`` is exact on a full
build (the whole items table joined with the live orders). On an incremental build it checks
what the build writes: every upserted line belongs to an order live after the changes. Lines of
orders deleted in the range are removed by construction; a line that reached the table some
other way is found only by a full build (run config ``rebuild``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.change_sets import changes_between
from cdc_lake.lake.hudi_timeline import (
    CommitInfo,
    commits_between,
    latest_commit,
    newest_recorded,
)
from cdc_lake.lake.hudi_timeline import table_exists as hudi_table_exists
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_as_of
from cdc_lake.lake.table_schema import table_schema
from cdc_lake.marts.figures import customer_figures, customer_rows, totals, updated_figures
from cdc_lake.marts.items_table import (
    DELETE_MARKER,
    BuildState,
    ItemsTableConfig,
    as_written,
    line_changes,
)
from cdc_lake.marts.order_items import flatten_order_items, preview_markdown, read_order_items
from cdc_lake.source.captured import CapturedTable
from cdc_lake.spark_apps.params import OrderItemsParams, OrderItemsReport
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class _Build:
    """What one build did, for its report."""

    kind: str  # "incremental", "full" or "none"
    state: BuildState
    figures: DataFrame
    reason: str = ""  # why a full build
    orders_rebuilt: int = 0
    upserted: int = 0
    deleted: int = 0
    orphans: int = 0
    preview: str = ""
    committed: CommitInfo | None = None


def run_order_items(spark: SparkSession, params: OrderItemsParams) -> AppReport:
    table_path, items, declared = params.table_path, params.items, params.captured
    newest = latest_commit(spark, table_path)
    if newest is None:
        raise RuntimeError(
            f"the Hudi table {table_path} has no commit yet: materialize the Hudi table of "
            f"{declared.source} first."
        )
    state = stored_state(spark, items.base_path)
    build, reason = None, None
    if params.rebuild:
        reason = "run config rebuild"
    elif state is None:
        reason = "no order items built yet"
    else:
        build, reason = _incremental(spark, table_path, declared, items, state, newest)
    if build is None:
        build = _full(spark, table_path, declared, items, newest, previous=state)
        build.reason = reason or ""
    return _report(items, build, newest)


def stored_state(spark: SparkSession, items_path: str) -> BuildState | None:
    """The state of the items table's newest build (None: no table, or no build in it)."""
    return newest_recorded(spark, items_path, BuildState.of)


def _incremental(
    spark: SparkSession,
    table_path: str,
    declared: CapturedTable,
    items: ItemsTableConfig,
    state: BuildState,
    newest: CommitInfo,
) -> tuple[_Build | None, str | None]:
    """The build from the changes; (None, why) when the changes or the stored figures cannot
    be read, and a full build must be done instead."""
    try:
        stored = spark.read.parquet(state.figures_path)
        if newest.instant == state.built_from_instant:
            return _Build("none", state, stored), None
        since = commits_between(spark, table_path, state.built_from_instant, newest.instant)
        if since is None:
            return None, f"commit {state.built_from_instant} is no longer in the active timeline"
        # The lake's columns as its commits recorded them (no sql/ on EMR).
        schema = table_schema(spark, table_path, captured=declared)
        if schema is None:  # it has a commit (newest), so it exists: never, but say so
            return None, f"the lake table {table_path} is gone"
        source, why = changes_between(
            spark,
            table_path,
            since,
            state.built_from_instant,
            state.built_from_completed,
            newest,
            schema,
        )
        if source is None:
            return None, why
        changes = source.first_and_last().persist()
        orders = changes.count()
    except Exception as e:  # py4j's errors carry Hudi's and the file system's
        return None, f"the changes or the stored figures could not be read: {_first_line(e)}"
    try:
        old = flatten_order_items(source.rows(changes, "before", schema))
        new = flatten_order_items(source.rows(changes, "after", schema))
        rows = line_changes(old, new).persist()
        try:
            live_after = live_rows(source.rows(changes, "after", schema)).select(
                *declared.keys, F.lit(True).alias("_live")
            )
            upsert, orphan = ~F.col(DELETE_MARKER), ~F.col(DELETE_MARKER) & F.col("_live").isNull()
            counts = (
                rows.join(live_after, list(declared.keys), "left")
                .agg(
                    F.count(F.when(upsert, 1)).alias("upserted"),
                    F.count(F.when(~upsert, 1)).alias("deleted"),
                    F.count(F.when(orphan, 1)).alias("orphans"),
                )
                .collect()[0]
            )
            build = _Build(
                "incremental",
                state,
                stored,
                orders_rebuilt=orders,
                upserted=int(counts["upserted"]),
                deleted=int(counts["deleted"]),
                orphans=int(counts["orphans"]),
                preview=preview_markdown(rows.where(upsert).drop(DELETE_MARKER)),
            )
            if build.upserted + build.deleted == 0:
                return build, None  # the changes left every line as it was: no commit
            build.state = BuildState(newest.instant, newest.completed, _figures_path(items, newest))
            figures = updated_figures(stored, old, new)
            figures.coalesce(1).write.parquet(build.state.figures_path)
            build.figures = spark.read.parquet(build.state.figures_path)
            rows.write.format("hudi").options(**items.write_options("upsert", build.state)).mode(
                "append"
            ).save(items.base_path)
        finally:
            rows.unpersist()
    finally:
        changes.unpersist()
    build.committed = latest_commit(spark, items.base_path)
    _drop_old_figures(spark, items, keep={build.state.figures_path, state.figures_path})
    return build, None


def _full(
    spark: SparkSession,
    table_path: str,
    declared: CapturedTable,
    items: ItemsTableConfig,
    newest: CommitInfo,
    previous: BuildState | None,
) -> _Build:
    """Every line from the snapshot as of ``newest``, replacing the table in one commit."""
    if not hudi_table_exists(spark, items.base_path):
        _delete(spark, items.base_path)  # Parquet written there by an earlier release
    state = BuildState(newest.instant, newest.completed, _figures_path(items, newest))
    lines = flatten_order_items(read_as_of(spark, table_path, newest.instant)).persist()
    try:
        customer_figures(lines).coalesce(1).write.parquet(state.figures_path)
        as_written(lines).write.format("hudi").options(
            **items.write_options("insert_overwrite_table", state)
        ).mode("append").save(items.base_path)
    finally:
        lines.unpersist()
    build = _Build("full", state, spark.read.parquet(state.figures_path))
    build.committed = latest_commit(spark, items.base_path)
    written = read_order_items(spark, items.base_path).cache()
    try:
        live = live_rows(read_as_of(spark, table_path, newest.instant)).select(*declared.keys)
        build.orphans = written.join(live, list(declared.keys), "left_anti").count()
        build.orders_rebuilt = written.select(*declared.keys).distinct().count()
        build.upserted = written.count()
        build.preview = preview_markdown(written)
    finally:
        written.unpersist()
    keep = {state.figures_path} | ({previous.figures_path} if previous else set())
    _drop_old_figures(spark, items, keep=keep)
    return build


def _report(items: ItemsTableConfig, build: _Build, newest: CommitInfo) -> AppReport:
    sums = totals(build.figures)
    report = AppReport()
    report.metadata = {
        "dagster/row_count": meta(sums["rows"], "int"),
        "total_revenue_usd": meta(round(float(sums["revenue"]), 2), "float"),
        "customers": meta(sums["customers"], "int"),
        OrderItemsReport.CUSTOMER_STATS: meta(customer_rows(build.figures), "json"),
        "preview": meta(build.preview, "md"),
        "path": meta(items.base_path, "path"),
        OrderItemsReport.HUDI_COMMIT_INSTANT: meta(newest.instant, "text"),
        "build": meta(build.kind, "text"),
        "orders_rebuilt": meta(build.orders_rebuilt, "int"),
        "lines_upserted": meta(build.upserted, "int"),
        "lines_deleted": meta(build.deleted, "int"),
        "items_commit_instant": meta(
            build.committed.instant if build.committed else "none", "text"
        ),
    }
    if build.reason:
        report.metadata["full_build_reason"] = meta(build.reason, "text")
    bad = sums["bad_revenue_lines"]
    report.check(
        OrderItemsReport.REVENUE_CHECK, bad == 0, negative_or_null_revenue=meta(bad, "int")
    )
    scope = {"full": "whole table", "incremental": "lines this build wrote"}.get(build.kind, "")
    report.check(
        OrderItemsReport.ORDERS_EXIST_CHECK,
        build.orphans == 0,
        orphan_rows=meta(build.orphans, "int"),
        scope=meta(scope or "nothing written", "text"),
    )
    return report


def _figures_path(items: ItemsTableConfig, newest: CommitInfo) -> str:
    return f"{items.figures_root.rstrip('/')}/{newest.instant}-{uuid.uuid4().hex[:8]}"


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    sc: Any = spark.sparkContext
    jpath = sc._jvm.org.apache.hadoop.fs.Path(path)
    return jpath.getFileSystem(sc._jsc.hadoopConfiguration()), jpath


def _delete(spark: SparkSession, path: str) -> None:
    fs, jpath = _fs(spark, path)
    if fs.exists(jpath):
        fs.delete(jpath, True)


def _drop_old_figures(spark: SparkSession, items: ItemsTableConfig, keep: set[str]) -> None:
    """Remove the figures of earlier builds (and of failed ones), keeping ``keep``."""
    fs, root = _fs(spark, items.figures_root.rstrip("/"))
    if not fs.exists(root):
        return
    names = {p.rstrip("/").rsplit("/", 1)[-1] for p in keep}
    for status in fs.listStatus(root):
        if status.getPath().getName() not in names:
            fs.delete(status.getPath(), True)
