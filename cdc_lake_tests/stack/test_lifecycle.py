"""up from nothing, up again, down, up again: on a second stack beside the session one."""

from __future__ import annotations

import shutil

from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import pid_alive, port_in_use
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

        stack.up()  # a second up starts nothing new
        assert {name: st.pid for name, st in stack.status().items()} == first

        s3 = stack.service("s3").client()  # type: ignore[attr-defined]
        s3.put_object(Bucket=settings.lake_bucket, Key="persist/check.txt", Body=b"still here")

        assert sorted(stack.down()) == ["connect", "kafka", "postgres", "s3"]
        assert not any(pid_alive(pid) for pid in first.values() if pid)
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
