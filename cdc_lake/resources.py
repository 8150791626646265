"""Dagster resources, and the one switch that picks their set: ``CDC_LAKE_ENV=local|prod``.

Every secret is a ``dg.EnvVar``: it is read when a run starts, never at import, and it never
reaches asset metadata or logs. For the local stack, ``cdc-lake stack up`` writes the variables
to ``.env`` at the project root (mode 0600, git-ignored), which ``dagster dev`` loads.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
import psycopg2
from dagster_aws.s3 import S3Resource
from dagster_pyspark import PySparkResource
from psycopg2.extensions import connection as PgConnection

from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.spark import spark_conf
from cdc_lake.streaming.connect_client import ConnectClient
from cdc_lake.streaming.connect_config import CdcConnectorSettings, topic_name


class PostgresResource(dg.ConfigurableResource):
    """The source database (local PostgreSQL, or RDS/Aurora in production)."""

    host: str
    port: int = 5432
    database: str
    user: str
    password: str
    replication_user: str
    sslmode: str = "prefer"

    def connect(self) -> PgConnection:
        try:
            return psycopg2.connect(
                host=self.host,
                port=self.port,
                dbname=self.database,
                user=self.user,
                password=self.password,
                sslmode=self.sslmode,
                connect_timeout=5,
                application_name="cdc-lake",
            )
        except psycopg2.OperationalError as e:
            # The DSN is not repeated: it would carry the password.
            raise ConnectionError(
                f"PostgreSQL at {self.host}:{self.port}/{self.database} as {self.user} is "
                f"unreachable: {str(e).strip()}. Fix: start it (`cdc-lake stack up` locally) or "
                "correct the connection settings."
            ) from e


class KafkaResource(dg.ConfigurableResource):
    """Kafka client settings, passed through to librdkafka (MSK adds SASL/IAM settings)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None

    def client_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        return conf


class KafkaConnectResource(dg.ConfigurableResource):
    """A Kafka Connect REST endpoint."""

    url: str
    timeout_s: float = 15.0

    def client(self) -> ConnectClient:
        return ConnectClient(self.url, timeout_s=self.timeout_s)


class CdcPipelineResource(dg.ConfigurableResource):
    """Names and knobs of the CDC pipeline: topic, connectors, buckets and prefixes."""

    topic_prefix: str = "cdc"
    slot_name: str = "cdc_lake_slot"
    publication: str = "cdc_publication"
    raw_bucket: str
    raw_prefix: str = "cdc-events/"
    lake_bucket: str
    region: str = "us-east-1"
    # Config-provider references, resolved by the Connect worker: never the secrets themselves.
    replication_password_ref: str = "${env:CDC_LAKE_REPLICATION_PASSWORD}"
    s3_endpoint: str | None = None
    s3_access_key_ref: str | None = "${env:CDC_LAKE_S3_ACCESS_KEY}"
    s3_secret_key_ref: str | None = "${env:CDC_LAKE_S3_SECRET_KEY}"
    flush_records: int = 1000
    flush_interval_ms: int = 10_000
    sample_scale: float = 1.0
    sample_seed: int = 42
    connector_timeout_s: float = 180.0

    @property
    def topic(self) -> str:
        return topic_name(self.topic_prefix)

    @property
    def source_connector_name(self) -> str:
        return f"{self.topic_prefix}-debezium-source"

    @property
    def sink_connector_name(self) -> str:
        return f"{self.topic_prefix}-s3-sink"

    @property
    def sink_consumer_group(self) -> str:
        """Connect's consumer group of the sink: its committed offsets are what is in S3."""
        return f"connect-{self.sink_connector_name}"

    def connector_settings(self, postgres: PostgresResource) -> CdcConnectorSettings:
        return CdcConnectorSettings(
            topic_prefix=self.topic_prefix,
            pg_host=postgres.host,
            pg_port=postgres.port,
            pg_database=postgres.database,
            replication_user=postgres.replication_user,
            replication_password_ref=self.replication_password_ref,
            raw_bucket=self.raw_bucket,
            raw_prefix=self.raw_prefix,
            region=self.region,
            slot_name=self.slot_name,
            publication=self.publication,
            flush_records=self.flush_records,
            flush_interval_ms=self.flush_interval_ms,
            s3_endpoint=self.s3_endpoint,
            s3_access_key_ref=self.s3_access_key_ref,
            s3_secret_key_ref=self.s3_secret_key_ref,
        )


