"""What the MSK Connect tests share: the settings they deploy with, the requests they expect,
and the stubbed answers.

moto has no kafkaconnect, so a real boto3 client is wrapped in botocore's Stubber: every request
is validated against the service model and compared with the exact expected parameters, and a
call that is not expected fails the test. S3 is moto's server, so uploads are real requests.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.deploy import deploy_to_msk_connect
from cdc_lake.streaming.msk.plugins import MskPluginDirs, build_plugin_zip
from cdc_lake.streaming.msk.settings import MskConnectSettings

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


def write_jars(folder: Path, jars: dict[str, bytes]) -> Path:
    for name, data in jars.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def make_plugin_dirs(tmp_path: Path) -> MskPluginDirs:
    """Small fake jars for both connectors and the config provider."""
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


# --- the expected plugins and requests ------------------------------------------------------


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
            # Our jars too: the source's first transform is their TruncateMarker.
            {"debezium": dirs.debezium, "s3sink": dirs.s3_sink, **provider},
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
