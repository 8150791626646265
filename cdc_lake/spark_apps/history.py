"""The history app: a captured table's history table brought up to its lake table's newest
commit (``cdc_lake/lake/history.py`` says what it holds and how each build works).

A build targets the lake table's newest commit, read first: a commit landing during the build is
left to the next one. It is incremental from the change sets of the commits since the one the
history was built from; full (the lake's live rows against the open versions) when there is no
history yet or nothing to follow from; none when the lake has not moved, or its commits since
changed no row. Either way the history commit records the lake commit it reached, atomically
with its rows, and the digest of its open versions, which the Dagster asset's check compares with
the lake's (``cdc_lake/defs/lake/history.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_lake.lake.change_sets import has_change_sets, read_change_set_sides
from cdc_lake.lake.digest import (
    add_digests,
    comparable,
    compare_digests,
    empty_digest,
    spark_digest,
)
from cdc_lake.lake.history import (
    STATE_KEY,
    VALID_TO,
    HistoryState,
    history_schema,
    open_versions,
    reconcile_rows,
    version_rows,
)
from cdc_lake.lake.hudi_timeline import (
    CommitInfo,
    commits_between,
    latest_commit,
    newest_recorded,
    table_exists,
)
from cdc_lake.lake.ordering import ORDERING_FIELD
from cdc_lake.lake.readers import read_as_of, read_table
from cdc_lake.lake.table_schema import table_schema
from cdc_lake.lake.timeline import instant_time
from cdc_lake.spark_apps.params import HistoryParams, HistoryReport
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_lake.lake.hudi import HudiTableConfig
    from cdc_lake.lake.schema import LakeSchema


@dataclass
class _Build:
    kind: str  # "incremental", "full" or "none"
    state: HistoryState | None
    reason: str = ""  # why a full build
    written: int = 0
    rescan_due: bool = False  # read the open versions' digest back after the commit
    rescanned: bool = False  # ... done
    matched_rescan: bool | None = None  # ... and whether the one the commit recorded agreed
    committed: CommitInfo | None = None


def run_history(spark: SparkSession, params: HistoryParams) -> AppReport:
    lake_path, config, declared = params.table_path, params.history, params.captured
    newest = latest_commit(spark, lake_path)
    schema = table_schema(spark, lake_path, captured=declared)
    if newest is None or schema is None:
        raise RuntimeError(
            f"the Hudi table {lake_path} has no commit yet: materialize the Hudi table of "
            f"{declared.source} first."
        )
    state = stored_state(spark, config.base_path)
    build = None
    if state is None:
        reason = "no history built yet"
    elif state.built_from_instant == newest.instant:
        build, reason = _Build("none", state), ""
    else:
        since = commits_between(spark, lake_path, state.built_from_instant, newest.instant)
        if since is None:
            reason = f"commit {state.built_from_instant} is no longer in the active timeline"
        elif not has_change_sets(spark, lake_path, since):
            reason = "a lake commit since has no change set"
        else:
            build = _incremental(spark, params, schema, state, newest, list(reversed(since)))
            reason = ""
    if build is None:
        build = _full(spark, params, schema, state, newest)
        build.reason = reason
    kept = build.state.digest if build.state is not None else None
    stale = kept is not None and comparable(kept, empty_digest(schema=schema)) is not None
    if kept is not None and (params.full_scan or build.rescan_due or stale):
        # The open versions' digest read back from the committed table: what the check then
        # compares with the lake. Kept for the next build is the one the commit recorded.
        read_back = spark_digest(
            open_versions(read_table(spark, config.base_path), schema), schema=schema
        )
        if not stale:
            build.matched_rescan = compare_digests(kept, read_back).equal
        assert build.state is not None
        build.state = replace(build.state, digest=read_back)
        build.rescanned = True
    return _report(config, build, newest, schema)


def stored_state(spark: SparkSession, history_path: str) -> HistoryState | None:
    """The state of the history table's newest build (None: no table, or no build in it)."""
    return newest_recorded(spark, history_path, HistoryState.of)


