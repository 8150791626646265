"""Each captured table's Hudi table (the outbox's ``cdc_events``, the customers'...): its raw CDC
files upserted with Spark. One factory, ``hudi_table_asset``, builds them all from the tables'
declarations (``cdc_lake/source/captured.py``); what follows holds for each.

Each materialisation ingests only the raw lines past the checkpoint held in the newest Hudi
commit: the last Kafka offset ingested per topic partition, so re-cut, overwritten or
duplicated raw objects change nothing. Run config ``replay_from_offset`` re-reads the raw files
from that offset on (the repair path; ``cdc-lake lake replay``). The latest change per order
wins by (source ts_ms, LSN), within a batch and across batches that arrive out of order.
Deletes are applied (hard by default). A malformed line fails the run, naming the object key
and line, and commits nothing; with ``quarantine`` on, bad lines go to the quarantine prefix and
the run goes on. A run with nothing new commits nothing.

A run with nothing new starts no Spark when it can tell without it: the checkpoint of the
asset's latest materialization, the table's newest commit on S3 equal to the one that
materialization reports (one listing of the Hudi timeline, ``cdc_lake/lake/timeline.py``), and
no raw object past that checkpoint (``cdc_lake/lake/checkpoint.py``'s ``pending``). It then
materializes again with the last commit's figures (commit instant, counts, checkpoint, row
count, digest) and check results, ``new_commit: false``, and zero for what it read, so the
UI, the sensor and ``matches_source`` keep seeing the last real commit
(``cdc_lake/defs/unchanged.py``). Anything else (no earlier materialization, a table that moved
without this instance, a replay) takes the Spark path, which also reports the newest commit's
figures when it commits nothing. The data version is the commit instant.
The source table's columns are read from PostgreSQL's catalog at each run and passed to the
upsert app, which evolves the lake's columns to follow them or fails before committing when it
cannot (``cdc_lake/lake/schema/evolution.py``); when the source cannot be reached, the lake keeps
the columns its last commit recorded (a warning in the log). The metadata shows the lake's columns
(``dagster/column_schema``, the UI's Columns tab) and its ``schema_version``; a change of the
source's columns since the last run always takes the Spark path.
The upsert app (``cdc_lake/spark_apps/upsert.py``) runs on local Spark or on EMR, as the
``spark_jobs`` resource decides, and evaluates the key and delete checks right after its commit.
See ``cdc_lake/lake/ingest.py`` for the details.
"""

import time
from dataclasses import replace

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field

from cdc_lake.defs import stage_attrs
from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.defs.lake.lag import applied_lag, applied_metadata
from cdc_lake.defs.unchanged import (
    carried_check_results,
    carried_metadata,
    checkpoint_of,
    latest_materialization,
)
from cdc_lake.lake.checkpoint import is_legacy, pending
from cdc_lake.lake.reconcile import write_source_keys
from cdc_lake.lake.schema import (
    LakeSchema,
    SchemaChangeError,
    SourceColumn,
    captured_columns,
    catalog_schema,
    columns_from_catalog,
    describe_change,
)
from cdc_lake.lake.timeline import instant_time, newest_commit_instant
from cdc_lake.raw.objects import RawLayout
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.spark import SparkLauncher, to_metadata
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.captured import RESCAN_CHECK, CapturedTable
from cdc_lake.spark_apps.params import UpsertParams, UpsertReport


class LakeRefreshConfig(dg.Config):
    full_scan: bool = Field(
        default=False,
        description="Rescan the whole table for the key and delete checks and the live-row "
        "digest, instead of following the commits' changes from the last run's state, and report "
        "whether the two agree (the incremental_matches_rescan check).",
    )
    replay_from_offset: int | None = Field(
        default=None,
        description="Re-ingest every topic partition's raw lines from this Kafka offset on, "
        "whatever the checkpoint says. The latest change still wins, so a replay only repairs.",
    )
    reconcile: bool = Field(
        default=False,
        description="Also delete the live rows whose key the source no longer holds (rows left "
        "over with no event to remove them, such as a TRUNCATE from before truncates reached "
        "the lake), in the same commit; a row changed after the source's keys were read is "
        "kept (cdc-lake lake reconcile).",
    )


def _description(table: CapturedTable) -> str:
    return table.description or (
        f"The current state of every row of {table.source}, one row per "
        f"{', '.join(table.keys)}, upserted from its raw CDC files into an Apache Hudi table, "
        "as the outbox's are."
    )


