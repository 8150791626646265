"""Process bookkeeping against real processes whose children come and go."""

from __future__ import annotations

import subprocess

from cdc_lake.stack.process import pid_alive, rss_mb


def test_rss_survives_children_exiting_while_it_reads():
    # A parent forking short-lived children, as postgres does with its backends. CI once failed
    # because a child vanished between the children listing and the read of its status.
    parent = subprocess.Popen(
        ["sh", "-c", "echo ready; while true; do sleep 0.001 & wait; done"],
        stdout=subprocess.PIPE,
    )
    try:
        # Popen returns mid-exec: until sh has run, it holds 4 kB and reads 0.0 MiB (a loaded CI
        # machine once kept it there for the first readings). Its first line says it has run.
        assert parent.stdout is not None
        assert parent.stdout.readline() == b"ready\n"
        # A fixed count, not a deadline: a loaded machine reads more slowly, never fewer times.
        readings = [rss_mb(parent.pid) for _ in range(1000)]
        assert all(r is not None and r > 0 for r in readings), [r for r in readings if not r][:5]
        assert pid_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    assert not pid_alive(parent.pid)
    assert rss_mb(parent.pid) is None
