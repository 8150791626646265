"""The production resource set, built from the environment without reaching AWS."""

from __future__ import annotations

import os

import boto3
import dagster as dg
import pytest
from botocore.stub import Stubber

from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.marts.items_table import BuildState, ItemsTableConfig
from cdc_lake.resources import build_resources
from cdc_lake.resources.prod import (
    ProdSettings,
    ProdSettingsError,
    msk_deploy_settings,
    prod_resources,
)
from cdc_lake.resources.spark import EmrServerlessLauncher, EmrStepLauncher
from cdc_lake.source.captured import OUTBOX
from cdc_lake.streaming.msk.api import MskConnectError
from cdc_lake.streaming.msk.client import MskConnectClient
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.aws.conftest import REGION

PROD_ENV = {
    "CDC_LAKE_ENV": "prod",
    "CDC_LAKE_AWS_REGION": "eu-west-1",
    "CDC_LAKE_PG_HOST": "orders.cluster-abc.eu-west-1.rds.amazonaws.com",
    "CDC_LAKE_PG_DATABASE": "northwind",
    "CDC_LAKE_PG_USER": "cdc_lake_app",
    "CDC_LAKE_KAFKA_BOOTSTRAP": "b-1.msk.example:9098,b-2.msk.example:9098",
    "CDC_LAKE_RAW_BUCKET": "acme-cdc-raw",
    "CDC_LAKE_LAKE_BUCKET": "acme-cdc-lake",
    "CDC_LAKE_EMR_CLUSTER_ID": "j-1ABCDEF",
    "CDC_LAKE_MSK_SUBNETS": "subnet-1",
    "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-1",
    "CDC_LAKE_MSK_CONNECT_ROLE_ARN": "arn:aws:iam::123456789012:role/connect",
    "CDC_LAKE_MSK_PLUGIN_BUCKET": "acme-connect-plugins",
}


def test_prod_names_every_missing_variable():
    with pytest.raises(ProdSettingsError) as info:
        prod_resources({"CDC_LAKE_PG_HOST": "h"})
    for name in ("CDC_LAKE_PG_DATABASE", "CDC_LAKE_KAFKA_BOOTSTRAP", "CDC_LAKE_LAKE_BUCKET"):
        assert name in str(info.value)
    assert "CDC_LAKE_PG_HOST" not in str(info.value)
    with pytest.raises(ProdSettingsError, match="CDC_LAKE_EMR_SERVERLESS_APP_ID"):
        prod_resources({**PROD_ENV, "CDC_LAKE_SPARK_TARGET": "emr-serverless"})
    with pytest.raises(ValueError, match="'staging' is not a known environment"):
        build_resources("staging")


@pytest.mark.parametrize(
    ("extra", "mode_vars"),
    [
        ({}, ["CDC_LAKE_EMR_CLUSTER_ID", "CDC_LAKE_MSK_SUBNETS", "CDC_LAKE_MSK_PLUGIN_BUCKET"]),
        (
            {"CDC_LAKE_SPARK_TARGET": "emr-serverless", "CDC_LAKE_CONNECT_MODE": "self-managed"},
            [
                "CDC_LAKE_EMR_SERVERLESS_APP_ID",
                "CDC_LAKE_EMR_EXECUTION_ROLE_ARN",
                "CDC_LAKE_CONNECT_URL",
            ],
        ),
    ],
)
def test_prod_names_every_missing_variable_in_one_message(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], mode_vars: list[str]
):
    # The variables of the chosen Spark target and Connect mode come in the same message as
    # the base ones, not in a second round once those are set.
    for name in list(os.environ):
        if name.startswith("CDC_LAKE_") or name == "AWS_REGION":
            monkeypatch.delenv(name)
    for name, value in {"CDC_LAKE_ENV": "prod", "CDC_LAKE_PG_HOST": "h", **extra}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ProdSettingsError) as info:
        build_resources()
    message = str(info.value)
    for name in ["CDC_LAKE_PG_DATABASE", "CDC_LAKE_LAKE_BUCKET", *mode_vars]:
        assert name in message, name
    assert "CDC_LAKE_PG_HOST" not in message
    assert message.count("not set") == 1


