"""up from nothing, up again, down, up again: on a second stack beside the session one."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import SERVER_ENV, pid_alive, port_in_use
from cdc_lake.stack.services import LakeServer
from cdc_lake.stack.settings import PORT_OFFSETS
from cdc_lake_tests.conftest import TEST_PORT_BASE, make_settings, processes_using


def test_up_is_idempotent_down_leaves_nothing_and_data_survives():
    settings = make_settings(TEST_PORT_BASE + 100)
    stack = LocalStack(settings, verbose=False)
    assert not (settings.state_dir / "data").exists()  # an empty state directory
    try:
        stack.up()
        first = {name: st.pid for name, st in stack.status().items()}
        assert all(first.values()), first
        assert stack.healthy()
        lake_server = stack.service("lake_server")
        assert isinstance(lake_server, LakeServer)
        spark_jvm = lake_server.health()["jvm_pid"]
        assert pid_alive(spark_jvm)

        stack.up()  # a second up starts nothing new
        assert {name: st.pid for name, st in stack.status().items()} == first

        s3 = stack.service("s3").client()  # type: ignore[attr-defined]
        s3.put_object(Bucket=settings.lake_bucket, Key="persist/check.txt", Body=b"still here")

        assert sorted(stack.down()) == ["connect", "kafka", "lake_server", "postgres", "s3"]
        assert not any(pid_alive(pid) for pid in [*first.values(), spark_jvm] if pid)
        assert processes_using(settings.state_dir) == []
        for name in PORT_OFFSETS:
            assert not port_in_use(settings.host, settings.port(name)), name
        assert all(st.pid is None for st in stack.status().values())

        stack.up()
        body = s3.get_object(Bucket=settings.lake_bucket, Key="persist/check.txt")["Body"].read()
        assert body == b"still here"
    finally:
        stack.down()
        assert processes_using(settings.state_dir) == []
        shutil.rmtree(settings.state_dir, ignore_errors=True)


def _environ_names(pid: int) -> set[str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return {item.split(b"=", 1)[0].decode() for item in raw.split(b"\0") if b"=" in item}


def test_the_state_directory_is_private_and_servers_get_only_their_environment(
    local_stack: LocalStack,
):
    s = local_stack.settings
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    s3.put_object(Bucket=s.raw_bucket, Key="private/check.json", Body=b"{}\n")

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    # Others get nothing; PostgreSQL's group (when it runs as its own user) may only pass through.
    traverse = 0o710 if os.geteuid() == 0 else 0o700
    assert (mode(s.state_dir), mode(s.run_dir), mode(s.state_dir / "data")) == (traverse,) * 3
    assert mode(s.conf_dir) == 0o700
    for top in (s.logs_dir, s.data_dir("s3"), s.data_dir("kafka")):
        assert mode(top) == 0o700, top
        paths = list(top.rglob("*"))
        assert paths, top
        # Files are the owner's alone: 0600, or 0400 where the server freezes them (Kafka makes
        # each KRaft metadata snapshot read-only, the first after an hour of uptime).
        wrong = [
            f"{p} {oct(mode(p))}"
            for p in paths
            if mode(p) not in ({0o700} if p.is_dir() else {0o600, 0o400})
        ]
        assert wrong == [], top
    assert (s.data_dir("s3") / s.raw_bucket / "private" / "check.json").is_file()
    assert {p.name for p in s.logs_dir.iterdir()} >= {"postgres.log", "s3.log", "connect.log"}

    for svc in local_stack.services:
        pid = local_stack.pidfile(svc).read()
        assert pid is not None, svc.name
        names = _environ_names(pid)
        assert names <= {*SERVER_ENV, *svc.env()}, (svc.name, names - set(SERVER_ENV))
        assert "PATH" in names and set(svc.env()) <= names, svc.name
