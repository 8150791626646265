"""Dagster resources, and the one switch that picks their set: ``CDC_LAKE_ENV=local|prod``.

Every secret is a ``dg.EnvVar``: it is read when a run starts, never at import, and it never
reaches asset metadata or logs. For the local stack, ``cdc-lake stack up`` writes the variables
to ``.env`` at the project root (mode 0600, git-ignored), which ``dagster dev`` loads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import boto3
import dagster as dg
import psycopg2
from dagster_aws.s3 import S3Resource
from dagster_pyspark import LazyPySparkResource
from psycopg2.extensions import connection as PgConnection

from cdc_lake.aws.glue import glue_sync_options, register_parquet_table
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.ingest import DEFAULT_MAX_LINE_MB
from cdc_lake.spark_jobs import (
    EmrServerlessSparkJobs,
    EmrStepSparkJobs,
    LocalSparkJobs,
    SparkJobsResource,
)
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.spark import spark_conf
from cdc_lake.streaming.connect_client import ConnectClient
from cdc_lake.streaming.connect_config import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    CdcConnectorSettings,
    topic_name,
)
from cdc_lake.streaming.msk.client import MskConnectClient
from cdc_lake.streaming.msk.secrets import secrets_manager_ref
from cdc_lake.streaming.msk.settings import MskConnectSettings, missing_msk_env


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
    """Kafka client settings, passed through to librdkafka.

    ``msk_iam_region`` set: SASL_SSL with OAUTHBEARER tokens signed for MSK IAM auth by AWS's
    ``aws-msk-iam-sasl-signer-python`` from the default credential chain (the instance or task
    role), which is how clients reach MSK's IAM listener (port 9098)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    msk_iam_region: str | None = None

    def client_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.msk_iam_region:
            region = self.msk_iam_region

            def token(_config: Any) -> tuple[str, float]:
                from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

                value, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
                return value, expiry_ms / 1000

            conf |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": token,
            }
        return conf


class ConnectResource(dg.ConfigurableResource):
    """Where the connectors run. ``client()`` answers ``connectors()``,
    ``status(name) -> {"connector": {"state"}, "tasks": [{"id", "state", "trace"?}]} | None``
    and ``deploy(name, config, timeout_s, log) -> (action, status)``."""

    def client(self) -> Any:
        raise NotImplementedError


class KafkaConnectResource(ConnectResource):
    """A Kafka Connect REST endpoint (the local stack's, or a self-managed one), with HTTP basic
    auth when ``user`` is set (the password an EnvVar, read when a run starts)."""

    url: str
    timeout_s: float = 15.0
    user: str | None = None
    password: str | None = None

    def client(self) -> ConnectClient:
        password = self.password
        if isinstance(password, dg.EnvVar):  # used outside a run (tests, scripts): read it now
            password = password.get_value()
        auth = (self.user, password or "") if self.user else None
        return ConnectClient(self.url, timeout_s=self.timeout_s, auth=auth)


class MskConnectResource(ConnectResource):
    """Kafka Connect on Amazon MSK Connect (``CDC_LAKE_CONNECT_MODE=msk``). Its settings come
    from the ``CDC_LAKE_MSK_*`` variables, read when a run starts; see
    ``cdc_lake/streaming/msk_connect.py``."""

    region: str
    poll_s: float = 15.0
    endpoint_url: str | None = None  # tests only

    def client(self) -> MskConnectClient:
        kc = boto3.client("kafkaconnect", region_name=self.region, endpoint_url=self.endpoint_url)
        return MskConnectClient(kc, MskConnectSettings.from_env(os.environ), self.poll_s)


