"""``cdc-lake ui``: ``dg dev`` on the stack's instance, for a stack in any state directory. The
session stack lives in a temporary state directory (not the checkout's), so without the
environment ``ui_command`` gives, its runs could not resolve the resources' secrets."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from cdc_lake.instance import default_home, ui_command
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env, project_root

LOCATIONS = "{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename } } } } }"  # noqa: E501


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for proc in Path("/proc").iterdir():
            try:
                if (
                    proc.name.isdigit()
                    and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent
                ):
                    out.append(int(proc.name))
                    todo.append(int(proc.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)


def test_ui_serves_the_stacks_instance_with_its_settings(local_stack: LocalStack):
    settings = local_stack.settings
    assert settings.state_dir != (project_root() / ".cdc-lake").resolve()
    port = _free_port()
    argv, env = ui_command(settings, port)
    secrets = local_secret_env(settings)
    assert not any(v in " ".join(argv) for v in secrets.values())
    proc = subprocess.Popen(
        argv, env=env, cwd=project_root(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        url, deadline, entries = f"http://127.0.0.1:{port}", time.monotonic() + 300, None
        while time.monotonic() < deadline and entries is None:
            assert proc.poll() is None, "dg dev exited"
            try:
                request = urllib.request.Request(
                    f"{url}/graphql", data=json.dumps({"query": LOCATIONS}).encode(),
                    headers={"Content-Type": "application/json"},
                )  # fmt: skip
                with urllib.request.urlopen(request, timeout=10) as r:
                    found = json.load(r)["data"]["workspaceOrError"]["locationEntries"]
                if found and found[0]["locationOrLoadError"]:
                    entries = found
            except OSError:
                pass
            time.sleep(2)
        assert entries is not None, "the UI never served the code location"
        assert [e["locationOrLoadError"]["__typename"] for e in entries] == ["RepositoryLocation"]
        # Every process under dg dev (webserver, daemon, code server; runs inherit theirs) has
        # the stack's instance and secrets in its environment, and none in its arguments.
        procs = _descendants(proc.pid)
        assert procs
        homes = set()
        for pid in procs:
            try:
                environ = _environ(pid)
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert not any(v in cmdline for v in secrets.values())
            assert all(environ.get(k) == v for k, v in secrets.items())
            homes.add(environ.get("DAGSTER_HOME"))
        assert homes == {str(default_home(settings))}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_configured_home_keeps_a_users_dagster_home_as_it_is(tmp_path, monkeypatch):
    """With ``DAGSTER_HOME`` set, the CLI's runs go there and only a missing ``dagster.yaml`` is
    written; without it, the stack's own instance gets its workspace too."""
    from cdc_lake.instance import configured_home
    from cdc_lake_tests.conftest import make_settings

    settings = make_settings(29_400, state_dir=tmp_path / "state")
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "workspace.yaml"
    workspace.write_text("load_from:\n  - python_module: my_project.definitions\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert configured_home(settings) == home
    assert workspace.read_text() == "load_from:\n  - python_module: my_project.definitions\n"
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"

    monkeypatch.delenv("DAGSTER_HOME")
    own = configured_home(settings)
    assert own == default_home(settings)
    assert "cdc_lake.definitions" in (own / "workspace.yaml").read_text()
