"""The Hudi table's newest completed commit, read from S3 with boto3 alone (no Spark, no JVM).

Hudi 1.x keeps its active timeline under ``<table>/.hoodie/timeline/``: a completed write is
the object ``<requested time>_<completion time>.<action>``; requested and inflight instants have
other names, and archived ones live under ``history/``. One delimiter listing of that folder
therefore tells which commit is the table's newest, which is all a run needs to know that the
table has not changed since a commit it already reported. The actions are those of the commits
timeline that ``cdc_lake.lake.hudi_timeline.latest_commit`` reads (commit, deltacommit,
replacecommit), so both name the same instant.

A table that is missing, or laid out differently, gives None: callers then take the Spark path,
which reads the timeline through Hudi itself.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

COMPLETED = re.compile(r"^(\d+)_(\d+)\.(commit|deltacommit|replacecommit)$")


def timeline_prefix(table_prefix: str) -> str:
    return f"{table_prefix.strip('/')}/.hoodie/timeline/"


def newest_commit_instant(client: Any, bucket: str, table_prefix: str) -> str | None:
    """The requested time (the instant's name) of the newest completed commit, or None."""
    prefix = timeline_prefix(table_prefix)
    newest: str | None = None
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter="/"
    ):
        for obj in page.get("Contents", []):
            m = COMPLETED.match(obj["Key"][len(prefix) :])
            # Fixed-width digits: the greatest name is the newest requested time.
            if m and (newest is None or m.group(1) > newest):
                newest = m.group(1)
    return newest


def instant_time(instant: str) -> datetime.datetime | None:
    """When an instant was requested, from its name (``yyyyMMddHHmmssSSS``), or None for a
    name that is not one ("none" before the first commit). Hudi writes instants in the
    timeline's time zone (``hoodie.table.timeline.timezone``, default the JVM's); the stack and
    EMR run in UTC, so UTC is assumed."""
    try:
        parsed = datetime.datetime.strptime(instant[:17], "%Y%m%d%H%M%S%f")
    except ValueError:
        return None
    return parsed.replace(tzinfo=datetime.UTC) if len(instant) == 17 else None
