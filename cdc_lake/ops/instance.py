"""The stack's Dagster instance (``<state>/dagster_home``) and the Dagster processes run on it.

- ``prepare_home`` writes the instance's ``dagster.yaml`` (``INSTANCE_YAML``: telemetry off, and
  the raw-files sensor's skipped ticks, one every few seconds while it is on, kept a day instead
  of Dagster's week; runs are pruned by ``dagster_runs_prune``, ``cdc_lake/defs/retention.py``)
  and a ``workspace.yaml`` that loads ``cdc_lake.definitions`` as the code location
  ``cdc_lake``, the name ``dg dev`` gives it (``pyproject.toml``), so sensor state and ticks
  recorded by one are the other's.
- ``dagster_env`` is what a Dagster process needs to reach the stack: the resources' secrets
  (their ``EnvVar``s), the state dir, port base and jars dir, and ``DAGSTER_HOME``. It goes into
  the child's environment, never into its arguments; Dagster's logs name variables, not values.
  Children start in the home directory, so a ``.env`` of another stack (the checkout's) is not
  loaded over it.
- ``DagsterProcess`` starts the daemon, the webserver (behind the stack's UI token,
  ``cdc_lake/ops/webserver.py``) or a code server (on a Unix socket) detached with that
  environment, its output in ``<state>/logs/<name>.log`` (0600), its pid in ``<state>/run/``,
  and stops it (and its code servers) by that pid. No Dagster process but the webserver has a
  TCP port, and the webserver answers only to the token.
- ``serve_ui`` (``cdc-lake ui``) runs the daemon and the webserver until Ctrl-C, and prints the
  URL that carries the token.
- ``refresh_through_sensor`` turns a table's raw files sensor on with the daemon running, waits
  for the one ``lake_refresh`` run it requests to end, and turns the sensor off again (its
  default). The ticks, the cursor and the run are the instance's, so the UI shows them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_lake.stack.process import PidFile, pid_alive, port_in_use, spawn, tail, terminate
from cdc_lake.stack.settings import StackSettings, local_secret_env, project_root

if TYPE_CHECKING:
    import dagster as dg

LOCATION = "cdc_lake"  # [tool.dg.project] code_location_name: the location dg dev loads
TRIGGER_TAG = "cdc_lake/trigger"  # on the runs a cdc-lake command starts: which one
DAEMON_LOOP_S = 2.0
INSTANCE_YAML = """telemetry:
  enabled: false
retention:
  sensor:
    purge_after_days:
      skipped: 1
      failure: 30
      success: -1
"""


def default_home(settings: StackSettings) -> Path:
    return settings.state_dir / "dagster_home"


def configured_home(settings: StackSettings) -> Path:
    """The instance the CLI's runs go to: ``DAGSTER_HOME`` if set (its files are the user's:
    only a missing ``dagster.yaml`` is written), else the stack's own, prepared in full."""
    if os.environ.get("DAGSTER_HOME"):
        return prepare_home(Path(os.environ["DAGSTER_HOME"]), workspace=False)
    return prepare_home(default_home(settings))


def prepare_home(home: Path, grpc_socket: Path | None = None, workspace: bool = True) -> Path:
    """The instance directory with its ``dagster.yaml`` and ``workspace.yaml``; idempotent.
    With ``grpc_socket``, the workspace uses the code server there (``code_server``) instead of
    each Dagster process spawning its own; without ``workspace``, none is written."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(INSTANCE_YAML)
    if not workspace:
        _create_storage(home)
        return home
    workspace_file = home / "workspace.yaml"
    if grpc_socket is not None:
        location = f"  - grpc_server:\n      socket: {grpc_socket}\n"
    elif workspace_file.exists() and "grpc_server" in workspace_file.read_text():
        return home  # keep the code server a caller set up
    else:
        location = (
            "  - python_module:\n"
            "      module_name: cdc_lake.definitions\n"
            f"      working_directory: {project_root()}\n"
        )
    workspace_file.write_text(f"load_from:\n{location}      location_name: {LOCATION}\n")
    _create_storage(home)
    return home


def _create_storage(home: Path) -> None:
    """Create the instance's SQLite storages now: a webserver and a daemon started together on
    a fresh instance would both create them, and leave two alembic heads behind."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)
        instance.all_instigator_state()


