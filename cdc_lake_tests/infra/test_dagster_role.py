"""The Dagster deployment's role (``cdc_lake/infra/dagster_role.py``): the calls table it is built
from (``cdc_lake/infra/dagster_calls.py``) is what the Dagster side's code calls, each action is
the one AWS names for its operation, and the synthesised role grants exactly those actions, each
on the project's resources, for both Spark targets.

What the code calls is read from its source (``ast``): in the modules and classes the Dagster
deployment runs in production, every attribute call or string literal that names an operation of
a boto3 client it makes, and, where ``confluent_kafka`` is imported, every ``Consumer`` method.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path
from typing import Any

import boto3
import dagster_aws.pipes
import pytest
from aws_cdk import aws_iam as iam
from botocore.exceptions import ClientError
from confluent_kafka import Consumer
from dagster_aws.pipes import PipesS3MessageReader

import cdc_lake
from cdc_lake.infra.dagster_calls import (
    PIPES_MESSAGE_KEYS,
    RECONCILE_KEYS,
    UNSCOPED_ACTIONS,
    SparkTarget,
    dagster_actions,
    dagster_calls,
)
from cdc_lake.infra.outputs import OUTPUT_PREFIX
from cdc_lake.infra.principals import trusted_principal
from cdc_lake.infra.settings import CODE_PREFIX, EMR_CLUSTER_TAG, EMR_LOG_PREFIX
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.captured import TABLES
from cdc_lake.streaming.topics import INSPECTOR_GROUP
from cdc_lake_tests.infra.conftest import Synth

ROOT = Path(cdc_lake.__file__).parent
PIPES = Path(dagster_aws.pipes.__file__).parent
# What the Dagster deployment runs in production, by Spark target: (file, classes or functions
# in it; none: the whole file).
UNITS: dict[str, list[tuple[Path, tuple[str, ...]]]] = {
    "common": [
        *[(path, ()) for path in sorted((ROOT / "defs").rglob("*.py"))],
        *[(ROOT / "resources" / f"{name}.py", ())
          for name in ("prod", "streaming", "lake", "source")],
        (ROOT / "resources" / "spark.py", ("_EmrLauncher",)),
        (ROOT / "spark_apps" / "package.py", ()),
        (ROOT / "raw" / "objects.py", ()),
        (ROOT / "lake" / "timeline.py", ()),
        (ROOT / "lake" / "checkpoint.py", ()),
        (ROOT / "lake" / "reconcile.py", ()),
        (ROOT / "streaming" / "topics.py", ()),
        (ROOT / "streaming" / "msk" / "client.py", ()),
        (ROOT / "streaming" / "msk" / "api.py", ()),
        (ROOT / "streaming" / "msk" / "deploy.py", ("MskConnectDeployer",)),
        (PIPES / "message_readers.py", ("PipesS3MessageReader",)),
    ],
    "emr-serverless": [
        (ROOT / "resources" / "spark.py", ("CdcEMRServerlessClient", "EmrServerlessLauncher")),
        (PIPES / "clients" / "emr_serverless.py", ("PipesEMRServerlessClient",)),
    ],
    "emr-step": [
        (ROOT / "resources" / "spark.py", ("EmrStepLauncher",)),
        (ROOT / "aws" / "emr_step.py", ()),
        (PIPES / "message_readers.py", ("PipesS3LogReader", "_can_read_from_s3")),
    ],
}  # fmt: skip
# Called in that code, yet never by the Dagster deployment, and so not granted.
NOT_FROM_DAGSTER = {
    # MskConnectClient.deploy raises for a missing connector before ensure_connector runs.
    ("kafkaconnect", "create_connector"),
}
CLIENTS = ("s3", "emr", "emr-serverless", "kafkaconnect")
IAM_PREFIX = {"s3": "s3", "emr": "elasticmapreduce", "emr-serverless": "emr-serverless",
              "kafkaconnect": "kafkaconnect"}  # fmt: skip
# Operations whose IAM action is not named after them.
NOT_NAMED_AFTER = {
    ("s3", "head_bucket"): "s3:ListBucket",
    ("s3", "list_objects_v2"): "s3:ListBucket",
    ("s3", "head_object"): "s3:GetObject",
    ("s3", "upload_file"): "s3:PutObject",  # s3transfer's: PutObject, or multipart parts
}


def _operations() -> dict[str, set[str]]:
    ops = {
        service: set(boto3.client(service, region_name="eu-west-1").meta.method_to_api_mapping)
        for service in CLIENTS
    }
    ops["s3"] |= {"upload_file", "upload_fileobj", "download_file", "download_fileobj"}
    ops["kafka"] = {"Consumer"} | {m for m in dir(Consumer) if not m.startswith("_")}
    return ops


def _scan(
    path: Path, names: tuple[str, ...], ops: dict[str, set[str]]
) -> tuple[set[tuple[str, str]], set[str]]:
    """(the calls, the boto3 clients made) in the file, or in its named classes/functions."""
    source = path.read_text()
    tree = ast.parse(source)
    nodes: list[ast.AST] = [tree]
    if names:
        defs = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef)
                and n.name in names]  # fmt: skip
        assert sorted(n.name for n in defs) == sorted(names), (path, names)
        nodes = list(defs)
    kafka = "confluent_kafka" in source
    calls: set[tuple[str, str]] = set()
    clients: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "client" and node.args and isinstance(node.args[0], ast.Constant):
                clients.add(str(node.args[0].value))
            for service, known in ops.items():
                # Boto3's are methods of a client (a bare list_objects(...) is a function of
                # ours); Kafka's are Consumer(...) and its methods, where confluent_kafka is.
                counts = kafka if service == "kafka" else isinstance(func, ast.Attribute)
                if name in known and counts:
                    calls.add((service, name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # An operation named for a paginator or a helper: get_paginator("list_connectors").
            calls |= {(s, node.value) for s in CLIENTS if node.value in ops[s]}
    return calls, clients


TARGETS: tuple[SparkTarget, ...] = ("emr-serverless", "emr-step")


@pytest.mark.parametrize("target", TARGETS)
def test_the_calls_table_is_what_the_dagster_side_calls(target: SparkTarget):
    ops = _operations()
    calls, clients = set(), set()
    for path, names in UNITS["common"] + UNITS[target]:
        found, made = _scan(path, names, ops)
        calls |= found
        clients |= made
    assert clients <= set(CLIENTS), clients  # no client the table does not cover
    assert calls - NOT_FROM_DAGSTER == set(dagster_calls(target)), target


def test_each_action_is_the_one_aws_names_for_its_operation():
    tables = dagster_calls("emr-serverless") | dagster_calls("emr-step")
    for (service, op), actions in tables.items():
        if service == "kafka":
            # Offsets only: no record is read, no group joined or committed to.
            assert all(a.startswith("kafka-cluster:") for a in actions), op
            continue
        client = boto3.client(service, region_name="eu-west-1")
        named = NOT_NAMED_AFTER.get((service, op))
        expected = named or f"{IAM_PREFIX[service]}:{client.meta.method_to_api_mapping[op]}"
        assert actions[0] == expected, (service, op)
    kafka = {a for (s, _), acts in tables.items() if s == "kafka" for a in acts}
    assert kafka == {"kafka-cluster:Connect", "kafka-cluster:DescribeTopic",
                     "kafka-cluster:DescribeGroup"}  # fmt: skip


def _by_action(statements: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for action in statement["Action"]:
            out.setdefault(action, []).append(statement)
    return out


def _resources(statements: list[dict[str, Any]], action: str) -> set[str]:
    return {r for s in _by_action(statements)[action] for r in s["Resource"]}


def _in_account(service: str) -> str:
    """How a rendered ARN of the stack's account and region starts."""
    return f"arn:${{AWS::Partition}}:{service}:${{AWS::Region}}:${{AWS::AccountId}}:"


