"""The Kafka Connect worker's REST API: basic auth, and a config provider that resolves only the
variables the connectors need (issue 10)."""

from __future__ import annotations

import json
import stat
import urllib.error
import urllib.request

import psycopg2
import pytest
from psycopg2.extras import LogicalReplicationConnection

from cdc_lake.resources.local import local_connector_settings
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import KafkaConnect
from cdc_lake.streaming.connect_client import ConnectClient, ConnectError, basic_auth_header


def _status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_connect_rest_api_needs_its_credentials(local_stack: LocalStack):
    s = local_stack.settings
    connect = local_stack.service("connect")
    assert isinstance(connect, KafkaConnect)
    user, password = s.connect_auth
    for path, method in (("/connectors", "GET"), ("/connector-plugins", "GET"), ("/", "GET")):
        assert _status(s.connect_url + path, method) == 401, path
    wrong = basic_auth_header((user, password + "x"))
    assert _status(s.connect_url + "/connectors", headers=wrong) == 401
    right = basic_auth_header((user, password))
    assert _status(s.connect_url + "/connectors", headers=right) == 200
    with pytest.raises(ConnectError, match=r"refused GET /connectors \(401 Unauthorized\)"):
        ConnectClient(s.connect_url).connectors()
    assert isinstance(ConnectClient(s.connect_url, auth=s.connect_auth).connectors(), list)
    # The secret sits in 0600 files; the JVM's arguments name only the JAAS file.
    for path in (connect.jaas_conf, connect.users_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert password in connect.users_file.read_text()
    assert password not in connect.jaas_conf.read_text()
    assert f"-Djava.security.auth.login.config={connect.jaas_conf}" in connect.argv()


def test_validate_cannot_echo_a_variable_the_connectors_do_not_need(local_stack: LocalStack):
    """Before: ``database.dbname=${env:CDC_LAKE_S3_SECRET_KEY}`` answered 'database "<the S3
    secret key>" does not exist' and wrote it to connect.log and postgres.log. Now the REST
    guard (``connectors/rest-guard``) refuses any reference outside ``database.password``
    before Debezium sees it; ``test_connect_guard.py`` tries every field of every plugin."""
    s = local_stack.settings
    c = s.credentials
    client = ConnectClient(s.connect_url, timeout_s=60, auth=s.connect_auth)
    responses = []
    # CDC_LAKE_S3_SECRET_KEY as before; the AWS keys are in the worker's environment (the S3
    # sink's AWS SDK reads them) but not allowed; HOME is any other variable.
    for name in ("CDC_LAKE_S3_SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "HOME"):
        config = local_connector_settings(s, topic_prefix="echo").debezium()
        config |= {"name": "echo-probe", "database.dbname": f"${{env:{name}}}"}
        status, payload = client.request(
            "PUT", "/connector-plugins/PostgresConnector/config/validate", config
        )
        response = json.dumps(payload)
        assert status == 400 and "'database.dbname'" in response, response[-2000:]
        responses.append(response)
    logs = {name: (s.logs_dir / name).read_text() for name in ("connect.log", "postgres.log")}
    secrets = (c.s3_secret_key, c.s3_access_key, c.replication_password, c.connect_password)
    for secret in secrets:
        assert not [r for r in responses if secret in r]
        for name, text in logs.items():
            assert secret not in text, name


def test_the_replication_role_reaches_only_the_projects_database(
    local_stack: LocalStack, ingested, resources
):
    """pg_hba.conf: before, the replication role could connect to ``postgres`` (and read every
    table's changes there through a logical decoding slot of its own)."""
    s = local_stack.settings
    repl = {
        "host": s.host,
        "port": s.port("postgres"),
        "user": s.replication_user,
        "password": s.credentials.replication_password,
        "connect_timeout": 5,
    }
    for dbname in ("postgres", "template1"):
        with pytest.raises(psycopg2.OperationalError, match="pg_hba.conf rejects connection"):
            psycopg2.connect(dbname=dbname, **repl)
    # A physical replication connection would stream the whole cluster's WAL.
    with pytest.raises(psycopg2.OperationalError, match="pg_hba.conf rejects replication"):
        psycopg2.connect(dbname="postgres", replication="true", **repl)
    # What Debezium opens: a plain and a logical replication connection to the project's
    # database; and the connector runs on them.
    psycopg2.connect(dbname=s.pg_database, **repl).close()
    walsender = psycopg2.connect(
        dbname=s.pg_database, connection_factory=LogicalReplicationConnection, **repl
    )
    walsender.close()
    source = resources["cdc"].source_connector_name
    status = resources["kafka_connect"].client().status(source)
    assert status["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"]
    # The app user still reaches its database; the superuser still administers.
    psycopg2.connect(s.pg_dsn()).close()