def test_prod_names_a_bad_spark_target_with_the_missing_variables():
    with pytest.raises(ProdSettingsError) as info:
        prod_resources({"CDC_LAKE_PG_HOST": "h", "CDC_LAKE_SPARK_TARGET": "glue"})
    assert "'glue' is not a target" in str(info.value)
    assert "CDC_LAKE_LAKE_BUCKET" in str(info.value)


def test_prod_resources_point_at_aws_and_hold_no_secret():
    r = prod_resources(PROD_ENV)
    assert isinstance(r["spark_jobs"], EmrStepLauncher)
    assert r["spark_jobs"].cluster_id == "j-1ABCDEF" and r["spark_jobs"].region == "eu-west-1"
    assert r["spark_jobs"].code_bucket == r["spark_jobs"].pipes_bucket == "acme-cdc-lake"
    conf = r["kafka"].client_conf()
    assert (conf["security.protocol"], conf["sasl.mechanism"]) == ("SASL_SSL", "OAUTHBEARER")
    assert callable(conf["oauth_cb"])
    assert r["postgres"].sslmode == "require"
    lake = r["lake"]
    assert lake.scheme == "s3" and lake.glue_database == "datalake"
    opts = lake.table_config(OUTBOX).write_options(schema=OUTBOX_SCHEMA)
    assert opts["hoodie.datasource.meta.sync.enable"] == "true"
    assert opts["hoodie.datasource.hive_sync.mode"] == "hms"  # EMR's metastore is Glue
    assert opts["hoodie.datasource.hive_sync.database"] == "datalake"
    # Glue's partition fields are the layout's: none by default, and an existing table's own.
    assert "hoodie.datasource.hive_sync.partition_fields" not in opts
    assert opts["hoodie.datasource.hive_sync.partition_extractor_class"].endswith(
        "NonPartitionedExtractor"
    )
    old = lake.table_config(OUTBOX).laid_out_as("order_year").write_options(schema=OUTBOX_SCHEMA)
    assert old["hoodie.datasource.hive_sync.partition_fields"] == "order_year"
    assert old["hoodie.datasource.write.partitionpath.field"] == "order_year"
    assert lake.table_config(OUTBOX).laid_out_as(None) == lake.table_config(OUTBOX)
    assert r["cdc"].replication_password_ref == "${secretsmanager:cdc-lake/replication:password}"
    assert r["cdc"].column_salt_ref == "${secretsmanager:cdc-lake/column-salt:column_salt}"
    assert r["postgres"].column_salt == "CDC_LAKE_COLUMN_SALT"  # an EnvVar: the name only
    # The password is an EnvVar, resolved at run time; no value is in the resource config.
    assert isinstance(r["postgres"].password, dg.EnvVar)
    assert r["postgres"].password == "CDC_LAKE_PG_PASSWORD"  # the variable's name, not a value
    serverless = prod_resources(
        {
            **PROD_ENV,
            "CDC_LAKE_SPARK_TARGET": "emr-serverless",
            "CDC_LAKE_EMR_SERVERLESS_APP_ID": "00fabc",
            "CDC_LAKE_EMR_EXECUTION_ROLE_ARN": "arn:aws:iam::1:role/emr",
        }
    )["spark_jobs"]
    assert isinstance(serverless, EmrServerlessLauncher) and serverless.application_id == "00fabc"


def test_definitions_load_in_prod_without_connecting(monkeypatch):
    for key, value in PROD_ENV.items():
        monkeypatch.setenv(key, value)
    from cdc_lake.defs.resources import resources

    defs = resources()
    assert isinstance(defs, dg.Definitions)
    assert set(defs.resources or {}) >= {"spark_jobs", "kafka_connect", "lake", "postgres"}


