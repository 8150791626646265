"""Checks of the CDC invariants on each captured table's Hudi table that need no Spark of their own
(the outbox's below; every other captured table gets the same three, on its own source table,
topic, quarantine and checkpoint).

``order_id_unique`` and ``no_deleted_orders`` (named after each table) are evaluated by the
upsert app itself (see the asset's check specs). Here:

- ``no_quarantined_lines``: the quarantine prefix is empty (only fills with quarantine on).
- ``matches_source`` (blocking): after catch-up, the live rows equal the outbox's, keys and
  content. The upsert app reports a digest of the live rows (per bucket of order_id mod 64: the
  count, key sums and the sum of a hash of each row's content; see ``cdc_lake/lake/digest.py``);
  the same digest is computed in PostgreSQL, so the comparison costs one query and no Spark
  app, on local Spark and on EMR alike. Differing buckets are reported as key differences (rows
  missing or extra) or content differences (stale rows). While raw files or topic records are
  still pending, the lake cannot match yet: the check then fails with WARN severity and says
  what is pending. A mismatch with nothing pending is an ERROR. Both digests cover the same
  columns: the source's, read from its catalog now, against those the lake's last refresh took.
  If they differ, the lake has not taken the source's schema change yet and the check says so.
- ``schema_matches_source``: the lake's columns (the last refresh's ``lake_schema``) against the
  source's catalog now. A source column the lake lacks, or whose type it took differently, is an
  ERROR (refresh; if the refresh fails, its error names the change it cannot take). A column
  dropped at the source and kept in the lake is a WARN that names it.
"""

from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.lake.checkpoint import Checkpoint, is_legacy, pending
from cdc_lake.lake.diff import RowDifferences, buckets_to_read, describe, write_source_rows
from cdc_lake.lake.digest import BUCKETS, VERSION, compare_digests, source_digest
from cdc_lake.lake.schema import LakeSchema, catalog_columns, catalog_schema, compare
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.spark import SparkLauncher
from cdc_lake.resources.streaming import CdcPipelineResource, KafkaResource
from cdc_lake.source.captured import CapturedTable
from cdc_lake.spark_apps.params import DiffParams, DiffReport, UpsertReport
from cdc_lake.streaming.topics import committed_offsets, end_offsets


def _what_differs(table: CapturedTable, key_buckets: int, content_buckets: int) -> str:
    """What a caught-up mismatch is, and the command that repairs each kind."""
    parts = []
    if key_buckets:
        parts.append(
            f"keys differ in {key_buckets} digest bucket(s): rows the lake lacks come back with "
            f"`cdc-lake source resnapshot --table {table.source} --all`, rows the source no "
            f"longer has go with `cdc-lake lake reconcile --table {table.source}`"
        )
    if content_buckets:
        parts.append(
            f"content differs in {content_buckets} bucket(s): stale rows come back with "
            f"`cdc-lake source resnapshot --table {table.source} --all`"
        )
    return "caught up, yet different from source: " + "; ".join(parts or ["digests differ"])


def _differing_rows(
    context: dg.AssetCheckExecutionContext,
    postgres: PostgresResource,
    s3: S3Resource,
    lake: LakeResource,
    spark_jobs: SparkLauncher,
    k: TableKeys,
    schema: LakeSchema,
    differing: list[int],
) -> RowDifferences:
    """The rows of the first differing buckets that differ, from the diff app
    (``cdc_lake/lake/diff.py``); the source's rows go through an object beside the table,
    deleted afterwards."""
    chosen = buckets_to_read(differing)
    key = f"{lake.table_prefix_of(k.table)}_reconcile/{context.run.run_id}-diff.keys"
    client = s3.get_client()
    conn = postgres.connect()
    try:
        n = write_source_rows(
            conn, client, lake.lake_bucket, key, schema, BUCKETS, chosen, postgres.column_salt
        )
    finally:
        conn.close()
    context.log.info(f"naming the differing rows: {n:,} source rows in buckets {list(chosen)}")
    params = DiffParams(lake.uri(lake.table_prefix_of(k.table)), schema, lake.uri(key), BUCKETS,
                        chosen)  # fmt: skip
    try:
        outcome = spark_jobs.run(context, params)
    finally:
        client.delete_object(Bucket=lake.lake_bucket, Key=key)
    return RowDifferences.from_json(outcome.metadata[DiffReport.DIFFERENCES].value)