@pytest.mark.parametrize("which", ["synth", "aurora"])
def test_the_dagster_role_grants_exactly_the_calls_actions(
    which: str, request: pytest.FixtureRequest
):
    s: Synth = request.getfixturevalue(which)
    target = s.stack.settings.spark_target
    statements = s.statements("DagsterRole")
    actions = s.actions("DagsterRole")
    assert actions == dagster_actions(target)
    by_service = {service: {a for a in actions if a.startswith(f"{service}:")}
                  for service in ("s3", "kafka-cluster", "kafkaconnect", "emr-serverless",
                                  "elasticmapreduce", "iam")}  # fmt: skip
    assert by_service["s3"] == {"s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert by_service["kafka-cluster"] == {"kafka-cluster:Connect", "kafka-cluster:DescribeTopic",
                                           "kafka-cluster:DescribeGroup"}  # fmt: skip
    assert by_service["kafkaconnect"] == {
        "kafkaconnect:ListConnectors", "kafkaconnect:DescribeConnector",
        "kafkaconnect:UpdateConnector", "kafkaconnect:DescribeConnectorOperation",
    }  # fmt: skip
    if target == "emr-serverless":
        assert by_service["emr-serverless"] == {
            "emr-serverless:StartJobRun", "emr-serverless:GetJobRun",
            "emr-serverless:GetDashboardForJobRun", "emr-serverless:GetApplication",
            "emr-serverless:CancelJobRun", "emr-serverless:TagResource",
        }  # fmt: skip
        assert by_service["iam"] == {"iam:PassRole"} and not by_service["elasticmapreduce"]
    else:
        assert by_service["elasticmapreduce"] == {
            "elasticmapreduce:DescribeCluster", "elasticmapreduce:AddJobFlowSteps",
            "elasticmapreduce:DescribeStep", "elasticmapreduce:CancelSteps",
        }  # fmt: skip
        assert not by_service["emr-serverless"] and not by_service["iam"]
    assert sum(map(len, by_service.values())) == len(actions)  # no other service
    # Nothing on "*" but what AWS gives no resource type, and nothing granted with a wildcard.
    for statement in statements:
        assert not any("*" in a for a in statement["Action"]), statement
        if "*" in statement["Resource"]:
            assert statement["Resource"] == ["*"]
            assert set(statement["Action"]) <= UNSCOPED_ACTIONS, statement
    assert actions >= UNSCOPED_ACTIONS


