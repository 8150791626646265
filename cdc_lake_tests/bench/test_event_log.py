"""Spark's event log read back (``bench/event_log.py``): a log written by hand, in Spark's own
event format, with two job groups sharing an application."""

from __future__ import annotations

import json
from pathlib import Path

from bench.event_log import (
    busy_seconds,
    slowest_stages,
    stage_table,
    stages_by_group,
    tasks_label,
)


def _job(job: int, group: str, stages: list[int], start: int, end: int) -> list[dict]:
    props = {"spark.jobGroup.id": group, "callSite.short": f"job {job}"}
    return [
        {"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": start,
         "Stage IDs": stages, "Properties": props},
        {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": end},
    ]  # fmt: skip


def _stage(stage: int, name: str, tasks: int, start: int, end: int) -> dict:
    info = {"Stage ID": stage, "Stage Name": name, "Number of Tasks": tasks,
            "Submission Time": start, "Completion Time": end}  # fmt: skip
    return {"Event": "SparkListenerStageCompleted", "Stage Info": info}


def test_stages_are_told_per_job_group_with_their_tasks_and_busy_time(tmp_path: Path):
    events = [
        *_job(0, "A/batch/0/000", [0, 1], 1_000, 4_000),
        _stage(0, "read", 4, 1_000, 2_000),
        _stage(1, "write", 1, 1_500, 4_000),  # overlaps "read": busy 3 s, not 3.5 s
        # Job 1 lists stage 0 too, whose shuffle output it reused: it ran in job 0, not here.
        *_job(1, "A/batch/0/001", [2, 3, 9, 0], 10_000, 13_000),
        _stage(2, "read", 4, 10_000, 11_000),
        _stage(3, "write", 2, 12_000, 13_000),  # stage 9 was skipped: never completed
        *_job(2, "", [4], 20_000, 21_000),  # untagged (a warm-up): no group
        _stage(4, "read", 4, 20_000, 21_000),
    ]
    (tmp_path / "app-1").write_text("".join(json.dumps(e) + "\n" for e in events))
    # A second application restarts the ids: its stage 0 is not the first one's.
    other = [*_job(0, "C/batch/0/000", [0], 1_000, 1_500), _stage(0, "merge", 3, 1_000, 1_500)]
    (tmp_path / "app-2").write_text("".join(json.dumps(e) + "\n" for e in other))

    groups = stages_by_group(tmp_path)
    assert sorted(groups) == ["A/batch/0/000", "A/batch/0/001", "C/batch/0/000"]
    first, second = groups["A/batch/0/000"], groups["A/batch/0/001"]
    assert stage_table(first) == [("read", 4, 1.0), ("write", 1, 2.5)]
    assert stage_table(groups["C/batch/0/000"]) == [("merge", 3, 0.5)]
    assert busy_seconds(first) == 3.0 and busy_seconds(second) == 2.0

    # Per call site and task count, the median over the batches: the one-task write is not
    # merged into the two-task one of the other batch.
    top = slowest_stages([first, second])
    assert top == [
        {"stage": "write", "seconds": 2.5, "tasks": 1, "runs": 1},
        {"stage": "read", "seconds": 1.0, "tasks": 4, "runs": 2},
        {"stage": "write", "seconds": 1.0, "tasks": 2, "runs": 1},
    ]
    assert tasks_label(1) == "1 task" and tasks_label(4) == "4 tasks"
