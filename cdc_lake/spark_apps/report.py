"""What a Spark app reports: its asset's metadata and its check results, as plain JSON.

Metadata values use the Pipes wire form ``{"raw_value": ..., "type": ...}``; check results are
``{"check_name", "passed", "severity", "metadata"}``. Being JSON, a report travels unchanged
through Dagster Pipes messages from EMR, and the local path turns the same form into Dagster
objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def meta(value: Any, kind: str) -> dict[str, Any]:
    return {"raw_value": value, "type": kind}


@dataclass
class AppReport:
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, **metadata: dict[str, Any]) -> None:
        self.checks.append(
            {"check_name": name, "passed": passed, "severity": "ERROR", "metadata": metadata}
        )
