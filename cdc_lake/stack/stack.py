"""``LocalStack``: bring the local servers up, report on them, and take them down.

The state directory is private: it, ``run/`` and ``data/`` are 0700, or 0710 with the group of
the user PostgreSQL runs as (when ``up`` runs as root), who must pass through them to its data
and socket directories but not list them; ``conf/`` is 0700, and ``logs/`` and the S3 and Kafka
data are 0700 directories of 0600 files (the servers run with umask 077).

``up`` is idempotent: a service whose recorded process is alive and healthy is left alone. A
service that cannot start (a port taken by someone else, a crash, no health in time) stops the
whole ``up``: everything this call started is stopped again, and the error names the component,
its log and the fix. ``down`` stops, in reverse order, only the pids the stack recorded (of
every server it may run, the optional ones included).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace
from typing import Any

from cdc_lake.stack.process import (
    PidFile,
    StackError,
    port_in_use,
    rss_mb,
    spawn,
    tail,
    terminate,
    wait_until,
)
from cdc_lake.stack.services import Service, all_services
from cdc_lake.stack.settings import (
    CONNECT_WORKERS,
    PORT_OFFSETS,
    StackSettings,
    local_secret_env,
    project_root,
)


@dataclass
class ServiceStatus:
    name: str
    pid: int | None
    healthy: bool
    rss_mb: float | None
    log: str
    details: dict[str, Any]


class LocalStack:
    def __init__(
        self,
        settings: StackSettings | None = None,
        verbose: bool = True,
        only: list[str] | None = None,
    ):
        self.settings = settings or StackSettings.from_env()
        self.services = [s for s in all_services(self.settings) if not only or s.name in only]
        # What ``down`` stops: with no ``only``, the optional servers too (the Spark cluster, a
        # second Connect worker), whether or not this call's settings turn them on, so that a
        # ``stack down`` without the variables of its ``up`` leaves nothing running.
        everything = replace(
            self.settings, spark_mode="cluster", connect_workers=max(CONNECT_WORKERS)
        )
        self.stoppable = self.services if only else all_services(everything)
        self.verbose = verbose

    def _say(self, msg: str) -> None:
        if self.verbose:
            print(f"[stack] {msg}", flush=True)

    def pidfile(self, service: Service) -> PidFile:
        return PidFile(self.settings.run_dir / f"{service.name}.pid")

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    # --- up ----------------------------------------------------------------------------------
    def up(self) -> dict[str, float]:
        """Start every service not already running; returns seconds to healthy per service."""
        self.private_layout()
        started: list[Service] = []
        timings: dict[str, float] = {}
        try:
            for svc in self.services:
                t0 = time.monotonic()
                if self._start(svc):
                    started.append(svc)
                timings[svc.name] = round(time.monotonic() - t0, 2)
        except BaseException:
            for svc in reversed(started):
                terminate(self.pidfile(svc), svc.stop_signal)
            raise
        self.write_env_file()
        return timings

    def private_layout(self) -> None:
        """Create or tighten the state directory's modes (see the module docstring); files an
        older version left readable are made 0600."""
        s = self.settings
        # Whether or not this stack runs PostgreSQL (``only``), the directory may be shared.
        group = next((svc.run_as for svc in all_services(s) if svc.run_as), None)
        for path in (s.state_dir, s.run_dir, s.state_dir / "data"):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            if group:
                shutil.chown(path, group=group)
            path.chmod(0o710 if group else 0o700)
        for path in (s.logs_dir, s.conf_dir, s.data_dir("s3"), s.data_dir("kafka")):
            path.mkdir(mode=0o700, exist_ok=True)
            path.chmod(0o700)
        for path in (s.logs_dir, s.data_dir("s3"), s.data_dir("kafka")):
            for root, dirs, files in os.walk(path):
                for d in dirs:
                    os.chmod(os.path.join(root, d), 0o700)
                for f in files:
                    os.chmod(os.path.join(root, f), 0o600)

    def write_env_file(self) -> None:
        """The resources' secrets as ``.env`` at the project root, which ``dagster dev`` loads;
        only for the project's own stack (default state directory)."""
        if self.settings.state_dir != (project_root() / ".cdc-lake").resolve():
            return
        path = project_root() / ".env"
        lines = [f"{k}={v}" for k, v in local_secret_env(self.settings).items()]
        lines.append(f"CDC_LAKE_PORT_BASE={self.settings.port_base}")
        path.write_text(
            "# written by `cdc-lake stack up`; do not commit\n" + "\n".join(lines) + "\n"
        )
        path.chmod(0o600)

    def _start(self, svc: Service) -> bool:
        pidfile = self.pidfile(svc)
        pid = pidfile.read()
        if pid is not None:
            self._wait_healthy(svc, pid, pidfile)
            svc.after_healthy()
            self._say(f"{svc.name}: already running (pid {pid})")
            return False
        for port_name in svc.ports:
            port = self.settings.port(port_name)
            if port_in_use(self.settings.host, port):
                raise StackError(
                    f"{svc.name}: port {port} on {self.settings.host} is already in use by a "
                    f"process this stack did not start. Fix: stop that process, or move the "
                    f"stack with CDC_LAKE_PORT_BASE (now {self.settings.port_base}; ports are the "
                    f"base plus {sorted(PORT_OFFSETS.values())}). Log: {svc.log}"
                )
        try:
            svc.prepare()
            argv = svc.argv()
        except StackError as e:
            if str(e).startswith(f"{svc.name}:"):
                raise
            raise StackError(f"{svc.name}: {e} Log: {svc.log}") from e
        pid = spawn(argv, svc.log, pidfile, env=svc.env(), cwd=svc.cwd(), user=svc.run_as)
        self._say(f"{svc.name}: started (pid {pid}), waiting for health")
        try:
            self._wait_healthy(svc, pid, pidfile)
            svc.after_healthy()
        except BaseException:
            terminate(pidfile, svc.stop_signal)
            raise
        self._say(f"{svc.name}: healthy at {svc.endpoint}")
        return True

    def _wait_healthy(self, svc: Service, pid: int, pidfile: PidFile) -> None:
        ok = wait_until(
            svc.healthy,
            self.settings.start_timeout_s,
            alive=lambda: pidfile.read() == pid,
        )
        if ok:
            return
        died = pidfile.read() != pid
        what = (
            "exited during start-up"
            if died
            else (f"did not become healthy within {self.settings.start_timeout_s:.0f}s")
        )
        raise StackError(
            f"{svc.name} {what}. Log: {svc.log}. Fix: {svc.fix_hint()}, then rerun "
            f"`cdc-lake stack up`.\n--- last lines of {svc.log.name} ---\n{tail(svc.log)}"
        )

    # --- down --------------------------------------------------------------------------------
    def down(self) -> list[str]:
        stopped = []
        for svc in reversed(self.stoppable):
            if terminate(self.pidfile(svc), svc.stop_signal):
                stopped.append(svc.name)
                self._say(f"{svc.name}: stopped")
        return stopped

    # --- status ------------------------------------------------------------------------------
    def status(self) -> dict[str, ServiceStatus]:
        out: dict[str, ServiceStatus] = {}
        for svc in self.services:
            pid = self.pidfile(svc).read()
            healthy = False
            if pid is not None:
                try:
                    healthy = bool(svc.healthy())
                except Exception:
                    healthy = False
            out[svc.name] = ServiceStatus(
                name=svc.name,
                pid=pid,
                healthy=healthy,
                rss_mb=rss_mb(pid) if pid else None,
                log=str(svc.log),
                details=svc.details(),
            )
        return out

    def healthy(self) -> bool:
        return all(s.healthy for s in self.status().values())

    def describe(self) -> dict[str, Any]:
        """Every endpoint and credential a client needs, as printed by ``status --json``."""
        s = self.settings
        statuses = self.status()
        spark_jars = [str(p) for p in s.spark_jars()]
        return {
            "state_dir": str(s.state_dir),
            "jars_dir": str(s.jars_dir),
            "healthy": all(st.healthy for st in statuses.values()),
            **{name: st.details for name, st in statuses.items()},
            "spark": {
                "jars": spark_jars,
                "mode": s.spark_mode,
                "master": s.spark_master_url if s.spark_mode == "cluster" else "local[*]",
                "ready": bool(spark_jars),
            },
            "services": {
                name: {
                    "pid": st.pid,
                    "healthy": st.healthy,
                    "rss_mb": st.rss_mb,
                    "log": st.log,
                }
                for name, st in statuses.items()
            },
        }
