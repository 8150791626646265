"""Deploy the Debezium source and our S3 sink to Amazon MSK Connect through boto3's
``kafkaconnect`` API: ``deploy_to_msk_connect`` or ``cdc-lake msk deploy``.

The connector configs are the ones the local path renders from ``connectors/``
(``CdcConnectorSettings.debezium()`` and ``.s3_sink_msk()``), plus a few MSK-only keys
(``msk_source_extras``) that never override a rendered one.

What is created and what is updated (every step is idempotent, so rerunning is always safe):

- Custom plugins. MSK Connect gives a connector exactly one plugin, and config providers must
  be on that plugin's path, so each plugin is one ZIP holding the connector's jars and the
  msk-config-providers jars, one top-level folder each. The ZIP is built deterministically
  (sorted entries, fixed timestamps, stored) so the same jars give the same bytes. It is
  uploaded to ``s3://<bucket>/<prefix>/<name>-<sha256[:12]>.zip`` only if that key is absent
  (or holds an object of another size), and the plugin, named ``<name>-<sha256[:12]>``, is
  created only if no plugin has that name; a new plugin is awaited until ACTIVE.
  Plugins cannot be changed in place: a changed jar set is a new plugin, which the connector is
  then switched to. Old plugins are left for you to delete.
- The worker configuration (converters and the Secrets Manager config provider) is named with
  the hash of its properties too: reused when it exists, created otherwise.
- Connectors are looked up by name. An absent one is created. An existing one is first awaited
  until RUNNING (an earlier run may have left it CREATING or UPDATING), then gets at most two
  ``update_connector`` calls, because the API takes either the connector configuration or the
  worker settings (capacity, plugin, worker configuration) per request, never both: one for a
  changed configuration, then one for changed worker settings. Nothing is sent when neither
  changed. Settings MSK Connect cannot update (cluster, network, authentication, role, Connect
  version, log delivery) raise ``MskConnectError`` naming them instead of being ignored.

Secrets: the database password is never in a connector config. ``database.password`` holds
``${secretsmanager:<secret>:<key>}``, which the workers resolve at task start through the
worker configuration's ``config.providers=secretsmanager`` (class
``com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider``) with the service
execution role's credentials. Before any AWS call, ``check_no_literal_secrets`` refuses a config
whose secret-looking key holds anything but such a reference, and any reference to a provider
the workers do not declare (e.g. the local ``${env:...}``).

Kafka access is IAM over TLS: MSK Connect authenticates the workers and the connectors' own
producers and consumers with the service execution role, so no ``producer.override.*`` or SASL
keys are needed (Debezium's PostgreSQL connector has no schema-history client of its own). The
role needs the ``kafka-cluster:*`` topic and group actions, ``kafka-cluster:CreateTopic`` for
the source's topic (MSK does not auto-create topics, so the source config sets
``topic.creation.default.*``), ``secretsmanager:GetSecretValue`` on the secret, and S3 write on
the raw bucket.

Failure behaviour: settings, secrets and plugin folders are checked before the first AWS call.
After that, the first failure raises and stops the deploy; what was created before it stays and
is reused by the next run. A connector that becomes FAILED, an update that MSK Connect rolled
back, or a plugin that failed to create raises ``MskConnectError`` with the resource's name,
state and the service's ``stateDescription``/``errorInfo`` (code and message). Waiting is
bounded by ``timeout_s`` and polls every ``poll_s``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cdc_lake.stack.settings import StackSettings
from cdc_lake.streaming.connect_config import CdcConnectorSettings

SECRETS_PROVIDER = "secretsmanager"
SECRETS_PROVIDER_CLASS = "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
IAM_BOOTSTRAP_PORTS = ("9098", "9198")  # MSK's IAM listeners: in the VPC, and public access
MCU_COUNTS = (1, 2, 4, 8)
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a ZIP entry can hold
CONFIG_PROVIDER_FOLDER = "msk-config-providers"

# Keys whose values are credentials; they may only hold a ${provider:...} reference.
SECRET_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|credential|jaas|"
    r"access\.key|key\.id|private\.key|api\.key",
    re.IGNORECASE,
)
REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.-]+):[^{}]*\}")
WHOLE_REFERENCE = re.compile(r"^\$\{[A-Za-z0-9_.-]+:[^{}]+\}$")

Sleep = Callable[[float], None]

CONNECTOR_HINTS = {
    "FAILED": ". Fix: read the worker logs (CDC_LAKE_MSK_LOG_GROUP); MSK Connect cannot update "
    "a FAILED connector, so delete it and rerun once the cause is fixed",
    "PAUSED": ". Fix: resume it (aws kafkaconnect resume-connector) and rerun",
}


def secrets_manager_ref(secret: str, key: str = "password") -> str:
    """``${secretsmanager:<secret>:<key>}``. The provider URL-decodes the secret id, and
    Kafka's ``${...}`` syntax cannot hold ':', so an ARN is URL-encoded; a plain name
    stays readable."""
    quoted = urllib.parse.quote(secret, safe="/-_.@=")
    return "${" + f"{SECRETS_PROVIDER}:{quoted}:{key}" + "}"


class MskConnectError(RuntimeError):
    pass


# --- settings ------------------------------------------------------------------------------

# (field, variable names, required). A later name is a fallback shared with the prod resources
# (cdc_lake/resources.py), so both paths agree on the region, brokers and secret.
ENV_VARS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("region", ("CDC_LAKE_AWS_REGION", "AWS_REGION"), True),
    ("bootstrap_servers", ("CDC_LAKE_MSK_BOOTSTRAP", "CDC_LAKE_KAFKA_BOOTSTRAP"), True),
    ("subnet_ids", ("CDC_LAKE_MSK_SUBNETS",), True),
    ("security_group_ids", ("CDC_LAKE_MSK_SECURITY_GROUPS",), True),
    ("service_execution_role_arn", ("CDC_LAKE_MSK_CONNECT_ROLE_ARN",), True),
    ("plugin_bucket", ("CDC_LAKE_MSK_PLUGIN_BUCKET",), True),
    ("db_secret", ("CDC_LAKE_REPLICATION_SECRET",), False),
    ("db_secret_key", ("CDC_LAKE_REPLICATION_SECRET_KEY",), False),
    ("secrets_region", ("CDC_LAKE_MSK_SECRETS_REGION",), False),
    ("plugin_prefix", ("CDC_LAKE_MSK_PLUGIN_PREFIX",), False),
    ("log_group", ("CDC_LAKE_MSK_LOG_GROUP",), False),
    ("log_bucket", ("CDC_LAKE_MSK_LOG_BUCKET",), False),
    ("log_prefix", ("CDC_LAKE_MSK_LOG_PREFIX",), False),
    ("mcu_count", ("CDC_LAKE_MSK_MCU_COUNT",), False),
    ("worker_count", ("CDC_LAKE_MSK_WORKER_COUNT",), False),
    ("min_workers", ("CDC_LAKE_MSK_MIN_WORKERS",), False),
    ("max_workers", ("CDC_LAKE_MSK_MAX_WORKERS",), False),
    ("kafka_connect_version", ("CDC_LAKE_MSK_CONNECT_VERSION",), False),
    ("topic_replication_factor", ("CDC_LAKE_MSK_TOPIC_REPLICATION",), False),
    ("name_prefix", ("CDC_LAKE_MSK_NAME_PREFIX",), False),
)
LIST_FIELDS = {"subnet_ids", "security_group_ids"}
INT_FIELDS = {
    "mcu_count",
    "worker_count",
    "min_workers",
    "max_workers",
    "topic_replication_factor",
}

# The source side, for the CLI (Dagster builds CdcConnectorSettings from its resources).
SOURCE_ENV_REQUIRED = ("CDC_LAKE_PG_HOST", "CDC_LAKE_PG_DATABASE", "CDC_LAKE_RAW_BUCKET")


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _missing_error(missing: list[str]) -> ValueError:
    return ValueError(f"missing environment variables: {', '.join(missing)}")


def missing_msk_env(environ: Mapping[str, str]) -> list[str]:
    """The required MSK Connect variables that are not set (each by its first name), so a
    caller can name them together with its own missing ones."""
    return [
        names[0]
        for _, names, required in ENV_VARS
        if required and not any(environ.get(n, "").strip() for n in names)
    ]


@dataclass(frozen=True)
class MskConnectSettings:
    """Where and how the connectors run on MSK Connect (``from_env`` lists the variables)."""

    region: str
    bootstrap_servers: str  # the cluster's IAM bootstrap brokers, host:9098,...
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    service_execution_role_arn: str
    plugin_bucket: str
    # Secrets Manager secret (name or ARN) whose JSON holds the replication password.
    db_secret: str = "cdc-lake/replication"
    db_secret_key: str = "password"
    plugin_prefix: str = "msk-connect/plugins"
    secrets_region: str | None = None  # of the secret; default: region
    log_group: str | None = None  # CloudWatch Logs group for worker logs
    log_bucket: str | None = None  # or/and an S3 bucket for them
    log_prefix: str | None = None
    mcu_count: int = 1
    worker_count: int = 1  # provisioned capacity, unless min/max workers are set
    min_workers: int | None = None
    max_workers: int | None = None
    scale_in_cpu_percent: int = 20
    scale_out_cpu_percent: int = 80
    kafka_connect_version: str = "3.7.x"
    topic_replication_factor: int = 3
    name_prefix: str = "cdc-lake"

    def __post_init__(self) -> None:
        problems = []
        for server in _csv(self.bootstrap_servers) or ("",):
            if server.rpartition(":")[2] not in IAM_BOOTSTRAP_PORTS:
                problems.append(
                    f"bootstrap server {server!r} is not an IAM listener (port 9098, or 9198 "
                    "for public access)"
                )
        if not self.subnet_ids:
            problems.append("no subnet ids")
        if not self.service_execution_role_arn.startswith("arn:"):
            problems.append("the service execution role must be an ARN")
        if self.mcu_count not in MCU_COUNTS:
            problems.append(f"mcu_count must be one of {MCU_COUNTS}")
        if (self.min_workers is None) != (self.max_workers is None):
            problems.append("autoscaling needs both min_workers and max_workers")
        elif self.min_workers is not None and self.max_workers is not None:
            if not 1 <= self.min_workers <= self.max_workers:
                problems.append("autoscaling needs 1 <= min_workers <= max_workers")
        elif self.worker_count < 1:
            problems.append("worker_count must be at least 1")
        if problems:
            raise ValueError("MSK Connect settings: " + "; ".join(problems))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> MskConnectSettings:
        """Required: CDC_LAKE_AWS_REGION (or AWS_REGION); CDC_LAKE_MSK_BOOTSTRAP, the IAM
        brokers host:9098,... (or CDC_LAKE_KAFKA_BOOTSTRAP); CDC_LAKE_MSK_SUBNETS and
        CDC_LAKE_MSK_SECURITY_GROUPS (comma-separated); CDC_LAKE_MSK_CONNECT_ROLE_ARN (the
        service execution role); CDC_LAKE_MSK_PLUGIN_BUCKET.

        Optional: CDC_LAKE_REPLICATION_SECRET (Secrets Manager secret holding the replication
        password, default cdc-lake/replication) and CDC_LAKE_REPLICATION_SECRET_KEY (its JSON
        key, default password); CDC_LAKE_MSK_SECRETS_REGION; CDC_LAKE_MSK_PLUGIN_PREFIX;
        CDC_LAKE_MSK_LOG_GROUP, CDC_LAKE_MSK_LOG_BUCKET, CDC_LAKE_MSK_LOG_PREFIX (worker logs);
        CDC_LAKE_MSK_MCU_COUNT and CDC_LAKE_MSK_WORKER_COUNT (provisioned), or
        CDC_LAKE_MSK_MIN_WORKERS with CDC_LAKE_MSK_MAX_WORKERS (autoscaling);
        CDC_LAKE_MSK_CONNECT_VERSION; CDC_LAKE_MSK_TOPIC_REPLICATION; CDC_LAKE_MSK_NAME_PREFIX.
        """
        missing = missing_msk_env(environ)
        if missing:
            raise _missing_error(missing)
        values: dict[str, Any] = {}
        for attr, names, _ in ENV_VARS:
            found = [(n, environ[n].strip()) for n in names if environ.get(n, "").strip()]
            if not found:
                continue
            name, raw = found[0]
            if attr in LIST_FIELDS:
                values[attr] = _csv(raw)
            elif attr in INT_FIELDS:
                try:
                    values[attr] = int(raw)
                except ValueError:
                    raise ValueError(f"{name}={raw!r} is not an integer") from None
            else:
                values[attr] = raw
        return cls(**values)

    # --- request parts ---------------------------------------------------------------------
    @property
    def partition(self) -> str:
        if self.region.startswith("cn-"):
            return "aws-cn"
        if self.region.startswith("us-gov-"):
            return "aws-us-gov"
        return "aws"

    @property
    def password_ref(self) -> str:
        return secrets_manager_ref(self.db_secret, self.db_secret_key)

    def kafka_cluster(self) -> dict[str, Any]:
        vpc: dict[str, Any] = {"subnets": list(self.subnet_ids)}
        if self.security_group_ids:
            vpc["securityGroups"] = list(self.security_group_ids)
        return {"apacheKafkaCluster": {"bootstrapServers": self.bootstrap_servers, "vpc": vpc}}

    def capacity(self) -> dict[str, Any]:
        """Valid for both create_connector and update_connector (whose autoScaling needs the
        policies)."""
        if self.min_workers is not None and self.max_workers is not None:
            return {
                "autoScaling": {
                    "mcuCount": self.mcu_count,
                    "minWorkerCount": self.min_workers,
                    "maxWorkerCount": self.max_workers,
                    "scaleInPolicy": {"cpuUtilizationPercentage": self.scale_in_cpu_percent},
                    "scaleOutPolicy": {"cpuUtilizationPercentage": self.scale_out_cpu_percent},
                }
            }
        return {
            "provisionedCapacity": {"mcuCount": self.mcu_count, "workerCount": self.worker_count}
        }

    def log_delivery(self) -> dict[str, Any] | None:
        worker: dict[str, Any] = {}
        if self.log_group:
            worker["cloudWatchLogs"] = {"enabled": True, "logGroup": self.log_group}
        if self.log_bucket:
            s3: dict[str, Any] = {"enabled": True, "bucket": self.log_bucket}
            if self.log_prefix:
                s3["prefix"] = self.log_prefix
            worker["s3"] = s3
        return {"workerLogDelivery": worker} if worker else None

    def worker_properties(self) -> str:
        """The worker configuration: converters (the connectors set their own) and the Secrets
        Manager config provider."""
        region = self.secrets_region or self.region
        lines = [
            f"key.converter={STRING_CONVERTER}",
            f"value.converter={STRING_CONVERTER}",
            f"config.providers={SECRETS_PROVIDER}",
            f"config.providers.{SECRETS_PROVIDER}.class={SECRETS_PROVIDER_CLASS}",
            f"config.providers.{SECRETS_PROVIDER}.param.region={region}",
        ]
        return "\n".join(lines) + "\n"


def connector_settings_from_env(
    environ: Mapping[str, str], msk: MskConnectSettings
) -> CdcConnectorSettings:
    """The source-side settings for the CLI, with the prod resources' variable names and
    defaults: CDC_LAKE_PG_HOST, CDC_LAKE_PG_DATABASE and CDC_LAKE_RAW_BUCKET (required);
    CDC_LAKE_PG_PORT (5432), CDC_LAKE_PG_REPLICATION_USER (cdc_replication),
    CDC_LAKE_RAW_PREFIX (cdc-events/), CDC_LAKE_TOPIC_PREFIX (cdc). The password is the Secrets
    Manager reference from ``msk``, never a value."""
    missing = [name for name in SOURCE_ENV_REQUIRED if not environ.get(name, "").strip()]
    if missing:
        raise _missing_error(missing)
    port = environ.get("CDC_LAKE_PG_PORT", "").strip() or "5432"
    if not port.isdigit():
        raise ValueError(f"CDC_LAKE_PG_PORT={port!r} is not a port number")
    return CdcConnectorSettings(
        topic_prefix=environ.get("CDC_LAKE_TOPIC_PREFIX", "").strip() or "cdc",
        pg_host=environ["CDC_LAKE_PG_HOST"].strip(),
        pg_port=int(port),
        pg_database=environ["CDC_LAKE_PG_DATABASE"].strip(),
        replication_user=environ.get("CDC_LAKE_PG_REPLICATION_USER", "").strip()
        or "cdc_replication",
        replication_password_ref=msk.password_ref,
        raw_bucket=environ["CDC_LAKE_RAW_BUCKET"].strip(),
        raw_prefix=environ.get("CDC_LAKE_RAW_PREFIX", "").strip() or "cdc-events/",
        region=msk.region,
    )


def connector_names(topic_prefix: str) -> tuple[str, str]:
    """(source, sink): the names CdcPipelineResource gives them, so the sink's consumer group
    is ``connect-<sink>`` on MSK Connect too."""
    return f"{topic_prefix}-debezium-source", f"{topic_prefix}-s3-sink"


# --- connector configs and the secret guard -----------------------------------------------


def msk_source_extras(settings: MskConnectSettings) -> dict[str, str]:
    return {
        # MSK restarts connectors that use config providers often unless told not to.
        "config.action.reload": "none",
        # MSK brokers do not auto-create topics: Connect creates the source's topic.
        "topic.creation.default.replication.factor": str(settings.topic_replication_factor),
        "topic.creation.default.partitions": "1",
    }


def _with_extras(name: str, config: Mapping[str, str], extras: Mapping[str, str]) -> dict[str, str]:
    clash = sorted(set(config) & set(extras))
    if clash:
        raise ValueError(f"connector {name}: MSK extras would override rendered keys {clash}")
    return {**config, **extras}


def check_no_literal_secrets(
    name: str, config: Mapping[str, str], providers: Iterable[str] = (SECRETS_PROVIDER,)
) -> None:
    """Refuse a config that would carry a secret: a secret-looking key whose value is not a
    whole ``${provider:...}`` reference, or a reference to a provider the workers lack."""
    declared = set(providers)
    for key, value in config.items():
        if SECRET_KEY.search(key) and not WHOLE_REFERENCE.match(value):
            raise ValueError(
                f"connector {name}: {key!r} must be a config-provider reference such as "
                "${secretsmanager:<secret>:<key>}, not a value"
            )
        for provider in REFERENCE.findall(value):
            if provider not in declared:
                raise ValueError(
                    f"connector {name}: {key!r} refers to config provider {provider!r}, which "
                    f"the MSK Connect workers do not declare (they have {sorted(declared)})"
                )


# --- plugins ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MskPluginDirs:
    """Folders of jars: each connector's, and the unpacked msk-config-providers release."""

    debezium: Path
    s3_sink: Path
    config_provider: Path

    @staticmethod
    def from_stack(stack: StackSettings, config_provider: str | Path) -> MskPluginDirs:
        return MskPluginDirs(
            debezium=stack.classpath_dir("plugins/debezium"),
            s3_sink=stack.classpath_dir("plugins/s3sink"),
            config_provider=Path(config_provider),
        )


