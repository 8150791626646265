"""The production stack that ``CDC_LAKE_ENV=prod`` expects, as ``docs/deploy.md`` describes it.

What it declares:
- networking: a VPC with private subnets (or an existing one, by ids), and one security group
  per client: the database takes PostgreSQL only from the Connect workers and from Dagster;
  MSK takes its IAM listener (9098) only from the Connect workers, EMR and Dagster (offsets);
- the source database, RDS or Aurora PostgreSQL 16, with a parameter group for logical
  replication (``rds.logical_replication``, slots and senders, ``wal_sender_timeout=0``,
  ``max_slot_wal_keep_size``), its admin secret, and the replication role's secret
  (``{"password": ...}``) that MSK Connect reads; the roles themselves are made by ``sql/``;
- MSK with IAM auth, TLS, broker logs, and no topic auto-creation;
- the MSK Connect service execution role with exactly the permissions ``docs/deploy.md`` lists,
  and its log group (plugins and connectors stay with ``cdc-lake msk deploy``);
- the raw and lake buckets (SSE-S3, public access blocked, TLS only, access logs), with an
  optional expiry of raw objects;
- EMR Serverless (Spark on the EMR 7 release whose Spark matches pyspark 3.5) and its job role,
  scoped to the buckets and the Glue database; or, for the running-cluster launcher, the
  instance role a cluster of your own takes;
- the Glue database;
- the Dagster deployment's role (its ECS task role, or an EC2 instance profile), trusted by the
  principal ``dagster_principal`` names, with exactly the actions of the calls the Dagster side
  makes (``dagster_calls.py``), each scoped to the project's resources;
- outputs: each named by its ``CDC_LAKE_*`` variable in its description (``outputs.py``), or
  by a plain name for what is no variable (the cluster, the Dagster role, ...).

Nothing here reads the environment or reaches AWS: ``InfraSettings`` holds every choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_msk as msk
from aws_cdk import aws_rds as rds
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as sm
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct, IConstruct

from cdc_lake.infra.dagster_calls import (
    PIPES_MESSAGE_KEYS,
    RECONCILE_KEYS,
    UNSCOPED_ACTIONS,
    dagster_actions,
)
from cdc_lake.infra.outputs import OUTPUT_PREFIX
from cdc_lake.resources.prod import GLUE_DATABASE
from cdc_lake.resources.spark import EmrServerlessLauncher
from cdc_lake.source.captured import TABLES
from cdc_lake.streaming.connect_config import CdcConnectorSettings, connector_names, topic_name
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake.streaming.topics import INSPECTOR_GROUP

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
    # Who may assume the Dagster role: a service ("ecs-tasks.amazonaws.com" for an ECS task
    # role, "ec2.amazonaws.com" for an instance profile), an account id, or an ARN.
    dagster_principal: str = "ecs-tasks.amazonaws.com"
    # An existing VPC, by ids (never looked up, so synthesis stays offline).
    vpc_id: str | None = None
    availability_zones: tuple[str, ...] = ()
    private_subnet_ids: tuple[str, ...] = ()
    private_route_table_ids: tuple[str, ...] = ()


def _service(name: str) -> iam.IPrincipal:
    # jsii's classes implement its interfaces at run time; pyright cannot see it.
    return cast(iam.IPrincipal, iam.ServicePrincipal(name))


def trusted_principal(value: str) -> iam.IPrincipal:
    """``dagster_principal``: a service principal (``*.amazonaws.com``), an account id (12
    digits), or an ARN (a role or user). Anything else raises ValueError."""
    if value.endswith(".amazonaws.com"):
        return _service(value)
    if len(value) == 12 and value.isdigit():
        return cast(iam.IPrincipal, iam.AccountPrincipal(value))
    if value.startswith("arn:"):
        return cast(iam.IPrincipal, iam.ArnPrincipal(value))
    raise ValueError(
        f"dagster_principal={value!r} is neither a service (ecs-tasks.amazonaws.com), an "
        "account id (12 digits) nor an ARN"
    )


class CdcLakeStack(cdk.Stack):
    """See the module docstring."""

    def __init__(
        self, scope: Construct, construct_id: str, settings: InfraSettings, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.settings = s = settings
        self.vpc = self._network()
        private = ec2.SubnetSelection(subnets=self.vpc.private_subnets)
        self.connect_sg = self._sg("ConnectWorkers", "MSK Connect workers")
        self.emr_sg = self._sg("Emr", "EMR Serverless jobs or the EMR cluster")
        self.dagster_sg = self._sg("Dagster", "the Dagster code server and run workers")
        self.db_sg = self._sg("Database", "the source database")
        self.msk_sg = self._sg("Msk", "the MSK brokers")
        for client in (self.connect_sg, self.dagster_sg):
            self.db_sg.add_ingress_rule(client, ec2.Port.tcp(PG_PORT), "PostgreSQL")
        for client in (self.connect_sg, self.emr_sg, self.dagster_sg):
            self.msk_sg.add_ingress_rule(client, ec2.Port.tcp(MSK_IAM_PORT), "MSK IAM listener")

        self.access_logs = self._bucket("AccessLogs", access_logs=None)
        self.raw = self._bucket("Raw", access_logs=self.access_logs, expiry=s.raw_expiry_days)
        self.lake = self._bucket("Lake", access_logs=self.access_logs)

        self.replication_secret = sm.Secret(
            self,
            "ReplicationSecret",
            secret_name=s.replication_secret_name,
            description="the replication role's password, read by MSK Connect",
            generate_secret_string=sm.SecretStringGenerator(
                secret_string_template="{}",
                generate_string_key="password",
                exclude_punctuation=True,
            ),
        )
        self.db_host, self.db_admin_secret = self._database(private)
        self.cluster = self._msk()
        self.connect_role, self.connect_logs = self._connect_role()
        self.glue_db = glue.CfnDatabase(
            self,
            "GlueDatabase",
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(name=s.glue_database),
        )
        self.emr_role = self._emr_role()
        self.emr_app = self._emr_serverless(private) if s.spark_target == "emr-serverless" else None
        self.dagster_role, self.dagster_profile = self._dagster_role()
        self._outputs()
        self._suppressions()

    # Networking

    def _network(self) -> ec2.IVpc:
        s = self.settings
        if s.vpc_id:
            return ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=s.vpc_id,
                availability_zones=list(s.availability_zones),
                private_subnet_ids=list(s.private_subnet_ids),
                private_subnet_route_table_ids=list(s.private_route_table_ids) or None,
            )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
                ),
            ],
        )
        vpc.add_flow_log("FlowLog")
        return vpc

    def _sg(self, name: str, who: str) -> ec2.SecurityGroup:
        return ec2.SecurityGroup(
            self, f"{name}Sg", vpc=self.vpc, description=f"cdc-lake: {who}", allow_all_outbound=True
        )

    # Storage

    def _bucket(
        self, name: str, access_logs: s3.IBucket | None, expiry: int | None = None
    ) -> s3.Bucket:
        rules = [s3.LifecycleRule(expiration=cdk.Duration.days(expiry))] if expiry else None
        return s3.Bucket(
            self,
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

    def _database(self, private: ec2.SubnetSelection) -> tuple[str, sm.ISecret]:
        s = self.settings
        parameters = {
            "rds.logical_replication": "1",
            "max_replication_slots": "10",
            "max_wal_senders": "10",
            "wal_sender_timeout": "0",
            "max_slot_wal_keep_size": str(s.slot_wal_keep_mb),
        }
        engine: rds.IEngine = (
            rds.DatabaseClusterEngine.aurora_postgres(
                version=rds.AuroraPostgresEngineVersion.VER_16_9
            )
            if s.database == "aurora"
            else rds.DatabaseInstanceEngine.postgres(version=rds.PostgresEngineVersion.VER_16_9)
        )
        # What the cluster and the instance share.
        common: dict[str, Any] = {
            "engine": engine,
            "parameter_group": rds.ParameterGroup(
                self, "DbParameters", engine=engine, parameters=parameters
            ),
            "vpc": self.vpc,
            "vpc_subnets": private,
            "security_groups": [self.db_sg],
            "credentials": rds.Credentials.from_generated_secret("cdc_admin"),
            "storage_encrypted": True,
            "deletion_protection": True,
            "removal_policy": cdk.RemovalPolicy.SNAPSHOT,
        }
        if s.database == "aurora":
            cluster = rds.DatabaseCluster(
                self,
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
            self,
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

    # MSK and MSK Connect

    def _msk(self) -> msk.CfnCluster:
        s = self.settings
        config = msk.CfnConfiguration(
            self,
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
        broker_logs = logs.LogGroup(self, "MskBrokerLogs", retention=logs.RetentionDays.ONE_MONTH)
        subnets = [n.subnet_id for n in self.vpc.private_subnets]
        return msk.CfnCluster(
            self,
            "Msk",
            cluster_name=f"{cdk.Aws.STACK_NAME}-msk",
            kafka_version=s.kafka_version,
            number_of_broker_nodes=len(subnets),
            broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
                instance_type=s.broker_instance_type,
                client_subnets=subnets,
                security_groups=[self.msk_sg.security_group_id],
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

    def _kafka_arn(self, kind: str, name: str) -> str:
        """A topic or group ARN of the cluster: ``arn:...:<kind>/<cluster name>/<uuid>/name``."""
        parts = cdk.Fn.split("/", self.cluster.attr_arn)
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

    def _connect_role(self) -> tuple[iam.Role, logs.LogGroup]:
        s = self.settings
        role = iam.Role(
            self,
            "ConnectRole",
            assumed_by=_service("kafkaconnect.amazonaws.com"),
            description="MSK Connect's service execution role for the cdc-lake connectors",
        )
        topics = [self._kafka_arn("topic", f"{s.topic_prefix}.datalake.*"),
                  self._kafka_arn("topic", "connect-*")]  # fmt: skip
        statements = [
            iam.PolicyStatement(
                actions=["kafka-cluster:Connect", "kafka-cluster:DescribeCluster"],
                resources=[self.cluster.attr_arn],
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
                resources=[self._kafka_arn("group", "connect-*")],
            ),
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.raw.arn_for_objects(f"{s.raw_prefix}*")]
            ),
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.raw.bucket_arn]),
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"],
                resources=[self.replication_secret.secret_arn],
            ),
        ]
        for statement in statements:
            role.add_to_policy(statement)
        # Worker logs are delivered by MSK Connect under the deployer's permissions, not the role's.
        log_group = logs.LogGroup(self, "ConnectLogs", retention=logs.RetentionDays.ONE_MONTH)
        return role, log_group

    # EMR and Glue

    def _emr_role(self) -> iam.Role:
        s = self.settings
        principal = _service(
            "emr-serverless.amazonaws.com" if s.spark_target == "emr-serverless"
            else "ec2.amazonaws.com"
        )  # fmt: skip
        role = iam.Role(
            self,
            "EmrJobRole",
            assumed_by=principal,
            description="the Spark apps' role: raw files in, the lake and Glue out",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:ListBucket"],
                resources=[self.raw.bucket_arn, self.raw.arn_for_objects("*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"],
                resources=[self.lake.bucket_arn, self.lake.arn_for_objects("*")],
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
            iam.CfnInstanceProfile(self, "EmrInstanceProfile", roles=[role.role_name])
        return role

    def _emr_serverless(self, private: ec2.SubnetSelection) -> emrs.CfnApplication:
        return emrs.CfnApplication(
            self,
            "EmrServerless",
            release_label=self.settings.emr_release,
            type="SPARK",
            name=f"{cdk.Aws.STACK_NAME}-spark",
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=15
            ),
            network_configuration=emrs.CfnApplication.NetworkConfigurationProperty(
                subnet_ids=[n.subnet_id for n in self.vpc.private_subnets],
                security_group_ids=[self.emr_sg.security_group_id],
            ),
        )

    # The Dagster deployment

    def _dagster_role(self) -> tuple[iam.Role, iam.CfnInstanceProfile | None]:
        """The role of the Dagster deployment: exactly ``dagster_actions``, each on the
        project's resources only."""
        s = self.settings
        role = iam.Role(
            self,
            "DagsterRole",
            assumed_by=trusted_principal(s.dagster_principal),
            description="the Dagster deployment: sensors, assets, checks, and the EMR launches",
        )

        def arn(service: str, resource: str) -> str:
            region, account = cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID
            return f"arn:{cdk.Aws.PARTITION}:{service}:{region}:{account}:{resource}"

        code = self.lake.arn_for_objects(f"{CODE_PREFIX.strip('/')}/*")
        reconcile = self.lake.arn_for_objects(RECONCILE_KEYS)
        statements = [
            # The raw listing (sensor, raw asset, checks) and the lake's (Hudi timelines,
            # quarantine). Not narrowed by prefix: HeadBucket has none, and HeadObject of code
            # not uploaded yet answers 404, not 403, only with ListBucket on the bucket.
            iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[self.raw.bucket_arn, self.lake.bucket_arn]
            ),
            # A version-1 checkpoint's raw object, the Pipes messages, the apps' code.
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    self.raw.arn_for_objects(f"{s.raw_prefix}*"),
                    self.lake.arn_for_objects(PIPES_MESSAGE_KEYS),
                    code,
                ],
            ),
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[code, reconcile]),
            # A reconcile's source keys, once the upsert app has read them.
            iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[reconcile]),
            # Offsets only: the topics' and the sink group's, never a record.
            iam.PolicyStatement(
                actions=["kafka-cluster:Connect"], resources=[self.cluster.attr_arn]
            ),
            iam.PolicyStatement(
                actions=["kafka-cluster:DescribeTopic"],
                resources=[self._kafka_arn("topic", topic_name(s.topic_prefix, t)) for t in TABLES],
            ),
            iam.PolicyStatement(
                actions=["kafka-cluster:DescribeGroup"],
                resources=[
                    self._kafka_arn("group", INSPECTOR_GROUP),
                    # Connect's group of the sink (CdcPipelineResource.sink_consumer_group).
                    self._kafka_arn("group", f"connect-{connector_names(s.topic_prefix)[1]}"),
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
        if self.emr_app is not None:
            app = arn("emr-serverless", f"/applications/{self.emr_app.attr_application_id}")
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
                    resources=[self.emr_role.role_arn],
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
                    resources=[self.lake.arn_for_objects(f"{EMR_LOG_PREFIX}*/steps/*")],
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
            profile = iam.CfnInstanceProfile(self, "DagsterInstanceProfile", roles=[role.role_name])
        return role, profile

    # Outputs

    def _outputs(self) -> None:
        s = self.settings
        values: dict[str, str] = {
            "CDC_LAKE_AWS_REGION": cdk.Aws.REGION,
            "CDC_LAKE_PG_HOST": self.db_host,
            "CDC_LAKE_PG_PORT": str(PG_PORT),
            "CDC_LAKE_PG_DATABASE": s.db_name,
            "CDC_LAKE_REPLICATION_SECRET": self.replication_secret.secret_name,
            "CDC_LAKE_RAW_BUCKET": self.raw.bucket_name,
            "CDC_LAKE_RAW_PREFIX": s.raw_prefix,
            "CDC_LAKE_LAKE_BUCKET": self.lake.bucket_name,
            "CDC_LAKE_TOPIC_PREFIX": s.topic_prefix,
            "CDC_LAKE_GLUE_DATABASE": s.glue_database,
            "CDC_LAKE_SPARK_TARGET": s.spark_target,
            "CDC_LAKE_MSK_SUBNETS": ",".join(n.subnet_id for n in self.vpc.private_subnets),
            "CDC_LAKE_MSK_SECURITY_GROUPS": self.connect_sg.security_group_id,
            "CDC_LAKE_MSK_CONNECT_ROLE_ARN": self.connect_role.role_arn,
            "CDC_LAKE_MSK_PLUGIN_BUCKET": self.lake.bucket_name,
            "CDC_LAKE_MSK_LOG_GROUP": self.connect_logs.log_group_name,
            # Not a variable: `cdc-lake aws env` asks MSK for its IAM brokers.
            "MSK_CLUSTER_ARN": self.cluster.attr_arn,
            # For the Dagster deployment (ECS or EKS): its tasks join this group.
            "DAGSTER_SECURITY_GROUP": self.dagster_sg.security_group_id,
            "DB_ADMIN_SECRET_ARN": self.db_admin_secret.secret_arn,
            # Not a variable: the Dagster deployment's task role (or its instance profile).
            "DAGSTER_ROLE_ARN": self.dagster_role.role_arn,
        }
        if self.dagster_profile is not None:
            values["DAGSTER_INSTANCE_PROFILE_ARN"] = self.dagster_profile.attr_arn
        if self.emr_app is not None:
            values["CDC_LAKE_EMR_SERVERLESS_APP_ID"] = self.emr_app.attr_application_id
            values["CDC_LAKE_EMR_EXECUTION_ROLE_ARN"] = self.emr_role.role_arn
            values["CDC_LAKE_EMR_LOG_URI"] = self.lake.s3_url_for_object(EMR_LOG_PREFIX)
        else:
            values["EMR_INSTANCE_ROLE_ARN"] = self.emr_role.role_arn
        for name, value in values.items():
            cdk.CfnOutput(
                self, name.replace("_", ""), value=value, description=f"{OUTPUT_PREFIX}{name}"
            )

    # cdk-nag: each finding this stack keeps, and why

    def _suppressions(self) -> None:
        def keep(construct: IConstruct, rule: str, reason: str) -> None:
            NagSuppressions.add_resource_suppressions(
                construct,
                [NagPackSuppression(id=rule, reason=reason)],
                apply_to_children=True,
            )

        db = self.node.find_child("Database")
        keep(db, "AwsSolutions-RDS6",
             "MSK Connect's Debezium authenticates with a password from Secrets Manager (its "
             "config provider); IAM auth tokens expire in 15 minutes, which a long-running "
             "replication connection cannot renew.")  # fmt: skip
        keep(db, "AwsSolutions-RDS11",
             "Debezium and the project's SQL use PostgreSQL's port; the database is reachable "
             "only from the Connect and Dagster security groups.")  # fmt: skip
        for secret in (db, self.replication_secret):
            keep(
                secret,
                "AwsSolutions-SMG4",
                "Rotation would change the password under a running connector, which reads "
                "it once at start; rotate by hand, then restart the connector.",
            )
        keep(self.connect_role, "AwsSolutions-IAM5",
             "Scoped to the pipeline's topics (<prefix>.datalake.*), Connect's internal topics "
             "and groups (connect-*), and the raw prefix: names the connectors create at run "
             "time.")  # fmt: skip
        keep(self.emr_role, "AwsSolutions-IAM5",
             "The Spark apps read any raw object and write any object of the lake bucket (the "
             "tables, quarantine, code and Pipes messages), and sync any table of the Glue "
             "database.")  # fmt: skip
        keep(self.dagster_role, "AwsSolutions-IAM5",
             "Keys and ids made at run time: raw objects under the raw prefix, the code under "
             "its prefix, Pipes message keys, the two connectors and their operations, the EMR "
             "Serverless job runs or the tagged cluster and its step logs; ListConnectors has "
             "no resource type, so it takes only '*'.")  # fmt: skip
