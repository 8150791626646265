"""Process bookkeeping against real processes whose children come and go."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cdc_lake.stack.process import SERVER_ENV, PidFile, pid_alive, rss_mb, spawn, terminate


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


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_a_server_gets_only_the_environment_it_needs_and_writes_private_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The caller's secrets and tokens stay with the caller.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "caller-secret")
    monkeypatch.setenv("CDC_LAKE_PG_PASSWORD", "caller-password")
    monkeypatch.setenv("LANG", "C.UTF-8")
    log, pidfile = tmp_path / "logs" / "svc.log", PidFile(tmp_path / "run" / "svc.pid")
    script = "echo data > made.txt; mkdir made.d; echo done; exec sleep 30"
    pid = spawn(["sh", "-c", script], log, pidfile, env={"SVC_SETTING": "1"}, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 20
        while b"done" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = _environ(pid)
        # PWD: sh exports it itself.
        extra = set(env) - {*SERVER_ENV, "SVC_SETTING", "PWD"}
        assert extra == set()
        assert env["SVC_SETTING"] == "1"
        assert env["PATH"] == os.environ["PATH"] and env["LANG"] == "C.UTF-8"
        # Its log, and whatever it writes, are its user's alone.
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "made.txt").stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "made.d").stat().st_mode) == 0o700
    finally:
        terminate(pidfile, timeout_s=5)
    assert not pid_alive(pid)


def test_a_log_left_readable_is_made_private_on_the_next_start(tmp_path: Path):
    log, pidfile = tmp_path / "svc.log", PidFile(tmp_path / "svc.pid")
    log.write_text("an older run\n")
    log.chmod(0o644)
    pid = spawn(["true"], log, pidfile)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_text().startswith("an older run\n")
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
