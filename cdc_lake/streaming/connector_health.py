"""Whether a connector is healthy, from Kafka Connect's status document.

Healthy means the connector and every task are RUNNING. A FAILED connector or task is an error
(its trace's first line says why); anything else not RUNNING (PAUSED, UNASSIGNED, RESTARTING)
is a warning: the connector is not moving, but nothing is lost while it waits (the source's
slot keeps the WAL; the sink's consumer group keeps its offsets). A missing connector is an
error. MSK Connect reports only the connector's state, which then stands for its tasks.
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
    trace = (failed[0] if failed else status["connector"]).get("trace") or ""
    why = trace.strip().splitlines()[0][:300] if trace.strip() else "no trace reported"
    return ConnectorHealth(False, "ERROR", f"{name}: {not_running}: {why}", states)
