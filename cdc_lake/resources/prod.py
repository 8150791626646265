"""The AWS resource set (``CDC_LAKE_ENV=prod``) and the one parser of the production settings.

``ProdSettings.from_env`` reads the ``CDC_LAKE_*`` variables once, the MSK Connect ones
(``MskConnectSettings``) included; ``prod_resources`` builds the resources from it, so a run
reads no setting from the environment. ``cdc-lake msk deploy`` reads the MSK and the source
side with the same reader and functions (``msk_deploy_settings``), so both agree on names,
defaults and validation. The reading rules are ``cdc_lake/aws/prod_env.py``'s: values are
stripped and an empty variable is unset (its default applies); every missing variable and bad
value is named in one ``ProdSettingsError``, so one fix round is enough.
``CDC_LAKE_GLUE_DATABASE=none`` turns the Glue catalog off (no Hudi meta sync, no order-items
table). Nothing connects and no secret is read: the database password stays a ``dg.EnvVar``,
the replication password a Secrets Manager reference the Connect worker resolves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from dagster_aws.s3 import S3Resource

from cdc_lake.aws.prod_env import EnvReader, ProdSettingsError
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
from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.settings import MskConnectSettings

__all__ = [  # ProdSettingsError is prod_env's, re-exported
    "SPARK_TARGETS",
    "ProdSettings",
    "ProdSettingsError",
    "msk_deploy_settings",
    "prod_resources",
    "prod_spark_launcher",
]

EMR_STEP = "emr-step"
EMR_SERVERLESS = "emr-serverless"
# Spark target -> its launcher, and (launcher field, variable) for
# each variable that target requires.
SPARK_TARGETS: dict[
    str, tuple[type[EmrStepLauncher | EmrServerlessLauncher], tuple[tuple[str, str], ...]]
] = {
    EMR_STEP: (EmrStepLauncher, (("cluster_id", "CDC_LAKE_EMR_CLUSTER_ID"),)),
    EMR_SERVERLESS: (
        EmrServerlessLauncher,
        (
            ("application_id", "CDC_LAKE_EMR_SERVERLESS_APP_ID"),
            ("execution_role_arn", "CDC_LAKE_EMR_EXECUTION_ROLE_ARN"),
        ),
    ),
}
DEFAULT_SPARK_TARGET = EMR_STEP
GLUE_OFF = "none"  # CDC_LAKE_GLUE_DATABASE=none: no Glue catalog (empty is unset: the default)
# Production's own defaults (locally the resources' defaults apply).
REPLICATION_USER = "cdc_replication"
PG_SSLMODE = "require"
GLUE_DATABASE = "datalake"
HUDI_PARALLELISM = 200


def _given(**values: Any) -> dict[str, Any]:
    """The values that were set: the others take the default of the class they are passed to."""
    return {k: v for k, v in values.items() if v is not None}


def _source(r: EnvReader) -> dict[str, Any]:
    """The source side (``CdcConnectorSettings``'s fields but the region and the password
    reference), shared by the resources and the MSK deploy."""
    return _given(
        pg_host=r.require("CDC_LAKE_PG_HOST"),
        pg_port=r.integer("CDC_LAKE_PG_PORT", what="a port number"),
        pg_database=r.require("CDC_LAKE_PG_DATABASE"),
        replication_user=r.get("CDC_LAKE_PG_REPLICATION_USER") or REPLICATION_USER,
        raw_bucket=r.require("CDC_LAKE_RAW_BUCKET"),
        raw_prefix=r.get("CDC_LAKE_RAW_PREFIX"),
        topic_prefix=r.get("CDC_LAKE_TOPIC_PREFIX"),
    )


@dataclass(frozen=True)
class ProdSettings:
    """Every production setting, read and checked once (``from_env``)."""

    region: str
    source: CdcConnectorSettings  # the database, raw bucket, topic and replication secret
    pg_user: str
    pg_sslmode: str
    kafka_bootstrap: str
    lake_bucket: str
    msk_connect: bool  # CDC_LAKE_CONNECT_MODE=msk (default), else a Connect REST URL
    connect_url: str | None
    msk: MskConnectSettings | None  # with msk_connect
    connect_user: str | None
    spark_target: str
    spark: dict[str, Any] = field(default_factory=dict)  # the launcher's fields
    lake: dict[str, Any] = field(default_factory=dict)  # LakeResource's production fields

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ProdSettings:
        """Required: CDC_LAKE_PG_HOST, CDC_LAKE_PG_DATABASE, CDC_LAKE_PG_USER,
        CDC_LAKE_KAFKA_BOOTSTRAP, CDC_LAKE_RAW_BUCKET, CDC_LAKE_LAKE_BUCKET; with
        CDC_LAKE_CONNECT_MODE=msk (default) the CDC_LAKE_MSK_* variables MskConnectSettings
        needs, else CDC_LAKE_CONNECT_URL; the variables of CDC_LAKE_SPARK_TARGET (emr-step,
        the default, or emr-serverless). docs/deploy.md lists the optional ones."""
        r = EnvReader(environ)
        source = _source(r)
        pg_user = r.require("CDC_LAKE_PG_USER")
        kafka_bootstrap = r.require("CDC_LAKE_KAFKA_BOOTSTRAP")
        lake_bucket = r.require("CDC_LAKE_LAKE_BUCKET")
        msk_connect = (r.get("CDC_LAKE_CONNECT_MODE") or "msk") == "msk"
        connect_url, msk = None, None
        if msk_connect:
            # Parsed here, once: the resource gets the settings, a run reads no variable.
            msk = MskConnectSettings.read(r)
        else:
            connect_url = r.require("CDC_LAKE_CONNECT_URL")
        target = r.get("CDC_LAKE_SPARK_TARGET") or DEFAULT_SPARK_TARGET
        spark: dict[str, Any] = {}
        if target in SPARK_TARGETS:
            spark = {name: r.require(var) for name, var in SPARK_TARGETS[target][1]}
        else:
            r.problems.append(
                f"CDC_LAKE_SPARK_TARGET={target!r} is not a target; use "
                + " or ".join(repr(t) for t in SPARK_TARGETS)
            )
        parallelism = r.integer("CDC_LAKE_HUDI_PARALLELISM")
        r.check(
            "CDC_LAKE_ENV=prod needs these variables, which are not set", ". See docs/deploy.md."
        )
        region = r.get("CDC_LAKE_AWS_REGION", "AWS_REGION") or CdcConnectorSettings.region
        if target == EMR_SERVERLESS:
            spark["log_uri"] = r.get("CDC_LAKE_EMR_LOG_URI")
        spark |= _given(
            code_bucket=r.get("CDC_LAKE_CODE_BUCKET") or lake_bucket,
            code_prefix=r.get("CDC_LAKE_CODE_PREFIX"),
            pipes_bucket=r.get("CDC_LAKE_PIPES_BUCKET") or lake_bucket,
        )
        return cls(
            region=region,
            source=CdcConnectorSettings(
                **source,
                region=region,
                replication_password_ref=(
                    msk.password_ref if msk else CdcConnectorSettings.replication_password_ref
                ),
                column_salt_ref=(
                    msk.column_salt_ref if msk else CdcConnectorSettings.column_salt_ref
                ),
            ),
            pg_user=pg_user,
            pg_sslmode=r.get("CDC_LAKE_PG_SSLMODE") or PG_SSLMODE,
            kafka_bootstrap=kafka_bootstrap,
            lake_bucket=lake_bucket,
            msk_connect=msk_connect,
            connect_url=connect_url,
            msk=msk,
            connect_user=r.get("CDC_LAKE_CONNECT_USER"),
            spark_target=target,
            spark=spark,
            lake=_given(
                table_type=r.get("CDC_LAKE_TABLE_TYPE"),
                glue_database=_glue_database(r.get("CDC_LAKE_GLUE_DATABASE")),
                parallelism=HUDI_PARALLELISM if parallelism is None else parallelism,
            ),
        )


def _glue_database(value: str | None) -> str | None:
    """``none`` (any case) turns the Glue catalog off; unset is the default database."""
    if value is None:
        return GLUE_DATABASE
    return None if value.lower() == GLUE_OFF else value


def msk_deploy_settings(
    environ: Mapping[str, str],
) -> tuple[MskConnectSettings, CdcConnectorSettings]:
    """``cdc-lake msk deploy``'s settings: MSK Connect's, and the source side read as for the
    prod resources (same variables, defaults and errors). The MSK variables' and the source's
    missing ones come in one message; the password is the Secrets Manager reference."""
    r = EnvReader(environ)
    msk = MskConnectSettings.read(r)
    source = _source(r)
    r.check("missing environment variables")
    assert msk is not None  # check raised otherwise
    return msk, CdcConnectorSettings(
        **source,
        region=msk.region,
        replication_password_ref=msk.password_ref,
        column_salt_ref=msk.column_salt_ref,
    )


def prod_spark_launcher(settings: ProdSettings) -> SparkLauncher:
    """``CDC_LAKE_SPARK_TARGET``: one of ``SPARK_TARGETS``."""
    launcher = SPARK_TARGETS[settings.spark_target][0]
    return launcher(region=settings.region, **settings.spark)


def prod_resources(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The AWS resource set: RDS/Aurora, MSK (IAM), Connect, S3, EMR and Glue.

    Plain settings are read from the environment now (they are not secrets). The database
    password stays a ``dg.EnvVar``, read when a run starts; inject it from Secrets Manager (for
    example the ECS task's ``secrets``). Everything on AWS authenticates with the role of the
    process (boto3's default chain): no access key is configured here."""
    s = ProdSettings.from_env(os.environ if environ is None else environ)
    src = s.source
    connect: ConnectResource
    if s.msk:
        connect = MskConnectResource(settings=s.msk.as_config())
    else:
        # Basic auth when CDC_LAKE_CONNECT_USER is set; the password is read when a run starts.
        connect = KafkaConnectResource(
            url=s.connect_url or "",
            user=s.connect_user,
            password=dg.EnvVar("CDC_LAKE_CONNECT_PASSWORD") if s.connect_user else None,
        )
    return {
        "postgres": PostgresResource(
            host=src.pg_host,
            port=src.pg_port,
            database=src.pg_database,
            user=s.pg_user,
            password=dg.EnvVar("CDC_LAKE_PG_PASSWORD"),
            column_salt=dg.EnvVar("CDC_LAKE_COLUMN_SALT"),
            replication_user=src.replication_user,
            sslmode=s.pg_sslmode,
        ),
        "kafka": KafkaResource(bootstrap_servers=s.kafka_bootstrap, msk_iam_region=s.region),
        "kafka_connect": connect,
        "s3": S3Resource(region_name=s.region),
        "cdc": CdcPipelineResource(
            topic_prefix=src.topic_prefix,
            raw_bucket=src.raw_bucket,
            raw_prefix=src.raw_prefix,
            region=s.region,
            # Resolved by the Connect worker's config provider, never by us.
            replication_password_ref=src.replication_password_ref,
            column_salt_ref=src.column_salt_ref,
            s3_endpoint=None,
        ),
        "lake": LakeResource(
            lake_bucket=s.lake_bucket,
            scheme="s3",  # EMRFS
            region=s.region,
            # Executors on other nodes ask the driver for file system views and markers.
            embedded_timeline_server=True,
            **s.lake,
        ),
        "spark_jobs": prod_spark_launcher(s),
    }
