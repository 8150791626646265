"""The shapes the checks' results share, so that every stage reports alike.

- ``at_most``: a lag or backlog gauge. It passes at or under its threshold; past it, it fails
  with WARN severity, since a lag loses nothing by itself (the slot keeps the WAL, the consumer
  group its offsets, the raw objects wait) but tells that something is down or slow.
- ``connector_check``: a connector's health (``cdc_lake/streaming/connector_health.py``):
  FAILED is an ERROR quoting its trace, anything else not RUNNING a WARN.
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from cdc_lake.streaming.connector_health import connector_health


def at_most(
    value: int, threshold: int, metadata: Mapping[str, Any], over: str
) -> dg.AssetCheckResult:
    """Pass when ``value <= threshold``; else WARN, with ``over`` saying what is over."""
    if value <= threshold:
        return dg.AssetCheckResult(passed=True, metadata=dict(metadata))
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=dict(metadata),
        description=over,
    )


def connector_check(name: str, status: dict[str, Any] | None) -> dg.AssetCheckResult:
    """The check result of ``connector_health``: one shape for the source and the sink."""
    health = connector_health(name, status)
    return dg.AssetCheckResult(
        passed=health.passed,
        severity=dg.AssetCheckSeverity(health.severity or "ERROR"),
        description=health.description,
        metadata={"connector": name, "states": dg.MetadataValue.json(health.states)},
    )