def _incremental(
    spark: SparkSession,
    params: HistoryParams,
    schema: LakeSchema,
    state: HistoryState,
    newest: CommitInfo,
    since: list[CommitInfo],
) -> _Build:
    """One upsert of the versions the change sets of ``since`` (oldest first) open and close."""
    versions = version_rows(read_change_set_sides(spark, params.table_path, since, schema), schema)
    try:
        written = versions.rows.count()
        if written == 0:
            return _Build("none", state)  # the commits since changed no row
        kept = state.digest
        due = params.full_scan or state.builds_since_full + 1 >= params.full_scan_every
        plus = spark_digest(versions.still_open(), schema=schema)
        build = _Build("incremental", state, written=written, rescan_due=due)
        if comparable(kept, empty_digest(schema=schema)) is None:
            minus = spark_digest(versions.replaced, schema=schema)
            digest = add_digests(kept, plus, minus)
        else:  # the lake's columns changed: over the new ones, from the stored open versions
            stored = open_versions(read_table(spark, params.history.base_path), schema)
            digest = spark_digest(_open_after(stored, versions.rows, schema), schema=schema)
        build.state = HistoryState(
            newest.instant, newest.completed, digest, 0 if due else state.builds_since_full + 1
        )
        _write(params.history, versions.rows, schema, build.state)
    finally:
        versions.unpersist()
    build.committed = latest_commit(spark, params.history.base_path)
    return build


def _full(
    spark: SparkSession,
    params: HistoryParams,
    schema: LakeSchema,
    state: HistoryState | None,
    newest: CommitInfo,
) -> _Build:
    """The lake's live rows as of ``newest`` against the history's open versions."""
    exists = table_exists(spark, params.history.base_path)
    history = read_table(spark, params.history.base_path) if exists else None
    stored = open_versions(history, schema) if history is not None else None
    table = read_as_of(spark, params.table_path, newest.instant)
    when = instant_time(newest.completed[:17])
    gone_at_ms = int(when.timestamp() * 1000) if when is not None else 0
    rows = reconcile_rows(table, stored, schema, gone_at_ms).persist()
    try:
        written = rows.count()
        if written == 0:
            return _Build("none", state)  # the history already equals the lake
        current = rows.where(F.col(VALID_TO).isNull())
        after = _open_after(stored, rows, schema) if stored is not None else current
        digest = spark_digest(after, schema=schema)
        build = _Build("full", HistoryState(newest.instant, newest.completed, digest),
                       written=written, rescan_due=True)  # fmt: skip
        assert build.state is not None
        _write(params.history, rows, schema, build.state)
    finally:
        rows.unpersist()
    build.committed = latest_commit(spark, params.history.base_path)
    return build


def _open_after(stored: DataFrame, rows: DataFrame, schema: LakeSchema) -> DataFrame:
    """The open versions once ``rows`` are written over the ``stored`` open ones (an upsert by
    version key): those stored that no row replaces, and the rows left open."""
    version = [*schema.keys, ORDERING_FIELD]
    kept = stored.join(rows.select(*version), version, "left_anti")
    return kept.unionByName(rows.where(F.col(VALID_TO).isNull()), allowMissingColumns=True)


def _write(
    config: HudiTableConfig, rows: DataFrame, schema: LakeSchema, state: HistoryState
) -> None:
    options = config.write_options(schema=history_schema(schema))
    # Options starting with "_" become the commit's extra metadata: the state goes with the rows.
    options[STATE_KEY] = state.to_json()
    rows.write.format("hudi").options(**options).mode("append").save(config.base_path)


def _report(
    config: HudiTableConfig, build: _Build, newest: CommitInfo, schema: LakeSchema
) -> AppReport:
    state = build.state
    # No build yet (a lake table with no live row): no version, the digest of none.
    digest = state.digest if state else empty_digest(schema=schema)
    report = AppReport()
    report.metadata = {
        HistoryReport.BUILT_FROM: meta(state.built_from_instant if state else "none", "text"),
        HistoryReport.OPEN_DIGEST: meta(digest, "json"),
        "build": meta(build.kind, "text"),
        "versions_written": meta(build.written, "int"),
        "current_versions": meta(int(digest["rows"]), "int"),
        "digest_rescanned": meta(build.rescanned, "bool"),
        HistoryReport.LAKE_COMMIT: meta(newest.instant, "text"),
        "history_commit_instant": meta(
            build.committed.instant if build.committed else "none", "text"
        ),
        "path": meta(config.base_path, "path"),
    }
    if build.committed is not None:
        report.metadata["versions_added"] = meta(build.committed.inserts, "int")
        report.metadata["versions_closed"] = meta(build.committed.updates, "int")
    if build.matched_rescan is not None:
        report.metadata["incremental_matched_rescan"] = meta(build.matched_rescan, "bool")
    if build.reason:
        report.metadata["full_build_reason"] = meta(build.reason, "text")
    return report