@dataclass(frozen=True)
class PluginArchive:
    name: str  # <base>-<sha256[:12]>: the custom plugin's name and the object's file name
    data: bytes
    sha256: str

    def key(self, prefix: str) -> str:
        prefix = prefix.strip("/")
        return f"{prefix}/{self.name}.zip" if prefix else f"{self.name}.zip"


def build_plugin_zip(folders: Mapping[str, Path]) -> bytes:
    """A ZIP with one top-level folder per entry of ``folders``, holding that folder's files.
    Entries are sorted, dated 1980-01-01 and stored (jars are compressed already), so the same
    files always give the same bytes."""
    entries: list[tuple[str, Path]] = []
    for top, folder in folders.items():
        folder = Path(folder)
        if not folder.is_dir():
            raise ValueError(f"plugin folder {folder} does not exist")
        files = [p for p in folder.rglob("*") if p.is_file()]
        if not any(p.suffix == ".jar" for p in files):
            raise ValueError(
                f"plugin folder {folder} holds no .jar files. Fix: run `cdc-lake stack install` "
                "for the connectors, or unpack the msk-config-providers release there."
            )
        entries += [(f"{top}/{p.relative_to(folder).as_posix()}", p) for p in files]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for arcname, path in sorted(entries):
            info = zipfile.ZipInfo(arcname, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever the host
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def plugin_archive(base_name: str, folders: Mapping[str, Path]) -> PluginArchive:
    data = build_plugin_zip(folders)
    digest = hashlib.sha256(data).hexdigest()
    return PluginArchive(name=f"{base_name}-{digest[:12]}", data=data, sha256=digest)


def plugin_archives(settings: MskConnectSettings, dirs: MskPluginDirs) -> dict[str, PluginArchive]:
    """The source's and the sink's plugin, each bundling the config provider."""
    provider = {CONFIG_PROVIDER_FOLDER: dirs.config_provider}
    return {
        "source": plugin_archive(
            f"{settings.name_prefix}-debezium", {"debezium": dirs.debezium, **provider}
        ),
        "sink": plugin_archive(
            f"{settings.name_prefix}-s3-sink", {"s3sink": dirs.s3_sink, **provider}
        ),
    }


@dataclass
class PluginResult:
    name: str
    arn: str
    revision: int
    s3_uri: str
    sha256: str
    uploaded: bool
    created: bool

    def ref(self) -> dict[str, Any]:
        return {"customPlugin": {"customPluginArn": self.arn, "revision": self.revision}}


def _error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def upload_plugin(s3: Any, bucket: str, key: str, data: bytes) -> bool:
    """Put the ZIP unless an object of the same size is already there; True if uploaded."""
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        if head.get("ContentLength") == len(data):
            return False
    except ClientError as e:
        if _error_code(e) not in ("404", "NoSuchKey", "NotFound"):
            raise
    s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/zip")
    return True


def _find_by_name(
    client: Any, operation: str, result_key: str, name_key: str, name: str, **params: Any
) -> dict[str, Any] | None:
    for page in client.get_paginator(operation).paginate(**params):
        for item in page.get(result_key, []):
            if item.get(name_key) == name:
                return item
    return None


def _describe_state(desc: Mapping[str, Any]) -> str:
    state = desc.get("stateDescription") or desc.get("errorInfo") or {}
    code, message = state.get("code"), state.get("message")
    return f"{code or 'no code'}: {message or 'no message'}"


def _poll(
    what: str,
    fetch: Callable[[], dict[str, Any]],
    state_key: str,
    done: set[str],
    failed: set[str],
    timeout_s: float,
    poll_s: float,
    sleep: Sleep,
    hints: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        desc = fetch()
        state = desc.get(state_key)
        if state in done:
            return desc
        if state in failed:
            hint = (hints or {}).get(state, "")
            raise MskConnectError(f"{what} is {state}: {_describe_state(desc)}{hint}")
        if time.monotonic() >= deadline:
            raise MskConnectError(f"{what} is still {state} after {timeout_s:.0f}s")
        sleep(poll_s)


def ensure_plugin(
    kafkaconnect: Any,
    s3: Any,
    settings: MskConnectSettings,
    archive: PluginArchive,
    timeout_s: float,
    poll_s: float,
    sleep: Sleep,
) -> PluginResult:
    key = archive.key(settings.plugin_prefix)
    uploaded = upload_plugin(s3, settings.plugin_bucket, key, archive.data)
    found = _find_by_name(
        kafkaconnect,
        "list_custom_plugins",
        "customPlugins",
        "name",
        archive.name,
        namePrefix=archive.name,
    )
    created = found is None
    if found is None:
        found = kafkaconnect.create_custom_plugin(
            name=archive.name,
            contentType="ZIP",
            description=f"cdc-lake connector plugin, sha256 {archive.sha256}",
            location={
                "s3Location": {
                    "bucketArn": f"arn:{settings.partition}:s3:::{settings.plugin_bucket}",
                    "fileKey": key,
                }
            },
        )
    arn = found["customPluginArn"]
    state = found.get("customPluginState")
    revision = (found.get("latestRevision") or {}).get("revision") or found.get("revision")
    if state != "ACTIVE" or not revision:
        desc = _poll(
            f"custom plugin {archive.name}",
            lambda: kafkaconnect.describe_custom_plugin(customPluginArn=arn),
            "customPluginState",
            {"ACTIVE"},
            {"CREATE_FAILED", "UPDATE_FAILED", "DELETING"},
            timeout_s,
            poll_s,
            sleep,
            hints={
                "CREATE_FAILED": f". Fix: check s3://{settings.plugin_bucket}/{key} is a ZIP "
                "of jars, delete the plugin and rerun"
            },
        )
        revision = desc["latestRevision"]["revision"]
    return PluginResult(
        name=archive.name,
        arn=arn,
        revision=int(revision),
        s3_uri=f"s3://{settings.plugin_bucket}/{key}",
        sha256=archive.sha256,
        uploaded=uploaded,
        created=created,
    )


# --- worker configuration -----------------------------------------------------------------


@dataclass
class WorkerConfigResult:
    name: str
    arn: str
    revision: int
    created: bool

    def ref(self) -> dict[str, Any]:
        return {"workerConfigurationArn": self.arn, "revision": self.revision}


def ensure_worker_configuration(
    kafkaconnect: Any, settings: MskConnectSettings
) -> WorkerConfigResult:
    """Worker configurations cannot be edited, so the name carries the properties' hash."""
    properties = settings.worker_properties()
    digest = hashlib.sha256(properties.encode()).hexdigest()[:12]
    name = f"{settings.name_prefix}-workers-{digest}"
    found = _find_by_name(
        kafkaconnect,
        "list_worker_configurations",
        "workerConfigurations",
        "name",
        name,
        namePrefix=name,
    )
    if found is not None and found.get("workerConfigurationState") == "DELETING":
        raise MskConnectError(f"worker configuration {name} is being deleted; rerun later")
    if found is not None:
        return WorkerConfigResult(
            name, found["workerConfigurationArn"], int(found["latestRevision"]["revision"]), False
        )
    made = kafkaconnect.create_worker_configuration(
        name=name,
        description="cdc-lake workers: string converters, Secrets Manager config provider",
        propertiesFileContent=base64.b64encode(properties.encode()).decode(),
    )
    return WorkerConfigResult(
        name, made["workerConfigurationArn"], int(made["latestRevision"]["revision"]), True
    )


# --- connectors ---------------------------------------------------------------------------


@dataclass
class ConnectorResult:
    name: str
    arn: str
    action: str  # created, updated or unchanged
    updates: list[str] = field(default_factory=list)  # connectorConfiguration, workerSetting
    state: str = ""


def _subset(wanted: Any, actual: Any) -> bool:
    """True if every key of ``wanted`` is in ``actual`` with the same value (recursively);
    describe_* answers carry extra keys we never set."""
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _subset(v, actual[k]) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(wanted) == len(actual)
            and all(_subset(w, a) for w, a in zip(wanted, actual, strict=True))
        )
    return wanted == actual


def _immutable_drift(desc: Mapping[str, Any], settings: MskConnectSettings) -> list[str]:
    have_cluster = (desc.get("kafkaCluster") or {}).get("apacheKafkaCluster") or {}
    have_vpc = have_cluster.get("vpc") or {}
    checks: list[tuple[str, Any, Any]] = [
        ("bootstrapServers", have_cluster.get("bootstrapServers"), settings.bootstrap_servers),
        ("subnets", sorted(have_vpc.get("subnets") or []), sorted(settings.subnet_ids)),
        (
            "securityGroups",
            sorted(have_vpc.get("securityGroups") or []),
            sorted(settings.security_group_ids),
        ),
        (
            "authenticationType",
            (desc.get("kafkaClusterClientAuthentication") or {}).get("authenticationType"),
            "IAM",
        ),
        (
            "encryptionType",
            (desc.get("kafkaClusterEncryptionInTransit") or {}).get("encryptionType"),
            "TLS",
        ),
        (
            "serviceExecutionRoleArn",
            desc.get("serviceExecutionRoleArn"),
            settings.service_execution_role_arn,
        ),
        ("kafkaConnectVersion", desc.get("kafkaConnectVersion"), settings.kafka_connect_version),
    ]
    drift = [f"{what} is {have!r}, wanted {want!r}" for what, have, want in checks if have != want]
    wanted_logs = settings.log_delivery()
    if wanted_logs and not _subset(wanted_logs, desc.get("logDelivery") or {}):
        drift.append(f"logDelivery is {desc.get('logDelivery')!r}, wanted {wanted_logs!r}")
    return drift


class MskConnectDeployer:
    """The deploy's steps, with its clients, settings and waiting policy."""

    def __init__(
        self,
        kafkaconnect: Any,
        settings: MskConnectSettings,
        timeout_s: float = 1800.0,
        poll_s: float = 15.0,
        sleep: Sleep = time.sleep,
        log: Callable[[str], None] | None = None,
    ):
        self.kc = kafkaconnect
        self.settings = settings
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.sleep = sleep
        self.log = log or (lambda message: None)

    def wait_running(self, name: str, arn: str) -> dict[str, Any]:
        return _poll(
            f"connector {name}",
            lambda: self.kc.describe_connector(connectorArn=arn),
            "connectorState",
            {"RUNNING"},
            {"FAILED", "DELETING", "PAUSED", "PAUSING"},
            self.timeout_s,
            self.poll_s,
            self.sleep,
            hints=CONNECTOR_HINTS,
        )

    def _update(
        self, name: str, desc: Mapping[str, Any], what: str, **params: Any
    ) -> dict[str, Any]:
        """One update_connector call against the described version, then wait for its
        operation and for RUNNING; returns the new description."""
        arn = desc["connectorArn"]
        self.log(f"connector {name}: updating its {what}")
        answer = self.kc.update_connector(
            connectorArn=arn, currentVersion=desc["currentVersion"], **params
        )
        op_arn = answer.get("connectorOperationArn")
        if op_arn:
            # A failed update is rolled back and the connector is RUNNING again, on the old
            # settings: only the operation tells.
            _poll(
                f"update of connector {name}'s {what}",
                lambda: self.kc.describe_connector_operation(connectorOperationArn=op_arn),
                "connectorOperationState",
                {"UPDATE_COMPLETE"},
                {"UPDATE_FAILED", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED"},
                self.timeout_s,
                self.poll_s,
                self.sleep,
            )
        return self.wait_running(name, arn)

    def ensure_connector(
        self,
        name: str,
        config: dict[str, str],
        plugin: PluginResult,
        worker: WorkerConfigResult,
    ) -> ConnectorResult:
        check_no_literal_secrets(name, config)
        s = self.settings
        found = _find_by_name(
            self.kc,
            "list_connectors",
            "connectors",
            "connectorName",
            name,
            connectorNamePrefix=name,
        )
        if found is not None and found.get("connectorState") == "DELETING":
            raise MskConnectError(f"connector {name} is being deleted; rerun once it is gone")
        if found is None:
            self.log(f"connector {name}: creating")
            request: dict[str, Any] = {
                "connectorName": name,
                "connectorDescription": f"cdc-lake {name}",
                "kafkaConnectVersion": s.kafka_connect_version,
                "serviceExecutionRoleArn": s.service_execution_role_arn,
                "capacity": s.capacity(),
                "connectorConfiguration": config,
                "kafkaCluster": s.kafka_cluster(),
                "kafkaClusterClientAuthentication": {"authenticationType": "IAM"},
                "kafkaClusterEncryptionInTransit": {"encryptionType": "TLS"},
                "plugins": [plugin.ref()],
                "workerConfiguration": worker.ref(),
            }
            log_delivery = s.log_delivery()
            if log_delivery:
                request["logDelivery"] = log_delivery
            arn = self.kc.create_connector(**request)["connectorArn"]
            desc = self.wait_running(name, arn)
            return ConnectorResult(name, arn, "created", state=desc["connectorState"])

        arn = found["connectorArn"]
        # An earlier run may have left it CREATING or UPDATING: updates need it RUNNING.
        desc = self.wait_running(name, arn)
        drift = _immutable_drift(desc, s)
        if drift:
            raise MskConnectError(
                f"connector {name} ({arn}) differs in settings MSK Connect cannot update: "
                + "; ".join(drift)
                + ". Fix: delete the connector and rerun (a new source connector snapshots "
                "again), or correct the settings."
            )
        updates = []
        if desc.get("connectorConfiguration") != config:
            desc = self._update(name, desc, "configuration", connectorConfiguration=config)
            updates.append("connectorConfiguration")
        worker_setting = {
            "capacity": s.capacity(),
            "plugins": [plugin.ref()],
            "workerConfiguration": worker.ref(),
        }
        have = {
            "capacity": desc.get("capacity") or {},
            "plugins": desc.get("plugins") or [],
            "workerConfiguration": desc.get("workerConfiguration") or {},
        }
        if not _subset(worker_setting, have):
            desc = self._update(name, desc, "worker settings", **worker_setting)
            updates.append("workerSetting")
        action = "updated" if updates else "unchanged"
        self.log(f"connector {name}: {action}")
        return ConnectorResult(name, arn, action, updates, desc["connectorState"])


def render_msk_configs(
    settings: MskConnectSettings, connectors: CdcConnectorSettings
) -> dict[str, dict[str, str]]:
    """{connector name: config}, source first, checked for secrets."""
    source_name, sink_name = connector_names(connectors.topic_prefix)
    configs = {
        source_name: _with_extras(source_name, connectors.debezium(), msk_source_extras(settings)),
        sink_name: connectors.s3_sink_msk(),
    }
    for name, config in configs.items():
        check_no_literal_secrets(name, config)
    return configs


def deploy_to_msk_connect(
    kafkaconnect_client: Any,
    s3_client: Any,
    settings: MskConnectSettings,
    connectors: CdcConnectorSettings,
    plugin_dirs: MskPluginDirs,
    timeout_s: float = 1800.0,
    poll_s: float = 15.0,
    sleep: Sleep = time.sleep,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Create or update the plugins, the worker configuration and both connectors; wait for
    each connector to be RUNNING. Returns what was done, with ARNs and plugin revisions."""
    configs = render_msk_configs(settings, connectors)  # before any AWS call
    archives = plugin_archives(settings, plugin_dirs)
    d = MskConnectDeployer(kafkaconnect_client, settings, timeout_s, poll_s, sleep, log)
    plugins = {
        role: ensure_plugin(kafkaconnect_client, s3_client, settings, a, timeout_s, poll_s, sleep)
        for role, a in archives.items()
    }
    worker = ensure_worker_configuration(kafkaconnect_client, settings)
    (source_name, source), (sink_name, sink) = configs.items()
    results = [
        d.ensure_connector(source_name, source, plugins["source"], worker),
        d.ensure_connector(sink_name, sink, plugins["sink"], worker),
    ]
    return {
        "plugins": {role: asdict(p) for role, p in plugins.items()},
        "worker_configuration": asdict(worker),
        "connectors": {r.name: asdict(r) for r in results},
    }


# --- CLI ----------------------------------------------------------------------------------


def cmd_msk_deploy(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    client_factory: Callable[..., Any] | None = None,
) -> int:
    env = os.environ if environ is None else environ
    try:
        # Both halves' missing variables in one message, not one half after the other.
        missing = missing_msk_env(env) + [
            n for n in SOURCE_ENV_REQUIRED if not env.get(n, "").strip()
        ]
        if missing:
            raise _missing_error(missing)
        msk = MskConnectSettings.from_env(env)
        connectors = connector_settings_from_env(env, msk)
        provider_dir = args.config_provider_dir or env.get("CDC_LAKE_MSK_CONFIG_PROVIDER_DIR")
        if not provider_dir:
            raise ValueError(
                "no config-provider folder: pass --config-provider-dir or set "
                "CDC_LAKE_MSK_CONFIG_PROVIDER_DIR to the unpacked msk-config-providers release"
            )
        stack = StackSettings.from_env(state_dir=getattr(args, "state_dir", None))
        dirs = MskPluginDirs.from_stack(stack, provider_dir)
        dirs = MskPluginDirs(
            debezium=Path(args.debezium_dir) if args.debezium_dir else dirs.debezium,
            s3_sink=Path(args.s3_sink_dir) if args.s3_sink_dir else dirs.s3_sink,
            config_provider=dirs.config_provider,
        )
        if args.dry_run:
            configs = render_msk_configs(msk, connectors)
            archives = plugin_archives(msk, dirs)
            plan = {
                "connectors": configs,
                "plugins": {
                    role: f"s3://{msk.plugin_bucket}/{a.key(msk.plugin_prefix)}"
                    for role, a in archives.items()
                },
                "worker_properties": msk.worker_properties(),
            }
            print(json.dumps(plan, indent=2))
            return 0
        if client_factory is None:
            import boto3

            client_factory = boto3.client
        result = deploy_to_msk_connect(
            client_factory("kafkaconnect", region_name=msk.region),
            client_factory("s3", region_name=msk.region),
            msk,
            connectors,
            dirs,
            timeout_s=args.timeout,
            poll_s=args.poll,
            log=lambda message: print(f"[msk] {message}", file=sys.stderr),
        )
    except (ValueError, MskConnectError, ClientError, BotoCoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


def add_msk_cli(subparsers: Any) -> None:
    """Register ``cdc-lake msk deploy`` on the CLI's subparsers."""
    msk = subparsers.add_parser("msk", help="deploy the connectors to Amazon MSK Connect")
    actions = msk.add_subparsers(dest="msk_action", required=True)
    deploy = actions.add_parser(
        "deploy",
        help="create or update the plugins, worker configuration and both connectors",
        description="Settings come from CDC_LAKE_AWS_REGION, CDC_LAKE_MSK_* and the source's "
        "CDC_LAKE_PG_HOST, CDC_LAKE_PG_DATABASE, CDC_LAKE_RAW_BUCKET (see "
        "cdc_lake/streaming/msk_connect.py).",
    )
    deploy.add_argument(
        "--config-provider-dir",
        help="unpacked msk-config-providers release (default: CDC_LAKE_MSK_CONFIG_PROVIDER_DIR)",
    )
    deploy.add_argument("--debezium-dir", help="Debezium jars (default: the stack's plugin)")
    deploy.add_argument("--s3-sink-dir", help="S3 sink jars (default: the stack's plugin)")
    deploy.add_argument("--timeout", type=float, default=1800.0, help="seconds per wait")
    deploy.add_argument("--poll", type=float, default=15.0, help="seconds between polls")
    deploy.add_argument(
        "--dry-run",
        action="store_true",
        help="print the configs, plugin keys and worker properties; call no AWS API",
    )
    deploy.set_defaults(func=cmd_msk_deploy)


# --- the Dagster side: the same interface as the Connect REST client ----------------------


class MskConnectClient:
    """What the topic and raw assets ask of Connect, answered by MSK Connect.

    Plugins and the worker configuration are made by ``cdc-lake msk deploy`` (it needs the
    connector jars, which the Dagster deployment does not carry). Materialising an asset then
    keeps the existing connector's configuration current, with the plugin and worker
    configuration it already runs, and waits for RUNNING. A connector that does not exist yet is
    an error that says to run the deploy command."""

    def __init__(self, kafkaconnect: Any, settings: MskConnectSettings, poll_s: float = 15.0):
        self.kc = kafkaconnect
        self.settings = settings
        self.poll_s = poll_s

    def connectors(self) -> list[str]:
        names = []
        for page in self.kc.get_paginator("list_connectors").paginate():
            names += [c["connectorName"] for c in page.get("connectors", [])]
        return names

    def status(self, name: str) -> dict[str, Any] | None:
        """Kafka Connect's status shape; MSK Connect reports no per-task states."""
        found = _find_by_name(
            self.kc, "list_connectors", "connectors", "connectorName", name,
            connectorNamePrefix=name,
        )  # fmt: skip
        if found is None:
            return None
        desc = self.kc.describe_connector(connectorArn=found["connectorArn"])
        return {"connector": {"state": desc["connectorState"]}, "tasks": []}

    def deploy(
        self,
        name: str,
        config: dict[str, str],
        timeout_s: float,
        log: Callable[[str], None] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        found = _find_by_name(
            self.kc, "list_connectors", "connectors", "connectorName", name,
            connectorNamePrefix=name,
        )  # fmt: skip
        if found is None:
            raise MskConnectError(
                f"connector {name} does not exist on MSK Connect. Fix: run `cdc-lake msk deploy` "
                "(it creates the plugins, the worker configuration and both connectors)."
            )
        desc = self.kc.describe_connector(connectorArn=found["connectorArn"])
        plugin = desc["plugins"][0]["customPlugin"]
        worker = desc.get("workerConfiguration") or {}
        if name.endswith("-debezium-source"):
            config = _with_extras(name, config, msk_source_extras(self.settings))
        deployer = MskConnectDeployer(self.kc, self.settings, timeout_s, self.poll_s, log=log)
        result = deployer.ensure_connector(
            name,
            config,
            PluginResult(plugin.get("customPluginArn", ""), plugin["customPluginArn"],
                         plugin["revision"], "", "", False, False),
            WorkerConfigResult(worker.get("workerConfigurationArn", ""),
                               worker.get("workerConfigurationArn", ""),
                               worker.get("revision", 1), False),
        )  # fmt: skip
        # MSK Connect reports no per-task states; the connector's state stands for them.
        return result.action, {"connector": {"state": result.state}, "tasks": []}