class CdcPipelineResource(dg.ConfigurableResource):
    """Names and knobs of the CDC pipeline: topic, connectors, buckets and prefixes."""

    topic_prefix: str = "cdc"
    slot_name: str = "cdc_lake_slot"
    publication: str = "cdc_publication"
    raw_bucket: str
    raw_prefix: str = "cdc-events/"
    lake_bucket: str
    region: str = "us-east-1"
    # A config-provider reference, resolved by the Connect worker: never the secret itself.
    replication_password_ref: str = "${env:CDC_LAKE_REPLICATION_PASSWORD}"
    # The S3 sink authenticates with the AWS SDK's default chain (the worker's environment
    # locally, the service execution role on MSK Connect): no keys in its config.
    s3_endpoint: str | None = None
    flush_records: int = 1000
    flush_interval_ms: int = 10_000
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    # The lag checks WARN past these: WAL the slot retains, records the sink has not committed,
    # raw objects the lake has not ingested yet.
    slot_lag_warn_bytes: int = 1 << 30
    sink_lag_warn_records: int = 100_000
    pending_objects_warn: int = 100
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
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            s3_endpoint=self.s3_endpoint,
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
    # A longer raw line is a bad line ("line N is X MB, over the limit of Y MB"), not parsed.
    max_line_mb: float = DEFAULT_MAX_LINE_MB
    parallelism: int = 2
    compaction_delta_commits: int = 5
    index_type: str = "RECORD_INDEX"  # or GLOBAL_SIMPLE; both global
    # Hudi's timeline server in the driver binds every interface: off locally, on for EMR.
    embedded_timeline_server: bool = False
    hudi_options: dict[str, str] = {}
    # Production: Hudi meta sync into this Glue database; the order items are registered too.
    glue_database: str | None = None
    region: str = "us-east-1"

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
            index_type=self.index_type,
            embedded_timeline_server=self.embedded_timeline_server,
            extra_options={**self.catalog_options(), **self.hudi_options},
        )

    def catalog_options(self) -> dict[str, str]:
        if not self.glue_database:
            return {}
        return glue_sync_options(self.glue_database, "cdc_events", self.partition_field)

    def upsert_params(
        self, cdc: CdcPipelineResource, replay_from_offset: int | None = None
    ) -> dict[str, Any]:
        """The ``upsert`` job's parameters: plain JSON, the same for local Spark and EMR."""
        return {
            "raw_bucket": cdc.raw_bucket,
            "raw_prefix": cdc.raw_prefix,
            "topic": cdc.topic,
            "replay_from_offset": replay_from_offset,
            "scheme": self.scheme,
            "table": asdict(self.table_config()),
            "quarantine_path": self.quarantine_path if self.quarantine else None,
            "max_line_mb": self.max_line_mb,
        }

    def order_items_params(self) -> dict[str, Any]:
        return {"table_path": self.table_path, "items_path": self.order_items_path}

    def register_order_items(self) -> str | None:
        """Register the order items' Parquet in Glue (production); None when there is no Glue."""
        if not self.glue_database:
            return None
        glue = boto3.client("glue", region_name=self.region)
        return register_parquet_table(
            glue, self.glue_database, "order_items", self.order_items_path
        )


def local_secret_env(settings: StackSettings) -> dict[str, str]:
    c = settings.credentials
    return {
        "CDC_LAKE_PG_PASSWORD": c.pg_password,
        "CDC_LAKE_S3_ACCESS_KEY": c.s3_access_key,
        "CDC_LAKE_S3_SECRET_KEY": c.s3_secret_key,
        "CDC_LAKE_CONNECT_PASSWORD": c.connect_password,
        # Read by Spark's s3a (EnvironmentVariableCredentialsProvider) in the JVM.
        "AWS_ACCESS_KEY_ID": c.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": c.s3_secret_key,
    }


