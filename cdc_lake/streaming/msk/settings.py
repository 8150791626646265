"""Where and how the connectors run on MSK Connect: ``MskConnectSettings``, read from the
``CDC_LAKE_MSK_*`` variables, and the parts of the ``kafkaconnect`` requests it determines
(cluster, capacity, log delivery, worker properties).

The variables are read by the production rules (``cdc_lake/aws/prod_env.py``: stripped, empty is
unset, one ``ProdSettingsError`` naming every missing or bad one), once, with the prod resources'
(``ProdSettings``) or the deploy's own (``msk_deploy_settings``); ``MskConnectResource`` gets
the parsed settings as config. Settings are validated when built: a broker that is not an IAM
listener, no subnets, a role that is not an ARN, or impossible capacity raise ``ValueError``
naming every problem, so a deploy or the resources fail before the first AWS call.
Kafka access is IAM over TLS: MSK Connect authenticates the workers and the connectors' own
clients with the service execution role, so no SASL keys are needed. The role needs the
``kafka-cluster:*`` topic and group actions, ``kafka-cluster:CreateTopic`` for the source's
topic, ``secretsmanager:GetSecretValue`` on the secret, and S3 write on the raw bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cdc_lake.aws.prod_env import EnvReader
from cdc_lake.streaming.msk.secrets import (
    SECRETS_PROVIDER,
    SECRETS_PROVIDER_CLASS,
    secrets_manager_ref,
)

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
IAM_BOOTSTRAP_PORTS = ("9098", "9198")  # MSK's IAM listeners: in the VPC, and public access
MCU_COUNTS = (1, 2, 4, 8)

# (field, variable names, required). A later name is a fallback shared with the prod resource
# set, so both paths agree on the region, brokers and secret.
ENV_VARS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("region", ("CDC_LAKE_AWS_REGION", "AWS_REGION"), True),
    ("bootstrap_servers", ("CDC_LAKE_MSK_BOOTSTRAP", "CDC_LAKE_KAFKA_BOOTSTRAP"), True),
    ("subnet_ids", ("CDC_LAKE_MSK_SUBNETS",), True),
    ("security_group_ids", ("CDC_LAKE_MSK_SECURITY_GROUPS",), True),
    ("service_execution_role_arn", ("CDC_LAKE_MSK_CONNECT_ROLE_ARN",), True),
    ("plugin_bucket", ("CDC_LAKE_MSK_PLUGIN_BUCKET",), True),
    ("db_secret", ("CDC_LAKE_REPLICATION_SECRET",), False),
    ("db_secret_key", ("CDC_LAKE_REPLICATION_SECRET_KEY",), False),
    ("salt_secret", ("CDC_LAKE_COLUMN_SALT_SECRET",), False),
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
SALT_KEY = "column_salt"  # the salt secret's JSON key
LIST_FIELDS = {"subnet_ids", "security_group_ids"}
INT_FIELDS = {
    "mcu_count",
    "worker_count",
    "min_workers",
    "max_workers",
    "topic_replication_factor",
}


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


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
    # Secrets Manager secret (name or ARN) whose JSON key ``column_salt`` holds the salt of
    # hashed columns and fields (docs/column-policies.md); the CDK app generates it.
    salt_secret: str = "cdc-lake/column-salt"
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
        r = EnvReader(environ)
        settings = cls.read(r)
        r.check("missing environment variables")
        assert settings is not None  # check raised otherwise
        return settings

    @classmethod
    def read(cls, r: EnvReader) -> MskConnectSettings | None:
        """The settings from ``r`` (``from_env`` lists the variables); None when one is missing
        or bad, or they are invalid together: ``r`` then names each, for the caller's
        ``r.check()`` to raise with its own."""
        values: dict[str, Any] = {}
        ok, problems = True, len(r.problems)
        for attr, names, required in ENV_VARS:
            if attr in INT_FIELDS:
                number = r.integer(*names, what="an integer")
                if number is not None:
                    values[attr] = number
                continue
            raw = r.require(*names) if required else r.get(*names)
            if not raw:
                ok = ok and not required
                continue
            values[attr] = _csv(raw) if attr in LIST_FIELDS else raw
        if not ok or len(r.problems) > problems:
            return None
        try:
            return cls(**values)
        except ValueError as e:
            r.problems.append(str(e))
            return None

    def as_config(self) -> dict[str, Any]:
        """The settings as plain config values (lists, and no unset field): a resource's
        config, read back by ``from_config``. No secret is among them."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in asdict(self).items()
            if v is not None
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> MskConnectSettings:
        values: dict[str, Any] = {k: tuple(v) if k in LIST_FIELDS else v for k, v in config.items()}
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

    @property
    def column_salt_ref(self) -> str:
        """The salt of hashed columns: the key ``column_salt`` of its own secret."""
        return secrets_manager_ref(self.salt_secret, SALT_KEY)

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