def test_msk_connect_asks_for_the_deploy_command_when_the_connector_is_missing():
    kc = boto3.client("kafkaconnect", region_name=REGION, aws_access_key_id="x",
                      aws_secret_access_key="x")  # fmt: skip
    settings = MskConnectSettings.from_env(
        {
            "CDC_LAKE_AWS_REGION": REGION,
            "CDC_LAKE_MSK_BOOTSTRAP": "b-1.msk.example:9098",
            "CDC_LAKE_MSK_SUBNETS": "subnet-1",
            "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-1",
            "CDC_LAKE_MSK_CONNECT_ROLE_ARN": "arn:aws:iam::123456789012:role/connect",
            "CDC_LAKE_MSK_PLUGIN_BUCKET": "plugins",
        }
    )
    client = MskConnectClient(kc, settings, poll_s=0)
    with Stubber(kc) as stub:
        stub.add_response(
            "list_connectors", {"connectors": []}, {"connectorNamePrefix": "cdc-s3-sink"}
        )
        with pytest.raises(MskConnectError, match="cdc-lake msk deploy"):
            client.deploy("cdc-s3-sink", {"connector.class": "x"}, timeout_s=1)
        stub.add_response(
            "list_connectors",
            {
                "connectors": [
                    {"connectorName": "cdc-debezium-source"},
                    {"connectorName": "cdc-s3-sink"},
                ]
            },
            {},
        )
        assert client.connectors() == ["cdc-debezium-source", "cdc-s3-sink"]


def test_glue_sync_options_travel_to_the_job_in_its_params():
    """What goes into the Pipes extras of the EMR step or job run is what the job writes with."""
    r = prod_resources(PROD_ENV)
    params = r["lake"].upsert_params(r["cdc"], table=OUTBOX).to_json()  # as the extras carry it
    assert params["scheme"] == "s3" and params["raw_bucket"] == "acme-cdc-raw"
    options = HudiTableConfig(**params["table"]).write_options(schema=OUTBOX_SCHEMA)
    assert options["hoodie.datasource.meta.sync.enable"] == "true"
    assert options["hoodie.datasource.hive_sync.database"] == "datalake"
    assert options["hoodie.datasource.hive_sync.table"] == "cdc_events"
    assert options["hoodie.datasource.meta_sync.condition.sync"] == "true"
    # The order items sync themselves too, as a table of their own, not partitioned.
    items = r["lake"].order_items_params().to_json()
    assert items["items"]["base_path"] == "s3://acme-cdc-lake/marts/order_items"
    state = BuildState("1", "2", "s3://acme-cdc-lake/marts/order_items_figures/1-x")
    item_options = ItemsTableConfig.from_json(items["items"]).write_options("upsert", state)
    assert item_options["hoodie.datasource.hive_sync.database"] == "datalake"
    assert item_options["hoodie.datasource.hive_sync.table"] == "order_items"
    assert item_options["hoodie.datasource.hive_sync.partition_extractor_class"].endswith(
        "NonPartitionedExtractor"
    )
    assert r["lake"].order_items_glue_table == "datalake.order_items"


def test_an_empty_variable_is_unset_for_the_resources_and_the_msk_deploy():
    """One parser: CDC_LAKE_PG_PORT="" is the default port on both paths (it crashed one)."""
    env = {**PROD_ENV, "CDC_LAKE_PG_PORT": "", "CDC_LAKE_TOPIC_PREFIX": " ", "AWS_REGION": ""}
    r = prod_resources(env)
    _, connectors = msk_deploy_settings(env)
    assert r["postgres"].port == connectors.pg_port == 5432
    assert r["cdc"].connector_settings(r["postgres"]) == connectors
    assert r["cdc"].topic_prefix == connectors.topic_prefix == "cdc"
    assert ProdSettings.from_env(env).source == connectors


def test_a_bad_value_is_one_error_naming_the_variable_on_both_paths():
    bad = {**PROD_ENV, "CDC_LAKE_PG_PORT": "54x"}
    message = "CDC_LAKE_PG_PORT='54x' is not a port number"
    with pytest.raises(ProdSettingsError, match=message):
        prod_resources(bad)
    with pytest.raises(ProdSettingsError, match=message):
        msk_deploy_settings(bad)
    # With the missing variables, in the same message.
    with pytest.raises(ProdSettingsError) as info:
        prod_resources({"CDC_LAKE_PG_HOST": "h", "CDC_LAKE_PG_PORT": "54x"})
    assert message in str(info.value) and "CDC_LAKE_LAKE_BUCKET" in str(info.value)


