"""The streaming resources: the CDC pipeline's names and knobs come from the streaming domain,
so the connectors Dagster deploys and those the MSK CLI deploys cannot drift apart."""

from __future__ import annotations

from dataclasses import MISSING, fields

from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.database import PUBLICATION
from cdc_lake.streaming.connect_config import CdcConnectorSettings, connector_names


def test_the_pipeline_defaults_are_the_connector_settings():
    defaults = {f.name: f.default for f in fields(CdcConnectorSettings) if f.default is not MISSING}
    assert set(defaults) >= {"topic_prefix", "slot_name", "publication", "flush_records",
                             "flush_interval_ms", "heartbeat_interval_ms"}  # fmt: skip
    cdc = CdcPipelineResource(raw_bucket="raw")
    shared = set(defaults) & set(CdcPipelineResource.model_fields)
    for name in shared:
        assert getattr(cdc, name) == defaults[name], name
    assert cdc.publication == PUBLICATION
    pg = PostgresResource(host="h", database="d", user="u", password="p", replication_user="r")
    settings = cdc.connector_settings(pg)
    assert settings == CdcConnectorSettings(
        pg_host="h", pg_port=5432, pg_database="d", replication_user="r", raw_bucket="raw"
    )
    tuned = CdcPipelineResource(raw_bucket="raw", slot_name="s2",
                                flush_records=5).connector_settings(pg)  # fmt: skip
    assert (tuned.slot_name, tuned.flush_records) == ("s2", 5)


def test_connector_names_are_built_in_one_place():
    cdc = CdcPipelineResource(raw_bucket="raw", topic_prefix="shop")
    assert (cdc.source_connector_name, cdc.sink_connector_name) == connector_names("shop")
    assert connector_names("shop") == ("shop-debezium-source", "shop-s3-sink")
    assert cdc.sink_consumer_group == "connect-shop-s3-sink"
