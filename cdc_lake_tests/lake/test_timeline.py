"""Instant names to times, for the commit time shown next to each commit instant."""

from __future__ import annotations

import datetime

from cdc_lake.lake.timeline import instant_time


def test_instant_names_are_read_as_utc_milliseconds():
    when = instant_time("20261122084043350")
    assert when == datetime.datetime(2026, 11, 22, 8, 40, 43, 350_000, tzinfo=datetime.UTC)


def test_names_that_are_not_instants_give_none():
    for name in ("none", "", "2026112208404335", "202611220840433501", "2026132208404335x"):
        assert instant_time(name) is None, name
