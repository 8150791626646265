"""Which finished runs the Dagster instance may forget, and forgetting them.

With the raw-files sensor on, the instance gains a ``lake_refresh`` run every few seconds of
activity, and each run's event log holds the assets' metadata (``python -m bench --only soak``
measures how much per run). Nothing in Dagster OSS deletes runs by age, so the instance grows
with the runs until they are pruned: ``dagster_runs_prune`` (``cdc_lake/defs/retention.py``)
does it on a schedule, off by default.

A run is pruned only if all of these hold:
- it has finished (succeeded, failed or canceled): a run in flight is never touched;
- it was created before the cutoff;
- it is not among the newest ``keep_newest`` runs;
- it holds no asset's latest materialization or observation, and no check's latest evaluation.
  Those are state, not history: the raw-files sensor and the Hudi asset read the lake's
  checkpoint from the latest materialization, and a carried run its checks' latest results.

Pruning a run deletes it with its event log (``DagsterInstance.delete_run``). On the SQLite
storage of a local instance that leaves the run's own event-log file behind, emptied, and its
captured stdout and stderr: both are removed too. What stays is small: the shared index keeps
its size (it reuses the freed pages), and Dagster leaves each run's check executions in it
(a row per check, with its evaluation). It is idempotent, and a failure part-way leaves the
runs not yet deleted as they were. Another process that read a run's events before it was
pruned (the webserver) fails to read them again, rather than finding none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (
    COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES,
)
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


def runs_holding_state(
    instance: dg.DagsterInstance, check_keys: Iterable[dg.AssetCheckKey] = ()
) -> set[str]:
    """The runs of each asset's latest materialization and observation, and of each given
    check's latest evaluation."""
    held: set[str] = set()
    for key in instance.get_asset_keys():
        for fetch in (instance.fetch_materializations, instance.fetch_observations):
            held.update(r.run_id for r in fetch(key, limit=1).records)
    storage = instance.event_log_storage
    checks = list(check_keys)
    if checks:
        # The latest execution may be one a failed run only planned: keep the run of the latest
        # completed evaluation too, the one a carried result reads.
        latest = storage.get_latest_asset_check_execution_by_key(checks)
        held.update(r.run_id for r in latest.values())
        for key in checks:
            done = storage.get_asset_check_execution_history(
                key, limit=1, status=COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES
            )
            held.update(r.run_id for r in done)
    return held


def prunable_runs(
    instance: dg.DagsterInstance,
    before: dt.datetime,
    keep_newest: int,
    check_keys: Iterable[dg.AssetCheckKey] = (),
) -> list[str]:
    """The ids of the runs the rules above allow to prune, oldest first. ``before``: an aware
    time (a naive one is taken as local time)."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(statuses=FINISHED, created_before=before.astimezone(dt.UTC)),
        ascending=True,
    )
    # After the candidates: a run that finished in between holds no state it would lose.
    newest = {
        r.dagster_run.run_id for r in instance.get_run_records(limit=keep_newest)
    } if keep_newest > 0 else set()  # fmt: skip
    held = runs_holding_state(instance, check_keys)
    return [
        r.dagster_run.run_id
        for r in records
        if r.dagster_run.run_id not in newest and r.dagster_run.run_id not in held
    ]


def prune_runs(
    instance: dg.DagsterInstance,
    before: dt.datetime,
    keep_newest: int,
    check_keys: Iterable[dg.AssetCheckKey] = (),
) -> list[str]:
    """Delete the prunable runs with their event logs; their ids."""
    pruned = prunable_runs(instance, before, keep_newest, check_keys)
    for run_id in pruned:
        instance.delete_run(run_id)
        _remove_run_files(instance, run_id)
    return pruned


def _remove_run_files(instance: dg.DagsterInstance, run_id: str) -> None:
    """A deleted run's files on a local instance: its SQLite event-log shard and its logs."""
    storage = instance.event_log_storage
    if isinstance(storage, SqliteEventLogStorage):
        shard = storage.path_for_shard(run_id)
        for path in (shard, f"{shard}-wal", f"{shard}-shm"):
            Path(path).unlink(missing_ok=True)
        # This process would take the shard for one with tables still: a later read of the
        # run's events (none) creates it again, empty, instead of failing.
        getattr(storage, "_initialized_dbs", set()).discard(run_id)
    logs = instance.compute_log_manager
    if isinstance(logs, LocalComputeLogManager):
        logs.delete_logs(prefix=[run_id])
