"""``lake_lag_seconds``: passes at or under the warning threshold, WARNs past it, is an ERROR
past the error threshold, and names what is behind; the applied time is metadata."""

from __future__ import annotations

import dagster as dg

from cdc_lake.defs.keys import KEYS
from cdc_lake.defs.lake.lag import LAG_CHECK, applied_metadata, lag_check, lag_result
from cdc_lake.lake.lag import Lag


def test_the_thresholds_decide_the_severity():
    ok = lag_result(Lag(100_000, 90_000, 95_000), warn_s=10, error_s=60)
    assert ok.passed and ok.metadata["pending_lag_seconds"].value == 5.0
    assert ok.metadata["applied_lag_seconds"].value == 10.0
    warn = lag_result(Lag(100_000, 90_000, 80_000), warn_s=10, error_s=60)
    assert not warn.passed and warn.severity == dg.AssetCheckSeverity.WARN
    assert "20 s old, over 10 s" in (warn.description or "")
    error = lag_result(Lag(200_000, 90_000, 80_000), warn_s=10, error_s=60)
    assert not error.passed and error.severity == dg.AssetCheckSeverity.ERROR
    assert "120 s old, over 60 s" in (error.description or "")
    assert error.metadata["oldest_pending_change"].value == 80.0
    # Nothing pending passes whatever the newest change's age.
    assert lag_result(Lag(10**9, 0, None), warn_s=0, error_s=0).passed
    assert applied_metadata(Lag(1, None, None)) == {}


def test_every_captured_table_has_one():
    checks = [lag_check(k) for k in KEYS]
    assert [next(iter(c.check_keys)) for c in checks] == [
        dg.AssetCheckKey(k.hudi, LAG_CHECK) for k in KEYS
    ]