class LakeResource(dg.ConfigurableResource):
    """Where the lake lives and how its Hudi table is written."""

    lake_bucket: str
    scheme: str = "s3a"  # Hadoop's filesystem scheme: s3a locally, s3 on EMR
    table_prefix: str = "lake/cdc_events"
    order_items_prefix: str = "marts/order_items"
    quarantine_prefix: str = "quarantine/cdc_events"
    table_type: str = "COPY_ON_WRITE"
    partition_field: str = "order_year"
    delete_mode: str = "hard"
    quarantine: bool = False
    parallelism: int = 2
    compaction_delta_commits: int = 5
    hudi_options: dict[str, str] = {}

    def uri(self, prefix: str) -> str:
        return f"{self.scheme}://{self.lake_bucket}/{prefix}"

    @property
    def table_path(self) -> str:
        return self.uri(self.table_prefix)

    @property
    def order_items_path(self) -> str:
        return self.uri(self.order_items_prefix)

    @property
    def quarantine_path(self) -> str:
        return self.uri(self.quarantine_prefix)

    def table_config(self) -> HudiTableConfig:
        return HudiTableConfig(
            base_path=self.table_path,
            table_type=self.table_type,
            partition_field=self.partition_field,
            delete_mode=self.delete_mode,
            parallelism=self.parallelism,
            compaction_delta_commits=self.compaction_delta_commits,
            extra_options=dict(self.hudi_options),
        )


def local_secret_env(settings: StackSettings) -> dict[str, str]:
    c = settings.credentials
    return {
        "CDC_LAKE_PG_PASSWORD": c.pg_password,
        "CDC_LAKE_S3_ACCESS_KEY": c.s3_access_key,
        "CDC_LAKE_S3_SECRET_KEY": c.s3_secret_key,
        # Read by Spark's s3a (EnvironmentVariableCredentialsProvider) in the JVM.
        "AWS_ACCESS_KEY_ID": c.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": c.s3_secret_key,
    }


def local_resources(
    settings: StackSettings | None = None, lake: dict[str, Any] | None = None, **pipeline: Any
) -> dict[str, Any]:
    """The local stack's resource set. Secrets are EnvVars; ``local_secret_env`` has values."""
    s = settings or StackSettings.from_env()
    return {
        "pyspark": PySparkResource(spark_config=spark_conf(s, with_keys=False)),
        "lake": LakeResource(**{"lake_bucket": s.lake_bucket, **(lake or {})}),
        "postgres": PostgresResource(
            host=s.host,
            port=s.port("postgres"),
            database=pipeline.pop("database", s.pg_database),
            user=s.pg_user,
            password=dg.EnvVar("CDC_LAKE_PG_PASSWORD"),
            replication_user=s.replication_user,
            sslmode="disable",
        ),
        "kafka": KafkaResource(bootstrap_servers=s.kafka_bootstrap),
        "kafka_connect": KafkaConnectResource(url=s.connect_url),
        "s3": S3Resource(
            endpoint_url=s.s3_endpoint,
            region_name=s.region,
            aws_access_key_id=dg.EnvVar("CDC_LAKE_S3_ACCESS_KEY"),
            aws_secret_access_key=dg.EnvVar("CDC_LAKE_S3_SECRET_KEY"),
            use_ssl=False,
        ),
        "cdc": CdcPipelineResource(
            **{
                "raw_bucket": s.raw_bucket,
                "lake_bucket": s.lake_bucket,
                "region": s.region,
                "s3_endpoint": s.s3_endpoint,
                **pipeline,
            }
        ),
    }


def build_resources(env: str | None = None) -> dict[str, Any]:
    env = env or os.environ.get("CDC_LAKE_ENV", "local")
    if env == "local":
        return local_resources()
    raise ValueError(
        f"CDC_LAKE_ENV={env!r} is not a known environment; use 'local' (prod is not built yet)"
    )
