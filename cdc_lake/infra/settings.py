"""The stack's choices (``InfraSettings``; the CDK app sets them from context, ``app.py``), and
the fixed release, ports, prefixes and tag the stack's parts share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdc_lake.resources.prod import GLUE_DATABASE
from cdc_lake.resources.spark import EmrServerlessLauncher
from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.settings import MskConnectSettings

# EMR 7.x releases carry Spark 3.5, the pyspark this project pins.
EMR_RELEASE = "emr-7.5.0"
PG_PORT = 5432
MSK_IAM_PORT = 9098
# Where the EMR launchers upload the apps' code in the lake bucket (their default).
CODE_PREFIX = EmrServerlessLauncher.model_fields["code_prefix"].default
# Job logs under the lake bucket: EMR Serverless's log URI, or your cluster's LogUri.
EMR_LOG_PREFIX = "emr-logs/"
# Tag your EMR cluster <EMR_CLUSTER_TAG>=<stack name>: the Dagster role adds steps only there.
EMR_CLUSTER_TAG = "cdc-lake"


@dataclass(frozen=True)
class InfraSettings:
    """The stack's choices; the defaults make a small, complete production stack."""

    database: Literal["rds", "aurora"] = "rds"
    db_instance_class: str = "t4g.medium"
    db_name: str = "northwind"
    multi_az: bool = True
    slot_wal_keep_mb: int = 4096  # max_slot_wal_keep_size (docs/deploy.md)
    kafka_version: str = "3.7.x"
    broker_instance_type: str = "kafka.m7g.large"
    spark_target: Literal["emr-serverless", "emr-step"] = "emr-serverless"
    emr_release: str = EMR_RELEASE
    raw_expiry_days: int | None = None  # raw objects expire after this many days; None: kept
    topic_prefix: str = CdcConnectorSettings.topic_prefix
    raw_prefix: str = CdcConnectorSettings.raw_prefix  # ends with "/"
    glue_database: str = GLUE_DATABASE
    replication_secret_name: str = MskConnectSettings.db_secret
    column_salt_secret_name: str = MskConnectSettings.salt_secret
    # Who may assume the Dagster role: a service ("ecs-tasks.amazonaws.com" for an ECS task
    # role, "ec2.amazonaws.com" for an instance profile), an account id, or an ARN.
    dagster_principal: str = "ecs-tasks.amazonaws.com"
    # An existing VPC, by ids (never looked up, so synthesis stays offline).
    vpc_id: str | None = None
    availability_zones: tuple[str, ...] = ()
    private_subnet_ids: tuple[str, ...] = ()
    private_route_table_ids: tuple[str, ...] = ()
