"""Process bookkeeping against real processes whose children come and go."""

from __future__ import annotations

import subprocess
import time

from cdc_lake.stack.process import pid_alive, rss_mb


def test_rss_survives_children_exiting_while_it_reads():
    # A parent forking short-lived children, as postgres does with its backends. CI once failed
    # because a child vanished between the children listing and the read of its status.
    parent = subprocess.Popen(["sh", "-c", "while true; do sleep 0.001 & wait; done"])
    try:
        deadline = time.monotonic() + 3
        readings = []
        while time.monotonic() < deadline:
            readings.append(rss_mb(parent.pid))
        assert len(readings) > 100
        assert all(r is not None and r > 0 for r in readings)
        assert pid_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()
    assert not pid_alive(parent.pid)
