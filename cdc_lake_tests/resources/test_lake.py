"""The lake resource: its catalog options (none locally, Glue in production) for the Hudi table
and the order items' table."""

from __future__ import annotations

from dataclasses import fields

import pytest

from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.marts.items_table import BuildState
from cdc_lake.resources.lake import LakeResource
from cdc_lake.source.captured import OUTBOX
from cdc_lake_tests.aws.conftest import REGION


def test_local_tables_have_no_catalog_options():
    lake = LakeResource(lake_bucket="b")
    assert lake.table_config(OUTBOX).extra_options == {} and lake.order_items_glue_table is None
    opts = HudiTableConfig(base_path="s3a://b/t").write_options(schema=OUTBOX_SCHEMA)
    assert "hoodie.datasource.meta.sync.enable" not in opts
    assert "hoodie.datasource.hive_sync.enable" not in opts
    # The record-level index by default (its cost grows with the new work; bench "index").
    assert opts["hoodie.index.type"] == "RECORD_INDEX"
    assert opts["hoodie.metadata.record.index.enable"] == "true"
    # ...which never reads a base file's bloom filter, so none is written (issue 52).
    assert opts["hoodie.parquet.bloom.filter.enabled"] == "false"
    # No partitions by default: no key can move, so no move is reconciled.
    assert opts["hoodie.record.index.update.partition.path"] == "false"
    assert opts["hoodie.datasource.write.keygenerator.class"].endswith("NonpartitionedKeyGenerator")
    simple = HudiTableConfig(base_path="s3a://b/t", index_type="GLOBAL_SIMPLE")
    simple_opts = simple.write_options(schema=OUTBOX_SCHEMA)
    assert simple_opts["hoodie.index.type"] == "GLOBAL_SIMPLE"
    assert "hoodie.parquet.bloom.filter.enabled" not in simple_opts  # Hudi's default
    with pytest.raises(ValueError, match="index_type"):
        HudiTableConfig(base_path="s3a://b/t", index_type="BLOOM")
    # Hudi's virtual keys leave the record index empty (duplicates, key filters that miss):
    # refused by name, whatever the index or the spelling.
    for index_type in ("RECORD_INDEX", "GLOBAL_SIMPLE"):
        with pytest.raises(ValueError, match="hoodie.populate.meta.fields=false"):
            HudiTableConfig(base_path="s3a://b/t", index_type=index_type,
                            extra_options={"hoodie.populate.meta.fields": " False"})  # fmt: skip
    with pytest.raises(ValueError, match="hoodie.populate.meta.fields"):
        LakeResource(lake_bucket="b", hudi_options={"hoodie.populate.meta.fields": "false"}
                     ).table_config(OUTBOX)  # fmt: skip
    kept = {"hoodie.populate.meta.fields": "true"}
    assert HudiTableConfig(base_path="s3a://b/t", extra_options=kept).write_options(
        schema=OUTBOX_SCHEMA)["hoodie.populate.meta.fields"] == "true"  # fmt: skip


def test_the_order_items_table_is_written_like_the_lake_and_synced_to_glue():
    """The items table gets the lake's parallelism and timeline-server setting, and in production
    Hudi's Glue sync as a table of its own, not partitioned; its figures sit beside it."""
    local = LakeResource(lake_bucket="b", parallelism=3)
    config = local.order_items_params().items
    assert config.base_path == "s3a://b/marts/order_items"
    assert config.figures_root == "s3a://b/marts/order_items_figures"
    opts = config.write_options("upsert", BuildState("1", "2", "f"))
    assert opts["hoodie.upsert.shuffle.parallelism"] == "3"
    assert opts["hoodie.embed.timeline.server"] == "false"
    assert opts["hoodie.datasource.write.recordkey.field"] == "order_id,product_id"
    assert "hoodie.datasource.meta.sync.enable" not in opts
    assert local.order_items_glue_table is None and local.order_items_params().rebuild is False

    prod = LakeResource(lake_bucket="acme-lake", scheme="s3", glue_database="datalake",
                        region=REGION, embedded_timeline_server=True)  # fmt: skip
    opts = prod.order_items_params(rebuild=True).items.write_options(
        "insert_overwrite_table", BuildState("1", "2", "f")
    )
    assert opts["hoodie.embed.timeline.server"] == "true"
    assert opts["hoodie.datasource.hive_sync.database"] == "datalake"
    assert opts["hoodie.datasource.hive_sync.table"] == "order_items"
    assert "hoodie.datasource.hive_sync.partition_fields" not in opts
    assert prod.order_items_glue_table == "datalake.order_items"
    assert prod.order_items_params(rebuild=True).rebuild is True


