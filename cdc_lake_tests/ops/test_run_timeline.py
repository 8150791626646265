"""Where a run's time went, read from the instance's event log (the daemon's path, with its
queue and run worker, is checked on the real UI in ``browser/test_ui.py``)."""

from __future__ import annotations

import time

import dagster as dg

from cdc_lake.ops.run_timeline import RunTimeline, run_timeline


@dg.op
def slow() -> int:
    time.sleep(0.3)
    return 1


@dg.op
def fails(value: int) -> None:
    raise RuntimeError(f"failed on {value}")


@dg.job(executor_def=dg.in_process_executor)
def two_steps() -> None:
    fails(slow())


def test_an_in_process_run_has_steps_and_no_queue():
    instance = dg.DagsterInstance.ephemeral()
    result = two_steps.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    timeline = run_timeline(instance, result.run_id)
    assert timeline.queued is None  # never queued: launched in this process
    assert list(timeline.steps) == ["slow", "fails"]  # in the order they ran
    assert timeline.steps["slow"] >= 0.3 and timeline.total is not None
    assert sum(timeline.steps.values()) <= timeline.total
    assert timeline.finish is not None and timeline.finish >= 0


def test_describe_lists_the_parts_a_run_had():
    line = RunTimeline(queued=1.25, launch=6.0, steps={"hudi": 12.34}, finish=0.5, total=21.0)
    assert line.describe() == (
        "queued 1.2s, run worker start 6.0s, hudi 12.3s, end 0.5s (total 21.0s)"
    )
    assert RunTimeline(queued=None, launch=None, steps={"a": 1.0}).describe() == "a 1.0s"
