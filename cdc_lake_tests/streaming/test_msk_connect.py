"""Deploying to MSK Connect: request shapes, idempotency, secrets and failures.

moto has no kafkaconnect, so a real boto3 client is wrapped in botocore's Stubber: every request
is validated against the service model and compared with the exact expected parameters, and a
call that is not expected fails the test. S3 is moto's server, so uploads are real requests.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk_connect import (
    MskConnectClient,
    MskConnectError,
    MskConnectSettings,
    MskPluginDirs,
    add_msk_cli,
    build_plugin_zip,
    check_no_literal_secrets,
    deploy_to_msk_connect,
)

REGION = "eu-west-1"
ROLE = "arn:aws:iam::123456789012:role/cdc-connect"
BOOTSTRAP = "b-1.cdc.kafka.eu-west-1.amazonaws.com:9098,b-2.cdc.kafka.eu-west-1.amazonaws.com:9098"
SOURCE, SINK = "cdc-debezium-source", "cdc-s3-sink"
SOURCE_ARN = f"arn:aws:kafkaconnect:{REGION}:123456789012:connector/{SOURCE}/1"
SINK_ARN = f"arn:aws:kafkaconnect:{REGION}:123456789012:connector/{SINK}/2"
WORKER_ARN = f"arn:aws:kafkaconnect:{REGION}:123456789012:worker-configuration/w/3"
PASSWORD_REF = "${secretsmanager:cdc-lake/replication:password}"
# The worker configuration, written out: converters and the Secrets Manager config provider.
WORKER_PROPERTIES = (
    "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
    "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
    "config.providers=secretsmanager\n"
    "config.providers.secretsmanager.class="
    "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider\n"
    f"config.providers.secretsmanager.param.region={REGION}\n"
)
WORKER_NAME = "cdc-lake-workers-" + hashlib.sha256(WORKER_PROPERTIES.encode()).hexdigest()[:12]
KAFKA_CLUSTER = {
    "apacheKafkaCluster": {
        "bootstrapServers": BOOTSTRAP,
        "vpc": {"subnets": ["subnet-a", "subnet-b"], "securityGroups": ["sg-connect"]},
    }
}
LOG_DELIVERY = {"workerLogDelivery": {"cloudWatchLogs": {"enabled": True, "logGroup": "/msk/cdc"}}}
CAPACITY = {"provisionedCapacity": {"mcuCount": 1, "workerCount": 1}}
MSK_SOURCE_EXTRAS = {
    "config.action.reload": "none",
    "topic.creation.default.replication.factor": "3",
    "topic.creation.default.partitions": "1",
}


def no_sleep(seconds: float) -> None:
    pass


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture
def msk() -> MskConnectSettings:
    return MskConnectSettings(
        region=REGION,
        bootstrap_servers=BOOTSTRAP,
        subnet_ids=("subnet-a", "subnet-b"),
        security_group_ids=("sg-connect",),
        service_execution_role_arn=ROLE,
        plugin_bucket="unused",  # each test sets its own moto bucket
        log_group="/msk/cdc",
    )


@pytest.fixture
def cdc(msk: MskConnectSettings) -> CdcConnectorSettings:
    return CdcConnectorSettings(
        topic_prefix="cdc",
        pg_host="cdc.cluster-abc.eu-west-1.rds.amazonaws.com",
        pg_port=5432,
        pg_database="cdc_lake",
        replication_user="cdc_replication",
        replication_password_ref=msk.password_ref,
        raw_bucket="cdc-raw-prod",
        raw_prefix="cdc-events/",
        region=REGION,
    )


def write_jars(folder: Path, jars: dict[str, bytes]) -> Path:
    for name, data in jars.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


@pytest.fixture
def dirs(tmp_path: Path) -> MskPluginDirs:
    return MskPluginDirs(
        debezium=write_jars(
            tmp_path / "debezium",
            {"debezium-connector-postgres.jar": b"dbz", "postgresql.jar": b"pg"},
        ),
        s3_sink=write_jars(tmp_path / "s3sink", {"cdc-lake-s3-sink.jar": b"sink"}),
        config_provider=write_jars(
            tmp_path / "provider",
            {"msk-config-providers.jar": b"prov", "lib/secretsmanager.jar": b"sm"},
        ),
    )


class S3:
    """A moto-server S3 client with a fresh bucket, counting the PutObject requests sent."""

    def __init__(self, endpoint: str):
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        self.bucket = f"plugins-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=self.bucket)
        self.puts: list[str] = []
        self.client.meta.events.register(
            "before-parameter-build.s3.PutObject",
            lambda params, **_: self.puts.append(params["Key"]),
        )

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()


@pytest.fixture
def s3(moto_endpoint: str) -> S3:
    return S3(moto_endpoint)


@pytest.fixture
def kc() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "kafkaconnect",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        # Every expected request was made: nothing stubbed was skipped.
        stubber.assert_no_pending_responses()


# --- the expected plugins and requests ----------------------------------------------------


class Plugin:
    def __init__(self, base: str, folders: dict[str, Path], bucket: str, arn: str):
        self.data = build_plugin_zip(folders)
        self.name = f"{base}-{hashlib.sha256(self.data).hexdigest()[:12]}"
        self.key = f"msk-connect/plugins/{self.name}.zip"
        self.bucket = bucket
        self.arn = arn

    def ref(self, revision: int = 1) -> dict[str, Any]:
        return {"customPlugin": {"customPluginArn": self.arn, "revision": revision}}


def plugins_for(dirs: MskPluginDirs, bucket: str) -> tuple[Plugin, Plugin]:
    provider = {"msk-config-providers": dirs.config_provider}
    return (
        Plugin(
            "cdc-lake-debezium",
            {"debezium": dirs.debezium, **provider},
            bucket,
            f"arn:aws:kafkaconnect:{REGION}:123456789012:custom-plugin/dbz/1",
        ),
        Plugin(
            "cdc-lake-s3-sink",
            {"s3sink": dirs.s3_sink, **provider},
            bucket,
            f"arn:aws:kafkaconnect:{REGION}:123456789012:custom-plugin/sink/1",
        ),
    )


def stub_new_plugin(stub: Stubber, plugin: Plugin) -> None:
    stub.add_response("list_custom_plugins", {"customPlugins": []}, {"namePrefix": plugin.name})
    stub.add_response(
        "create_custom_plugin",
        {
            "customPluginArn": plugin.arn,
            "customPluginState": "CREATING",
            "name": plugin.name,
            "revision": 1,
        },
        {
            "name": plugin.name,
            "contentType": "ZIP",
            "description": "cdc-lake connector plugin, sha256 "
            + hashlib.sha256(plugin.data).hexdigest(),
            "location": {
                "s3Location": {"bucketArn": f"arn:aws:s3:::{plugin.bucket}", "fileKey": plugin.key}
            },
        },
    )
    stub.add_response(
        "describe_custom_plugin",
        {
            "customPluginArn": plugin.arn,
            "customPluginState": "ACTIVE",
            "latestRevision": {"revision": 1},
        },
        {"customPluginArn": plugin.arn},
    )


def stub_existing_plugin(stub: Stubber, plugin: Plugin, revision: int = 1) -> None:
    stub.add_response(
        "list_custom_plugins",
        {
            "customPlugins": [
                {
                    "name": plugin.name,
                    "customPluginArn": plugin.arn,
                    "customPluginState": "ACTIVE",
                    "latestRevision": {"revision": revision, "contentType": "ZIP"},
                }
            ]
        },
        {"namePrefix": plugin.name},
    )


def stub_new_worker_config(stub: Stubber) -> None:
    stub.add_response(
        "list_worker_configurations", {"workerConfigurations": []}, {"namePrefix": WORKER_NAME}
    )
    stub.add_response(
        "create_worker_configuration",
        {
            "workerConfigurationArn": WORKER_ARN,
            "name": WORKER_NAME,
            "latestRevision": {"revision": 1},
            "workerConfigurationState": "ACTIVE",
        },
        {
            "name": WORKER_NAME,
            "description": "cdc-lake workers: string converters, Secrets Manager config provider",
            "propertiesFileContent": base64.b64encode(WORKER_PROPERTIES.encode()).decode(),
        },
    )


def stub_existing_worker_config(stub: Stubber) -> None:
    stub.add_response(
        "list_worker_configurations",
        {
            "workerConfigurations": [
                # A prefix match with another name must not be taken for ours.
                {"name": WORKER_NAME + "-old", "workerConfigurationArn": WORKER_ARN + "x"},
                {
                    "name": WORKER_NAME,
                    "workerConfigurationArn": WORKER_ARN,
                    "workerConfigurationState": "ACTIVE",
                    "latestRevision": {"revision": 1},
                },
            ]
        },
        {"namePrefix": WORKER_NAME},
    )


WORKER_REF = {"workerConfigurationArn": WORKER_ARN, "revision": 1}


def create_request(name: str, config: dict[str, str], plugin: Plugin) -> dict[str, Any]:
    return {
        "connectorName": name,
        "connectorDescription": f"cdc-lake {name}",
        "kafkaConnectVersion": "3.7.x",
        "serviceExecutionRoleArn": ROLE,
        "capacity": CAPACITY,
        "connectorConfiguration": config,
        "kafkaCluster": KAFKA_CLUSTER,
        "kafkaClusterClientAuthentication": {"authenticationType": "IAM"},
        "kafkaClusterEncryptionInTransit": {"encryptionType": "TLS"},
        "plugins": [plugin.ref()],
        "workerConfiguration": WORKER_REF,
        "logDelivery": LOG_DELIVERY,
    }


def described(
    name: str,
    arn: str,
    config: dict[str, str],
    plugin: Plugin,
    state: str = "RUNNING",
    version: str = "V1",
    revision: int = 1,
    **overrides: Any,
) -> dict[str, Any]:
    return {
        "connectorArn": arn,
        "connectorName": name,
        "connectorState": state,
        "currentVersion": version,
        "connectorConfiguration": config,
        "capacity": CAPACITY,
        "plugins": [plugin.ref(revision)],
        "workerConfiguration": WORKER_REF,
        "kafkaCluster": KAFKA_CLUSTER,
        "kafkaClusterClientAuthentication": {"authenticationType": "IAM"},
        "kafkaClusterEncryptionInTransit": {"encryptionType": "TLS"},
        "kafkaConnectVersion": "3.7.x",
        "serviceExecutionRoleArn": ROLE,
        "logDelivery": LOG_DELIVERY,
        **overrides,
    }


def stub_created_connector(
    stub: Stubber, name: str, arn: str, config: dict[str, str], plugin: Plugin
) -> None:
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": name})
    stub.add_response(
        "create_connector",
        {"connectorArn": arn, "connectorName": name, "connectorState": "CREATING"},
        create_request(name, config, plugin),
    )
    # Polled until RUNNING.
    for state in ("CREATING", "CREATING", "RUNNING"):
        stub.add_response(
            "describe_connector",
            described(name, arn, config, plugin, state=state),
            {"connectorArn": arn},
        )


def stub_existing_plugins_and_worker(stub: Stubber, dbz: Plugin, sink: Plugin) -> None:
    """Both plugins (revision 1) and the worker configuration are already deployed."""
    stub_existing_plugin(stub, dbz)
    stub_existing_plugin(stub, sink)
    stub_existing_worker_config(stub)


def stub_listed_connector(stub: Stubber, name: str, arn: str, description: dict[str, Any]) -> None:
    stub.add_response(
        "list_connectors",
        {"connectors": [{"connectorName": name, "connectorArn": arn, "connectorState": "RUNNING"}]},
        {"connectorNamePrefix": name},
    )
    stub.add_response("describe_connector", description, {"connectorArn": arn})


def expected_configs(cdc: CdcConnectorSettings) -> tuple[dict[str, str], dict[str, str]]:
    return {**cdc.debezium(), **MSK_SOURCE_EXTRAS}, cdc.s3_sink_msk()


def deploy(kc: Any, s3: S3, msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs, **kw):
    settings = MskConnectSettings(**{**msk.__dict__, "plugin_bucket": s3.bucket})
    return deploy_to_msk_connect(
        kc, s3.client, settings, cdc, dirs, timeout_s=60, poll_s=0.5, sleep=no_sleep, **kw
    )


# --- settings -----------------------------------------------------------------------------


def test_from_env_names_every_missing_variable():
    with pytest.raises(ValueError) as e:
        MskConnectSettings.from_env({"CDC_LAKE_MSK_SUBNETS": "subnet-a"})
    for name in (
        "CDC_LAKE_AWS_REGION",
        "CDC_LAKE_MSK_BOOTSTRAP",
        "CDC_LAKE_MSK_SECURITY_GROUPS",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN",
        "CDC_LAKE_MSK_PLUGIN_BUCKET",
    ):
        assert name in str(e.value)
    assert "CDC_LAKE_MSK_SUBNETS" not in str(e.value)


def test_from_env_reads_lists_numbers_and_shared_fallbacks():
    env = {
        "AWS_REGION": REGION,  # fallback of CDC_LAKE_AWS_REGION
        "CDC_LAKE_KAFKA_BOOTSTRAP": BOOTSTRAP,  # fallback of CDC_LAKE_MSK_BOOTSTRAP
        "CDC_LAKE_MSK_SUBNETS": " subnet-a, subnet-b ,",
        "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-connect",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN": ROLE,
        "CDC_LAKE_MSK_PLUGIN_BUCKET": "plugins",
        "CDC_LAKE_MSK_MCU_COUNT": "2",
        "CDC_LAKE_MSK_MIN_WORKERS": "1",
        "CDC_LAKE_MSK_MAX_WORKERS": "3",
        "CDC_LAKE_REPLICATION_SECRET": "prod/cdc",
    }
    s = MskConnectSettings.from_env(env)
    assert (s.region, s.bootstrap_servers) == (REGION, BOOTSTRAP)
    assert s.subnet_ids == ("subnet-a", "subnet-b") and s.security_group_ids == ("sg-connect",)
    assert s.capacity() == {
        "autoScaling": {
            "mcuCount": 2,
            "minWorkerCount": 1,
            "maxWorkerCount": 3,
            "scaleInPolicy": {"cpuUtilizationPercentage": 20},
            "scaleOutPolicy": {"cpuUtilizationPercentage": 80},
        }
    }
    assert s.password_ref == "${secretsmanager:prod/cdc:password}"
    assert s.log_delivery() is None
    with pytest.raises(ValueError, match="CDC_LAKE_MSK_MCU_COUNT='two' is not an integer"):
        MskConnectSettings.from_env({**env, "CDC_LAKE_MSK_MCU_COUNT": "two"})


def test_settings_refuse_non_iam_brokers_and_bad_capacity(msk: MskConnectSettings):
    fields = msk.__dict__
    with pytest.raises(ValueError, match="'b-1:9092' is not an IAM listener"):
        MskConnectSettings(**{**fields, "bootstrap_servers": "b-1:9092"})
    with pytest.raises(ValueError, match=r"mcu_count must be one of \(1, 2, 4, 8\)"):
        MskConnectSettings(**{**fields, "mcu_count": 3})
    with pytest.raises(ValueError, match="needs both min_workers and max_workers"):
        MskConnectSettings(**{**fields, "min_workers": 1})


def test_secret_arn_is_url_encoded_in_the_reference(msk: MskConnectSettings):
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cdc/repl-AbC123"
    ref = MskConnectSettings(**{**msk.__dict__, "db_secret": arn}).password_ref
    # Kafka's ${provider:path:key} cannot hold ':' in the path; the provider URL-decodes it.
    assert ref == (
        "${secretsmanager:arn%3Aaws%3Asecretsmanager%3Aeu-west-1%3A123456789012%3Asecret"
        "%3Acdc/repl-AbC123:password}"
    )


# --- the secret guard ---------------------------------------------------------------------


def test_secret_guard_refuses_literals_and_undeclared_providers():
    check_no_literal_secrets("c", {"database.password": PASSWORD_REF, "key.converter": "x"})
    with pytest.raises(ValueError, match="'database.password' must be a config-provider"):
        check_no_literal_secrets("c", {"database.password": "hunter2"})
    with pytest.raises(ValueError, match="'aws.secret.access.key' must be"):
        check_no_literal_secrets("c", {"aws.secret.access.key": "abc${secretsmanager:s:k}"})
    with pytest.raises(ValueError, match="'aws.access.key.id' must be"):
        check_no_literal_secrets("c", {"aws.access.key.id": "AKIAEXAMPLE"})
    # The local stack's env provider is not declared on the MSK workers.
    with pytest.raises(ValueError, match="config provider 'env'"):
        check_no_literal_secrets("c", {"database.password": "${env:CDC_LAKE_REPLICATION_PASSWORD}"})


def test_deploy_refuses_a_literal_password_before_any_aws_call(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc
):
    client, _ = kc  # no responses stubbed: any kafkaconnect call would fail the test
    literal = CdcConnectorSettings(**{**cdc.__dict__, "replication_password_ref": "hunter2"})
    with pytest.raises(ValueError, match=f"connector {SOURCE}: 'database.password'"):
        deploy_to_msk_connect(client, None, msk, literal, dirs, sleep=no_sleep)


# --- plugin archives ----------------------------------------------------------------------


def test_plugin_zip_is_deterministic_and_laid_out_per_plugin(tmp_path: Path):
    jars = {"b.jar": b"bbb", "a.jar": b"aaa", "lib/c.jar": b"ccc"}
    one = write_jars(tmp_path / "one", jars)
    two = write_jars(tmp_path / "two", dict(reversed(list(jars.items()))))
    os.utime(two / "a.jar", (1_000_000_000, 1_000_000_000))  # other mtimes, same bytes
    provider = write_jars(tmp_path / "provider", {"p.jar": b"ppp"})
    first = build_plugin_zip({"debezium": one, "msk-config-providers": provider})
    assert build_plugin_zip({"debezium": two, "msk-config-providers": provider}) == first
    with zipfile.ZipFile(io.BytesIO(first)) as zf:
        assert zf.namelist() == [
            "debezium/a.jar",
            "debezium/b.jar",
            "debezium/lib/c.jar",
            "msk-config-providers/p.jar",
        ]
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.read("debezium/lib/c.jar") == b"ccc"
    (two / "b.jar").write_bytes(b"changed")
    assert build_plugin_zip({"debezium": two, "msk-config-providers": provider}) != first
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no .jar files"):
        build_plugin_zip({"debezium": tmp_path / "empty"})


# --- deploys ------------------------------------------------------------------------------


def test_first_deploy_creates_plugins_worker_config_and_connectors(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    # The rendered Debezium config carries only a reference to the password.
    assert source_config["database.password"] == PASSWORD_REF
    assert "aws.access.key.id" not in sink_config and "aws.s3.endpoint" not in sink_config
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub_created_connector(stub, SOURCE, SOURCE_ARN, source_config, dbz)
    stub_created_connector(stub, SINK, SINK_ARN, sink_config, sink)

    result = deploy(client, s3, msk, cdc, dirs)

    assert s3.puts == [dbz.key, sink.key]
    assert s3.read(dbz.key) == dbz.data and s3.read(sink.key) == sink.data
    assert result["plugins"]["source"] == {
        "name": dbz.name,
        "arn": dbz.arn,
        "revision": 1,
        "s3_uri": f"s3://{s3.bucket}/{dbz.key}",
        "sha256": hashlib.sha256(dbz.data).hexdigest(),
        "uploaded": True,
        "created": True,
    }
    assert result["worker_configuration"] == {
        "name": WORKER_NAME,
        "arn": WORKER_ARN,
        "revision": 1,
        "created": True,
    }
    assert {n: (c["action"], c["arn"], c["state"]) for n, c in result["connectors"].items()} == {
        SOURCE: ("created", SOURCE_ARN, "RUNNING"),
        SINK: ("created", SINK_ARN, "RUNNING"),
    }


def test_worker_configuration_declares_the_secrets_manager_provider(msk: MskConnectSettings):
    decoded = msk.worker_properties()
    props = dict(line.split("=", 1) for line in decoded.splitlines())
    assert props["config.providers"] == "secretsmanager"
    assert (
        props["config.providers.secretsmanager.class"]
        == "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"
    )
    assert props["config.providers.secretsmanager.param.region"] == REGION
    assert decoded == WORKER_PROPERTIES  # the exact content the create request is checked for


def test_second_deploy_reuses_everything_and_uploads_nothing(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub_created_connector(stub, SOURCE, SOURCE_ARN, source_config, dbz)
    stub_created_connector(stub, SINK, SINK_ARN, sink_config, sink)
    deploy(client, s3, msk, cdc, dirs)
    assert len(s3.puts) == 2

    # Everything exists and matches: only look-ups, no create_* or update_* request.
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub, SOURCE, SOURCE_ARN, described(SOURCE, SOURCE_ARN, source_config, dbz)
    )
    stub_listed_connector(stub, SINK, SINK_ARN, described(SINK, SINK_ARN, sink_config, sink))
    again = deploy(client, s3, msk, cdc, dirs)

    assert len(s3.puts) == 2  # the same jars give the same key, already uploaded
    assert [p["uploaded"] for p in again["plugins"].values()] == [False, False]
    assert [p["created"] for p in again["plugins"].values()] == [False, False]
    assert again["worker_configuration"]["created"] is False
    assert {n: c["action"] for n, c in again["connectors"].items()} == {
        SOURCE: "unchanged",
        SINK: "unchanged",
    }


def test_existing_connector_is_updated_with_its_current_version(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    old_config = {**source_config, "snapshot.mode": "never"}
    stub_existing_plugins_and_worker(stub, dbz, sink)
    # The source runs an older config on an older plugin and a smaller capacity.
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, old_config, dbz, version="V7", revision=1, capacity={}),
    )
    op = f"{SOURCE_ARN}/operation/1"
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING", "connectorOperationArn": op},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V7",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector_operation",
        {"connectorOperationArn": op, "connectorOperationState": "UPDATE_IN_PROGRESS"},
        {"connectorOperationArn": op},
    )
    stub.add_response(
        "describe_connector_operation",
        {"connectorOperationArn": op, "connectorOperationState": "UPDATE_COMPLETE"},
        {"connectorOperationArn": op},
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V8", capacity={}),
        {"connectorArn": SOURCE_ARN},
    )
    # Worker settings go in a second request: the API refuses them with the configuration.
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING"},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V8",
            "capacity": CAPACITY,
            "plugins": [dbz.ref()],
            "workerConfiguration": WORKER_REF,
        },
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V9"),
        {"connectorArn": SOURCE_ARN},
    )
    stub_listed_connector(stub, SINK, SINK_ARN, described(SINK, SINK_ARN, sink_config, sink))

    result = deploy(client, s3, msk, cdc, dirs)

    assert result["connectors"][SOURCE]["action"] == "updated"
    assert result["connectors"][SOURCE]["updates"] == ["connectorConfiguration", "workerSetting"]
    assert result["connectors"][SINK]["action"] == "unchanged"


def test_failed_connector_raises_with_its_state_description(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": SOURCE})
    stub.add_response(
        "create_connector",
        {"connectorArn": SOURCE_ARN, "connectorName": SOURCE, "connectorState": "CREATING"},
        create_request(SOURCE, source_config, dbz),
    )
    stub.add_response(
        "describe_connector",
        described(
            SOURCE,
            SOURCE_ARN,
            source_config,
            dbz,
            state="FAILED",
            stateDescription={
                "code": "InvalidInput.InvalidConnectorConfiguration",
                "message": "Connection to cdc.cluster-abc refused",
            },
        ),
        {"connectorArn": SOURCE_ARN},
    )
    with pytest.raises(MskConnectError) as e:
        deploy(client, s3, msk, cdc, dirs)
    message = str(e.value)
    assert f"connector {SOURCE} is FAILED" in message
    assert "InvalidInput.InvalidConnectorConfiguration: Connection to cdc.cluster-abc refused" in (
        message
    )
    # The sink is not attempted after the source failed (no stubs left for it).


def test_rolled_back_update_raises_with_the_error_info(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    old_config = {**source_config, "tasks.max": "2"}
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub, SOURCE, SOURCE_ARN, described(SOURCE, SOURCE_ARN, old_config, dbz, version="V2")
    )
    op = f"{SOURCE_ARN}/operation/9"
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING", "connectorOperationArn": op},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V2",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector_operation",
        {
            "connectorOperationArn": op,
            "connectorOperationState": "ROLLBACK_COMPLETE",
            "errorInfo": {"code": "HealthCheckFailed", "message": "task 0 failed"},
        },
        {"connectorOperationArn": op},
    )
    with pytest.raises(
        MskConnectError, match="ROLLBACK_COMPLETE: HealthCheckFailed: task 0 failed"
    ):
        deploy(client, s3, msk, cdc, dirs)


def test_settings_that_cannot_be_updated_raise_instead_of_being_ignored(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_existing_plugins_and_worker(stub, dbz, sink)
    other_cluster = {
        "apacheKafkaCluster": {
            **KAFKA_CLUSTER["apacheKafkaCluster"],
            "bootstrapServers": "old:9098",
        }
    }
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, source_config, dbz, kafkaCluster=other_cluster),
    )
    with pytest.raises(MskConnectError, match="bootstrapServers is 'old:9098'"):
        deploy(client, s3, msk, cdc, dirs)


def test_waiting_gives_up_after_the_timeout(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, source_config, dbz, state="CREATING"),
    )
    settings = MskConnectSettings(**{**msk.__dict__, "plugin_bucket": s3.bucket})
    with pytest.raises(MskConnectError, match=f"connector {SOURCE} is still CREATING after 0s"):
        deploy_to_msk_connect(client, s3.client, settings, cdc, dirs, timeout_s=0, sleep=no_sleep)


# --- CLI ----------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cdc-lake")
    parser.add_argument("--state-dir")
    add_msk_cli(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_reports_missing_variables(capsys):
    args = parse(["msk", "deploy"])
    assert args.func(args, environ={}) == 2
    err = capsys.readouterr().err
    assert "CDC_LAKE_AWS_REGION" in err and "CDC_LAKE_MSK_PLUGIN_BUCKET" in err


def test_cli_names_the_msk_and_the_source_variables_in_one_message(capsys):
    args = parse(["msk", "deploy"])
    assert args.func(args, environ={"CDC_LAKE_PG_HOST": "db.internal"}) == 2
    err = capsys.readouterr().err
    for name in ("CDC_LAKE_MSK_SUBNETS", "CDC_LAKE_PG_DATABASE", "CDC_LAKE_RAW_BUCKET"):
        assert name in err, name
    assert "CDC_LAKE_PG_HOST" not in err


def test_cli_dry_run_prints_the_plan_without_calling_aws(dirs: MskPluginDirs, capsys):
    env = {
        "CDC_LAKE_AWS_REGION": REGION,
        "CDC_LAKE_MSK_BOOTSTRAP": BOOTSTRAP,
        "CDC_LAKE_MSK_SUBNETS": "subnet-a,subnet-b",
        "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-connect",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN": ROLE,
        "CDC_LAKE_MSK_PLUGIN_BUCKET": "plugins",
        "CDC_LAKE_PG_HOST": "db.internal",
        "CDC_LAKE_PG_DATABASE": "cdc_lake",
        "CDC_LAKE_RAW_BUCKET": "cdc-raw-prod",
    }
    args = parse(
        [
            "msk",
            "deploy",
            "--dry-run",
            f"--config-provider-dir={dirs.config_provider}",
            f"--debezium-dir={dirs.debezium}",
            f"--s3-sink-dir={dirs.s3_sink}",
        ]
    )

    def no_clients(*a: Any, **kw: Any) -> Any:
        raise AssertionError("a dry run must not create AWS clients")

    assert args.func(args, environ=env, client_factory=no_clients) == 0
    plan = json.loads(capsys.readouterr().out)
    source = plan["connectors"][SOURCE]
    assert source["database.password"] == PASSWORD_REF
    assert source["database.hostname"] == "db.internal"
    assert source["database.user"] == "cdc_replication"
    assert plan["connectors"][SINK]["aws.s3.bucket.name"] == "cdc-raw-prod"
    assert plan["plugins"]["source"].startswith(
        "s3://plugins/msk-connect/plugins/cdc-lake-debezium-"
    )
    assert "config.providers=secretsmanager" in plan["worker_properties"]


# --- the Dagster side ---------------------------------------------------------------------


def test_the_assets_client_updates_the_deployed_connector_on_its_own_plugin(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc
):
    client, stub = kc
    dbz, _ = plugins_for(dirs, "plugins")
    source_config, _ = expected_configs(cdc)
    old = {**source_config, "snapshot.mode": "never"}
    deployed = described(SOURCE, SOURCE_ARN, old, dbz, version="V3", revision=2)
    stub_listed_connector(stub, SOURCE, SOURCE_ARN, deployed)  # which plugin does it run?
    stub_listed_connector(stub, SOURCE, SOURCE_ARN, deployed)  # ensure_connector's lookup
    # Only the configuration changes: the plugin revision it runs (2) is kept, so no second
    # update of the worker settings is sent.
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING"},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V3",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V4", revision=2),
        {"connectorArn": SOURCE_ARN},
    )
    # The asset passes the plain rendered config; the MSK additions are the client's job.
    action, status = MskConnectClient(client, msk, poll_s=0).deploy(
        SOURCE, cdc.debezium(), timeout_s=5
    )
    assert (action, status["connector"]["state"]) == ("updated", "RUNNING")


def test_the_assets_client_sends_the_deploy_command_when_nothing_is_deployed(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, kc
):
    client, stub = kc
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": SINK})
    with pytest.raises(MskConnectError, match="cdc-lake msk deploy"):
        MskConnectClient(client, msk, poll_s=0).deploy(SINK, cdc.s3_sink_msk(), timeout_s=5)
