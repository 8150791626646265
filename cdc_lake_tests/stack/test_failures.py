"""Bad input: each failure gives one clear message naming the component, the log and the fix,
and leaves nothing half-started."""

from __future__ import annotations

import dataclasses
import shutil
import socket
from pathlib import Path

import pytest

from cdc_lake.stack import LocalStack, StackError
from cdc_lake.stack.install import resolve_jars
from cdc_lake.stack.services import require_java
from cdc_lake_tests.conftest import TEST_PORT_BASE, fresh_state_dir, make_settings, processes_using


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with the basics but no java and no mvn."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "env", "uname", "cat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return bin_dir


def test_port_taken_names_component_and_fix_and_stops_what_started():
    settings = make_settings(TEST_PORT_BASE + 200)
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind((settings.host, settings.port("s3")))
    blocker.listen()
    stack = LocalStack(settings, verbose=False)
    try:
        with pytest.raises(StackError) as err:
            stack.up()
        msg = str(err.value)
        assert msg.startswith("s3: port") and str(settings.port("s3")) in msg
        assert "CDC_LAKE_PORT_BASE" in msg and "s3.log" in msg
        # postgres had started before s3 failed; it was stopped again.
        assert processes_using(settings.state_dir) == []
    finally:
        blocker.close()
        stack.down()
        shutil.rmtree(settings.state_dir, ignore_errors=True)


def test_java_missing_is_named_with_the_fix(bare_path: Path):
    with pytest.raises(StackError, match=r"Java 17.*apt-get install -y openjdk-17"):
        require_java()
    settings = make_settings(TEST_PORT_BASE + 300)
    stack = LocalStack(settings, verbose=False)
    try:
        with pytest.raises(StackError) as err:
            stack.up()
        assert str(err.value).startswith("s3: ") and "s3.log" in str(err.value)
        assert processes_using(settings.state_dir) == []
    finally:
        stack.down()
        shutil.rmtree(settings.state_dir, ignore_errors=True)


def test_maven_missing_is_named_with_the_fix(bare_path: Path):
    settings = make_settings(TEST_PORT_BASE + 400)
    with pytest.raises(StackError, match=r"Maven.*apt-get install -y maven"):
        resolve_jars(dataclasses.replace(settings, jars_dir=settings.state_dir / "jars"))
    shutil.rmtree(settings.state_dir, ignore_errors=True)


def test_failed_download_names_maven_log_and_fix(tmp_path: Path):
    settings = make_settings(TEST_PORT_BASE + 500)
    settings = dataclasses.replace(settings, jars_dir=settings.state_dir / "jars")
    # An empty local repository in offline mode: every artifact download fails for real.
    with pytest.raises(StackError) as err:
        resolve_jars(settings, maven_args=["-o", f"-Dmaven.repo.local={tmp_path / 'm2'}"])
    msg = str(err.value)
    assert "Maven could not resolve" in msg and "install-maven.log" in msg and "Fix:" in msg
    assert not (settings.jars_dir / ".installed").exists()
    shutil.rmtree(settings.state_dir, ignore_errors=True)


def test_unhealthy_in_time_names_component_log_and_leaves_nothing():
    settings = dataclasses.replace(
        make_settings(TEST_PORT_BASE + 600, fresh_state_dir()), start_timeout_s=1.0
    )
    stack = LocalStack(settings, verbose=False)
    try:
        with pytest.raises(StackError) as err:
            stack.up()
        msg = str(err.value)
        assert "did not become healthy within 1s" in msg
        assert ".log" in msg and "cdc-lake stack up" in msg
        assert processes_using(settings.state_dir) == []
    finally:
        stack.down()
        shutil.rmtree(settings.state_dir, ignore_errors=True)
