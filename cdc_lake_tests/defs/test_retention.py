"""The ``dagster_runs_prune`` job (``cdc_lake/defs/retention.py``): run in process, and launched
from the code location as the daemon launches it."""

from __future__ import annotations

import dagster as dg
import pytest

from cdc_lake.defs.retention import dagster_runs_prune_job
from cdc_lake_tests.runs.test_retention import a


def _run(instance: dg.DagsterInstance) -> None:
    assert dg.materialize([a], instance=instance).success


@pytest.mark.parametrize("keep_days,expected", [(7.0, 0), (0.0, 3)])
def test_the_prune_job_deletes_by_age_and_reports_how_many(keep_days: float, expected: int):
    with dg.instance_for_test() as instance:
        for _ in range(4):
            _run(instance)
        job = dg.Definitions(jobs=[dagster_runs_prune_job]).get_job_def("dagster_runs_prune")
        result = job.execute_in_process(
            instance=instance,
            run_config={
                "ops": {"prune_finished_runs": {"config": {"keep_days": keep_days,
                                                           "keep_newest": 0}}}
            },
        )  # fmt: skip
        assert result.success
        assert result.output_for_node("prune_finished_runs") == expected
        # a's latest materialization and the prune's own run (in flight while it ran) stay.
        assert len(instance.get_runs()) == 5 - expected
        assert result.run_id in {r.run_id for r in instance.get_runs()}


def test_launched_from_the_code_location_it_keeps_every_checks_latest_evaluation():
    """As the daemon launches it: the job from the project's definitions, whose checks it reads
    from its repository (an in-process run has none, and keeps only the assets' latest runs)."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    from cdc_lake.definitions import defs

    loaded = defs() if not isinstance(defs, dg.Definitions) else defs
    checks = loaded.get_repository_def().asset_graph.asset_check_keys
    assert len(checks) >= 7  # the Hudi tables' and the order items'
    repo = ReconstructableRepository.for_module("cdc_lake.definitions", "defs")
    with dg.instance_for_test() as instance:
        result = dg.execute_job(
            repo.get_reconstructable_job("dagster_runs_prune"),
            instance=instance,
            run_config={"ops": {"prune_finished_runs": {"config": {"keep_days": 0}}}},
        )
        assert result.success
        said = [e.user_message for e in instance.all_logs(result.run_id)]
        assert any(f"one of {len(checks)} checks" in m for m in said), said
