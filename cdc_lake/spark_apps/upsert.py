"""The upsert app: the raw files after the checkpoint into the Hudi table, then its checks.

It ingests the new raw files (see ``cdc_lake/lake/ingest.py`` for ordering, deletes, idempotency
and bad input), then evaluates the Spark-side CDC checks (the key is unique, no deleted row is
left: ``order_id_unique`` and ``no_deleted_orders`` for the outbox, named after each captured
table by its declaration) and the digest of the live rows (keys and content, see
``cdc_lake/lake/digest.py``) that the ``matches_source`` check compares with the outbox without
a second Spark app. It does so from the previous run's state and the change feed of the new
commits when it can, in full every so many commits or on request (``full_scan``), and then also
reports whether the two agreed (``incremental_matches_rescan``); see
``cdc_lake/lake/table_state.py``. With nothing new it commits nothing and reports the newest
commit's figures (``commit_instant``, counts) with ``new_commit`` false. It runs locally or on
EMR by name through ``cdc_lake/spark_apps/run.py``.

The source table's columns come in the parameters (``source_columns``: what the lake asset read
from the source's catalog); the lake's columns follow them (``cdc_lake/lake/schema/evolution.py``),
and a change the lake cannot take fails the app before anything is written. The lake's columns and
schema version are reported (``lake_schema``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_lake.lake.digest import empty_digest
from cdc_lake.lake.hudi_timeline import latest_commit, table_exists
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import DeleteMode
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.reconcile import SourceKeys
from cdc_lake.lake.schema import SourceColumn
from cdc_lake.lake.table_state import TableState, evaluate
from cdc_lake.source.captured import RESCAN_CHECK, CapturedTable
from cdc_lake.spark_apps.params import UpsertParams, UpsertReport
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_upsert(spark: SparkSession, s3_client: Any, params: UpsertParams) -> AppReport:
    table = params.table
    declared = params.captured
    result = ingest_new_files(
        spark,
        s3_client,
        RawSource(params.raw_bucket, params.raw_prefix, params.topic, params.scheme),
        table,
        quarantine_path=params.quarantine_path,
        replay_from=params.replay_from_offset,
        max_line_mb=params.max_line_mb,
        source_columns=_list(params.source_columns),
        captured=declared,
        declared=_list(params.declared_columns),
        reconcile=SourceKeys(params.reconcile_keys_uri, params.reconcile_ts_ms)
        if params.reconcile_keys_uri is not None and params.reconcile_ts_ms is not None
        else None,
    )
    schema = result.schema
    assert schema is not None  # ingest_new_files always reports the lake's columns
    exists = table_exists(spark, table.base_path)
    # Nothing committed: report the newest commit's figures, never "none" over a real table.
    commit = result.committed or (latest_commit(spark, table.base_path) if exists else None)
    report = AppReport()
    report.metadata = {
        UpsertReport.COMMIT_INSTANT: meta(commit.instant if commit else "none", "text"),
        UpsertReport.NEW_COMMIT: meta(result.committed is not None, "bool"),
        "records_inserted": meta(commit.inserts if commit else 0, "int"),
        "records_updated": meta(commit.updates if commit else 0, "int"),
        "records_deleted": meta(commit.deletes if commit else 0, "int"),
        **UpsertReport.per_run(
            files_read=len(result.files),
            bytes_read=result.bytes_read,
            events_read=result.events_read,
            events_upserted=result.events_upserted,
            quarantined_lines=result.quarantined,
            lines_already_ingested=result.lines_skipped,
            offset_gaps=result.offset_gaps,
            # A completed snapshot in the batch deletes the live rows it no longer held.
            orders_absent_from_snapshot=result.absent_from_snapshot,
            # A TRUNCATE in the batch deletes every live row older than it.
            rows_truncated=result.truncated_rows,
            # Reconcile (cdc-lake lake reconcile): live rows whose key the source no longer held.
            rows_reconciled=result.reconciled_rows,
            # Lines holding Debezium's placeholder for an unchanged TOASTed value: filled in
            # from the key's previous value (cdc_lake/lake/unavailable.py).
            unavailable_lines_filled=result.unavailable_lines,
            # A column added with a default: the stored rows it was given to (once, when added).
            backfilled_rows=result.backfilled,
            backfilled_columns=list(result.backfilled_columns),
            # The commit's change set (cdc_lake/lake/change_sets.py): rows, or why it has none.
            change_set=result.change_set_text(),
        ),
        "ignored_raw_keys": meta(len(result.ignored_keys), "int"),
        "ignored_raw_keys_sample": meta(result.ignored_keys[:10], "json"),
        "table_path": meta(table.base_path, "path"),
        "table_type": meta(table.table_type, "text"),
        # The layout written: the table's own, which a changed setting does not move.
        "partition_field": meta(result.partition_field or "none", "text"),
        UpsertReport.CHECKPOINT: meta(result.checkpoint, "json"),
        "s3_list_requests": meta(result.list_requests, "int"),
        "seconds": meta(round(result.seconds, 2), "float"),
    }
    if result.layout_note:
        report.metadata[UpsertReport.LAYOUT_NOTE] = meta(result.layout_note, "text")
    if schema is not None:
        report.metadata[UpsertReport.LAKE_SCHEMA] = meta(schema.to_json(), "json")
    if not exists:
        report.metadata["dagster/row_count"] = meta(0, "int")
        report.metadata[UpsertReport.LIVE_KEY_DIGEST] = meta(empty_digest(schema=schema), "json")
        reason = meta("table does not exist yet: no raw files ingested", "text")
        for name in (declared.key_unique_check, declared.no_deleted_check, RESCAN_CHECK):
            report.check(name, False, reason=reason)
        return report
    state = evaluate(
        spark,
        table,
        params.previous_state,
        full_scan=params.full_scan,
        full_scan_every=params.full_scan_every,
        schema=schema,
    )
    assert state is not None  # the table exists, so it has a commit
    report_state(report, state, table.delete_mode, declared)
    return report


def _list(columns: tuple[SourceColumn, ...] | None) -> list[SourceColumn] | None:
    return None if columns is None else list(columns)


def report_state(
    report: AppReport, state: TableState, delete_mode: DeleteMode, declared: CapturedTable
) -> None:
    """The table state's metadata and the key and delete checks, into the app's report."""
    mode = meta(state.mode, "text")
    report.metadata["dagster/row_count"] = meta(state.table_rows, "int")
    report.metadata[UpsertReport.LIVE_KEY_DIGEST] = meta(state.digest, "json")
    report.metadata["checks_mode"] = mode
    report.check(declared.key_unique_check, state.duplicated_keys == 0,
                 duplicated_keys=meta(state.duplicated_keys, "int"),
                 sample=meta(state.duplicate_sample, "json"), mode=mode)  # fmt: skip
    if delete_mode == "soft":
        # Soft deletes keep their rows on purpose, flagged; readers filter on is_deleted.
        report.check(declared.no_deleted_check, True,
                     soft_deleted_rows=meta(state.flagged_rows, "int"),
                     delete_mode=meta("soft", "text"), mode=mode)  # fmt: skip
    else:
        report.check(declared.no_deleted_check, state.flagged_rows == 0,
                     deleted_rows_left=meta(state.flagged_rows, "int"),
                     delete_mode=meta("hard", "text"), mode=mode)  # fmt: skip
    # The newest full scan's verdict, evaluated now or carried until the next one.
    rescan = state.last_rescan
    report.check(RESCAN_CHECK, bool(rescan.get("matched", True)),
                 compared_now=meta(state.incremental_matches_rescan is not None, "bool"),
                 last_full_scan_instant=meta(str(rescan.get("instant", "")), "text"),
                 compared=meta(bool(rescan.get("compared")), "bool"),
                 commits_since_full=meta(int(state.digest.get("commits_since_full", 0)), "int"),
                 detail=meta(state.mismatch_detail, "json"), mode=mode)  # fmt: skip