def test_the_dagster_role_reaches_only_the_projects_buckets_topics_and_connectors(synth: Synth):
    statements = synth.statements("DagsterRole")
    raw = "${" + synth.logical_id("RawBucket", "AWS::S3::Bucket") + ".Arn}"
    lake = "${" + synth.logical_id("LakeBucket", "AWS::S3::Bucket") + ".Arn}"
    code = f"{lake}/{CODE_PREFIX}/*"
    assert _resources(statements, "s3:ListBucket") == {raw, lake}
    assert _resources(statements, "s3:GetObject") == {
        f"{raw}/cdc-events/*", f"{lake}/{PIPES_MESSAGE_KEYS}", code,
    }  # fmt: skip
    reconcile = f"{lake}/{RECONCILE_KEYS}"
    assert _resources(statements, "s3:PutObject") == {code, reconcile}
    assert _resources(statements, "s3:DeleteObject") == {reconcile}
    # Kafka: the cluster, each captured table's topic and the two groups, by name.
    assert _resources(statements, "kafka-cluster:Connect") == {"${Msk.Arn}"}
    cluster = "${Msk.Arn/[1]}/${Msk.Arn/[2]}"
    kafka = _in_account("kafka")
    cdc = CdcPipelineResource(raw_bucket="raw")
    assert _resources(statements, "kafka-cluster:DescribeTopic") == {
        f"{kafka}topic/{cluster}/{cdc.topic_of(t)}" for t in TABLES
    }
    assert _resources(statements, "kafka-cluster:DescribeGroup") == {
        f"{kafka}group/{cluster}/{group}" for group in (INSPECTOR_GROUP, cdc.sink_consumer_group)
    }
    # MSK Connect: the two connectors, whatever their ids.
    names = (cdc.source_connector_name, cdc.sink_connector_name)
    connect = _in_account("kafkaconnect")
    for action in ("kafkaconnect:DescribeConnector", "kafkaconnect:UpdateConnector"):
        assert _resources(statements, action) == {f"{connect}connector/{n}/*" for n in names}
    assert _resources(statements, "kafkaconnect:DescribeConnectorOperation") == {
        f"{connect}connector-operation/{n}/*" for n in names
    }


def test_emr_serverless_runs_only_on_the_application_with_only_the_job_role(synth: Synth):
    statements = synth.statements("DagsterRole")
    app = _in_account("emr-serverless") + "/applications/${EmrServerless.ApplicationId}"
    for action in ("emr-serverless:StartJobRun", "emr-serverless:GetApplication"):
        assert _resources(statements, action) == {app}
    for action in ("emr-serverless:GetJobRun", "emr-serverless:GetDashboardForJobRun",
                   "emr-serverless:CancelJobRun", "emr-serverless:TagResource"):  # fmt: skip
        assert _resources(statements, action) == {f"{app}/jobruns/*"}
    (pass_role,) = _by_action(statements)["iam:PassRole"]
    job_role = synth.logical_id("EmrJobRole", "AWS::IAM::Role")
    assert pass_role["Action"] == ["iam:PassRole"]
    assert pass_role["Resource"] == ["${" + job_role + ".Arn}"]
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
    }