def test_the_table_settings_defaults_are_hudi_table_configs():
    """Declared once: the resource's table settings default to HudiTableConfig's, and reach it."""
    shared = {f.name for f in fields(HudiTableConfig)} & set(LakeResource.model_fields)
    assert shared >= {
        "table_type", "delete_mode", "parallelism",
        "compaction_delta_commits", "index_type", "embedded_timeline_server",
    }  # fmt: skip
    lake, table = LakeResource(lake_bucket="b"), HudiTableConfig(base_path="s3a://b/t")
    for name in shared:
        assert getattr(lake, name) == getattr(table, name), name
    assert lake.table_config(OUTBOX) == HudiTableConfig(
        base_path=lake.table_path_of(OUTBOX), table_name="cdc_events", partition_field=""
    )
    moved = LakeResource(lake_bucket="b", table_type="MERGE_ON_READ", parallelism=7)
    assert (moved.table_config(OUTBOX).table_type, moved.table_config(OUTBOX).parallelism) == (
        "MERGE_ON_READ", 7)  # fmt: skip


def test_the_region_and_the_glue_table_name_are_declared_once():
    from cdc_lake.streaming.connect_config import CdcConnectorSettings

    assert LakeResource(lake_bucket="b").region == CdcConnectorSettings.region
    lake = LakeResource(lake_bucket="b", glue_database="datalake")
    table_name = HudiTableConfig(base_path="s3a://b/t").table_name
    opts = lake.table_config(OUTBOX).write_options(schema=OUTBOX_SCHEMA)
    assert opts["hoodie.datasource.hive_sync.table"] == table_name


def test_every_captured_table_is_laid_out_by_one_rule_from_its_declaration():
    """Every table, the outbox's too: ``<lake_prefix>/<name>``, ``<quarantine_prefix>/<name>``,
    partitioned as its declaration says (no setting for one table)."""
    from dataclasses import replace

    from cdc_lake.lake.tables import declared_schema
    from cdc_lake.source.captured import CUSTOMERS

    lake = LakeResource(lake_bucket="b", lake_prefix="t/x", glue_database="db")
    outbox, customers = lake.table_config(OUTBOX), lake.table_config(CUSTOMERS)
    assert outbox.base_path == "s3a://b/t/x/cdc_events" and outbox.partition_field == ""
    assert customers.base_path == "s3a://b/t/x/customers" and customers.table_name == "customers"
    # Its partitioning is its declaration's (none).
    options = customers.write_options(schema=declared_schema(CUSTOMERS))
    assert (
        customers.partition_field == ""
        and options["hoodie.datasource.hive_sync.table"] == "customers"
    )
    assert lake.quarantine_prefix_of(CUSTOMERS) == "quarantine/customers"
    defaults = LakeResource(lake_bucket="b")
    assert defaults.table_prefix_of(CUSTOMERS) == "lake/customers"
    # The paths existing lakes have: the outbox's at lake/cdc_events, quarantine/cdc_events.
    assert defaults.table_prefix_of(OUTBOX) == "lake/cdc_events"
    assert defaults.quarantine_prefix_of(OUTBOX) == "quarantine/cdc_events"
    # The outbox's year column is a column only, unless its declaration partitions by it.
    assert OUTBOX.partition_field == "order_year" and not OUTBOX.partitioned
    by_year = replace(OUTBOX, partitioned=True)
    assert lake.table_config(by_year).partition_field == "order_year"
    assert lake.table_config(by_year).write_options(schema=declared_schema(OUTBOX))[
        "hoodie.datasource.write.partitionpath.field"
    ] == "order_year"
