"""The part of the stack moto can create, deployed to moto's server from the synthesised
template; then the production settings read from its outputs, and the prod resources' clients
using what it made.

moto's CloudFormation creates the buckets (with their encryption), the IAM roles and their
policies (evaluating the intrinsic functions that scope them), and the log groups. It has no
model for the Glue database, the Secrets Manager secret, the EMR Serverless application or the
bucket policies: the first three are created from their template properties through moto's
APIs, the bucket policies are not exercised here (test_stack checks them in the template).
Everything else (VPC, RDS, MSK) has no moto model: references to it become ARN-shaped
placeholders, and outputs that need it are left out (``NOT_DEPLOYED`` gives their variables).

Then the refresh runs as an EMR Serverless job run with the launcher the prod resources build
from the deployed stack's outputs (application, job role, log URI, code and Pipes bucket):
moto's server plays the control plane and ``EmrSimulator`` runs the job on local Spark. S3 is
the local stack's S3 server there (the simulated job's Spark reads it), with the stack's lake
bucket made on it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import secrets
import string
from typing import Any

import boto3
import dagster as dg
import pytest

from bench.outbox import cdc_events_hudi
from bench.synthetic import event
from cdc_lake.infra.outputs import named_outputs
from cdc_lake.resources.prod import (
    EMR_SERVERLESS,
    ProdSettings,
    prod_resources,
    prod_spark_launcher,
)
from cdc_lake.resources.spark import EmrServerlessLauncher
from cdc_lake.stack import LocalStack
from cdc_lake_tests.aws.conftest import REGION, synthetic_lake, synthetic_resources
from cdc_lake_tests.aws.emr_sim import EmrSimulator
from cdc_lake_tests.infra.conftest import Synth

BY_CLOUDFORMATION = {"AWS::S3::Bucket", "AWS::IAM::Role", "AWS::IAM::Policy",
                     "AWS::Logs::LogGroup"}  # fmt: skip
BY_API = {"AWS::Glue::Database", "AWS::SecretsManager::Secret", "AWS::EMRServerless::Application"}


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
    moto = {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}  # fmt: skip
    for name, value in moto.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    # A session of its own: boto3's default one would keep these keys for later tests.
    session = boto3.Session(region_name=REGION)
    return {n: session.client(n)
            for n in ("cloudformation", "s3", "iam", "glue", "secretsmanager", "logs",
                      "emr-serverless")}  # fmt: skip


def _resolved(node: Any, stack: str) -> Any:
    """A property's value with ``AWS::StackName`` and ``Fn::Join`` evaluated."""
    if isinstance(node, dict) and node.get("Ref") == "AWS::StackName":
        return stack
    if isinstance(node, dict) and "Fn::Join" in node:
        separator, parts = node["Fn::Join"]
        return separator.join(_resolved(p, stack) for p in parts)
    return node


def deploy(template: dict[str, Any], aws: dict[str, Any]) -> dict[str, str]:
    """Deploy what moto can of ``template`` as a new stack. Its outputs, by the name each one's
    description gives, with the application moto's API made in place of the output that
    CloudFormation could not give."""
    stack = f"cdc-lake-{secrets.token_hex(3)}"
    aws["cloudformation"].create_stack(
        StackName=stack, TemplateBody=json.dumps(moto_part(template)),
        Capabilities=["CAPABILITY_IAM"],
    )  # fmt: skip
    (deployed,) = aws["cloudformation"].describe_stacks(StackName=stack)["Stacks"]
    assert deployed["StackStatus"] == "CREATE_COMPLETE", deployed.get("StackStatusReason")
    outputs = named_outputs(deployed["Outputs"])
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
                secrets.choice(string.ascii_letters + string.digits)
                for _ in range(generate.get("PasswordLength", 32))
            )
            name = props.get("Name", f"{stack}/{logical_id}")  # the admin's: a generated name
            sm = aws["secretsmanager"]
            try:
                sm.create_secret(Name=name, SecretString=json.dumps(value))
            except sm.exceptions.ResourceExistsException:
                sm.put_secret_value(SecretId=name, SecretString=json.dumps(value))
        elif resource["Type"] == "AWS::EMRServerless::Application":
            # The output that names it referred to the undeployed application: set it here.
            declared = named_outputs(template["Outputs"].values(), value="Value")
            assert _references(declared["CDC_LAKE_EMR_SERVERLESS_APP_ID"], set()) == {logical_id}
            outputs["CDC_LAKE_EMR_SERVERLESS_APP_ID"] = aws["emr-serverless"].create_application(
                name=_resolved(props["Name"], stack), releaseLabel=props["ReleaseLabel"],
                type=props["Type"],
            )["applicationId"]  # fmt: skip
    assert {r["Type"] for r in template["Resources"].values()} >= BY_API
    return outputs


# What moto cannot deploy (the database, MSK and its subnets), as a deployment would give it.
NOT_DEPLOYED = {
    "CDC_LAKE_PG_HOST": "db.internal", "CDC_LAKE_PG_USER": "app",
    "CDC_LAKE_KAFKA_BOOTSTRAP": "b-1.msk:9098", "CDC_LAKE_MSK_SUBNETS": "subnet-a",
    "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-a",
    "CDC_LAKE_REPLICATION_SECRET": "cdc-lake/replication",
    "CDC_LAKE_COLUMN_SALT_SECRET": "cdc-lake/column-salt",
}  # fmt: skip


