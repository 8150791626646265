"""The lake resource: its catalog options (none locally, Glue in production) and the order
items' registration in Glue, against moto's server."""

from __future__ import annotations

from dataclasses import fields

import boto3
import pytest

from cdc_lake.aws.glue import register_parquet_table
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.resources.lake import LakeResource
from cdc_lake_tests.aws.conftest import REGION


def test_local_tables_have_no_catalog_options():
    lake = LakeResource(lake_bucket="b")
    assert lake.catalog_options() == {} and lake.register_order_items() is None
    opts = HudiTableConfig(base_path="s3a://b/t").write_options()
    assert "hoodie.datasource.meta.sync.enable" not in opts
    assert "hoodie.datasource.hive_sync.enable" not in opts
    # The record-level index by default (its cost grows with the new work; bench "index").
    assert opts["hoodie.index.type"] == "RECORD_INDEX"
    assert opts["hoodie.metadata.record.index.enable"] == "true"
    assert opts["hoodie.record.index.update.partition.path"] == "true"
    simple = HudiTableConfig(base_path="s3a://b/t", index_type="GLOBAL_SIMPLE").write_options()
    assert simple["hoodie.index.type"] == "GLOBAL_SIMPLE"
    with pytest.raises(ValueError, match="index_type"):
        HudiTableConfig(base_path="s3a://b/t", index_type="BLOOM")


def test_order_items_are_registered_in_glue(moto_endpoint: str, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    glue = boto3.client("glue", region_name=REGION, endpoint_url=moto_endpoint)
    lake = LakeResource(lake_bucket="acme-lake", scheme="s3", glue_database="datalake",
                        region=REGION)  # fmt: skip
    assert lake.register_order_items() == "created"
    table = glue.get_table(DatabaseName="datalake", Name="order_items")["Table"]
    sd = table["StorageDescriptor"]
    assert sd["Location"] == "s3://acme-lake/marts/order_items"
    assert [c["Name"] for c in sd["Columns"]] == [
        "customer_id", "order_id", "order_date", "product_id", "product_name", "unit_price",
        "quantity", "discount", "revenue",
    ]  # fmt: skip
    assert sd["SerdeInfo"]["SerializationLibrary"].endswith("ParquetHiveSerDe")
    assert lake.register_order_items() == "unchanged"
    assert register_parquet_table(glue, "datalake", "order_items", "s3://elsewhere/x") == "updated"
    moved = glue.get_table(DatabaseName="datalake", Name="order_items")["Table"]
    assert moved["StorageDescriptor"]["Location"] == "s3://elsewhere/x"


def test_the_table_settings_defaults_are_hudi_table_configs():
    """Declared once: the resource's table settings default to HudiTableConfig's, and reach it."""
    shared = {f.name for f in fields(HudiTableConfig)} & set(LakeResource.model_fields)
    assert shared >= {
        "table_type", "partition_field", "delete_mode", "parallelism",
        "compaction_delta_commits", "index_type", "embedded_timeline_server",
    }  # fmt: skip
    lake, table = LakeResource(lake_bucket="b"), HudiTableConfig(base_path="s3a://b/t")
    for name in shared:
        assert getattr(lake, name) == getattr(table, name), name
    assert lake.table_config() == HudiTableConfig(base_path=lake.table_path)
    moved = LakeResource(lake_bucket="b", table_type="MERGE_ON_READ", parallelism=7)
    assert (moved.table_config().table_type, moved.table_config().parallelism) == (
        "MERGE_ON_READ", 7)  # fmt: skip


def test_the_region_and_the_glue_table_name_are_declared_once():
    from cdc_lake.streaming.connect_config import CdcConnectorSettings

    assert LakeResource(lake_bucket="b").region == CdcConnectorSettings.region
    lake = LakeResource(lake_bucket="b", glue_database="datalake")
    table_name = HudiTableConfig(base_path="s3a://b/t").table_name
    assert lake.catalog_options()["hoodie.datasource.hive_sync.table"] == table_name