@pytest.mark.parametrize("count", ["two", "²", "-1"])
def test_a_bad_msk_variable_fails_when_the_prod_resources_are_built(count: str):
    """MSK Connect's settings are parsed with the rest, not when a run starts."""
    bad = {**PROD_ENV, "CDC_LAKE_MSK_MCU_COUNT": count}
    message = f"CDC_LAKE_MSK_MCU_COUNT={count!r} is not an integer"
    for build in (prod_resources, msk_deploy_settings, MskConnectSettings.from_env):
        with pytest.raises(ProdSettingsError) as info:
            build(bad)
        assert message in str(info.value), build
    # An invalid combination, too, and with the other problems in one message.
    with pytest.raises(ProdSettingsError) as info:
        prod_resources({**PROD_ENV, "CDC_LAKE_MSK_MCU_COUNT": "3", "CDC_LAKE_PG_PORT": "x"})
    assert "mcu_count must be one of" in str(info.value)
    assert "CDC_LAKE_PG_PORT='x'" in str(info.value)


def test_the_msk_settings_are_parsed_once_for_the_resources_and_the_deploy(
    monkeypatch: pytest.MonkeyPatch,
):
    env = {**PROD_ENV, "CDC_LAKE_MSK_MCU_COUNT": " 2 ", "CDC_LAKE_MSK_LOG_GROUP": "",
           "CDC_LAKE_REPLICATION_SECRET": "prod/cdc"}  # fmt: skip
    connect = prod_resources(env)["kafka_connect"]
    deployed, _ = msk_deploy_settings(env)
    assert deployed.mcu_count == 2 and deployed.log_group is None
    assert MskConnectSettings.from_config(connect.settings) == deployed
    assert ProdSettings.from_env(env).msk == deployed
    # A run reads no variable: the client is built from the resource's config alone.
    for name in list(os.environ):
        if name.startswith("CDC_LAKE_") or name == "AWS_REGION":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    assert connect.client().settings == deployed


def test_glue_database_none_turns_the_catalog_off():
    lake = prod_resources({**PROD_ENV, "CDC_LAKE_GLUE_DATABASE": "none"})["lake"]
    assert lake.glue_database is None
    assert lake.table_config(OUTBOX).extra_options == {}
    options = lake.table_config(OUTBOX).write_options(schema=OUTBOX_SCHEMA)
    assert "hoodie.datasource.meta.sync.enable" not in options
    assert lake.order_items_glue_table is None
    items = lake.order_items_params().items
    assert "hoodie.datasource.meta.sync.enable" not in items.write_options(
        "upsert", BuildState("1", "2", "f")
    )
    # Empty is unset: the default database.
    assert prod_resources({**PROD_ENV, "CDC_LAKE_GLUE_DATABASE": ""})["lake"].glue_database == (
        "datalake"
    )


def test_the_resources_package_imports_a_resource_set_only_when_chosen():
    import subprocess
    import sys

    code = (
        "import sys, cdc_lake.resources as r; "
        "print(r.environment_name(), 'cdc_lake.resources.local' in sys.modules, "
        "'cdc_lake.resources.prod' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "CDC_LAKE_ENV"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.split() == ["local", "False", "False"]


def test_the_prod_resources_load_nothing_of_the_local_stack(monkeypatch):
    """Building the prod set (and loading the definitions with it) imports no module of
    ``cdc_lake.stack``: production never depends on the local servers' code."""
    import subprocess
    import sys

    code = (
        "import sys, cdc_lake.resources as r; r.build_resources('prod'); "
        "from cdc_lake.definitions import defs; defs(); "
        "print(sorted(m for m in sys.modules if m.startswith('cdc_lake.stack')))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDC_LAKE_")}
    env |= PROD_ENV | {"CDC_LAKE_ENV": "prod"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "[]", done.stdout