def dagster_env(settings: StackSettings, home: Path) -> dict[str, str]:
    """The variables a Dagster process on this stack needs, secrets included (environment only)."""
    env = local_secret_env(settings) | {
        "DAGSTER_HOME": str(home),
        "CDC_LAKE_STATE_DIR": str(settings.state_dir),
        "CDC_LAKE_PORT_BASE": str(settings.port_base),
        "CDC_LAKE_JARS_DIR": str(settings.jars_dir),
    }
    # A checkout used without installing it (PYTHONPATH), and the venv's own bin directory.
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        if name in os.environ:
            env[name] = os.environ[name]
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return env


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@dataclass
class DagsterProcess:
    """A Dagster process on the stack's instance: ``argv`` and then ``-w <workspace>``."""

    settings: StackSettings
    home: Path
    name: str  # its log and pid file: "dagster-daemon", "dagster-webserver", "dagster-code"
    argv: tuple[str, ...]
    loads_workspace: bool = True  # False: it serves the code itself (a code server)

    @property
    def log(self) -> Path:
        return self.settings.logs_dir / f"{self.name}.log"

    @property
    def pidfile(self) -> PidFile:
        return PidFile(self.settings.run_dir / f"{self.name}.pid")

    def start(self) -> int:
        if (pid := self.pidfile.read()) is not None:
            return pid
        argv = [*self.argv]
        if self.loads_workspace:
            argv += ["-w", str(prepare_home(self.home) / "workspace.yaml")]
        return spawn(
            argv, self.log, self.pidfile, env=dagster_env(self.settings, self.home), cwd=self.home
        )

    def alive(self) -> bool:
        return self.pidfile.read() is not None

    def stop(self) -> bool:
        return terminate(self.pidfile, timeout_s=20)

    def failure(self, what: str) -> RuntimeError:
        return RuntimeError(f"{what}; {self.name}'s log {self.log} ends with:\n{tail(self.log)}")


def daemon(settings: StackSettings, home: Path) -> DagsterProcess:
    argv = (_bin("dagster-daemon"), "run", "--log-level", "warning")
    return DagsterProcess(settings, home, "dagster-daemon", argv)


def ui_token_path(settings: StackSettings) -> Path:
    return settings.conf_dir / "ui.token"


def webserver(settings: StackSettings, home: Path, port: int) -> DagsterProcess:
    """The Dagster UI on 127.0.0.1:``port`` behind the stack's UI token
    (``cdc_lake/ops/webserver.py``)."""
    argv = (sys.executable, "-m", "cdc_lake.ops.webserver", "--host", "127.0.0.1",
            "--port", str(port), "--token-file", str(ui_token_path(settings)))  # fmt: skip
    return DagsterProcess(settings, home, "dagster-webserver", argv)


def code_server(settings: StackSettings, home: Path, socket: Path) -> DagsterProcess:
    """``dagster code-server start`` for ``cdc_lake.definitions`` on a Unix socket (in a 0700
    directory: no other user can call it): one long-lived code server for the webserver and
    the daemon (theirs would stop when a heartbeat comes late on a loaded machine). Runs start
    from it, with its environment."""
    argv = (_bin("dagster"), "code-server", "start", "-m", "cdc_lake.definitions",
            "--location-name", LOCATION, "--socket", str(socket), "-d", str(project_root()),
            "--log-level", "warning")  # fmt: skip
    return DagsterProcess(settings, home, "dagster-code", argv, loads_workspace=False)


def wait_for_webserver(
    proc: DagsterProcess, port: int, token: str, timeout_s: float = 180.0
) -> str:
    """The UI's URL once it answers ``/server_info`` to the token."""
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(
        f"{url}/server_info", headers={"Authorization": f"Bearer {token}"}
    )
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                if r.status == 200:
                    return url
        except OSError:
            pass
        if not proc.alive():
            raise proc.failure("the Dagster webserver exited")
        time.sleep(1.0)
    raise proc.failure(f"the Dagster webserver did not answer on {url} in {timeout_s:.0f}s")


def start_sensor(settings: StackSettings, home: Path, sensor: str) -> None:
    """``dagster sensor start`` on the instance (the instigator state the daemon reads)."""
    workspace = str(prepare_home(home) / "workspace.yaml")
    verb = "start"
    done = subprocess.run(
        [_bin("dagster"), "sensor", verb, sensor, "-w", workspace],
        env=os.environ | dagster_env(settings, home),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"dagster sensor {verb} {sensor} failed:\n{done.stdout}{done.stderr}")


