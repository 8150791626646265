"""``cdc-lake workload`` when PostgreSQL drops its connection (as a restart does): one line naming
the cause and how far it got, exit status 1, no traceback."""

from __future__ import annotations

import re
import threading
import time

import psycopg2

from cdc_lake.ops.cli import main
from cdc_lake.source.database import prepare_source
from cdc_lake.stack import LocalStack


def _terminate_other_clients(dsn: str, spare: int, after_s: float) -> None:
    """After ``after_s``, end every client backend but ``spare``, as a server shutdown does
    (SIGTERM to each backend: 'terminating connection due to administrator command')."""
    time.sleep(after_s)
    admin = psycopg2.connect(dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = "
            "'client backend' AND datname = current_database() AND pid <> pg_backend_pid() "
            "AND pid <> %s",
            (spare,),
        )
    admin.close()


def test_workload_stops_with_one_line_when_postgres_drops_it(
    local_stack: LocalStack, pg, monkeypatch, capsys
):
    settings = local_stack.settings
    prepare_source(pg, settings.replication_user, progress=lambda _: None)
    pg.commit()
    monkeypatch.setenv("CDC_LAKE_PORT_BASE", str(settings.port_base))
    killer = threading.Thread(
        target=_terminate_other_clients, args=(settings.pg_dsn(), pg.get_backend_pid(), 3.0)
    )
    killer.start()
    try:
        rc = main(["--state-dir", str(settings.state_dir), "workload", "--changes", "600",
                   "--rate", "20"])  # fmt: skip
    finally:
        killer.join()
    err = capsys.readouterr().err
    assert rc == 1
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    m = re.fullmatch(
        r"error: workload stopped after (\d+) of 600 changes: PostgreSQL at "
        rf"{settings.host}:{settings.port('postgres')}/{settings.pg_database}: "
        r"(terminating connection due to administrator command|server closed the connection.*)",
        err.strip(),
    )
    assert m, err
    assert 0 < int(m.group(1)) < 600
