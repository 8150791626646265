"""The session stack's lake server as a process: private token, no secret in its arguments or
environment, loopback only, no answer without the token, and its warm-up."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from cdc_lake.stack import LocalStack
from cdc_lake.stack.lake_server import LakeServerError, request, token_path
from cdc_lake.stack.services import LakeServer
from cdc_lake.stack.warm_up import MAX_ROUNDS, PREFIX
from cdc_lake_tests.stack.test_spark import (
    LOOPBACK,
    all_cmdlines,
    listening_sockets,
    stack_secrets,
)


def _server(local_stack: LocalStack) -> LakeServer:
    svc = local_stack.service("lake_server")
    assert isinstance(svc, LakeServer)
    return svc


def test_the_lake_server_holds_no_secret_in_its_arguments_or_environment(local_stack: LocalStack):
    s = local_stack.settings
    health = _server(local_stack).health()
    pid, jvm = health["pid"], health["jvm_pid"]
    assert pid == local_stack.pidfile(_server(local_stack)).read()
    secrets = stack_secrets(local_stack)
    token = token_path(s).read_text().strip()
    cmdlines = all_cmdlines()
    assert "cdc_lake.stack.lake_server" in cmdlines[pid]
    assert "org.apache.spark.deploy.SparkSubmit" in cmdlines[jvm]
    for proc in (pid, jvm):
        environ = Path(f"/proc/{proc}/environ").read_bytes().decode(errors="replace")
        for where, text in ((f"{proc} argv", cmdlines[proc]), (f"{proc} environ", environ)):
            found = [n for n, v in {**secrets, "token": token}.items() if v in text]
            assert found == [], where
    # s3a's keys are in a 0600 file, which the JVM's environment names.
    environ = Path(f"/proc/{jvm}/environ").read_bytes().decode(errors="replace").split("\0")
    named = "AWS_CREDENTIAL_PROFILES_FILE="
    (profile,) = [e[len(named) :] for e in environ if e.startswith(named)]
    assert stat.S_IMODE(Path(profile).stat().st_mode) == 0o600
    assert s.credentials.s3_secret_key in Path(profile).read_text()
    assert stat.S_IMODE(token_path(s).stat().st_mode) == 0o600
    # The server and its JVM listen on loopback only.
    sockets = listening_sockets(pid) + listening_sockets(jvm)
    assert (s.host, s.port("lake_server")) in sockets
    assert [a for a in sockets if a[0] not in LOOPBACK] == []


def test_the_lake_server_answers_only_with_its_token(local_stack: LocalStack, tmp_path: Path):
    s = local_stack.settings
    wrong = tmp_path / "token"
    wrong.write_text("not-the-token\n")
    port = s.port("lake_server")
    with pytest.raises(LakeServerError, match="answered 401"):
        request(s.host, port, wrong, "GET", "/health", timeout_s=5)
    with pytest.raises(LakeServerError, match="answered 401"):
        request(s.host, port, wrong, "POST", "/run", {"app": "upsert", "params": {}}, 5)
    with pytest.raises(LakeServerError, match="answered 401"):
        request(s.host, port, wrong, "GET", "/memory", timeout_s=5)
    assert request(s.host, port, token_path(s), "GET", "/health", timeout_s=5)["jvm_pid"]
    # The soak benchmark's sample: the heap after a full GC, within what the JVM may take.
    memory = request(s.host, port, token_path(s), "GET", "/memory", timeout_s=120)
    assert 0 < memory["heap_used_mb"] <= memory["heap_committed_mb"] <= memory["heap_max_mb"]
    assert memory["jvm_threads"] > 1 and memory["python_threads"] >= 1


def test_the_lake_server_warms_up_on_the_upsert_path_and_leaves_nothing(local_stack: LocalStack):
    """At its start the server runs the upsert app on a throwaway table in the stack's S3 until
    the JIT is quiet or an app is asked for (cdc_lake/stack/warm_up.py), then deletes it:
    ``/health`` gives the rounds, and neither bucket keeps a warm-up object."""
    s = local_stack.settings
    ask = (s.host, s.port("lake_server"), token_path(s), "GET", "/health")
    deadline = time.monotonic() + 600
    while (warm := request(*ask, timeout_s=5)["warm_up"]) is None:
        assert time.monotonic() < deadline, "the warm-up never ended"
        time.sleep(1)
    # At least round 1, the table's creation, ran: the app's whole path, on S3.
    assert "error" not in warm and 1 <= warm["rounds"] <= MAX_ROUNDS, warm
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    for bucket in s.buckets:
        left = s3.list_objects_v2(Bucket=bucket, Prefix=PREFIX).get("KeyCount", 0)
        assert left == 0, (bucket, left)
    log = _server(local_stack).log.read_text()
    assert "warm-up round 1:" in log and "warmed up in" in log
