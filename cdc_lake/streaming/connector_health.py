"""Whether a connector is healthy, from Kafka Connect's status document.

Healthy means the connector and every task are RUNNING. A FAILED connector or task is an error
(its trace's first line says why); anything else not RUNNING (PAUSED, UNASSIGNED, RESTARTING)
is a warning: the connector is not moving, but nothing is lost while it waits (the source's
slot keeps the WAL; the sink's consumer group keeps its offsets). A missing connector is an
error. MSK Connect reports only the connector's state, which then stands for its tasks.

The one reader of Connect's status document: the checks (``connector_health``), the client's
restart of failed tasks (``failed_components``) and its wait for RUNNING (``failure_trace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class ConnectorHealth:
    passed: bool
    severity: Literal["ERROR", "WARN"] | None
    description: str
    states: dict[str, str]


def connector_health(name: str, status: dict[str, Any] | None) -> ConnectorHealth:
    if status is None:
        return ConnectorHealth(
            False, "ERROR", f"connector {name!r} does not exist: materialize its asset", {}
        )
    tasks = status.get("tasks", [])
    states = {"connector": status["connector"]["state"]}
    states |= {f"task {t['id']}": t["state"] for t in tasks}
    not_running = ", ".join(f"{k} {v}" for k, v in states.items() if v != "RUNNING")
    if not not_running:
        return ConnectorHealth(True, None, f"{name}: RUNNING", states)
    failed = [t for t in tasks if t["state"] == "FAILED"]
    if status["connector"]["state"] != "FAILED" and not failed:
        return ConnectorHealth(False, "WARN", f"{name}: {not_running}", states)
    why = first_line((failed[0] if failed else status["connector"]).get("trace"))
    return ConnectorHealth(False, "ERROR", f"{name}: {not_running}: {why}", states)


def first_line(trace: str | None) -> str:
    """A Java trace's first line (the exception and its message), at most 300 characters."""
    trace = (trace or "").strip()
    return trace.splitlines()[0][:300] if trace else "no trace reported"


def failed_components(status: dict[str, Any] | None) -> list[str]:
    """'connector: <first trace line>' and 'task N: <...>' for each FAILED part."""
    if not status:
        return []
    parts = [("connector", status.get("connector", {}))]
    parts += [(f"task {t.get('id')}", t) for t in status.get("tasks", [])]
    return [
        f"{what}: {first_line(part.get('trace'))}"
        for what, part in parts
        if part.get("state") == "FAILED"
    ]


def failure_trace(status: dict[str, Any]) -> str | None:
    """The first FAILED component's whole trace, with where it ran, or None."""
    conn = status.get("connector", {})
    if conn.get("state") == "FAILED":
        return f"connector on {conn.get('worker_id')}: {conn.get('trace', '(no trace)')}"
    for task in status.get("tasks", []):
        if task.get("state") == "FAILED":
            return f"task {task.get('id')} on {task.get('worker_id')}: {task.get('trace')}"
    return None
