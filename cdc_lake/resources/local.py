"""The local stack's resource set (``CDC_LAKE_ENV=local``, the default).

Secrets are ``dg.EnvVar``s naming the variables of ``local_secret_env``; their values come from
the stack's credentials, in ``.env`` (``cdc-lake stack up``) or the calling process.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource
from dagster_pyspark import LazyPySparkResource

from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.spark import LocalSparkLauncher
from cdc_lake.resources.streaming import (
    CdcPipelineResource,
    KafkaConnectResource,
    KafkaResource,
)
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.spark import spark_conf


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
        "spark_jobs": LocalSparkLauncher(pyspark=pyspark, s3=s3),
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
