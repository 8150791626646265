"""The part of the stack moto can create, deployed to moto's server from the synthesised
template; then the production settings read from its outputs, and the prod resources' clients
using what it made.

moto's CloudFormation creates the buckets (with their encryption), the IAM roles and their
policies (evaluating the intrinsic functions that scope them), and the log groups. It has no
model for the Glue database, the Secrets Manager secret or the bucket policies: the first two
are created from their template properties through moto's Glue and Secrets Manager APIs, the
bucket policies are not exercised here (test_stack checks them in the template). Everything
else (VPC, RDS, MSK, EMR Serverless) has no moto model that CloudFormation deploys: references
to it become ARN-shaped placeholders, and outputs that need it are left out.
"""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import string
from typing import Any

import boto3
import pytest

from cdc_lake.infra.outputs import OUTPUT_PREFIX
from cdc_lake.resources.prod import ProdSettings, prod_resources
from cdc_lake_tests.infra.conftest import Synth

REGION = "us-east-1"
BY_CLOUDFORMATION = {"AWS::S3::Bucket", "AWS::IAM::Role", "AWS::IAM::Policy",
                     "AWS::Logs::LogGroup"}  # fmt: skip
BY_API = {"AWS::Glue::Database", "AWS::SecretsManager::Secret"}


def _references(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        if "Ref" in node:
            found.add(node["Ref"])
        if "Fn::GetAtt" in node:
            found.add(node["Fn::GetAtt"][0])
        for value in node.values():
            _references(value, found)
    elif isinstance(node, list):
        for value in node:
            _references(value, found)
    return found


def _placeholders(node: Any, absent: set[str]) -> Any:
    """References to resources not deployed, as ARN-shaped text (IAM wants ARNs)."""
    if isinstance(node, dict):
        if node.get("Ref") in absent:
            return f"arn:aws:cloudformation:{REGION}:123456789012:not-deployed/{node['Ref']}"
        if "Fn::GetAtt" in node and node["Fn::GetAtt"][0] in absent:
            # Shaped like an MSK cluster's ARN: the Connect role's topic ARNs split it.
            return f"arn:aws:kafka:{REGION}:123456789012:cluster/{node['Fn::GetAtt'][0]}/uuid"
        return {k: _placeholders(v, absent) for k, v in node.items()}
    if isinstance(node, list):
        return [_placeholders(v, absent) for v in node]
    return node


def moto_part(template: dict[str, Any]) -> dict[str, Any]:
    """The template's resources moto's CloudFormation creates, and the outputs they give."""
    kept = {k for k, r in template["Resources"].items() if r["Type"] in BY_CLOUDFORMATION}
    absent = set(template["Resources"]) - kept
    resources = {}
    for name in kept:
        resource = copy.deepcopy(template["Resources"][name])
        resource.pop("Metadata", None)
        depends = resource.pop("DependsOn", [])
        depends = [d for d in ([depends] if isinstance(depends, str) else depends) if d in kept]
        if depends:
            resource["DependsOn"] = depends
        resources[name] = _placeholders(resource, absent)
    outputs = {k: o for k, o in template["Outputs"].items()
               if not _references(o["Value"], set()) & absent}  # fmt: skip
    return {"Resources": resources, "Outputs": outputs}


@pytest.fixture
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """boto3's default chain pointed at moto (as the prod resources will use it)."""
    for name, value in {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
                        "AWS_SESSION_TOKEN": "testing"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    # A session of its own: boto3's default one would keep these keys for later tests.
    session = boto3.Session(region_name=REGION)
    return {n: session.client(n)
            for n in ("cloudformation", "s3", "iam", "glue", "secretsmanager", "logs")}  # fmt: skip


def test_the_stack_deployed_to_moto_gives_the_prod_settings_and_resources(
    synth: Synth, aws: dict[str, Any]
):
    template = synth.template
    stack = f"cdc-lake-{secrets.token_hex(3)}"
    aws["cloudformation"].create_stack(
        StackName=stack, TemplateBody=json.dumps(moto_part(template)),
        Capabilities=["CAPABILITY_IAM"],
    )  # fmt: skip
    (deployed,) = aws["cloudformation"].describe_stacks(StackName=stack)["Stacks"]
    assert deployed["StackStatus"] == "CREATE_COMPLETE", deployed.get("StackStatusReason")
    # What moto's CloudFormation has no model for, from the template's own properties.
    for logical_id, resource in template["Resources"].items():
        props = resource["Properties"]
        # moto's server is the session's: another test may have made the same names.
        if resource["Type"] == "AWS::Glue::Database":
            glue = aws["glue"]
            with contextlib.suppress(glue.exceptions.AlreadyExistsException):
                glue.create_database(DatabaseInput=props["DatabaseInput"])
        elif resource["Type"] == "AWS::SecretsManager::Secret":
            generate = props["GenerateSecretString"]
            value = json.loads(generate["SecretStringTemplate"])
            value[generate["GenerateStringKey"]] = "".join(
                secrets.choice(string.ascii_letters + string.digits) for _ in range(32)
            )
            name = props.get("Name", f"{stack}/{logical_id}")  # the admin's: a generated name
            sm = aws["secretsmanager"]
            try:
                sm.create_secret(Name=name, SecretString=json.dumps(value))
            except sm.exceptions.ResourceExistsException:
                sm.put_secret_value(SecretId=name, SecretString=json.dumps(value))
    assert {r["Type"] for r in template["Resources"].values()} >= BY_API

    outputs = {o["Description"].removeprefix(OUTPUT_PREFIX): o["OutputValue"]
               for o in deployed["Outputs"]}  # fmt: skip
    assert outputs["CDC_LAKE_RAW_BUCKET"] != outputs["CDC_LAKE_LAKE_BUCKET"]
    # The deployed buckets, encrypted as declared.
    for name in ("CDC_LAKE_RAW_BUCKET", "CDC_LAKE_LAKE_BUCKET"):
        rules = aws["s3"].get_bucket_encryption(Bucket=outputs[name])
        (rule,) = rules["ServerSideEncryptionConfiguration"]["Rules"]
        assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    # The Connect role, trusted by MSK Connect, scoped to the deployed raw bucket and topics.
    scoped = deployed_role(aws["iam"], outputs["CDC_LAKE_MSK_CONNECT_ROLE_ARN"],
                           "kafkaconnect.amazonaws.com")  # fmt: skip
    assert f"arn:aws:s3:::{outputs['CDC_LAKE_RAW_BUCKET']}/cdc-events/*" in scoped
    assert "topic/Msk/uuid/cdc.datalake.*" in scoped
    # The Dagster role, an ECS task role, scoped to the deployed buckets.
    scoped = deployed_role(aws["iam"], outputs["DAGSTER_ROLE_ARN"], "ecs-tasks.amazonaws.com")
    assert f"arn:aws:s3:::{outputs['CDC_LAKE_LAKE_BUCKET']}/cdc-lake/code/*" in scoped
    assert f"arn:aws:s3:::{outputs['CDC_LAKE_RAW_BUCKET']}/cdc-events/*" in scoped
    assert aws["logs"].describe_log_groups(logGroupNamePrefix=outputs["CDC_LAKE_MSK_LOG_GROUP"])[
        "logGroups"
    ]

    # The production settings from the outputs; what moto cannot deploy, from the deployment.
    not_deployed = {
        "CDC_LAKE_PG_HOST": "db.internal", "CDC_LAKE_PG_USER": "app",
        "CDC_LAKE_KAFKA_BOOTSTRAP": "b-1.msk:9098", "CDC_LAKE_MSK_SUBNETS": "subnet-a",
        "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-a",
        "CDC_LAKE_REPLICATION_SECRET": "cdc-lake/replication",
        "CDC_LAKE_EMR_SERVERLESS_APP_ID": "app-id",
    }  # fmt: skip
    env = {k: v for k, v in outputs.items() if k.startswith("CDC_LAKE_")} | not_deployed
    settings = ProdSettings.from_env(env)
    assert settings.lake_bucket == outputs["CDC_LAKE_LAKE_BUCKET"]
    resources = prod_resources(env)
    # The prod resources' own clients reach what the stack made.
    s3 = resources["s3"].get_client()
    s3.put_object(Bucket=outputs["CDC_LAKE_RAW_BUCKET"], Key="cdc-events/probe.jsonl", Body=b"{}")
    listed = s3.list_objects_v2(Bucket=outputs["CDC_LAKE_RAW_BUCKET"], Prefix="cdc-events/")
    assert [o["Key"] for o in listed["Contents"]] == ["cdc-events/probe.jsonl"]
    database = aws["glue"].get_database(Name=outputs["CDC_LAKE_GLUE_DATABASE"])["Database"]
    assert database["Name"] == resources["lake"].glue_database == "datalake"
    assert settings.msk is not None
    secret = aws["secretsmanager"].get_secret_value(SecretId=settings.msk.db_secret)
    assert set(json.loads(secret["SecretString"])) == {settings.msk.db_secret_key}


def deployed_role(iam: Any, arn: str, service: str) -> str:
    """The deployed role's one inline policy as JSON text, once its trust names ``service``."""
    role = arn.rsplit("/", 1)[1]
    trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": service}
    (policy,) = iam.list_role_policies(RoleName=role)["PolicyNames"]
    document = iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"]
    return json.dumps(document["Statement"])
