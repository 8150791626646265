"""``cdc-lake ui`` on the session stack: the daemon and the token-gated webserver, played as its
user and as another local user.

The session stack lives in a temporary state directory (not the checkout's), so without the
environment ``cdc-lake ui`` gives its processes, their runs could not resolve the resources'
secrets. The attacker is a second Unix user (made with ``useradd``) in a forked child: it cannot
read the token, its requests get 401, and it cannot connect to any socket the UI's processes
hold. With the token, a run config that points a resource elsewhere or reads its secret from
another variable is refused before any run exists, and the listener it named hears nothing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from cdc_lake.defs.keys import KEYS
from cdc_lake.ops.instance import LOCATION, default_home, ui_token_path
from cdc_lake.ops.webserver import cookie_name
from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env, project_root
from cdc_lake_tests.second_user import as_user, attacker, descendants

LOCATIONS = "{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename } } } } }"  # noqa: E501
LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on RunConfigValidationInvalid { errors { message } }
  ... on PythonError { message }
  ... on LaunchRunSuccess { run { runId } } } }"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if m := re.fullmatch(r"socket:\[(\d+)\]", target):
            inodes.add(int(m.group(1)))
    return inodes


def _listeners(inodes: set[int]) -> tuple[set[int], set[str]]:
    """The TCP ports listened on and the Unix socket paths bound by these socket inodes."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[9]) in inodes:  # LISTEN
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and int(f[6]) in inodes and f[7].startswith("/"):
            paths.add(f[7])
    return ports, paths


