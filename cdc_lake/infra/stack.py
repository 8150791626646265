"""The production stack that ``CDC_LAKE_ENV=prod`` expects, as ``docs/deploy.md`` describes it.

What it declares:
- networking: a VPC with private subnets (or an existing one, by ids), and one security group
  per client: the database takes PostgreSQL only from the Connect workers and from Dagster;
  MSK takes its IAM listener (9098) only from the Connect workers, EMR and Dagster (offsets);
- the source database, RDS or Aurora PostgreSQL 16, with a parameter group for logical
  replication (``rds.logical_replication``, slots and senders, ``wal_sender_timeout=0``,
  ``max_slot_wal_keep_size``), its admin secret, and the replication role's secret
  (``{"password": ...}``) that MSK Connect reads; the roles themselves are made by ``sql/``;
- the salt of hashed columns and fields, generated into a secret of its own
  (``{"column_salt": ...}``), which MSK Connect and Dagster read;
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

The stack class assembles the parts, each built in a module of its own: the choices and the
names they share (``settings.py``), networking (``network.py``), the buckets and the source
database (``storage.py``), MSK and MSK Connect (``msk.py``), EMR (``emr.py``), the Dagster
role (``dagster_role.py``) and the principals the roles trust (``principals.py``); the
replication and salt secrets, the Glue database, the outputs and the cdk-nag suppressions are
here.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_secretsmanager as sm
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct, IConstruct

from cdc_lake.infra.dagster_role import dagster_role
from cdc_lake.infra.emr import emr_role, emr_serverless
from cdc_lake.infra.msk import connect_role, msk_cluster
from cdc_lake.infra.network import network, security_group
from cdc_lake.infra.outputs import OUTPUT_PREFIX
from cdc_lake.infra.settings import EMR_LOG_PREFIX, MSK_IAM_PORT, PG_PORT, InfraSettings
from cdc_lake.infra.storage import bucket, database
from cdc_lake.streaming.msk.settings import SALT_KEY


class CdcLakeStack(cdk.Stack):
    """See the module docstring."""

    def __init__(
        self, scope: Construct, construct_id: str, settings: InfraSettings, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.settings = s = settings
        self.vpc = network(self, s)
        private = ec2.SubnetSelection(subnets=self.vpc.private_subnets)
        self.connect_sg = security_group(self, self.vpc, "ConnectWorkers", "MSK Connect workers")
        self.emr_sg = security_group(
            self, self.vpc, "Emr", "EMR Serverless jobs or the EMR cluster"
        )
        self.dagster_sg = security_group(
            self, self.vpc, "Dagster", "the Dagster code server and run workers"
        )
        self.db_sg = security_group(self, self.vpc, "Database", "the source database")
        self.msk_sg = security_group(self, self.vpc, "Msk", "the MSK brokers")
        for client in (self.connect_sg, self.dagster_sg):
            self.db_sg.add_ingress_rule(client, ec2.Port.tcp(PG_PORT), "PostgreSQL")
        for client in (self.connect_sg, self.emr_sg, self.dagster_sg):
            self.msk_sg.add_ingress_rule(client, ec2.Port.tcp(MSK_IAM_PORT), "MSK IAM listener")

        self.access_logs = bucket(self, "AccessLogs", access_logs=None)
        self.raw = bucket(self, "Raw", access_logs=self.access_logs, expiry=s.raw_expiry_days)
        self.lake = bucket(self, "Lake", access_logs=self.access_logs)

        self.replication_secret = _generated_secret(
            self, "ReplicationSecret", s.replication_secret_name,
            "the replication role's password, read by MSK Connect", "password",
        )  # fmt: skip
        # The salt of hashed columns and fields, generated here, never seen by anyone: the
        # connector hashes with it, and matches_source (CDC_LAKE_COLUMN_SALT) computes the same.
        self.salt_secret = _generated_secret(
            self, "ColumnSaltSecret", s.column_salt_secret_name,
            "the salt of hashed columns, read by MSK Connect and Dagster", SALT_KEY, length=48,
        )  # fmt: skip
        self.db_host, self.db_admin_secret = database(self, s, self.vpc, private, self.db_sg)
        self.cluster = msk_cluster(self, s, self.vpc, self.msk_sg)
        self.connect_role, self.connect_logs = connect_role(
            self, s, self.cluster, self.raw, (self.replication_secret, self.salt_secret)
        )
        self.glue_db = glue.CfnDatabase(
            self,
            "GlueDatabase",
            catalog_id=self.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(name=s.glue_database),
        )
        self.emr_role = emr_role(self, s, self.raw, self.lake)
        self.emr_app = (
            emr_serverless(self, s, self.vpc, self.emr_sg)
            if s.spark_target == "emr-serverless"
            else None
        )
        self.dagster_role, self.dagster_profile = dagster_role(
            self, s, self.raw, self.lake, self.cluster, self.emr_app, self.emr_role
        )
        self._outputs()
        self._suppressions()

    # Outputs

    def _outputs(self) -> None:
        s = self.settings
        values: dict[str, str] = {
            "CDC_LAKE_AWS_REGION": cdk.Aws.REGION,
            "CDC_LAKE_PG_HOST": self.db_host,
            "CDC_LAKE_PG_PORT": str(PG_PORT),
            "CDC_LAKE_PG_DATABASE": s.db_name,
            "CDC_LAKE_REPLICATION_SECRET": self.replication_secret.secret_name,
            "CDC_LAKE_COLUMN_SALT_SECRET": self.salt_secret.secret_name,
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
        keep(self.salt_secret, "AwsSolutions-SMG4",
             "A new salt changes every hash: the lake's hashed values would no longer match new "
             "ones. It changes only with a new lake table (docs/column-policies.md).")  # fmt: skip
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


def _generated_secret(
    scope: Construct, logical_id: str, name: str, description: str, key: str,
    length: int | None = None,
) -> sm.Secret:
    """A secret whose JSON holds one value, ``key``, that Secrets Manager generates (letters and
    digits): never in the template or an output."""
    return sm.Secret(
        scope,
        logical_id,
        secret_name=name,
        description=description,
        generate_secret_string=sm.SecretStringGenerator(
            secret_string_template="{}",
            generate_string_key=key,
            exclude_punctuation=True,
            password_length=length,
        ),
    )
