"""``cdc-lake aws env``: a deployed stack's outputs and its MSK brokers as NAME=value lines,
against the CloudFormation and MSK APIs as botocore stubs (no AWS here)."""

from __future__ import annotations

import argparse
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdc_lake.infra.outputs import OUTPUT_PREFIX, stack_variables
from cdc_lake.ops.aws_cli import cmd_aws_env

CLUSTER = "arn:aws:kafka:eu-west-1:123456789012:cluster/cdc-lake-msk/0123-4567"
BROKERS = "b-1.msk.eu-west-1.amazonaws.com:9098,b-2.msk.eu-west-1.amazonaws.com:9098"


def _clients(
    outputs: list[dict[str, str]], brokers: dict[str, str] | None, stack: str = "cdc-lake"
) -> tuple[Any, Any]:
    cfn = boto3.client("cloudformation", region_name="eu-west-1")
    kafka = boto3.client("kafka", region_name="eu-west-1")
    cfn_stub, kafka_stub = Stubber(cfn), Stubber(kafka)
    cfn_stub.add_response(
        "describe_stacks",
        {"Stacks": [{"StackName": stack, "CreationTime": "2026-11-27T00:00:00Z",
                     "StackStatus": "CREATE_COMPLETE", "Outputs": outputs}]},
        {"StackName": stack},
    )  # fmt: skip
    if brokers is not None:
        kafka_stub.add_response("get_bootstrap_brokers", brokers, {"ClusterArn": CLUSTER})
    cfn_stub.activate()
    kafka_stub.activate()
    return cfn, kafka


def _output(name: str, value: str) -> dict[str, str]:
    return {"OutputKey": name.replace("_", ""), "OutputValue": value,
            "Description": f"{OUTPUT_PREFIX}{name}"}  # fmt: skip


OUTPUTS = [
    _output("CDC_LAKE_RAW_BUCKET", "raw-bucket"),
    _output("CDC_LAKE_PG_HOST", "db.example"),
    _output("MSK_CLUSTER_ARN", CLUSTER),
    _output("DAGSTER_SECURITY_GROUP", "sg-0123"),
    _output("DAGSTER_ROLE_ARN", "arn:aws:iam::123456789012:role/cdc-lake-DagsterRole"),
    {"OutputKey": "Other", "OutputValue": "x", "Description": "not ours"},
]


def test_the_outputs_and_the_iam_brokers_become_variables():
    cfn, kafka = _clients(OUTPUTS, {"BootstrapBrokerStringSaslIam": BROKERS})
    assert stack_variables(cfn, kafka, "cdc-lake") == {
        "CDC_LAKE_KAFKA_BOOTSTRAP": BROKERS,
        "CDC_LAKE_PG_HOST": "db.example",
        "CDC_LAKE_RAW_BUCKET": "raw-bucket",
    }


def test_the_command_prints_env_lines(capsys: pytest.CaptureFixture[str]):
    cfn, kafka = _clients(OUTPUTS, {"BootstrapBrokerStringSaslIam": BROKERS})
    clients = {"cloudformation": cfn, "kafka": kafka}
    args = argparse.Namespace(stack="cdc-lake", region="eu-west-1")
    assert cmd_aws_env(args, client_factory=lambda name, **_: clients[name]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "CDC_LAKE_ENV=prod" and f"CDC_LAKE_KAFKA_BOOTSTRAP={BROKERS}" in lines
    # Outputs that are no variable (the cluster, the Dagster group and role) are not printed.
    assert all(line.startswith("CDC_LAKE_") for line in lines), lines


def test_a_stack_that_is_not_ours_or_a_cluster_without_iam_is_named():
    cfn, kafka = _clients([OUTPUTS[-1]], None, stack="other")
    with pytest.raises(ValueError, match="stack 'other' has no cdc-lake outputs"):
        stack_variables(cfn, kafka, "other")
    cfn, kafka = _clients(OUTPUTS, {"BootstrapBrokerStringTls": "b-1:9094"})
    with pytest.raises(ValueError, match=r"cluster/cdc-lake-msk/0123-4567 has no IAM listener"):
        stack_variables(cfn, kafka, "cdc-lake")