def _post(url: str, query: str, variables: dict | None = None, token: str | None = None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers=headers,
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.load(r)


@dataclass
class RunningUi:
    proc: subprocess.Popen
    url: str
    token: str
    port: int


@pytest.fixture(scope="module")
def running_ui(local_stack: LocalStack, tmp_path_factory) -> Iterator[RunningUi]:
    """``cdc-lake ui`` as a user runs it, on the session stack; the URL it prints."""
    settings = local_stack.settings
    port = _free_port()
    out = tmp_path_factory.mktemp("ui") / "stdout"
    env = os.environ | {
        "CDC_LAKE_PORT_BASE": str(settings.port_base),
        "CDC_LAKE_JARS_DIR": str(settings.jars_dir),
    }
    for name in local_secret_env(settings):
        env.pop(name, None)  # the command finds them itself, from the stack's credentials
    cli = str(Path(sys.executable).parent / "cdc-lake")
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [cli, "--state-dir", str(settings.state_dir), "ui", "--port", str(port)],
            env=env, cwd=project_root(), stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline, url, token = time.monotonic() + 400, None, ""
        while url is None:
            assert proc.poll() is None, f"cdc-lake ui exited:\n{out.read_text()}"
            assert time.monotonic() < deadline, f"no URL printed:\n{out.read_text()}"
            if m := re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", out.read_text()):
                url = m.group(1)
                token = m.group(2)
            time.sleep(1)
        assert token == ui_token_path(settings).read_text().strip()
        yield RunningUi(proc, url, token, port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    # It stopped what it started: no daemon or webserver is left behind.
    assert not (settings.run_dir / "dagster-webserver.pid").exists()
    assert not (settings.run_dir / "dagster-daemon.pid").exists()


def _locations(ui: RunningUi) -> list[dict]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = _post(ui.url, LOCATIONS, token=ui.token)["data"]["workspaceOrError"]
        entries = found["locationEntries"]
        if entries and entries[0]["locationOrLoadError"]:
            return entries
        time.sleep(2)
    raise AssertionError("the UI never served the code location")


def test_ui_serves_the_stacks_instance_with_its_settings(
    running_ui: RunningUi, local_stack: LocalStack
):
    settings = local_stack.settings
    entries = _locations(running_ui)
    assert [e["locationOrLoadError"]["__typename"] for e in entries] == ["RepositoryLocation"]
    # Every process under it (webserver, daemon, their code servers; runs inherit theirs) has
    # the stack's instance and secrets in its environment, and none in its arguments.
    secrets = local_secret_env(settings)
    procs = descendants(running_ui.proc.pid)
    assert len(procs) >= 2
    homes = set()
    for pid in procs:
        try:
            environ = _environ(pid)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert not any(v in cmdline for v in secrets.values())
        assert running_ui.token not in cmdline
        assert all(environ.get(k) == v for k, v in secrets.items())
        homes.add(environ.get("DAGSTER_HOME"))
    assert homes == {str(default_home(settings))}


def test_the_url_with_the_token_sets_a_cookie_that_opens_the_ui(running_ui: RunningUi):
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(f"{running_ui.url}/runs?token={running_ui.token}", timeout=30)
    assert redirect.value.code == 303
    assert redirect.value.headers["Location"] == "/runs"  # the token leaves the address bar
    cookie = redirect.value.headers["Set-Cookie"]
    assert cookie.startswith(f"{cookie_name(running_ui.port)}={running_ui.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = urllib.request.Request(
        f"{running_ui.url}/runs", headers={"Cookie": cookie.split(";")[0]}
    )
    with urllib.request.urlopen(page, timeout=60) as r:
        assert r.status == 200 and b"<html" in r.read().lower()


def test_another_local_user_cannot_reach_the_ui(running_ui: RunningUi, local_stack: LocalStack):
    user = attacker()
    _locations(running_ui)  # the UI is up, with its code servers
    procs = [running_ui.proc.pid, *descendants(running_ui.proc.pid)]
    inodes = set().union(*(_socket_inodes(p) for p in procs if Path(f"/proc/{p}").exists()))
    ports, unix_paths = _listeners(inodes)
    # The webserver's port is the only TCP listener of the UI's processes; code servers use
    # Unix sockets.
    assert ports == {running_ui.port}
    assert unix_paths, "the code servers' Unix sockets were not found"
    url, token_file = running_ui.url, str(ui_token_path(local_stack.settings))
    launch = {
        "p": {
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
            }
        }
    }

    def probe() -> dict:
        out: dict = {}
        try:
            Path(token_file).read_text()
            out["token_read"] = True
        except PermissionError:
            out["token_read"] = False
        for name, query in (("page", None), ("graphql", LAUNCH), ("wrong_token", None)):
            try:
                if query is None:
                    suffix = "/?token=guess" if name == "wrong_token" else "/"
                    urllib.request.urlopen(f"{url}{suffix}", timeout=30)
                else:
                    _post(url, query, launch)
                out[name] = 200
            except urllib.error.HTTPError as e:
                out[name] = e.code
        out["unix"] = {}
        for path in sorted(unix_paths):
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(path)
                    out["unix"][path] = "connected"
                except OSError as e:
                    out["unix"][path] = type(e).__name__
        return out

    seen = as_user(user, probe)
    assert "child_error" not in seen, seen
    assert seen["token_read"] is False
    assert (seen["page"], seen["graphql"], seen["wrong_token"]) == (401, 401, 401), seen
    assert set(seen["unix"].values()) <= {"PermissionError", "FileNotFoundError"}, seen
    assert "PermissionError" in seen["unix"].values(), seen


def test_run_config_cannot_redirect_a_resource_or_pick_its_secret(
    running_ui: RunningUi, local_stack: LocalStack
):
    """The issue's exfiltration, now with the token: the Connect resource pointed at our own
    listener, its password read from the S3 secret's variable. Refused; nothing connects."""
    _locations(running_ui)
    heard: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                heard.append(conn.recv(65536))

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    instance = dg.DagsterInstance.from_config(str(default_home(local_stack.settings)))
    before = {r.run_id for r in instance.get_runs()}
    evil = {
        "url": f"http://127.0.0.1:{listener.getsockname()[1]}",
        "password": {"env": "CDC_LAKE_S3_SECRET_KEY"},
    }
    attempts = {
        "kafka_connect": {"resources": {"kafka_connect": {"config": evil}}},
        "postgres": {"resources": {"postgres": {"config": {"host": "127.0.0.2"}}}},
    }
    try:
        for resource, run_config in attempts.items():
            params = {
                "selector": {
                    "repositoryLocationName": LOCATION,
                    "repositoryName": "__repository__",
                    "jobName": "__ASSET_JOB",
                    "assetSelection": [{"path": k.topic.path} for k in KEYS],  # one multi-asset
                },
                "runConfigData": run_config,
            }
            answer = _post(running_ui.url, LAUNCH, {"p": params}, token=running_ui.token)
            launched = answer["data"]["launchRun"]
            assert launched["__typename"] == "RunConfigValidationInvalid", answer
            message = " ".join(e["message"] for e in launched["errors"])
            assert "unexpected config" in message and resource in message, message
        time.sleep(3)
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
    assert heard == []
    assert {r.run_id for r in instance.get_runs()} == before


def test_configured_home_keeps_a_users_dagster_home_as_it_is(tmp_path, monkeypatch):
    """With ``DAGSTER_HOME`` set, the CLI's runs go there and only a missing ``dagster.yaml`` is
    written; without it, the stack's own instance gets its workspace too."""
    from dagster._core.scheduler.instigation import InstigatorType, TickStatus

    from cdc_lake.ops.instance import INSTANCE_YAML, configured_home
    from cdc_lake_tests.conftest import make_settings

    settings = make_settings(29_400, state_dir=tmp_path / "state")
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "workspace.yaml"
    workspace.write_text("load_from:\n  - python_module: my_project.definitions\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert configured_home(settings) == home
    assert workspace.read_text() == "load_from:\n  - python_module: my_project.definitions\n"
    assert (home / "dagster.yaml").read_text() == INSTANCE_YAML
    # The daemon purges the sensor's skipped ticks after a day, its failures after 30 days.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        kept = instance.get_tick_retention_settings(InstigatorType.SENSOR)
        assert kept[TickStatus.SKIPPED] == 1 and kept[TickStatus.FAILURE] == 30
        assert kept[TickStatus.SUCCESS] == -1  # the ticks that requested runs stay

    monkeypatch.delenv("DAGSTER_HOME")
    own = configured_home(settings)
    assert own == default_home(settings)
    assert "cdc_lake.definitions" in (own / "workspace.yaml").read_text()
