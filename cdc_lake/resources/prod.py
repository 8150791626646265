"""The AWS resource set (``CDC_LAKE_ENV=prod``): RDS/Aurora, MSK, (MSK) Connect, S3, EMR, Glue.

The ``CDC_LAKE_*`` variables are checked before anything is built: one ``ProdSettingsError``
names every missing variable and bad value, so one fix round is enough. Nothing connects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.spark import EmrServerlessLauncher, EmrStepLauncher, SparkLauncher
from cdc_lake.resources.streaming import (
    CdcPipelineResource,
    ConnectResource,
    KafkaConnectResource,
    KafkaResource,
    MskConnectResource,
)
from cdc_lake.streaming.msk.secrets import secrets_manager_ref
from cdc_lake.streaming.msk.settings import missing_msk_env


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


def prod_spark_launcher(environ: Mapping[str, str], region: str, lake_bucket: str) -> SparkLauncher:
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
        return EmrStepLauncher(cluster_id=environ["CDC_LAKE_EMR_CLUSTER_ID"], **common)
    return EmrServerlessLauncher(
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
        "spark_jobs": prod_spark_launcher(env, region, lake_bucket),
    }
