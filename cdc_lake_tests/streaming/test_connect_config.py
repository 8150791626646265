"""Connector configs render from the templates in connectors/, strictly, and never hold secrets."""

from __future__ import annotations

import json

import pytest

from cdc_lake.stack import StackSettings
from cdc_lake.streaming.connect_config import (
    CdcConnectorSettings,
    ConnectorConfigError,
    connectors_dir,
    render_connector_config,
)


@pytest.fixture
def settings(tmp_path) -> CdcConnectorSettings:
    return CdcConnectorSettings.local(StackSettings.from_env(state_dir=tmp_path, port_base=20000))


def test_debezium_config(settings: CdcConnectorSettings):
    cfg = settings.debezium()
    assert cfg["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert cfg["plugin.name"] == "pgoutput"
    assert cfg["database.port"] == "20032"
    assert cfg["topic.prefix"] == "cdc" and settings.topic == "cdc.datalake.cdc_events"
    assert cfg["table.include.list"] == "datalake.cdc_events"
    assert cfg["publication.autocreate.mode"] == "disabled"
    # Option names of Debezium 2.5+/3.x, not the removed delete.handling.mode.
    assert cfg["transforms.unwrap.delete.tombstone.handling.mode"] == "rewrite"
    assert "transforms.unwrap.delete.handling.mode" not in cfg
    assert cfg["transforms.unwrap.add.fields"] == "op,db,table,schema,lsn,source.ts_ms"
    assert cfg["decimal.handling.mode"] == "string"
    assert cfg["value.converter.schemas.enable"] == "false"
    assert cfg["database.password"] == "${env:CDC_LAKE_REPLICATION_PASSWORD}"
    assert all("{{" not in v for v in cfg.values())


def test_local_and_msk_sinks(settings: CdcConnectorSettings):
    local = settings.s3_sink_local()
    assert local["topics"] == "cdc.datalake.cdc_events"
    assert local["aws.s3.endpoint"] == "http://127.0.0.1:20080"
    assert local["aws.secret.access.key"] == "${env:CDC_LAKE_S3_SECRET_KEY}"
    msk = settings.s3_sink_msk()
    assert msk["connector.class"] == "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector"
    assert msk["connect.s3.kcql"].startswith(
        "INSERT INTO cdc-raw:cdc-events SELECT * FROM `cdc.datalake.cdc_events`"
    )
    assert "'flush.count'=1000" in msk["connect.s3.kcql"]
    assert "'flush.interval'=10" in msk["connect.s3.kcql"]


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
