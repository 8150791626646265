"""The Dagster deployment's role (its ECS task role, or an EC2 instance profile), trusted by the
principal ``dagster_principal`` names, with exactly the actions of the calls the Dagster side
makes (``dagster_calls.py``), each scoped to the project's resources."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_msk as msk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdc_lake.infra.dagster_calls import (
    PIPES_MESSAGE_KEYS,
    RECONCILE_KEYS,
    UNSCOPED_ACTIONS,
    dagster_actions,
)
from cdc_lake.infra.msk import kafka_arn
from cdc_lake.infra.principals import trusted_principal
from cdc_lake.infra.settings import CODE_PREFIX, EMR_CLUSTER_TAG, EMR_LOG_PREFIX, InfraSettings
from cdc_lake.source.captured import TABLES
from cdc_lake.streaming.connect_config import connector_names, topic_name
from cdc_lake.streaming.topics import INSPECTOR_GROUP


def dagster_role(
    scope: Construct,
    settings: InfraSettings,
    raw: s3.IBucket,
    lake: s3.IBucket,
    cluster: msk.CfnCluster,
    emr_app: emrs.CfnApplication | None,
    emr_role: iam.Role,
) -> tuple[iam.Role, iam.CfnInstanceProfile | None]:
    """The role of the Dagster deployment: exactly ``dagster_actions``, each on the
    project's resources only."""
    s = settings
    role = iam.Role(
        scope,
        "DagsterRole",
        assumed_by=trusted_principal(s.dagster_principal),
        description="the Dagster deployment: sensors, assets, checks, and the EMR launches",
    )

    def arn(service: str, resource: str) -> str:
        region, account = cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID
        return f"arn:{cdk.Aws.PARTITION}:{service}:{region}:{account}:{resource}"

    code = lake.arn_for_objects(f"{CODE_PREFIX.strip('/')}/*")
    reconcile = lake.arn_for_objects(RECONCILE_KEYS)
    statements = [
        # The raw listing (sensor, raw asset, checks) and the lake's (Hudi timelines,
        # quarantine). Not narrowed by prefix: HeadBucket has none, and HeadObject of code
        # not uploaded yet answers 404, not 403, only with ListBucket on the bucket.
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[raw.bucket_arn, lake.bucket_arn]),
        # A version-1 checkpoint's and the lag check's raw objects, the Pipes messages, the
        # apps' code.
        iam.PolicyStatement(
            actions=["s3:GetObject"],
            resources=[
                raw.arn_for_objects(f"{s.raw_prefix}*"),
                lake.arn_for_objects(PIPES_MESSAGE_KEYS),
                code,
            ],
        ),
        iam.PolicyStatement(actions=["s3:PutObject"], resources=[code, reconcile]),
        # A reconcile's source keys, once the upsert app has read them.
        iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[reconcile]),
        # Offsets only: the topics' and the sink group's, never a record.
        iam.PolicyStatement(actions=["kafka-cluster:Connect"], resources=[cluster.attr_arn]),
        iam.PolicyStatement(
            actions=["kafka-cluster:DescribeTopic"],
            resources=[kafka_arn(cluster, "topic", topic_name(s.topic_prefix, t)) for t in TABLES],
        ),
        iam.PolicyStatement(
            actions=["kafka-cluster:DescribeGroup"],
            resources=[
                kafka_arn(cluster, "group", INSPECTOR_GROUP),
                # Connect's group of the sink (CdcPipelineResource.sink_consumer_group).
                kafka_arn(cluster, "group", f"connect-{connector_names(s.topic_prefix)[1]}"),
            ],
        ),
        # The two connectors, whatever id MSK Connect gave them, and their operations.
        iam.PolicyStatement(
            actions=["kafkaconnect:DescribeConnector", "kafkaconnect:UpdateConnector"],
            resources=[
                arn("kafkaconnect", f"connector/{name}/*")
                for name in connector_names(s.topic_prefix)
            ],
        ),
        iam.PolicyStatement(
            actions=["kafkaconnect:DescribeConnectorOperation"],
            resources=[
                arn("kafkaconnect", f"connector-operation/{name}/*")
                for name in connector_names(s.topic_prefix)
            ],
        ),
        # ListConnectors has no resource type in IAM: "*" is the only resource it takes.
        iam.PolicyStatement(actions=sorted(UNSCOPED_ACTIONS), resources=["*"]),
    ]
    if emr_app is not None:
        app = arn("emr-serverless", f"/applications/{emr_app.attr_application_id}")
        statements += [
            iam.PolicyStatement(
                actions=["emr-serverless:StartJobRun", "emr-serverless:GetApplication"],
                resources=[app],
            ),
            # Job runs get their ids when they start; TagResource tags them as they do.
            iam.PolicyStatement(
                actions=[
                    "emr-serverless:GetJobRun",
                    "emr-serverless:GetDashboardForJobRun",
                    "emr-serverless:CancelJobRun",
                    "emr-serverless:TagResource",
                ],
                resources=[f"{app}/jobruns/*"],
            ),
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[emr_role.role_arn],
                conditions={
                    "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
                },
            ),
        ]
    else:
        statements += [
            # The cluster is yours, made after the stack: any cluster id, but only one
            # tagged for this stack.
            iam.PolicyStatement(
                actions=[
                    "elasticmapreduce:DescribeCluster",
                    "elasticmapreduce:AddJobFlowSteps",
                    "elasticmapreduce:DescribeStep",
                    "elasticmapreduce:CancelSteps",
                ],
                resources=[arn("elasticmapreduce", "cluster/*")],
                conditions={
                    "StringEquals": {
                        f"elasticmapreduce:ResourceTag/{EMR_CLUSTER_TAG}": cdk.Aws.STACK_NAME
                    }
                },
            ),
            # The steps' stdout and stderr, with the cluster's LogUri under emr-logs/.
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[lake.arn_for_objects(f"{EMR_LOG_PREFIX}*/steps/*")],
            ),
        ]
    # The statements scope the actions; dagster_calls.py says which there are.
    granted = {a for statement in statements for a in statement.actions}
    drift = sorted(granted ^ dagster_actions(s.spark_target))
    if drift:
        raise AssertionError(f"the Dagster role and dagster_calls.py differ in {drift}")
    for statement in statements:
        role.add_to_policy(statement)
    profile = None
    if s.dagster_principal == "ec2.amazonaws.com":
        profile = iam.CfnInstanceProfile(scope, "DagsterInstanceProfile", roles=[role.role_name])
    return role, profile
