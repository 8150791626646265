"""The AWS calls the Dagster deployment makes in production, and the IAM actions each needs.

The Dagster deployment (code server, daemon, run workers) runs the sensors, the assets and their
checks, and launches the Spark apps on EMR through Dagster Pipes. Each entry below is one call
it makes, ``(client, operation) -> IAM actions``, the operation's own action first, then any
other AWS authorises it by. The client is boto3's service name, or ``kafka`` for the Kafka
requests librdkafka sends to MSK's IAM listener on behalf of a ``confluent_kafka.Consumer``
method (MSK authorises them as ``kafka-cluster:*`` actions).
``dagster_actions`` is what the stack's Dagster role grants (``stack.py`` scopes each action to
the project's resources); ``cdc_lake_tests/infra`` checks these tables against the code that
makes the calls, and each action against the operation's own name.

Deliberately absent, because the Dagster side never calls them: what ``cdc-lake msk deploy`` and
``cdc-lake aws env`` call (an operator runs them with their own credentials); a connector's
creation (``MskConnectClient.deploy`` refuses a missing connector first); CloudWatch Logs (the
Pipes messages come through S3); Secrets Manager (the database password is injected into the
environment by the deployment, the replication password is resolved by MSK Connect); Glue (Hudi
syncs the tables from the Spark apps, under the job role).
"""

from __future__ import annotations

from typing import Literal

Call = tuple[str, str]
SparkTarget = Literal["emr-serverless", "emr-step"]

# Every Spark target: the sensors, raw and lake assets, checks, and the EMR launchers' S3 side.
COMMON_CALLS: dict[Call, tuple[str, ...]] = {
    # defs/raw/assets.py raw_cdc_files: does the raw bucket exist.
    ("s3", "head_bucket"): ("s3:ListBucket",),
    # raw/objects.py list_objects (sensor, raw asset, checks), lake/timeline.py (the no-Spark
    # paths), defs/lake/checks.py no_quarantined_lines, defs/marts/assets.py and
    # defs/lake/history.py _unchanged.
    ("s3", "list_objects_v2"): ("s3:ListBucket",),
    # lake/checkpoint.py load: a version-1 checkpoint's raw object; lake/lag.py: the first raw
    # object past the checkpoint per partition (lake_lag_seconds); dagster_aws's
    # PipesS3MessageReader: the Pipes messages.
    ("s3", "get_object"): ("s3:GetObject",),
    # spark_apps/package.py upload_package: is the code there; the Pipes messages.
    ("s3", "head_object"): ("s3:GetObject",),
    # spark_apps/package.py upload_package: the apps' code (one PutObject, well under the
    # multipart threshold).
    ("s3", "upload_file"): ("s3:PutObject",),
    # defs/lake/assets.py and lake/reconcile.py, `cdc-lake lake reconcile`: the source's keys,
    # written beside the table for the upsert app, deleted once it has run.
    ("s3", "put_object"): ("s3:PutObject",),
    ("s3", "delete_object"): ("s3:DeleteObject",),
    # streaming/msk/client.py and deploy.py: the topic and raw assets keep the two existing
    # connectors current; the checks read their state.
    ("kafkaconnect", "list_connectors"): ("kafkaconnect:ListConnectors",),
    ("kafkaconnect", "describe_connector"): ("kafkaconnect:DescribeConnector",),
    ("kafkaconnect", "update_connector"): ("kafkaconnect:UpdateConnector",),
    ("kafkaconnect", "describe_connector_operation"): (
        "kafkaconnect:DescribeConnectorOperation",
        "kafkaconnect:DescribeConnector",  # AWS asks for both
    ),
    # streaming/topics.py: topic offsets and the sink's committed offsets, never records.
    # SASL authentication, and the coordinator of a consumer's group (FindCoordinator).
    ("kafka", "Consumer"): ("kafka-cluster:Connect", "kafka-cluster:DescribeGroup"),
    ("kafka", "list_topics"): ("kafka-cluster:DescribeTopic",),  # Metadata
    ("kafka", "get_watermark_offsets"): ("kafka-cluster:DescribeTopic",),  # ListOffsets
    # oldest_unconsumed_ts (lake_lag_seconds): ListOffsets by time, no record fetched.
    ("kafka", "offsets_for_times"): ("kafka-cluster:DescribeTopic",),
    ("kafka", "committed"): ("kafka-cluster:DescribeGroup", "kafka-cluster:DescribeTopic"),
    ("kafka", "close"): (),  # never subscribed: no LeaveGroup
    ("kafka", "poll"): (),  # never assigned: serves the client's error callback, fetches nothing
}

TARGET_CALLS: dict[SparkTarget, dict[Call, tuple[str, ...]]] = {
    # resources/spark.py EmrServerlessLauncher, through dagster_aws's PipesEMRServerlessClient.
    "emr-serverless": {
        # Pipes tags the job run with the Dagster run's (tagging on create), and passes the job
        # role to EMR Serverless.
        ("emr-serverless", "start_job_run"): (
            "emr-serverless:StartJobRun",
            "emr-serverless:TagResource",
            "iam:PassRole",
        ),
        ("emr-serverless", "get_job_run"): ("emr-serverless:GetJobRun",),
        ("emr-serverless", "get_dashboard_for_job_run"): ("emr-serverless:GetDashboardForJobRun",),
        ("emr-serverless", "get_application"): ("emr-serverless:GetApplication",),
        ("emr-serverless", "cancel_job_run"): ("emr-serverless:CancelJobRun",),  # run terminated
    },
    # resources/spark.py EmrStepLauncher, through aws/emr_step.py PipesEMRStepClient; the step's
    # stdout and stderr are read from the cluster's LogUri (the S3 calls above).
    "emr-step": {
        ("emr", "describe_cluster"): ("elasticmapreduce:DescribeCluster",),
        ("emr", "add_job_flow_steps"): ("elasticmapreduce:AddJobFlowSteps",),
        ("emr", "describe_step"): ("elasticmapreduce:DescribeStep",),
        ("emr", "cancel_steps"): ("elasticmapreduce:CancelSteps",),  # run terminated
    },
}

# Actions AWS defines no resource type for: granted on "*" (stack.py says why).
UNSCOPED_ACTIONS = frozenset({"kafkaconnect:ListConnectors"})

# The reconcile's key objects (defs/lake/assets.py): "<table prefix>_reconcile/<run id>.keys".
RECONCILE_KEYS = "*_reconcile/*.keys"

# dagster_aws's PipesS3MessageReader writes each run's messages at the bucket's root under 30
# random letters ("<30 letters>/<n>.json"): the keys the Dagster role may read there.
PIPES_MESSAGE_KEYS = "?" * 30 + "/*.json"


def dagster_calls(spark_target: SparkTarget) -> dict[Call, tuple[str, ...]]:
    """Every call the Dagster side makes with this Spark target."""
    return COMMON_CALLS | TARGET_CALLS[spark_target]


def dagster_actions(spark_target: SparkTarget) -> set[str]:
    """The IAM actions those calls need: exactly what the Dagster role grants."""
    return {action for actions in dagster_calls(spark_target).values() for action in actions}
