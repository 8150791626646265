"""Where the stack keeps data: the buckets (SSE-S3, public access blocked, TLS only, access
logs, an optional expiry), and the source database, RDS or Aurora PostgreSQL 16, with its
parameter group for logical replication and its admin secret."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_rds as rds
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as sm
from constructs import Construct

from cdc_lake.infra.settings import InfraSettings

# Storage


def bucket(
    scope: Construct, name: str, access_logs: s3.IBucket | None, expiry: int | None = None
) -> s3.Bucket:
    rules = [s3.LifecycleRule(expiration=cdk.Duration.days(expiry))] if expiry else None
    return s3.Bucket(
        scope,
        f"{name}Bucket",
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=f"{name.lower()}/" if access_logs else None,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=rules,
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )


# The source database


def database(
    scope: Construct,
    settings: InfraSettings,
    vpc: ec2.IVpc,
    private: ec2.SubnetSelection,
    db_sg: ec2.ISecurityGroup,
) -> tuple[str, sm.ISecret]:
    s = settings
    parameters = {
        "rds.logical_replication": "1",
        "max_replication_slots": "10",
        "max_wal_senders": "10",
        "wal_sender_timeout": "0",
        "max_slot_wal_keep_size": str(s.slot_wal_keep_mb),
    }
    engine: rds.IEngine = (
        rds.DatabaseClusterEngine.aurora_postgres(version=rds.AuroraPostgresEngineVersion.VER_16_9)
        if s.database == "aurora"
        else rds.DatabaseInstanceEngine.postgres(version=rds.PostgresEngineVersion.VER_16_9)
    )
    # What the cluster and the instance share.
    common: dict[str, Any] = {
        "engine": engine,
        "parameter_group": rds.ParameterGroup(
            scope, "DbParameters", engine=engine, parameters=parameters
        ),
        "vpc": vpc,
        "vpc_subnets": private,
        "security_groups": [db_sg],
        "credentials": rds.Credentials.from_generated_secret("cdc_admin"),
        "storage_encrypted": True,
        "deletion_protection": True,
        "removal_policy": cdk.RemovalPolicy.SNAPSHOT,
    }
    if s.database == "aurora":
        cluster = rds.DatabaseCluster(
            scope,
            "Database",
            writer=rds.ClusterInstance.provisioned(
                "Writer", instance_type=ec2.InstanceType(s.db_instance_class)
            ),
            default_database_name=s.db_name,
            backup=rds.BackupProps(retention=cdk.Duration.days(7)),
            **common,
        )
        assert cluster.secret is not None
        return cluster.cluster_endpoint.hostname, cluster.secret
    instance = rds.DatabaseInstance(
        scope,
        "Database",
        instance_type=ec2.InstanceType(s.db_instance_class),
        database_name=s.db_name,
        multi_az=s.multi_az,
        allocated_storage=50,
        backup_retention=cdk.Duration.days(7),
        cloudwatch_logs_exports=["postgresql"],
        **common,
    )
    assert instance.secret is not None
    return instance.db_instance_endpoint_address, instance.secret