def local_resources(
    settings: StackSettings | None = None, lake: dict[str, Any] | None = None, **pipeline: Any
) -> dict[str, Any]:
    """The local stack's resource set. Secrets are EnvVars; ``local_secret_env`` has values."""
    s = settings or StackSettings.from_env()
    # Lazy: the JVM starts with the first Spark job, not with every run that could use one.
    pyspark = LazyPySparkResource(spark_config=spark_conf(s))
    s3 = S3Resource(
        endpoint_url=s.s3_endpoint,
        region_name=s.region,
        aws_access_key_id=dg.EnvVar("CDC_LAKE_S3_ACCESS_KEY"),
        aws_secret_access_key=dg.EnvVar("CDC_LAKE_S3_SECRET_KEY"),
        use_ssl=False,
    )
    return {
        "pyspark": pyspark,
        "spark_jobs": LocalSparkJobs(pyspark=pyspark, s3=s3),
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
        "kafka_connect": KafkaConnectResource(
            url=s.connect_url,
            user=s.connect_user,
            password=dg.EnvVar("CDC_LAKE_CONNECT_PASSWORD"),
        ),
        "s3": s3,
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


class ProdSettingsError(ValueError):
    """A production setting is missing or invalid; the message names every variable."""


# Required in every production setup; prod_required_env adds those of the chosen modes.
PROD_REQUIRED = (
    "CDC_LAKE_PG_HOST",
    "CDC_LAKE_PG_DATABASE",
    "CDC_LAKE_PG_USER",
    "CDC_LAKE_KAFKA_BOOTSTRAP",
    "CDC_LAKE_RAW_BUCKET",
    "CDC_LAKE_LAKE_BUCKET",
)
SPARK_TARGET_REQUIRED = {
    "emr-step": ("CDC_LAKE_EMR_CLUSTER_ID",),
    "emr-serverless": ("CDC_LAKE_EMR_SERVERLESS_APP_ID", "CDC_LAKE_EMR_EXECUTION_ROLE_ARN"),
}


def check_prod_env(environ: Mapping[str, str]) -> None:
    """Raise one ProdSettingsError naming every missing variable (of the base settings, the
    Connect mode and the Spark target) and every bad value, so one fix round is enough."""
    missing = [n for n in PROD_REQUIRED if not environ.get(n)]
    problems = []
    if environ.get("CDC_LAKE_CONNECT_MODE", "msk") == "msk":
        # MskConnectResource reads these when a run starts; name them now, with the rest.
        missing += [n for n in missing_msk_env(environ) if n not in missing]
    elif not environ.get("CDC_LAKE_CONNECT_URL"):
        missing.append("CDC_LAKE_CONNECT_URL")
    target = environ.get("CDC_LAKE_SPARK_TARGET", "emr-step")
    if target in SPARK_TARGET_REQUIRED:
        missing += [n for n in SPARK_TARGET_REQUIRED[target] if not environ.get(n)]
    else:
        problems.append(
            f"CDC_LAKE_SPARK_TARGET={target!r} is not a target; use 'emr-step' or 'emr-serverless'"
        )
    if missing:
        problems.insert(
            0,
            "CDC_LAKE_ENV=prod needs these variables, which are not set: " + ", ".join(missing),
        )
    if problems:
        raise ProdSettingsError(". ".join(problems) + ". See docs/deploy.md.")


def prod_spark_jobs(environ: Mapping[str, str], region: str, lake_bucket: str) -> SparkJobsResource:
    """``CDC_LAKE_SPARK_TARGET``: ``emr-step`` (default) or ``emr-serverless``. The caller has
    run ``check_prod_env``."""
    target = environ.get("CDC_LAKE_SPARK_TARGET", "emr-step")
    common: dict[str, Any] = {
        "region": region,
        "code_bucket": environ.get("CDC_LAKE_CODE_BUCKET", lake_bucket),
        "code_prefix": environ.get("CDC_LAKE_CODE_PREFIX", "cdc-lake/code"),
        "pipes_bucket": environ.get("CDC_LAKE_PIPES_BUCKET", lake_bucket),
    }
    if target == "emr-step":
        return EmrStepSparkJobs(cluster_id=environ["CDC_LAKE_EMR_CLUSTER_ID"], **common)
    return EmrServerlessSparkJobs(
        application_id=environ["CDC_LAKE_EMR_SERVERLESS_APP_ID"],
        execution_role_arn=environ["CDC_LAKE_EMR_EXECUTION_ROLE_ARN"],
        log_uri=environ.get("CDC_LAKE_EMR_LOG_URI"),
        **common,
    )


def prod_resources(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The AWS resource set: RDS/Aurora, MSK (IAM), Connect, S3, EMR and Glue.

    Plain settings are read from the environment now (they are not secrets). The database
    password stays a ``dg.EnvVar``, read when a run starts; inject it from Secrets Manager (for
    example the ECS task's ``secrets``). Everything on AWS authenticates with the role of the
    process (boto3's default chain): no access key is configured here."""
    env = os.environ if environ is None else environ
    check_prod_env(env)
    region = env.get("CDC_LAKE_AWS_REGION") or env.get("AWS_REGION") or "us-east-1"
    lake_bucket = env["CDC_LAKE_LAKE_BUCKET"]
    msk_connect = env.get("CDC_LAKE_CONNECT_MODE", "msk") == "msk"
    connect: ConnectResource
    if msk_connect:
        connect = MskConnectResource(region=region)
    else:
        # Basic auth when CDC_LAKE_CONNECT_USER is set; the password is read when a run starts.
        user = env.get("CDC_LAKE_CONNECT_USER")
        connect = KafkaConnectResource(
            url=env["CDC_LAKE_CONNECT_URL"],
            user=user,
            password=dg.EnvVar("CDC_LAKE_CONNECT_PASSWORD") if user else None,
        )
    return {
        "postgres": PostgresResource(
            host=env["CDC_LAKE_PG_HOST"],
            port=int(env.get("CDC_LAKE_PG_PORT", "5432")),
            database=env["CDC_LAKE_PG_DATABASE"],
            user=env["CDC_LAKE_PG_USER"],
            password=dg.EnvVar("CDC_LAKE_PG_PASSWORD"),
            replication_user=env.get("CDC_LAKE_PG_REPLICATION_USER", "cdc_replication"),
            sslmode=env.get("CDC_LAKE_PG_SSLMODE", "require"),
        ),
        "kafka": KafkaResource(
            bootstrap_servers=env["CDC_LAKE_KAFKA_BOOTSTRAP"], msk_iam_region=region
        ),
        "kafka_connect": connect,
        "s3": S3Resource(region_name=region),
        "cdc": CdcPipelineResource(
            topic_prefix=env.get("CDC_LAKE_TOPIC_PREFIX", "cdc"),
            raw_bucket=env["CDC_LAKE_RAW_BUCKET"],
            raw_prefix=env.get("CDC_LAKE_RAW_PREFIX", "cdc-events/"),
            lake_bucket=lake_bucket,
            region=region,
            # Resolved by the Connect worker's config provider, never by us.
            replication_password_ref=(
                secrets_manager_ref(
                    env.get("CDC_LAKE_REPLICATION_SECRET", "cdc-lake/replication"),
                    env.get("CDC_LAKE_REPLICATION_SECRET_KEY", "password"),
                )
                if msk_connect
                else "${env:CDC_LAKE_REPLICATION_PASSWORD}"
            ),
            s3_endpoint=None,
        ),
        "lake": LakeResource(
            lake_bucket=lake_bucket,
            scheme="s3",  # EMRFS
            table_type=env.get("CDC_LAKE_TABLE_TYPE", "COPY_ON_WRITE"),
            glue_database=env.get("CDC_LAKE_GLUE_DATABASE", "datalake"),
            region=region,
            parallelism=int(env.get("CDC_LAKE_HUDI_PARALLELISM", "200")),
            # Executors on other nodes ask the driver for file system views and markers.
            embedded_timeline_server=True,
        ),
        "spark_jobs": prod_spark_jobs(env, region, lake_bucket),
    }


def build_resources(env: str | None = None) -> dict[str, Any]:
    """The resource set chosen by ``CDC_LAKE_ENV`` (``local``, the default, or ``prod``)."""
    env = env or os.environ.get("CDC_LAKE_ENV", "local")
    if env == "local":
        return local_resources()
    if env == "prod":
        return prod_resources()
    raise ValueError(f"CDC_LAKE_ENV={env!r} is not a known environment; use 'local' or 'prod'")
