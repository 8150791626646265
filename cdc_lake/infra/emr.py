"""The stack's Spark side: EMR Serverless (Spark on the EMR 7 release whose Spark matches
pyspark 3.5) and its job role, scoped to the buckets and the Glue database; or, for the
running-cluster launcher, the instance role a cluster of your own takes."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdc_lake.infra.principals import service_principal
from cdc_lake.infra.settings import InfraSettings


def emr_role(
    scope: Construct, settings: InfraSettings, raw: s3.IBucket, lake: s3.IBucket
) -> iam.Role:
    s = settings
    principal = service_principal(
        "emr-serverless.amazonaws.com" if s.spark_target == "emr-serverless"
        else "ec2.amazonaws.com"
    )  # fmt: skip
    role = iam.Role(
        scope,
        "EmrJobRole",
        assumed_by=principal,
        description="the Spark apps' role: raw files in, the lake and Glue out",
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:ListBucket"],
            resources=[raw.bucket_arn, raw.arn_for_objects("*")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"],
            resources=[lake.bucket_arn, lake.arn_for_objects("*")],
        )
    )
    glue_arn = f"arn:{cdk.Aws.PARTITION}:glue:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}"
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[
                "glue:GetDatabase",
                "glue:CreateDatabase",
                "glue:GetTable",
                "glue:CreateTable",
                "glue:UpdateTable",
                "glue:GetPartitions",
                "glue:BatchCreatePartition",
                "glue:BatchUpdatePartition",
                "glue:BatchDeletePartition",
            ],
            resources=[
                f"{glue_arn}:catalog",
                f"{glue_arn}:database/{s.glue_database}",
                f"{glue_arn}:table/{s.glue_database}/*",
            ],
        )
    )
    if s.spark_target == "emr-step":
        iam.CfnInstanceProfile(scope, "EmrInstanceProfile", roles=[role.role_name])
    return role


def emr_serverless(
    scope: Construct, settings: InfraSettings, vpc: ec2.IVpc, emr_sg: ec2.ISecurityGroup
) -> emrs.CfnApplication:
    return emrs.CfnApplication(
        scope,
        "EmrServerless",
        release_label=settings.emr_release,
        type="SPARK",
        name=f"{cdk.Aws.STACK_NAME}-spark",
        auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
            enabled=True, idle_timeout_minutes=15
        ),
        network_configuration=emrs.CfnApplication.NetworkConfigurationProperty(
            subnet_ids=[n.subnet_id for n in vpc.private_subnets],
            security_group_ids=[emr_sg.security_group_id],
        ),
    )