def hudi_table_asset(k: TableKeys) -> dg.AssetsDefinition:
    """The Hudi table of one captured table, with the checks its upsert app evaluates."""
    table = k.table

    @dg.asset(
        key=k.hudi,
        deps=[k.raw],
        description=_description(table),
        kinds={"hudi", "spark", "s3"},
        **stage_attrs(__name__, fresh=True),
        check_specs=[
            dg.AssetCheckSpec(
                table.key_unique_check,
                asset=k.hudi,
                description=f"{', '.join(table.keys)} is unique in the Hudi table",
            ),
            dg.AssetCheckSpec(
                table.no_deleted_check,
                asset=k.hudi,
                description=f"no deleted row of {table.source} survives in the table (hard "
                "deletes)",
            ),
            dg.AssetCheckSpec(
                RESCAN_CHECK,
                asset=k.hudi,
                description="the state the checks keep from the commits' changes equalled a rescan "
                "of the whole table at the newest full scan (every so many commits, on request, "
                "or scheduled: the lake_full_check job)",
            ),
        ],
    )
    def _hudi(
        context: dg.AssetExecutionContext,
        config: LakeRefreshConfig,
        spark_jobs: SparkLauncher,
        cdc: CdcPipelineResource,
        lake: LakeResource,
        s3: S3Resource,
        postgres: PostgresResource,
    ) -> dg.MaterializeResult:
        previous = latest_materialization(context.instance, k.hudi)
        source_columns = _source_columns(context, postgres, k.table)
        if config.replay_from_offset is not None:
            context.log.info(f"replaying the raw files from offset {config.replay_from_offset}")
        elif config.full_scan:
            context.log.info("full scan requested: the checks rescan the whole table")
        elif config.reconcile:
            context.log.info("reconcile requested: rows whose key the source lacks are deleted")
        elif (
            same := _nothing_new(context, s3, cdc, lake, previous, source_columns, k)
        ) is not None:
            return same
        state = previous[1].get(UpsertReport.LIVE_KEY_DIGEST) if previous else None
        params = lake.upsert_params(
            cdc,
            config.replay_from_offset,
            # The checks go on from the state the last run reported (cdc_lake/lake/table_state.py).
            previous_state=state.value
            if state is not None and isinstance(state.value, dict)
            else None,
            full_scan=config.full_scan,
            source_columns=source_columns,
            table=k.table,
        )
        keys_object = None
        if config.reconcile:
            keys_object, params = _with_source_keys(context, postgres, s3, lake, k, params)
        try:
            outcome = spark_jobs.run(context, params)
        finally:
            if keys_object is not None:
                s3.get_client().delete_object(Bucket=lake.lake_bucket, Key=keys_object)
        instant = str(outcome.metadata[UpsertReport.COMMIT_INSTANT].value)
        if not outcome.metadata[UpsertReport.NEW_COMMIT].value:
            context.log.info(
                f"no new raw lines since the checkpoint: nothing committed ({instant})"
            )
        if (note := outcome.metadata.get(UpsertReport.LAYOUT_NOTE)) is not None:
            context.log.warning(f"{k.table.name}: {note.value}")
        version = dg.DataVersion(instant) if instant != "none" else None
        extra, lead = {}, {}
        if (when := instant_time(instant)) is not None:
            # First on the asset's page: when the lake last changed, readable.
            lead["commit_time"] = dg.MetadataValue.timestamp(when)
        if (stored := outcome.metadata.get(UpsertReport.CHECKPOINT)) is not None:
            # The newest change applied, and its age (cdc_lake/lake/lag.py).
            extra |= applied_metadata(applied_lag(stored.value))
        if (schema_meta := outcome.metadata.get(UpsertReport.LAKE_SCHEMA)) is not None:
            schema = LakeSchema.from_json(schema_meta.value)
            extra |= schema_metadata(schema)
            old = previous[1].get(UpsertReport.LAKE_SCHEMA) if previous else None
            old_schema = (
                LakeSchema.from_json(old.value) if old and isinstance(old.value, dict) else None
            )
            if (change := describe_change(old_schema, schema)) is not None:
                context.log.info(change)
                extra["schema_change"] = dg.MetadataValue.text(change)
            if schema.dropped:
                context.log.warning(
                    f"columns dropped at the source, kept in the lake: {', '.join(schema.dropped)}"
                )
        return outcome.materialize_result(context, data_version=version, lead=lead, **extra)

    return _hudi


def _with_source_keys(
    context: dg.AssetExecutionContext,
    postgres: PostgresResource,
    s3: S3Resource,
    lake: LakeResource,
    k: TableKeys,
    params: UpsertParams,
) -> tuple[str, UpsertParams]:
    """The source's keys, read in one snapshot, into an object beside the table for the upsert
    app (``cdc_lake/lake/reconcile.py``); the object's key, and the parameters that name it."""
    key = f"{lake.table_prefix_of(k.table)}_reconcile/{context.run.run_id}.keys"
    conn = postgres.connect()
    try:
        schema = catalog_schema(conn, k.table)
        keys, n = write_source_keys(
            conn, s3.get_client(), lake.lake_bucket, key, lake.uri(key), schema
        )
    finally:
        conn.close()
    context.log.info(f"reconcile: {n:,} source keys as of {keys.ts_ms} (ms)")
    return key, replace(params, reconcile_keys_uri=keys.uri, reconcile_ts_ms=keys.ts_ms)


