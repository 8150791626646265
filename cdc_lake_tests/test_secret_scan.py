"""The secret scan (issue 10): after a demo-sized pipeline run, no secret of the stack is in any
place another local user or a UI viewer could read it.

Secrets: every value of ``credentials.json`` (PostgreSQL superuser, app and replication
passwords, S3 keys, the Connect REST password, the Kafka users' passwords, the column salt, the
Spark cluster's shared secret and UI token) and of the resources' secret variables. Places:
- every file under the state directory (logs of every server and of Spark, the S3 data of the
  raw and lake buckets with Hudi's commit metadata, Kafka's logs including Connect's config,
  offset and status topics, PostgreSQL's data directory), except ``conf/`` and
  ``credentials.json``, which hold them by design (0600 files, checked here);
- the Dagster instance's storage directory (event log and run storage, compute logs);
- the Connect REST API's answers: connectors with their configs, status and tasks, plugins;
- every asset materialization's and check evaluation's metadata;
- ``/proc/*/cmdline`` of every process (the stack's servers and Spark's JVM among them), and
  ``/proc/<pid>/environ`` of each server: a server holds only the secrets it uses.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import dagster as dg

from bench.outbox import cdc_events_hudi, matches_source, no_quarantined_lines
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.stack import LocalStack
from cdc_lake_tests.lake.test_pipeline import catch_up
from cdc_lake_tests.stack.test_spark import all_cmdlines, jvm_pid

# The conf files of the optional servers (the Spark cluster, a second Connect worker).
OPTIONAL_CONF = {"spark-cluster.properties", "spark-app.properties", "spark-ui-token",
                 "connect_2-distributed.properties"}  # fmt: skip
# What each server is given on purpose (its environment; see Service.env()).
OWN = {
    "connect": {"replication_password", "s3_access_key", "s3_secret_key", "column_salt"},
}


def files_holding(root: Path, secrets: dict[str, str], skip: tuple[Path, ...] = ()) -> list:
    """(file, secret name) for every file under root that holds a secret."""
    found = []
    needles = {name: value.encode() for name, value in secrets.items()}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if any(path.is_relative_to(s) for s in skip) or not path.is_file():
                continue
            data = path.read_bytes()
            found += [(str(path), n) for n, needle in needles.items() if needle in data]
    return found


def text_holding(texts: dict[str, str], secrets: dict[str, str]) -> list:
    return [(where, n) for where, text in texts.items() for n, v in secrets.items() if v in text]


def test_no_secret_anywhere_after_a_pipeline_run(
    local_stack: LocalStack, ingested, resources, secret_env, spark, tmp_path: Path
):
    s = local_stack.settings
    secrets = json.loads((s.state_dir / "credentials.json").read_text())
    secrets |= {f"env:{k}": v for k, v in secret_env.items()}
    assert len(set(secrets.values())) == 13 and all(len(v) >= 16 for v in secrets.values())

    # The scanner finds what is there: a secret planted in a file of a scanned tree.
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "x.log").write_text(f"with {s.credentials.connect_password}\n")
    planted = files_holding(tmp_path / "planted", secrets)
    assert {n for _, n in planted} == {"connect_password", "env:CDC_LAKE_CONNECT_PASSWORD"}

    # The demo's pipeline on an instance whose storage is on disk.
    catch_up(resources)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster"))
    assets = [cdc_events_topic, raw_cdc_files, cdc_events_hudi, order_items]
    result = dg.materialize(
        [*assets, no_quarantined_lines, matches_source], resources=resources, instance=instance
    )
    assert result.success

    leaks = files_holding(s.state_dir, secrets, skip=(s.conf_dir, s.jars_dir))
    leaks = [(f, n) for f, n in leaks if f != str(s.state_dir / "credentials.json")]
    leaks += files_holding(tmp_path / "dagster", secrets)
    assert any((tmp_path / "dagster").rglob("*.db")), "no event log on disk"

    connect = resources["kafka_connect"].client()
    answers = {"/connectors": connect.connectors()}
    for path in ("/connectors?expand=info&expand=status", "/connector-plugins"):
        answers[path] = connect.request("GET", path)[1]
    for name in answers["/connectors"]:
        for what in ("config", "status", "tasks", "topics"):
            path = f"/connectors/{name}/{what}"
            answers[path] = connect.request("GET", path)[1]
    assert len(answers) >= 2 + 4 * 2  # the source and the sink connector at least
    leaks += text_holding({k: json.dumps(v) for k, v in answers.items()}, secrets)

    metadata = {
        f"{m.asset_key.to_user_string()} materialization": repr(m.metadata)
        for m in (e.materialization for e in result.get_asset_materialization_events())
    } | {
        f"{c.asset_key.to_user_string()} {c.check_name}": repr(c.metadata)
        for c in result.get_asset_check_evaluations()
    }
    assert len(metadata) >= len(assets)
    leaks += text_holding(metadata, secrets)

    cmdlines = all_cmdlines()
    assert jvm_pid(spark) in cmdlines
    leaks += text_holding({f"/proc/{p}/cmdline": c for p, c in cmdlines.items()}, secrets)
    for svc in local_stack.services:
        pid = local_stack.pidfile(svc).read()
        assert pid is not None, svc.name
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        own = {getattr(s.credentials, name) for name in OWN.get(svc.name, ())}
        others = {n: v for n, v in secrets.items() if v not in own}
        leaks += text_holding({f"{svc.name} /proc/{pid}/environ": environ}, others)
    assert leaks == []

    # Where the servers' secrets are on purpose: private files in a private directory.
    assert stat.S_IMODE(s.conf_dir.stat().st_mode) == 0o700
    on_purpose = {Path(f) for f, _ in files_holding(s.conf_dir, secrets)}
    # ... and those of the optional servers, if a test on this stack started them.
    assert {p.name for p in on_purpose} - OPTIONAL_CONF == {
        "s3proxy.conf", "connect-users.properties", "s3a-credentials",
        "kafka-server.properties", "connect-distributed.properties",
    }  # fmt: skip
    for path in on_purpose:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
