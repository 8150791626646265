"""``cdc-lake lake replay`` and ``reconcile``: bring a lake that drifted from the source back
to it.

A replay runs one captured table's Hudi asset (``--table``; the command's default is the first
declared table) with ``replay_from_offset``: every raw line of its topic from that Kafka offset
on is read again, whatever its checkpoint says, then the marts built from the table are rebuilt,
and the table's checks run. The latest change per key still wins, so a replay can only repair:
rows that are already right stay as they are, and a missing or stale row gets its newest change
back. It runs through Dagster on the configured instance (``DAGSTER_HOME``; locally
``<state>/dagster_home``), so it shows in the UI like any run. It exits non-zero when a blocking
check fails.

Raw files only hold what the sink wrote. For changes that never reached them, ask Debezium to
send the rows again (``cdc-lake source resnapshot``), then refresh.

A reconcile runs the same asset with ``reconcile``: it ingests what is new, and deletes in the
same commit the live rows whose key the source no longer holds, rows that no event will ever
remove (``cdc_lake/lake/reconcile.py``). It is idempotent: a second run deletes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from cdc_lake.source.captured import CapturedTable
from cdc_lake.spark_apps.params import UpsertReport
from cdc_lake.stack.settings import StackSettings


def replay(
    settings: StackSettings,
    from_offset: int,
    resources: dict[str, Any] | None = None,
    say: Callable[[str], None] = print,
    *,
    table: CapturedTable,
) -> int:
    """Replays ``table``'s raw files from ``from_offset``; 0 when its lake table then matches
    the source."""
    say(f"[replay] re-ingesting the raw files of {table.source} from offset {from_offset}")
    return _repair(settings, {"replay_from_offset": from_offset}, "replay", resources, say, table)


def reconcile(
    settings: StackSettings,
    resources: dict[str, Any] | None = None,
    say: Callable[[str], None] = print,
    *,
    table: CapturedTable,
) -> int:
    """Deletes ``table``'s lake rows whose key the source no longer holds; 0 when its lake
    table then matches the source."""
    say(f"[reconcile] deleting the lake rows of {table.source} whose key the source lacks")
    return _repair(settings, {"reconcile": True}, "reconcile", resources, say, table)


def _repair(
    settings: StackSettings,
    config: dict[str, Any],
    label: str,
    resources: dict[str, Any] | None,
    say: Callable[[str], None],
    table: CapturedTable,
) -> int:
    import dagster as dg

    from cdc_lake.defs.keys import table_keys
    from cdc_lake.defs.lake.assets import hudi_tables
    from cdc_lake.defs.lake.checks import table_checks
    from cdc_lake.defs.lake.jobs import hudi_op
    from cdc_lake.defs.marts.assets import order_items
    from cdc_lake.ops.instance import configured_home
    from cdc_lake.resources import build_resources, environment_name
    from cdc_lake.resources.local import local_resources
    from cdc_lake.stack.settings import local_secret_env

    local = environment_name() == "local"
    if local:
        # In this process only: the resources' EnvVars, never on a command line.
        os.environ.update(local_secret_env(settings))
    os.environ["DAGSTER_HOME"] = str(configured_home(settings))
    if resources is None:
        resources = local_resources(settings) if local else build_resources()
    hudi_key = table_keys(table).hudi
    quarantine, matches, _ = table_checks[table]
    # The marts built from this table, rebuilt in the same run.
    marts = [a for a in (order_items,) if hudi_key in a.dependency_keys]
    result = dg.materialize(
        [hudi_tables[table], *marts, matches, quarantine],
        resources=resources,
        instance=dg.DagsterInstance.get(),
        run_config={"ops": {hudi_op(hudi_key): {"config": config}}},
        raise_on_error=False,
    )
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        if mat.asset_key == hudi_key:
            meta = {k: v.value for k, v in mat.metadata.items()}
            say(
                f"[{label}] read {meta['files_read']} raw objects, {meta['events_read']} events; "
                f"{meta['records_inserted']} rows inserted, {meta['records_updated']} updated, "
                f"{meta['records_deleted']} deleted, {meta.get('rows_reconciled', 0)} of them "
                f"left over (commit {meta[UpsertReport.COMMIT_INSTANT]})"
            )
    failed = [e for e in result.get_asset_check_evaluations() if not e.passed]
    for e in failed:
        say(f"[{label}] check {e.check_name} failed: {e.description or ''}")
    if not result.success:
        say(f"[{label}] run {result.run_id} failed; see it in the Dagster UI")
        return 1
    return 1 if any(e.check_name == "matches_source" for e in failed) else 0
