"""Where a run's time went, from its events in the Dagster instance: the wait in the run queue,
the run worker's start (a new process that loads the code location and the resources), each
step, and the run's end. The demo prints it for the run the sensor requests, so a user sees
what a commit pays between the tick and the lake.

Read only: the event log is the instance's (the UI's Gantt chart shows the same events). Parts
a run did not have are None: a run launched in process (``dagster.materialize``, ``cdc-lake
refresh``) is never queued, and a step that has not ended has no duration. Times are the
events' own timestamps (seconds, the writing process's clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import dagster as dg


@dataclass(frozen=True)
class RunTimeline:
    """Seconds spent in each part of one run."""

    queued: float | None  # RUN_ENQUEUED -> the launch: waiting for the daemon's dequeue loop
    launch: float | None  # RUN_STARTING -> RUN_START: the run worker's process and code load
    steps: dict[str, float] = field(default_factory=dict)  # step key -> STEP_START to its end
    finish: float | None = None  # the last step's end -> the run's end
    total: float | None = None  # the first event -> the run's end

    def describe(self) -> str:
        """One line, the parts in order; missing ones left out."""
        parts = [
            f"{name} {seconds:.1f}s"
            for name, seconds in (("queued", self.queued), ("run worker start", self.launch))
            if seconds is not None
        ]
        parts += [f"{step} {seconds:.1f}s" for step, seconds in self.steps.items()]
        if self.finish is not None:
            parts.append(f"end {self.finish:.1f}s")
        total = f" (total {self.total:.1f}s)" if self.total is not None else ""
        return ", ".join(parts) + total


def run_timeline(instance: dg.DagsterInstance, run_id: str) -> RunTimeline:
    """The timeline of ``run_id`` from the instance's event log."""
    import dagster as dg

    kinds = dg.DagsterEventType
    first: dict[object, float] = {}
    step_start: dict[str, float] = {}
    step_end: dict[str, float] = {}
    start = None
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        start = entry.timestamp if start is None else start
        kind = event.event_type
        first.setdefault(kind, entry.timestamp)
        if kind == kinds.STEP_START and event.step_key:
            step_start.setdefault(event.step_key, entry.timestamp)
        elif kind in (kinds.STEP_SUCCESS, kinds.STEP_FAILURE) and event.step_key:
            step_end[event.step_key] = entry.timestamp

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    # The queue's daemon launches a run without a RUN_DEQUEUED event: RUN_STARTING is the launch.
    launched = first.get(kinds.RUN_STARTING, first.get(kinds.RUN_DEQUEUED))
    ends = (kinds.RUN_SUCCESS, kinds.RUN_FAILURE, kinds.RUN_CANCELED)
    ended = next((first[k] for k in ends if k in first), None)
    steps = {
        key: step_end[key] - began
        for key, began in sorted(step_start.items(), key=lambda kv: kv[1])
        if key in step_end
    }
    return RunTimeline(
        queued=span(first.get(kinds.RUN_ENQUEUED), launched),
        launch=span(launched, first.get(kinds.RUN_START)),
        steps=steps,
        finish=span(max(step_end.values(), default=None), ended),
        total=span(start, ended),
    )
