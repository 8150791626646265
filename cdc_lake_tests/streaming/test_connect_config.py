"""Connector configs render from the templates in connectors/, strictly, and never hold secrets."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from cdc_lake.resources.local import local_connector_settings
from cdc_lake.source.captured import OUTBOX, CapturedTable
from cdc_lake.stack import StackSettings
from cdc_lake.streaming.connect_config import (
    CdcConnectorSettings,
    ConnectorConfigError,
    connectors_dir,
    render_connector_config,
    topic_name,
)


@pytest.fixture
def settings(tmp_path) -> CdcConnectorSettings:
    return local_connector_settings(StackSettings.from_env(state_dir=tmp_path, port_base=20000))


def test_debezium_config(settings: CdcConnectorSettings):
    cfg = settings.debezium()
    assert cfg["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert cfg["plugin.name"] == "pgoutput"
    assert cfg["database.port"] == "20032"
    assert cfg["topic.prefix"] == "cdc" and topic_name("cdc", OUTBOX) == "cdc.datalake.cdc_events"
    assert cfg["table.include.list"] == "datalake.cdc_events,datalake.customers"
    assert cfg["publication.autocreate.mode"] == "disabled"
    # Option names of Debezium 2.5+/3.x, not the removed delete.handling.mode.
    assert cfg["transforms.unwrap.delete.tombstone.handling.mode"] == "rewrite"
    assert "transforms.unwrap.delete.handling.mode" not in cfg
    fields = "op,db,table,schema,lsn,source.ts_ms,source.snapshot"
    assert cfg["transforms.unwrap.add.fields"] == fields
    assert cfg["decimal.handling.mode"] == "string"
    assert cfg["value.converter.schemas.enable"] == "false"
    assert cfg["database.password"] == "${env:CDC_LAKE_REPLICATION_PASSWORD}"
    assert all("{{" not in v for v in cfg.values())


def test_local_and_msk_sinks(settings: CdcConnectorSettings):
    local = settings.s3_sink_local()
    assert local["topics"] == "cdc.datalake.cdc_events,cdc.datalake.customers"
    assert local["aws.s3.endpoint"] == "http://127.0.0.1:20080"
    # No keys in either: the AWS SDK's default chain (the worker's environment locally).
    assert not {"aws.access.key.id", "aws.secret.access.key"} & set(local)
    msk = settings.s3_sink_msk()
    # Our sink on both; on MSK without endpoint or keys (the service execution role's
    # credentials), and with the same flush settings and converters as locally.
    assert msk["connector.class"] == local["connector.class"]
    assert msk["connector.class"] == "io.cdclake.connect.s3.S3JsonLinesSinkConnector"
    assert msk["topics"] == "cdc.datalake.cdc_events,cdc.datalake.customers"
    assert msk["aws.s3.bucket.name"] == "cdc-raw" and msk["file.name.prefix"] == "cdc-events/"
    assert msk["aws.s3.region"] == "us-east-1"
    for key in ("aws.s3.endpoint", "aws.access.key.id", "aws.secret.access.key"):
        assert key not in msk, key
    assert "aws.s3.path.style.access.enabled" not in msk
    same = ("file.max.records", "file.flush.interval.ms", "key.converter", "value.converter")
    assert {k: msk[k] for k in same} == {k: local[k] for k in same}
    assert msk["file.max.records"] == "1000" and msk["file.flush.interval.ms"] == "10000"
    assert set(msk) == set(local) - {"aws.s3.endpoint", "aws.s3.path.style.access.enabled"}


def test_no_template_holds_a_secret_or_an_environment():
    for path in connectors_dir().glob("*.json"):
        text = path.read_text()
        json.loads(text)
        for word in ("127.0.0.1", "localhost", 'password": "', "amazonaws.com"):
            assert word not in text.replace('password": "{{', ""), (path.name, word)


def test_missing_and_unused_settings_are_errors(tmp_path):
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"a": "{{x}}", "b": "fixed-{{y}}"}))
    assert render_connector_config(template, {"x": 1, "y": "z"}) == {"a": "1", "b": "fixed-z"}
    with pytest.raises(ConnectorConfigError, match=r"t.json: no value for \['y'\]"):
        render_connector_config(template, {"x": 1})
    with pytest.raises(ConnectorConfigError, match=r"t.json: settings \['typo'\] are not used"):
        render_connector_config(template, {"x": 1, "y": 2, "typo": 3})


def test_every_record_is_keyed_by_its_tables_declared_key(settings: CdcConnectorSettings):
    log = CapturedTable(source="datalake.audit_log", key="id", ddl_file="")
    details = CapturedTable(
        source="datalake.order_details", key=("order_id", "product_id"), ddl_file=""
    )
    cfg = replace(settings, tables=(OUTBOX, log, details)).debezium()
    assert cfg["message.key.columns"] == (
        "datalake.cdc_events:order_id;datalake.audit_log:id;"
        "datalake.order_details:order_id,product_id"
    )


def test_column_policies_reach_the_source_connector(settings: CdcConnectorSettings):
    """Excluded columns in Debezium's column.exclude.list (escaped regexes), hashed ones in our
    transform, which runs on the envelope (after the truncate marker, before the unwrap), with
    the salt as a reference only."""
    cfg = settings.debezium()
    assert cfg["column.exclude.list"] == r"datalake\.customers\.fax"
    assert cfg["transforms"] == "truncate,hash,unwrap"
    assert cfg["transforms.hash.type"] == "io.cdclake.connect.HashColumns"
    assert cfg["transforms.hash.columns"] == "datalake.customers.phone"
    assert cfg["transforms.hash.salt.secret"] == "${env:CDC_LAKE_COLUMN_SALT}"
    # Fields of jsonb columns: in the same transform, never in Debezium's column list.
    assert cfg["transforms.hash.fields.hashed"] == (
        "datalake.cdc_events.customer.phone,datalake.cdc_events.employee.home_phone"
    )
    assert cfg["transforms.hash.fields.excluded"] == "datalake.cdc_events.customer.fax"
    people = CapturedTable(
        source="datalake.people", key="id", ddl_file="", exclude=("a$b", "c", "e.f"),
        hashed=("d", "e.g"),
    )  # fmt: skip
    plain = replace(settings, tables=(replace(OUTBOX, exclude=(), hashed=()),)).debezium()
    assert "column.exclude.list" not in plain and plain["transforms.hash.columns"] == ""
    assert plain["transforms.hash.fields.hashed"] == plain["transforms.hash.fields.excluded"] == ""
    cfg = replace(settings, tables=(people,)).debezium()
    assert cfg["column.exclude.list"] == r"datalake\.people\.a\$b,datalake\.people\.c"
    assert cfg["transforms.hash.columns"] == "datalake.people.d"
    assert cfg["transforms.hash.fields.hashed"] == "datalake.people.e.g"
    assert cfg["transforms.hash.fields.excluded"] == "datalake.people.e.f"


def test_a_policy_cannot_cover_the_key_or_both_ways():
    def people(**policy: Any) -> CapturedTable:
        return CapturedTable(source="datalake.people", key="id", ddl_file="", **policy)

    for bad, said in (
        ({"exclude": ("id",)}, "the key"),
        ({"hashed": ("id",)}, "the key"),
        ({"exclude": ("a",), "hashed": ("a",)}, "both excluded and hashed"),
        ({"exclude": "a"}, "a tuple of column names"),
    ):
        with pytest.raises(ValueError, match=said):
            people(**bad)
