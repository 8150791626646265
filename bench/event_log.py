"""Spark's event log, read back: which jobs and stages a timed piece of work ran, and in how many
tasks. The benchmarks turn it on (``spark.eventLog.enabled``) and tag their work with a job group
(``SparkContext.setJobGroup``), so that a stage's tasks and time are told per side and per batch.
Nothing here is timed: it reads the files Spark wrote, and the driver JVM's own counters."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

# The events read; every other line (most of a log: one per task) is skipped unparsed.
_WANTED = ("SparkListenerJobStart", "SparkListenerJobEnd", "SparkListenerStageCompleted")


def read_event_log(log_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Jobs (start, end ms, call site, job group, stage ids) and stages (id, start, end ms,
    name, tasks) of every application logged under ``log_dir``. A job whose start or end is
    missing (Spark's listener queue can drop events under load) is left out."""
    jobs: dict[tuple[str, int], dict[str, Any]] = {}
    stages: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(log_dir.iterdir()):
        app = path.name  # job and stage ids restart in each application
        for line in path.read_text().splitlines():
            if not any(w in line[:60] for w in _WANTED):
                continue
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerJobStart":
                props = e.get("Properties") or {}
                jobs[app, e["Job ID"]] = {
                    "start": e["Submission Time"],
                    "site": props.get("callSite.short", ""),
                    "group": props.get("spark.jobGroup.id", ""),
                    "stages": [(app, s) for s in e.get("Stage IDs", [])],
                }
            elif kind == "SparkListenerJobEnd":
                if (app, e["Job ID"]) in jobs:
                    jobs[app, e["Job ID"]]["end"] = e["Completion Time"]
            elif kind == "SparkListenerStageCompleted":
                info = e["Stage Info"]
                if "Submission Time" in info and "Completion Time" in info:
                    stages[app, info["Stage ID"]] = {
                        "id": (app, info["Stage ID"]),
                        "start": info["Submission Time"],
                        "end": info["Completion Time"],
                        "name": info["Stage Name"],
                        "tasks": info["Number of Tasks"],
                    }
    return [j for j in jobs.values() if "end" in j], list(stages.values())


def stages_by_group(log_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The stages that ran under each job group, in the order they started. A stage counts for
    the job it ran in: one skipped there (its shuffle output reused from an earlier job, which
    lists it too) is not completed again, and one that started outside the job's time is the
    earlier job's."""
    jobs, stages = read_event_log(log_dir)
    by_id = {s["id"]: s for s in stages}
    out: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
    for j in jobs:
        for sid in j["stages"]:
            st = by_id.get(sid)
            if j["group"] and st is not None and j["start"] <= st["start"] <= j["end"]:
                out[j["group"]][sid] = st
    return {g: sorted(ss.values(), key=lambda s: s["start"]) for g, ss in out.items()}


def slowest_stages(groups: list[list[dict[str, Any]]], top: int = 3) -> list[dict[str, Any]]:
    """Across several runs of the same work (``groups``: each run's stages), the stages that
    took longest, told apart by call site and task count (Hudi runs several stages from one
    call site: its one-task rewrite beside four-task ones): per (site, tasks), the median over
    the runs of its seconds, summed within a run."""
    secs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for stages in groups:
        run_s: dict[tuple[str, int], float] = defaultdict(float)
        for s in stages:
            run_s[s["name"], s["tasks"]] += (s["end"] - s["start"]) / 1000
        for key, v in run_s.items():
            secs[key].append(v)
    ranked = sorted(secs, key=lambda k: median(secs[k]), reverse=True)[:top]
    return [
        {"stage": name, "seconds": median(secs[name, n]), "tasks": n, "runs": len(secs[name, n])}
        for name, n in ranked
    ]


def tasks_label(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def union_ms(intervals: list[tuple[int, int]]) -> int:
    """Milliseconds covered by at least one of the (start, end) intervals."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def busy_seconds(stages: list[dict[str, Any]]) -> float:
    """Seconds in which at least one of ``stages`` ran: the rest of a timed piece of work is
    the driver's alone (Hudi's timeline, markers and commit, S3 calls, planning)."""
    return union_ms([(st["start"], st["end"]) for st in stages]) / 1000


def stage_table(stages: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """One run's stages as (name, tasks, seconds), in the order they started."""
    return [(s["name"], s["tasks"], (s["end"] - s["start"]) / 1000) for s in stages]
