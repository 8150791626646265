"""The lake's lag in seconds (``cdc_lake/lake/lag.py``) and the newest source time a checkpoint
keeps (``cdc_lake/lake/checkpoint.py``): pure, no stack. On the real stack:
``cdc_lake_tests/ops/test_refresh.py`` (raw files) and ``cdc_lake_tests/ingestion/test_lag.py``
(the topic)."""

from __future__ import annotations

import json

from cdc_lake.lake.checkpoint import Checkpoint, PartitionProgress
from cdc_lake.lake.lag import Lag, applied_ts_ms


def test_the_two_numbers():
    lag = Lag(now_ms=100_000, applied_ts_ms=40_000, oldest_pending_ts_ms=70_500)
    assert lag.applied_s == 60.0 and lag.pending_s == 29.5
    # Nothing pending: the lake holds all there is, however old its newest change.
    idle = Lag(now_ms=100_000, applied_ts_ms=1_000, oldest_pending_ts_ms=None)
    assert idle.pending_s == 0.0 and idle.applied_s == 99.0
    # Before any refresh said: no applied time; clocks a little apart never give a negative.
    assert Lag(5_000, None, 6_000).applied_s is None and Lag(5_000, None, 6_000).pending_s == 0


def test_the_checkpoint_keeps_the_newest_source_time_applied():
    cp = Checkpoint("t", {0: PartitionProgress(9, 0, "e")})
    assert cp.applied_ts_ms is None and "applied_ts_ms" not in cp.to_json()
    later = cp.applied_until(2_000).applied_until(None)
    # An older batch (a replay, another partition's late lines) never moves it back.
    assert later.applied_until(1_500).applied_ts_ms == 2_000
    assert later.applied_until(2_500).applied_ts_ms == 2_500
    wire = json.loads(json.dumps(later.to_json()))
    assert Checkpoint.from_json(wire) == later and applied_ts_ms(wire) == 2_000
    # A replay rewinds the offsets, not the time; a checkpoint from before reads as None.
    assert later.rewound(0).applied_ts_ms == 2_000
    assert applied_ts_ms(cp.to_json()) is None and applied_ts_ms(None) is None
