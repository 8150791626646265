"""Kafka Connect's REST API on the session stack gives no secret away, even to a caller who has
the Connect password (``connectors/rest-guard``, configured by
``cdc_lake/stack/services/connect.py``).

Every plugin's validate endpoint gets, in each of its fields, ``${env:...}`` of each secret
variable the worker has and ``${file:...}`` of the stack's credentials; no answer contains any
secret. The guard refuses each such config with 400 naming the field, except the one reference
the stack uses (the replication password in Debezium's ``database.password``, pointed at the
stack's database), whose value the answer hides.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from cdc_lake.stack import LocalStack
from cdc_lake.stack.settings import local_secret_env
from cdc_lake.streaming.connect_config import DEBEZIUM_TEMPLATE, connector_class

ALLOWED = "${env:CDC_LAKE_REPLICATION_PASSWORD}"


class Connect:
    def __init__(self, stack: LocalStack):
        s = stack.settings
        user, password = s.connect_auth
        self.url = s.connect_url
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def call(self, method: str, path: str, body: object = None) -> tuple[int, str]:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": self.auth, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


@pytest.fixture(scope="module")
def connect(local_stack: LocalStack) -> Connect:
    return Connect(local_stack)


def _secrets(stack: LocalStack) -> list[str]:
    return [v for v in local_secret_env(stack.settings).values() if len(v) >= 8]


def _references(stack: LocalStack) -> list[str]:
    worker = stack.service("connect").env()  # type: ignore[attr-defined]
    credentials = stack.settings.state_dir / "credentials.json"
    return [
        *(f"${{env:{name}}}" for name in worker),
        f"${{file:{credentials}:replication_password}}",
        f"${{file:{credentials}}}",
    ]


def _pinned(stack: LocalStack) -> dict[str, str]:
    s = stack.settings
    return {"database.hostname": s.host, "database.port": str(s.port("postgres"))}


def test_no_validate_answer_carries_a_secret(local_stack: LocalStack, connect: Connect):
    status, body = connect.call("GET", "/connector-plugins?connectorsOnly=true")
    assert status == 200, body
    plugins = [p["class"] for p in json.loads(body)]
    debezium = connector_class(DEBEZIUM_TEMPLATE)
    assert debezium in plugins and "io.cdclake.connect.s3.S3JsonLinesSinkConnector" in plugins
    secrets, references = _secrets(local_stack), _references(local_stack)
    assert len(secrets) >= 4 and len(references) >= 5
    answered, refused = 0, 0
    for plugin in plugins:
        status, body = connect.call("GET", f"/connector-plugins/{plugin}/config")
        assert status == 200, body
        fields = [f["name"] for f in json.loads(body)]
        base = {"connector.class": plugin, "name": "probe", "topics": "probe"}
        if plugin == debezium:
            base |= _pinned(local_stack)
        path = f"/connector-plugins/{urllib.parse.quote(plugin)}/config/validate"
        for field in fields:
            for reference in references:
                status, body = connect.call("PUT", path, {**base, field: reference})
                answered += 1
                leaked = [s for s in secrets if s in body]
                assert not leaked, (plugin, field, reference, status)
                allowed = (
                    plugin == debezium and field == "database.password" and reference == ALLOWED
                )
                if allowed:
                    assert status == 200, body
                    values = {c["value"]["name"]: c["value"] for c in json.loads(body)["configs"]}
                    assert values["database.password"]["value"] != reference
                else:
                    assert status == 400 and f"'{field}'" in body, (plugin, field, body)
                    refused += 1
    assert refused == answered - 1 and answered > 100


def test_the_guard_keeps_the_secret_in_its_place(local_stack: LocalStack, connect: Connect):
    debezium = connector_class(DEBEZIUM_TEMPLATE)
    # Another connector class may not hold the reference, in any field.
    sink = {
        "connector.class": "io.cdclake.connect.s3.S3JsonLinesSinkConnector",
        "topics": "probe",
        "s3.bucket.name": ALLOWED,
    }
    status, body = connect.call("POST", "/connectors", {"name": "probe-sink", "config": sink})
    assert status == 400 and "'s3.bucket.name'" in body, body
    # Debezium may, in database.password only, and only pointed at the stack's database: a
    # config that would send the password to another server is refused.
    elsewhere = {"connector.class": debezium, "database.password": ALLOWED,
                 **_pinned(local_stack), "database.hostname": "127.0.0.2"}  # fmt: skip
    status, body = connect.call("PUT", "/connectors/probe-source/config", elsewhere)
    assert status == 400 and "'database.hostname' must be" in body, body
    status, body = connect.call(
        "PUT", f"/connector-plugins/{debezium}/config/validate", {**elsewhere, "name": "probe"}
    )
    assert status == 400, body
    # A patch could move a running connector elsewhere: refused.
    status, body = connect.call("PATCH", "/connectors/probe-source/config", {"a": "b"})
    assert status == 400 and "PATCH" in body, body
    status, body = connect.call("GET", "/connectors")
    assert status == 200 and "probe" not in body, body


def test_the_salt_goes_only_into_a_hash_transform(local_stack: LocalStack, connect: Connect):
    """The salt of hashed columns (docs/column-policies.md) may be referred to in the
    ``salt.secret`` of a ``HashColumns`` transform only, which hashes with it and never writes
    it out; the validate answer hides it. Anywhere else, 400 naming the field."""
    debezium = connector_class(DEBEZIUM_TEMPLATE)
    salt_ref = "${env:CDC_LAKE_COLUMN_SALT}"
    salt = local_stack.settings.credentials.column_salt
    path = f"/connector-plugins/{debezium}/config/validate"
    config = {"connector.class": debezium, "name": "probe", "database.password": ALLOWED,
              **_pinned(local_stack), "transforms": "h",
              "transforms.h.type": "io.cdclake.connect.HashColumns",
              "transforms.h.columns": "datalake.customers.phone",
              "transforms.h.salt.secret": salt_ref}  # fmt: skip
    status, body = connect.call("PUT", path, config)
    assert status == 200 and salt not in body, body
    # Refused, naming the salt's field: another transform type, an alias the connector does
    # not run, an alias with a dot, another database, another connector class.
    insert = "org.apache.kafka.connect.transforms.InsertField$Value"
    for change in ({"transforms.h.type": insert, "transforms.h.static.field": "s"},
                   {"transforms": "other"}, {"transforms": "h,h.salt"},
                   {"database.hostname": "127.0.0.2"}):  # fmt: skip
        status, body = connect.call("PUT", path, {**config, **change})
        said = "'database.hostname' must be" if "database.hostname" in change else (
            "'transforms.h.salt.secret'")  # fmt: skip
        assert status == 400 and said in body and salt not in body, (change, body)
    sink = "io.cdclake.connect.s3.S3JsonLinesSinkConnector"
    on_sink = {k: v for k, v in config.items() if k.startswith("transforms")}
    status, body = connect.call("POST", "/connectors", {"name": "probe-salt", "config": {
        "connector.class": sink, "topics": "probe", **on_sink}})  # fmt: skip
    assert status == 400 and "'transforms.h.salt.secret'" in body and salt not in body, body
    # The reference anywhere else: 400 naming that field.
    for field in ("transforms.h.columns", "database.dbname"):
        status, body = connect.call("PUT", path, {**config, field: salt_ref})
        assert status == 400 and f"'{field}'" in body and salt not in body, (field, body)
