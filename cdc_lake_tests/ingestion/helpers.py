"""Reading what the pipeline wrote, for assertions."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import dagster as dg

from cdc_lake.raw.objects import RawLayout, list_objects


def raw_events(s3_client: Any, bucket: str, prefix: str, topic: str) -> list[dict[str, Any]]:
    """Every event in the topic's raw files, in key order (offset order within a partition)."""
    objects = list_objects(s3_client, bucket, RawLayout(prefix, topic)).objects
    events: list[dict[str, Any]] = []
    for obj in sorted(objects):
        body = s3_client.get_object(Bucket=bucket, Key=obj.key)["Body"].read().decode()
        events += [json.loads(line) for line in body.splitlines() if line]
    return events


def wait_for_events(
    read: Callable[[], list[dict[str, Any]]],
    done: Callable[[list[dict[str, Any]]], bool],
    timeout_s: float = 90.0,
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        events = read()
        if done(events):
            return events
        time.sleep(1.0)
    raise AssertionError(f"condition not met in {timeout_s:.0f}s; {len(events)} events seen")


def metadata(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    for ev in result.get_asset_materialization_events():
        mat = ev.materialization
        if mat.asset_key == key:
            return {k: v.value for k, v in mat.metadata.items()}
    raise KeyError(key)
