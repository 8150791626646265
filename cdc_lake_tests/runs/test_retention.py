"""Pruning the Dagster instance's runs (``cdc_lake/runs/retention.py``) on a real SQLite instance:
old finished runs go with their event logs; the newest runs, runs in flight, and the runs holding
an asset's latest materialization or a check's latest evaluation stay."""

from __future__ import annotations

import datetime as dt
import glob
from pathlib import Path

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (
    COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES,
    AssetCheckExecutionRecordStatus,
)
from dagster._core.storage.event_log import SqliteEventLogStorage

from cdc_lake.runs.retention import prunable_runs, prune_runs


@dg.asset
def a() -> int:
    return 1


@dg.asset
def b() -> int:
    return 2


@dg.asset_check(asset=a)
def a_positive() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset(name="a")
def a_failing() -> int:
    raise RuntimeError("boom")


@dg.op
def noop() -> None:
    pass


@dg.job
def pending_job() -> None:
    noop()


def _run(instance: dg.DagsterInstance, assets: list, ok: bool = True) -> str:
    result = dg.materialize(assets, instance=instance, raise_on_error=False)
    assert result.success is ok
    return result.run_id


def _history(instance: dg.DagsterInstance) -> dict[str, str]:
    """run id -> its role in the scenario below"""
    names = ["b", "a1", "a2", "a3", "a+check", "check planned", "a4", "failed"]
    runs = [_run(instance, [b])]
    runs += [_run(instance, [a]) for _ in range(3)]
    runs.append(_run(instance, [a, a_positive]))  # the check's latest completed evaluation
    # The check's latest execution: planned by a run that failed before evaluating it.
    runs.append(_run(instance, [a_failing, a_positive], ok=False))
    runs.append(_run(instance, [a]))  # a's latest materialization
    runs.append(_run(instance, [a_failing], ok=False))  # finished, but failed
    return dict(zip(runs, names, strict=True))


def test_old_finished_runs_go_and_the_runs_holding_state_stay():
    with dg.instance_for_test() as instance:
        roles = _history(instance)
        by_role = {role: run_id for run_id, role in roles.items()}
        waiting = instance.create_run_for_job(pending_job).run_id  # not started: never pruned
        future = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)
        checks = [a_positive.check_key]

        # Only runs created before the cutoff.
        a2 = instance.get_run_record_by_id(by_role["a2"])
        assert a2 is not None
        assert prunable_runs(instance, a2.create_timestamp, 1, checks) == [by_role["a1"]]

        # The newest two runs ("failed", then the waiting one) are kept; "b" holds b's only
        # materialization, "a4" a's latest, "a+check" the check's latest evaluation, and
        # "check planned" its latest execution, which never completed.
        pruned = prune_runs(instance, future, keep_newest=2, check_keys=checks)
        assert [roles[r] for r in pruned] == ["a1", "a2", "a3"]
        left = {r.run_id for r in instance.get_runs()}
        kept = ("b", "a+check", "check planned", "a4", "failed")
        assert left == {by_role[n] for n in kept} | {waiting}
        # Their event logs went with them, files included; the state the pipeline reads is
        # still there.
        storage = instance.event_log_storage
        assert isinstance(storage, SqliteEventLogStorage)
        shards = {
            Path(p).stem for p in glob.glob(str(Path(storage.path_for_shard("x")).parent / "*.db"))
        }
        assert shards.isdisjoint(pruned) and by_role["a4"] in shards
        logs = Path(instance.compute_log_manager._base_dir)  # type: ignore[attr-defined]
        assert {d.name for d in logs.iterdir()}.isdisjoint(pruned)
        assert instance.all_logs(by_role["a1"]) == []
        latest_b = instance.get_latest_materialization_event(b.key)
        latest_a = instance.get_latest_materialization_event(a.key)
        assert latest_b is not None and latest_b.run_id == by_role["b"]
        assert latest_a is not None and latest_a.run_id == by_role["a4"]
        latest_check = storage.get_latest_asset_check_execution_by_key(checks)[checks[0]]
        assert latest_check.run_id == by_role["check planned"]
        assert latest_check.status == AssetCheckExecutionRecordStatus.PLANNED
        done = storage.get_asset_check_execution_history(
            checks[0], limit=1, status=COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES
        )
        assert [r.run_id for r in done] == [by_role["a+check"]]

        # Idempotent; and without the newest-runs guard the failed run goes too, never the
        # waiting one.
        assert prune_runs(instance, future, keep_newest=2, check_keys=checks) == []
        assert [roles[r] for r in prune_runs(instance, future, 0, checks)] == ["failed"]
        assert waiting in {r.run_id for r in instance.get_runs()}