def _latest_lake_metadata(
    context: dg.AssetCheckExecutionContext, k: TableKeys
) -> dict[str, Any] | None:
    event = context.instance.get_latest_materialization_event(k.hudi)
    mat = event.asset_materialization if event else None
    return {name: v.value for name, v in mat.metadata.items()} if mat else None


def lake_checks(k: TableKeys) -> list[dg.AssetChecksDefinition]:
    """The three checks of one captured table's Hudi table."""

    @dg.asset_check(asset=k.hudi, description="no raw line was quarantined as malformed")
    def no_quarantined_lines(s3: S3Resource, lake: LakeResource) -> dg.AssetCheckResult:
        client = s3.get_client()
        prefix = lake.quarantine_prefix_of(k.table)
        listed = client.list_objects_v2(Bucket=lake.lake_bucket, Prefix=prefix + "/", MaxKeys=1000)
        files = [o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".json")]
        return dg.AssetCheckResult(
            passed=not files,
            metadata={
                "quarantine_files": len(files),
                "quarantine_path": dg.MetadataValue.path(lake.uri(prefix)),
            },
        )

    @dg.asset_check(
        asset=k.hudi,
        blocking=True,
        description=f"after catch-up, the table's live rows equal those of {k.table.source} in "
        "PostgreSQL",
    )
    def matches_source(
        context: dg.AssetCheckExecutionContext,
        postgres: PostgresResource,
        kafka: KafkaResource,
        s3: S3Resource,
        cdc: CdcPipelineResource,
        lake: LakeResource,
        spark_jobs: SparkLauncher,
    ) -> dg.AssetCheckResult:
        lake_meta = _latest_lake_metadata(context, k)
        lake_digest = (lake_meta or {}).get(UpsertReport.LIVE_KEY_DIGEST)
        if lake_meta is None or lake_digest is None:
            return dg.AssetCheckResult(
                passed=False, description="the Hudi table has not been materialized yet"
            )
        if lake_digest.get("version") != VERSION:
            return dg.AssetCheckResult(
                passed=False,
                description="the Hudi table's digest predates content hashing: materialize it "
                "again",
            )
        conn = postgres.connect()
        try:
            table = k.table
            columns = catalog_schema(conn, table)
            if columns.digest_signature() != lake_digest.get("columns"):
                added = sorted(
                    set(columns.digest_signature()) - set(lake_digest.get("columns", []))
                )
                gone = sorted(set(lake_digest.get("columns", [])) - set(columns.digest_signature()))
                return dg.AssetCheckResult(
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={
                        "source_columns_not_in_lake_digest": dg.MetadataValue.json(added),
                        "lake_digest_columns_not_at_source": dg.MetadataValue.json(gone),
                    },
                    description="the source's columns changed since the lake's last refresh: "
                    "refresh the lake (schema_matches_source tells what changed)",
                )
            source = source_digest(
                conn, lake_digest["buckets"], schema=columns, salt=postgres.column_salt
            )
        finally:
            conn.close()
        diff = compare_digests(source, lake_digest)
        differing = sorted(diff.details)
        meta: dict[str, Any] = {
            "lake_rows": lake_digest["rows"],
            "source_rows": source["rows"],
            "differing_buckets": len(differing),
            "key_differences": dg.MetadataValue.int(len(diff.key_buckets)),
            "content_differences": dg.MetadataValue.int(len(diff.content_buckets)),
            "sample_buckets": dg.MetadataValue.json(
                {str(b): diff.details[b] for b in differing[:10]}
            ),
        }
        if diff.equal:
            return dg.AssetCheckResult(passed=True, metadata=meta)
        # Not equal: is the lake merely behind? Pending raw objects, records the sink has not
        # flushed, or topic offsets past the lake's checkpoint all mean it is.
        stored = lake_meta.get(UpsertReport.CHECKPOINT) or None
        topic = cdc.topic_of(k.table)
        plan = pending(s3.get_client(), cdc.raw_bucket, RawLayout(cdc.raw_prefix, topic), stored)
        conf = kafka.client_conf()
        ends = end_offsets(conf, topic)
        done = committed_offsets(conf, cdc.sink_consumer_group, topic, list(ends))
        pending_records = sum(max(0, e - done.get(p, 0)) for p, e in ends.items())
        lake_offsets = Checkpoint.from_json(stored) if stored and not is_legacy(stored) else None
        lake_lag = (
            sum(max(0, e - lake_offsets.offset(p) - 1) for p, e in ends.items())
            if lake_offsets
            else None
        )
        meta |= {
            "pending_raw_files": dg.MetadataValue.int(len(plan.objects)),
            "pending_topic_records": dg.MetadataValue.int(pending_records),
        }
        if lake_lag is not None:
            meta["topic_records_past_lake_checkpoint"] = dg.MetadataValue.int(lake_lag)
        behind = bool(plan.objects) or pending_records > 0 or bool(lake_lag)
        if behind:
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                metadata=meta,
                description="not caught up yet",
            )
        # Caught up and different: name the rows (a read of the lake on its Spark).
        description = _what_differs(k.table, len(diff.key_buckets), len(diff.content_buckets))
        try:
            found = _differing_rows(context, postgres, s3, lake, spark_jobs, k, columns, differing)
        except Exception as e:  # the buckets' figures above still say what differs
            context.log.warning(f"could not name the differing rows: {e}")
            description += f" (the rows could not be named: {e})"
        else:
            meta["differing_rows"] = dg.MetadataValue.json(found.to_json())
            description = "caught up, yet different from source " + describe(
                found, table.keys, table.source, len(differing)
            )
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata=meta,
            description=description,
        )

    @dg.asset_check(
        asset=k.hudi,
        description="the lake's columns are the source table's: none missing, none of another type "
        "(a column dropped at the source and kept in the lake warns)",
    )
    def schema_matches_source(
        context: dg.AssetCheckExecutionContext, postgres: PostgresResource
    ) -> dg.AssetCheckResult:
        recorded = (_latest_lake_metadata(context, k) or {}).get(UpsertReport.LAKE_SCHEMA)
        if not isinstance(recorded, dict):
            return dg.AssetCheckResult(
                passed=False,
                description="the Hudi table has no recorded schema yet: materialize it",
            )
        lake = LakeSchema.from_json(recorded)
        conn = postgres.connect()
        try:
            source = catalog_columns(conn, k.table)
        finally:
            conn.close()
        diff = compare(source, lake)
        meta = {
            "schema_version": dg.MetadataValue.int(lake.version),
            "source_columns": dg.MetadataValue.int(len(source)),
            "lake_columns": dg.MetadataValue.int(len(lake.columns)),
            "missing_in_lake": dg.MetadataValue.json(list(diff.missing)),
            "type_changed": dg.MetadataValue.json(list(diff.changed)),
            "dropped_at_source": dg.MetadataValue.json(list(diff.dropped)),
        }
        if diff.equal:
            return dg.AssetCheckResult(passed=True, metadata=meta)
        if diff.missing or diff.changed:
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata=meta,
                description="the lake has not taken the source's columns: "
                + "; ".join(
                    [f"not in the lake: {', '.join(diff.missing)}"] * bool(diff.missing)
                    + [f"type changed: {', '.join(diff.changed)}"] * bool(diff.changed)
                )
                + ". Refresh the lake; a change it cannot take fails the refresh, naming it.",
            )
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            metadata=meta,
            description=f"dropped at the source, kept in the lake (null from then on): "
            f"{', '.join(diff.dropped)}",
        )

    return [no_quarantined_lines, matches_source, schema_matches_source]


# One set per captured table.
table_checks = {k.table: lake_checks(k) for k in KEYS}
lake_table_checks = [c for checks in table_checks.values() for c in checks]