def stop_sensor(instance: dg.DagsterInstance, sensor: str) -> None:
    """Stop the sensor by its stored state (no code location to load, unlike the CLI)."""
    for state in instance.all_instigator_state():
        if state.instigator_name == sensor and state.is_running:
            instance.stop_sensor(state.instigator_origin_id, state.selector_id, None)


def sensor_runs(instance: dg.DagsterInstance, sensor: str, since: float) -> list[dg.DagsterRun]:
    """Runs the sensor requested (Dagster tags them with its name) created after ``since``."""
    import datetime

    import dagster as dg

    after = datetime.datetime.fromtimestamp(since, datetime.UTC)
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={"dagster/sensor_name": sensor}, created_after=after)
    )
    return [r.dagster_run for r in records]


def refresh_through_sensor(
    settings: StackSettings, instance: dg.DagsterInstance, sensor: str, timeout_s: float = 900.0
) -> dg.DagsterRun:
    """Start the daemon, turn the raw files sensor named ``sensor`` on, wait for the run it
    requests to end, then turn the sensor off and stop the daemon. Raises when no run ends in
    time."""
    home = Path(instance.root_directory)
    name = sensor
    proc = daemon(settings, home)
    since = time.time()
    proc.start()
    try:
        start_sensor(settings, home, name)
        try:
            run = _wait_for_one_run(instance, proc, name, since, timeout_s)
        finally:
            stop_sensor(instance, name)
    finally:
        proc.stop()
    return run


def _wait_for_one_run(
    instance: dg.DagsterInstance, proc: DagsterProcess, sensor: str, since: float, timeout_s: float
) -> dg.DagsterRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = sensor_runs(instance, sensor, since)
        if runs and all(r.is_finished for r in runs):
            return runs[-1]  # newest first: the first one requested
        if not pid_alive(proc.pidfile.read() or -1):
            raise proc.failure("the Dagster daemon exited")
        time.sleep(DAEMON_LOOP_S)
    raise proc.failure(f"no run of {sensor} ended within {timeout_s:.0f}s")


def check_evaluations(instance: dg.DagsterInstance, run_id: str) -> list:
    """The run's asset check evaluations, from the instance's event log."""
    import dagster as dg

    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    return [
        r.event_log_entry.dagster_event.event_specific_data
        for r in records
        if r.event_log_entry.dagster_event is not None
    ]


def materializations(instance: dg.DagsterInstance, run_id: str) -> dict:
    """The run's materializations by asset key, from the instance's event log."""
    import dagster as dg

    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    out = {}
    for r in records:
        mat = r.asset_materialization
        if mat is not None:
            out[mat.asset_key] = mat
    return out


def ui_url(port: int, token: str) -> str:
    """The URL that opens the UI: it carries the UI's token once (the gate makes it a cookie)."""
    from cdc_lake.ops.webserver import TOKEN_PARAM

    return f"http://127.0.0.1:{port}/?{TOKEN_PARAM}={token}"


def serve_ui(settings: StackSettings, port: int = 3000) -> int:
    """``cdc-lake ui``: the daemon and the token-gated webserver on the stack's instance, until
    Ctrl-C or SIGTERM; then both stop. Prints the URL with the token (only here: never in a log
    or an argument)."""
    import signal

    from cdc_lake.ops.webserver import ensure_token

    if port_in_use("127.0.0.1", port):
        print(f"[ui] port {port} is in use: pass another with --port", file=sys.stderr)
        return 2
    home = prepare_home(default_home(settings))
    token = ensure_token(ui_token_path(settings))
    web, bg = webserver(settings, home, port), daemon(settings, home)
    if (pid := web.pidfile.read()) is not None:
        print(f"[ui] this stack's UI already runs (pid {pid}): stop it first", file=sys.stderr)
        return 2
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    web.start()
    bg.start()
    try:
        wait_for_webserver(web, port, token, timeout_s=300)
        print(f"[ui] the Dagster UI on the instance {home}; open (the link carries its token):")
        print(f"[ui]   {ui_url(port, token)}", flush=True)
        while not stopping and web.alive() and bg.alive():
            time.sleep(1.0)
        if not stopping:
            failed = web if not web.alive() else bg
            raise failed.failure(f"{failed.name} exited")
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        bg.stop()
        web.stop()