def _source_columns(
    context: dg.AssetExecutionContext, postgres: PostgresResource, table: CapturedTable
) -> list[SourceColumn] | None:
    """The source table's columns from its catalog; None, with a warning, when the source or
    the table cannot be reached: the refresh then keeps the lake's recorded columns, and a raw
    line with a field they lack still stops it (``cdc_lake/lake/ingest.py``). A column policy
    naming a column the source lacks stops the refresh (``captured_columns``)."""
    try:
        conn = postgres.connect()
        try:
            columns = columns_from_catalog(conn, table.source)
        finally:
            conn.close()
    except (ConnectionError, SchemaChangeError) as e:
        context.log.warning(f"the source's columns cannot be read, the lake keeps its own: {e}")
        return None
    return captured_columns(table, columns)


def schema_metadata(schema: LakeSchema) -> dict[str, dg.MetadataValue]:
    """The lake's columns for the UI's Columns tab, and the schema version."""
    columns = [
        dg.TableColumn(
            c.name,
            c.lake_type,
            description=f"dropped at the source (was {c.name} {c.source_type})"
            if c.dropped
            else f"source: {c.source_type}",
        )
        for c in schema.columns
    ]
    return {
        "dagster/column_schema": dg.MetadataValue.table_schema(dg.TableSchema(columns=columns)),
        "schema_version": dg.MetadataValue.int(schema.version),
    }


def _nothing_new(
    context: dg.AssetExecutionContext,
    s3: S3Resource,
    cdc: CdcPipelineResource,
    lake: LakeResource,
    previous: tuple[str, dict[str, dg.MetadataValue]] | None,
    source_columns: list[SourceColumn] | None,
    k: TableKeys,
) -> dg.MaterializeResult | None:
    """The carried-forward result when the table provably has all there is, else None."""
    t0 = time.monotonic()
    if previous is None:
        return None
    meta = previous[1]
    recorded = meta.get(UpsertReport.LAKE_SCHEMA)
    if recorded is None or not isinstance(recorded.value, dict):
        return None
    taken = sorted((c.name, c.source_type) for c in LakeSchema.from_json(recorded.value).live)
    if source_columns is not None and taken != sorted((c.name, c.pg_type) for c in source_columns):
        context.log.info("the source's columns changed since the last run")
        return None
    instant = meta.get(UpsertReport.COMMIT_INSTANT)
    checkpoint = checkpoint_of(meta)
    if instant is None or instant.value == "none" or not checkpoint or is_legacy(checkpoint):
        return None
    client = s3.get_client()
    newest = newest_commit_instant(client, lake.lake_bucket, lake.table_prefix_of(k.table))
    if newest != instant.value:
        # Committed to (or rolled back) without this instance seeing it: Spark reads Hudi itself.
        context.log.info(f"the table's newest commit is {newest}, not {instant.value}")
        return None
    layout = RawLayout(cdc.raw_prefix, cdc.topic_of(k.table))
    plan = pending(client, cdc.raw_bucket, layout, checkpoint)
    if plan.objects:
        return None
    checks = carried_check_results(context, k.hudi)
    if checks is None:
        return None
    context.log.info(
        f"nothing new past the checkpoint and the table is still at commit {instant.value}: "
        "no Spark, the last commit's figures are carried forward"
    )
    result = carried_metadata(
        previous,
        **{UpsertReport.NEW_COMMIT: dg.MetadataValue.bool(False)},
        **to_metadata(UpsertReport.per_run()),
        ignored_raw_keys=dg.MetadataValue.int(len(plan.ignored)),
        ignored_raw_keys_sample=dg.MetadataValue.json(plan.ignored[:10]),
        s3_list_requests=dg.MetadataValue.int(plan.list_requests + 1),  # + the timeline's
        seconds=dg.MetadataValue.float(round(time.monotonic() - t0, 2)),
        **applied_metadata(applied_lag(checkpoint)),  # its age now, not the last run's
    )
    return dg.MaterializeResult(
        metadata=result,
        check_results=checks,
        data_version=dg.DataVersion(str(instant.value)),
    )


# One per captured table, from its declaration alone.
hudi_tables = {k.table: hudi_table_asset(k) for k in KEYS}
hudi_table_assets = list(hudi_tables.values())
