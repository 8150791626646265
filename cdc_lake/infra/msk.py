"""The stack's streaming side: MSK with IAM auth, TLS, broker logs, and no topic
auto-creation; the ARNs of the cluster's topics and groups; and the MSK Connect service
execution role with exactly the permissions ``docs/deploy.md`` lists, and its log group
(plugins and connectors stay with ``cdc-lake msk deploy``)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_msk as msk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as sm
from constructs import Construct

from cdc_lake.infra.principals import service_principal
from cdc_lake.infra.settings import InfraSettings


def msk_cluster(
    scope: Construct, settings: InfraSettings, vpc: ec2.IVpc, msk_sg: ec2.ISecurityGroup
) -> msk.CfnCluster:
    s = settings
    config = msk.CfnConfiguration(
        scope,
        "MskConfiguration",
        name=f"{cdk.Aws.STACK_NAME}-brokers",
        server_properties="\n".join(
            [
                # The Debezium connector creates its topic (topic.creation.default.*).
                "auto.create.topics.enable=false",
                "default.replication.factor=2",
                "min.insync.replicas=1",
            ]
        ),
    )
    broker_logs = logs.LogGroup(scope, "MskBrokerLogs", retention=logs.RetentionDays.ONE_MONTH)
    subnets = [n.subnet_id for n in vpc.private_subnets]
    return msk.CfnCluster(
        scope,
        "Msk",
        cluster_name=f"{cdk.Aws.STACK_NAME}-msk",
        kafka_version=s.kafka_version,
        number_of_broker_nodes=len(subnets),
        broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
            instance_type=s.broker_instance_type,
            client_subnets=subnets,
            security_groups=[msk_sg.security_group_id],
        ),
        client_authentication=msk.CfnCluster.ClientAuthenticationProperty(
            sasl=msk.CfnCluster.SaslProperty(iam=msk.CfnCluster.IamProperty(enabled=True)),
            unauthenticated=msk.CfnCluster.UnauthenticatedProperty(enabled=False),
        ),
        encryption_info=msk.CfnCluster.EncryptionInfoProperty(
            encryption_in_transit=msk.CfnCluster.EncryptionInTransitProperty(
                client_broker="TLS", in_cluster=True
            )
        ),
        configuration_info=msk.CfnCluster.ConfigurationInfoProperty(
            arn=config.attr_arn, revision=1
        ),
        logging_info=msk.CfnCluster.LoggingInfoProperty(
            broker_logs=msk.CfnCluster.BrokerLogsProperty(
                cloud_watch_logs=msk.CfnCluster.CloudWatchLogsProperty(
                    enabled=True, log_group=broker_logs.log_group_name
                )
            )
        ),
    )


def kafka_arn(cluster: msk.CfnCluster, kind: str, name: str) -> str:
    """A topic or group ARN of the cluster: ``arn:...:<kind>/<cluster name>/<uuid>/name``."""
    parts = cdk.Fn.split("/", cluster.attr_arn)
    return cdk.Fn.join(
        "",
        [
            f"arn:{cdk.Aws.PARTITION}:kafka:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:{kind}/",
            cdk.Fn.select(1, parts),
            "/",
            cdk.Fn.select(2, parts),
            f"/{name}",
        ],
    )


def connect_role(
    scope: Construct,
    settings: InfraSettings,
    cluster: msk.CfnCluster,
    raw: s3.IBucket,
    secrets: tuple[sm.Secret, ...],
) -> tuple[iam.Role, logs.LogGroup]:
    s = settings
    role = iam.Role(
        scope,
        "ConnectRole",
        assumed_by=service_principal("kafkaconnect.amazonaws.com"),
        description="MSK Connect's service execution role for the cdc-lake connectors",
    )
    topics = [kafka_arn(cluster, "topic", f"{s.topic_prefix}.datalake.*"),
              kafka_arn(cluster, "topic", "connect-*")]  # fmt: skip
    statements = [
        iam.PolicyStatement(
            actions=["kafka-cluster:Connect", "kafka-cluster:DescribeCluster"],
            resources=[cluster.attr_arn],
        ),
        iam.PolicyStatement(
            actions=[
                "kafka-cluster:ReadData",
                "kafka-cluster:WriteData",
                "kafka-cluster:DescribeTopic",
                "kafka-cluster:CreateTopic",
            ],
            resources=topics,
        ),
        iam.PolicyStatement(
            actions=["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"],
            resources=[kafka_arn(cluster, "group", "connect-*")],
        ),
        iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[raw.arn_for_objects(f"{s.raw_prefix}*")]
        ),
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[raw.bucket_arn]),
        iam.PolicyStatement(
            actions=["secretsmanager:GetSecretValue"],
            resources=[secret.secret_arn for secret in secrets],
        ),
    ]
    for statement in statements:
        role.add_to_policy(statement)
    # Worker logs are delivered by MSK Connect under the deployer's permissions, not the role's.
    log_group = logs.LogGroup(scope, "ConnectLogs", retention=logs.RetentionDays.ONE_MONTH)
    return role, log_group
