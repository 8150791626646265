"""The local stack's resource set (``CDC_LAKE_ENV=local``, the default).

Secrets are ``dg.EnvVar``s naming the variables of ``cdc_lake.stack.settings.local_secret_env``;
their values come from the stack's credentials, in ``.env`` (``cdc-lake stack up``) or the calling
process. ``local_connector_settings`` gives the connectors' settings these resources deploy.

Where the Spark apps run is ``CDC_LAKE_LOCAL_SPARK`` (``local_spark_mode``,
``cdc_lake/stack/settings.py``): ``server`` (the default) sends them to the stack's lake server,
whose session is warm; ``in_process`` builds a session in the run's own process, with its JVM
start, as the tests of pure Spark code and the benchmarks do; ``cluster`` submits each as an
application to the stack's Spark standalone cluster (``cdc_lake/resources/spark_cluster.py``).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource
from dagster_pyspark import LazyPySparkResource

from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.lake_server import LocalServerSparkLauncher
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.spark import LocalSparkLauncher, SparkLauncher
from cdc_lake.resources.spark_cluster import SparkClusterLauncher
from cdc_lake.resources.streaming import (
    CdcPipelineResource,
    KafkaConnectResource,
    KafkaResource,
)
from cdc_lake.stack.lake_server import SERVICE as LAKE_SERVER
from cdc_lake.stack.lake_server import token_path
from cdc_lake.stack.settings import (
    KAFKA_SASL_MECHANISM,
    StackSettings,
    local_spark_mode,
)
from cdc_lake.stack.spark import spark_conf
from cdc_lake.streaming.connect_config import CdcConnectorSettings


def local_spark_launcher(
    s: StackSettings, mode: str, pyspark: LazyPySparkResource, s3: S3Resource
) -> SparkLauncher:
    if mode == "in_process":
        return LocalSparkLauncher(pyspark=pyspark, s3=s3)
    if mode == "cluster":
        return SparkClusterLauncher.of(s)
    return LocalServerSparkLauncher(
        host=s.host, port=s.port(LAKE_SERVER), token_file=str(token_path(s))
    )


def local_postgres(s: StackSettings, database: str | None = None) -> PostgresResource:
    return PostgresResource(
        host=s.host,
        port=s.port("postgres"),
        database=s.pg_database if database is None else database,
        user=s.pg_user,
        password=dg.EnvVar("CDC_LAKE_PG_PASSWORD"),
        column_salt=dg.EnvVar("CDC_LAKE_COLUMN_SALT"),
        replication_user=s.replication_user,
        sslmode="disable",
    )


def local_pipeline(s: StackSettings, **pipeline: Any) -> CdcPipelineResource:
    return CdcPipelineResource(
        **{
            "raw_bucket": s.raw_bucket,
            "region": s.region,
            "s3_endpoint": s.s3_endpoint,
            **pipeline,
        }
    )


def local_connector_settings(
    s: StackSettings, topic_prefix: str = CdcConnectorSettings.topic_prefix
) -> CdcConnectorSettings:
    """The connectors' settings on the local stack, as the local resources deploy them. The
    password is a reference (the stack starts the Connect worker with its variable set)."""
    return local_pipeline(s, topic_prefix=topic_prefix).connector_settings(local_postgres(s))


def local_resources(
    settings: StackSettings | None = None,
    lake: dict[str, Any] | None = None,
    spark: str | None = None,
    **pipeline: Any,
) -> dict[str, Any]:
    """The local stack's resource set. Secrets are EnvVars; ``local_secret_env`` has values.
    ``spark`` is one of ``LOCAL_SPARK_MODES``; None takes the settings' (``CDC_LAKE_LOCAL_SPARK``
    when they come from the environment)."""
    s = settings or StackSettings.from_env()
    mode = local_spark_mode(spark or s.spark_mode)
    # Lazy: the JVM starts with the first Spark app, not with every run that could use one.
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
        "spark_jobs": local_spark_launcher(s, mode, pyspark, s3),
        "lake": LakeResource(**{"lake_bucket": s.lake_bucket, **(lake or {})}),
        "postgres": local_postgres(s, pipeline.pop("database", None)),
        "kafka": KafkaResource(
            bootstrap_servers=s.kafka_bootstrap,
            security_protocol=s.kafka_security_protocol,
            sasl_mechanism=KAFKA_SASL_MECHANISM,
            sasl_username=s.kafka_user,
            sasl_password=dg.EnvVar("CDC_LAKE_KAFKA_PASSWORD"),
        )
        if s.kafka_sasl
        else KafkaResource(bootstrap_servers=s.kafka_bootstrap),
        "kafka_connect": KafkaConnectResource(
            url=s.connect_url,
            user=s.connect_user,
            password=dg.EnvVar("CDC_LAKE_CONNECT_PASSWORD"),
        ),
        "s3": s3,
        "cdc": local_pipeline(s, **pipeline),
    }