def prod_env(outputs: dict[str, str]) -> dict[str, str]:
    """The deployment's environment: the stack's ``CDC_LAKE_*`` outputs and ``NOT_DEPLOYED``."""
    return {k: v for k, v in outputs.items() if k.startswith("CDC_LAKE_")} | NOT_DEPLOYED


def test_the_stack_deployed_to_moto_gives_the_prod_settings_and_resources(
    synth: Synth, aws: dict[str, Any]
):
    outputs = deploy(synth.template, aws)
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
    env = prod_env(outputs)
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
    # The salt of hashed columns: generated, in the secret the connector's reference names.
    assert settings.msk.salt_secret == env["CDC_LAKE_COLUMN_SALT_SECRET"]
    salt = aws["secretsmanager"].get_secret_value(SecretId=settings.msk.salt_secret)
    (value,) = json.loads(salt["SecretString"]).values()
    assert set(json.loads(salt["SecretString"])) == {"column_salt"} and len(value) >= 32
    assert settings.msk.salt_secret in resources["cdc"].column_salt_ref
    # The application the settings name is the one made from the template.
    app = aws["emr-serverless"].get_application(applicationId=settings.spark["application_id"])
    assert app["application"]["name"].endswith("-spark")


def test_the_refresh_runs_on_emr_serverless_with_the_deployed_stacks_settings(
    synth: Synth, aws: dict[str, Any], local_stack: LocalStack, secret_env, monkeypatch
):
    import moto.emrserverless.models as serverless_models

    # moto makes every job run SUCCESS at once; EMR starts them SCHEDULED. The simulator runs
    # SCHEDULED ones and gives them the state EMR would.
    monkeypatch.setattr(serverless_models, "JOB_STATUS", "SCHEDULED")
    outputs = deploy(synth.template, aws)
    env = prod_env(outputs)
    settings = ProdSettings.from_env(env)
    assert settings.spark_target == EMR_SERVERLESS  # the stack's default target
    launcher = prod_resources(env)["spark_jobs"]
    assert isinstance(launcher, EmrServerlessLauncher)
    # Where AWS is, here: moto's control plane; S3 is the local S3 server, holding the stack's
    # lake bucket (the code and the Pipes messages go there, as in production). The lake table
    # is the synthetic one of the local resources: only the launcher comes from the stack.
    s = local_stack.settings
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # the local S3 server's, for Spark
        monkeypatch.setenv(name, secret_env[name])
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake_bucket = outputs["CDC_LAKE_LAKE_BUCKET"]
    s3.create_bucket(Bucket=lake_bucket)
    here = {"endpoint_url": aws["emr-serverless"].meta.endpoint_url,
            "s3_endpoint_url": s.s3_endpoint, "poll_interval_s": 0.5}  # fmt: skip
    jobs = prod_spark_launcher(dataclasses.replace(settings, spark=settings.spark | here))
    # The prod resources' launcher but for where AWS is.
    assert jobs.model_dump() == launcher.model_dump() | here
    syn = synthetic_lake(local_stack)
    syn.put([event(7, 100, 1), event(8, 100, 2), event(7, 50, 0, op="d", deleted=True)])
    resources = synthetic_resources(local_stack, syn, jobs)
    with EmrSimulator(s, s3, REGION) as sim:
        result = dg.materialize([cdc_events_hudi], resources=resources)
    assert result.success and [e.returncode for e in sim.executions] == [0], [
        e.stderr[-3000:] for e in sim.executions
    ]

    # The job ran in the deployed application, as the deployed job role, logging where the
    # stack said.
    client = aws["emr-serverless"]
    app_id = outputs["CDC_LAKE_EMR_SERVERLESS_APP_ID"]
    (run,) = client.list_job_runs(applicationId=app_id)["jobRuns"]
    detail = client.get_job_run(applicationId=app_id, jobRunId=run["id"])["jobRun"]
    assert detail["state"] == "SUCCESS"
    assert detail["executionRole"] == outputs["CDC_LAKE_EMR_EXECUTION_ROLE_ARN"]
    scoped = deployed_role(aws["iam"], detail["executionRole"], "emr-serverless.amazonaws.com")
    assert f"arn:aws:s3:::{lake_bucket}" in scoped
    assert detail["configurationOverrides"]["monitoringConfiguration"] == {
        "s3MonitoringConfiguration": {"logUri": outputs["CDC_LAKE_EMR_LOG_URI"]}
    }
    assert outputs["CDC_LAKE_EMR_LOG_URI"].startswith(f"s3://{lake_bucket}/")
    driver = detail["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"].startswith(f"s3://{lake_bucket}/{launcher.code_prefix}/")
    assert driver["entryPoint"].endswith("/entry.py")
    params = driver["sparkSubmitParameters"]
    assert params.startswith("--jars /usr/lib/hudi/hudi-spark-bundle.jar --py-files s3://")
    assert "spark.emr-serverless.driverEnv.DAGSTER_PIPES_CONTEXT=" in params
    # The app's metadata came back through Pipes messages in the stack's bucket.
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["records_inserted"].value == 2  # the older delete of 7 was ignored
    assert meta["AWS EMR Serverless Job Run ID"].value == run["id"]
    assert s3.list_objects_v2(Bucket=lake_bucket, Prefix=launcher.code_prefix)["KeyCount"] == 2


def deployed_role(iam: Any, arn: str, service: str) -> str:
    """The deployed role's one inline policy as JSON text, once its trust names ``service``."""
    role = arn.rsplit("/", 1)[1]
    trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": service}
    (policy,) = iam.list_role_policies(RoleName=role)["PolicyNames"]
    document = iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"]
    return json.dumps(document["Statement"])
