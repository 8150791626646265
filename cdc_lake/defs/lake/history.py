"""The history table of each captured table whose declaration keeps one (``history``): every
version of every row its lake table has held, with ``valid_from`` and ``valid_to``. One
factory, ``history_table_asset``, builds them from the declarations.

Each materialisation brings the history up to the lake table's newest commit, from the change
sets of the commits since the one it was built from (the ``history`` app,
``cdc_lake/spark_apps/history.py``; what a build does is ``cdc_lake/lake/history.py``). It runs
right after the lake table, in the table's refresh job. When the lake's newest commit (one
listing of its timeline on S3) is the one the history reached, nothing runs: the last build's
figures and check result are carried forward.

``current_versions_match_lake`` (blocking): the digest of the open versions equals the digest of
the lake table's live rows that its own materialisation reported for the same commit: the
history's current rows are the lake's, keys and content (not their ``cdc_ordering`` nor their
times). Run config ``full_scan`` reads the open versions' digest back from the committed table
instead of carrying it from build to build.
"""

from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field

from cdc_lake.defs import stage_attrs
from cdc_lake.defs.keys import KEYS, TableKeys
from cdc_lake.defs.unchanged import carried_check_results, carried_metadata, latest_materialization
from cdc_lake.lake.digest import compare_digests
from cdc_lake.lake.timeline import newest_commit_instant
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.spark import SparkLauncher
from cdc_lake.spark_apps.params import HistoryReport, UpsertReport


class HistoryConfig(dg.Config):
    full_scan: bool = Field(
        default=False,
        description="Read the digest of the current versions back from the whole history table, "
        "instead of carrying it from build to build (also when nothing is built).",
    )


def history_table_asset(k: TableKeys) -> dg.AssetsDefinition:
    """The history table of one captured table, with its check against the lake table."""
    table, key = k.table, k.history
    assert key is not None, f"{table.source} keeps no history (cdc_lake/source/captured.py)"

    @dg.asset(
        key=key,
        deps=[k.hudi],
        description=(
            f"Every version of every row of {table.source} that its Hudi table has held, one "
            "row per version: the columns, cdc_op, cdc_ordering, valid_from and valid_to (null "
            "for the current version). Append-only: a change closes the version it replaces, "
            "a delete or a truncate closes the last one."
        ),
        kinds={"hudi", "spark", "s3"},
        **stage_attrs(__name__, fresh=True),
        check_specs=[
            dg.AssetCheckSpec(
                HistoryReport.MATCHES_LAKE_CHECK,
                asset=key,
                blocking=True,
                description=f"the current versions equal the live rows of {table.source}'s "
                "Hudi table at the same commit (digests of keys and content)",
            )
        ],
    )
    def _history(
        context: dg.AssetExecutionContext,
        config: HistoryConfig,
        spark_jobs: SparkLauncher,
        lake: LakeResource,
        s3: S3Resource,
    ) -> dg.MaterializeResult:
        if not config.full_scan and (same := _unchanged(context, lake, s3, k)) is not None:
            return same
        outcome = spark_jobs.run(context, lake.history_params(table, full_scan=config.full_scan))
        m = outcome.metadata
        outcome.checks.append(matches_lake(context.instance, k, m))
        context.log.info(
            f"{table.name} history: {m['build'].value} build, {m['versions_written'].value} "
            f"versions written, {m['current_versions'].value} current"
        )
        reached = str(m[HistoryReport.LAKE_COMMIT].value)
        return outcome.materialize_result(context, data_version=dg.DataVersion(reached))

    return _history


def matches_lake(
    instance: dg.DagsterInstance, k: TableKeys, metadata: dict[str, Any]
) -> dg.AssetCheckResult:
    """``current_versions_match_lake`` from the history app's metadata and the lake asset's
    latest materialisation."""
    name = HistoryReport.MATCHES_LAKE_CHECK
    reached = str(metadata[HistoryReport.LAKE_COMMIT].value)
    ours = metadata[HistoryReport.OPEN_DIGEST].value
    lake = latest_materialization(instance, k.hudi)
    theirs = lake[1].get(UpsertReport.LIVE_KEY_DIGEST) if lake else None
    digest = theirs.value if theirs is not None and isinstance(theirs.value, dict) else None
    if digest is None or digest.get("instant") != reached:
        at = digest.get("instant") if digest else "none"
        return dg.AssetCheckResult(
            check_name=name,
            passed=False,
            metadata={
                "reason": f"the lake asset's last digest is at commit {at}, the history reached "
                f"{reached}: materialize the Hudi table, then the history",
            },
        )
    try:
        diff = compare_digests(digest, ours)
    except ValueError as e:
        return dg.AssetCheckResult(check_name=name, passed=False, metadata={"reason": str(e)})
    return dg.AssetCheckResult(
        check_name=name,
        passed=diff.equal,
        metadata={
            "lake_rows": dg.MetadataValue.int(_rows(digest)),
            "current_versions": dg.MetadataValue.int(_rows(ours)),
            "differing_buckets": dg.MetadataValue.json(
                {str(b): d for b, d in sorted(diff.details.items())[:10]}
            ),
            "commit": dg.MetadataValue.text(reached),
        },
    )


def _rows(digest: Any) -> int:
    return int(digest.get("rows", 0)) if isinstance(digest, dict) else 0


def _unchanged(
    context: dg.AssetExecutionContext, lake: LakeResource, s3: S3Resource, k: TableKeys
) -> dg.MaterializeResult | None:
    """The carried-forward result when the history reached the lake table's newest commit."""
    assert k.history is not None
    previous = latest_materialization(context.instance, k.history)
    reached = previous[1].get(HistoryReport.LAKE_COMMIT) if previous else None
    if previous is None or reached is None:
        return None
    client = s3.get_client()
    newest = newest_commit_instant(client, lake.lake_bucket, lake.table_prefix_of(k.table))
    if newest != reached.value:
        return None
    checks = carried_check_results(context, k.history)
    if checks is None:
        return None
    context.log.info(f"the Hudi table is still at commit {reached.value}: no history to build")
    return dg.MaterializeResult(
        metadata=carried_metadata(previous, unchanged=dg.MetadataValue.bool(True)),
        check_results=checks,
        data_version=dg.DataVersion(str(reached.value)),
    )


# One per captured table that keeps a history, from its declaration alone.
history_tables = {k.table: history_table_asset(k) for k in KEYS if k.history is not None}
history_table_assets = list(history_tables.values())