def test_the_cluster_variant_adds_steps_only_to_a_cluster_tagged_for_the_stack(aurora: Synth):
    statements = aurora.statements("DagsterRole")
    (emr,) = [s for s in statements if any(a.startswith("elasticmapreduce:") for a in s["Action"])]
    assert emr["Resource"] == [_in_account("elasticmapreduce") + "cluster/*"]
    assert emr["Condition"] == {
        "StringEquals": {f"elasticmapreduce:ResourceTag/{EMR_CLUSTER_TAG}": "${AWS::StackName}"}
    }
    lake = "${" + aurora.logical_id("LakeBucket", "AWS::S3::Bucket") + ".Arn}"
    assert f"{lake}/{EMR_LOG_PREFIX}*/steps/*" in _resources(statements, "s3:GetObject")


def test_the_pipes_message_keys_are_the_ones_dagster_aws_reads():
    read: list[str] = []

    class Client:  # records the keys the reader asks for
        def get_object(self, Bucket: str, Key: str) -> Any:
            read.append(Key)
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")

        head_object = get_object

    reader = PipesS3MessageReader(bucket="lake", client=Client())
    with reader.get_params() as params:
        reader.messages_are_readable(params)
        reader.download_messages_chunk(12, params)
    assert len(read) == 2
    assert all(fnmatch.fnmatchcase(key, PIPES_MESSAGE_KEYS) for key in read), read
    # Not the lake's tables, nor the code.
    for key in ("lake/cdc_events/.hoodie/timeline/20260101000000000_1.commit",
                "lake/cdc_events/.hoodie/hoodie.properties", f"{CODE_PREFIX}/0a1b/entry.py",
                "marts/order_items_figures/part-0.json"):  # fmt: skip
        assert not fnmatch.fnmatchcase(key, PIPES_MESSAGE_KEYS), key


def test_the_trusted_principal_and_the_instance_profile(synth: Synth, aurora: Synth):
    def trust(s: Synth) -> Any:
        role = s.template["Resources"][s.logical_id("DagsterRole", "AWS::IAM::Role")]
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Action"] == "sts:AssumeRole" and "Condition" not in statement
        return statement["Principal"]

    assert trust(synth) == {"Service": "ecs-tasks.amazonaws.com"}
    assert trust(aurora) == {"Service": "ec2.amazonaws.com"}
    profiles = [p["Properties"]["Roles"]
                for p in aurora.of_type("AWS::IAM::InstanceProfile").values()]  # fmt: skip
    assert [{"Ref": aurora.logical_id("DagsterRole", "AWS::IAM::Role")}] in profiles
    assert len(synth.of_type("AWS::IAM::InstanceProfile")) == 0
    assert isinstance(trusted_principal("123456789012"), iam.AccountPrincipal)
    assert isinstance(trusted_principal("arn:aws:iam::123456789012:role/ops"), iam.ArnPrincipal)
    with pytest.raises(ValueError, match="dagster_principal='ecs'"):
        trusted_principal("ecs")


def test_the_role_arn_is_an_output_but_no_variable(synth: Synth, aurora: Synth):
    for s, extra in ((synth, set()), (aurora, {"DAGSTER_INSTANCE_PROFILE_ARN"})):
        named = {o["Description"].removeprefix(OUTPUT_PREFIX): o["Value"]
                 for o in s.template["Outputs"].values()}  # fmt: skip
        role = s.logical_id("DagsterRole", "AWS::IAM::Role")
        assert named["DAGSTER_ROLE_ARN"] == {"Fn::GetAtt": [role, "Arn"]}
        assert {n for n in named if n.startswith("DAGSTER_") and "ARN" in n} == {
            "DAGSTER_ROLE_ARN"
        } | extra


def test_docs_name_every_action_of_the_role():
    documented = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
    for target in TARGETS:
        for action in dagster_actions(target):
            assert action.split(":")[1] in documented, action
