"""The production stack (``cdc_lake/infra/stack.py``) synthesised offline on the machine's
Node.js: cdk-nag's AwsSolutions pack and cfn-lint pass, it holds what ``docs/deploy.md``
lists, and its outputs are an environment the prod resources and ``cdc-lake msk deploy`` take."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.infra.app import settings_from_context
from cdc_lake.infra.dagster_calls import UNSCOPED_ACTIONS
from cdc_lake.infra.outputs import OUTPUT_PREFIX
from cdc_lake.infra.settings import EMR_RELEASE
from cdc_lake.resources.prod import ProdSettings, msk_deploy_settings
from cdc_lake.streaming.msk.settings import SALT_KEY, MskConnectSettings
from cdc_lake_tests.infra.conftest import SUBNETS, Synth


@pytest.mark.parametrize("which", ["synth", "aurora"])
def test_cdk_nag_and_cfn_lint_pass(which: str, request: pytest.FixtureRequest):
    s: Synth = request.getfixturevalue(which)
    findings = [m for m in s.messages if m[0] in ("aws:cdk:error", "aws:cdk:warning")]
    assert not findings, findings
    # Each finding kept is suppressed in code, with its reason.
    kept = [
        rule
        for r in s.template["Resources"].values()
        for rule in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert kept and all(len(rule["reason"]) >= 40 for rule in kept), kept
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), str(s.path)],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_cdk_assertions_on_the_template(synth: Synth):
    from aws_cdk.assertions import Match, Template

    template = Template.from_stack(synth.stack)
    template.has_resource_properties(
        "AWS::RDS::DBParameterGroup",
        {"Parameters": Match.object_like({"rds.logical_replication": "1"})},
    )
    template.all_resources_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": Match.any_value(),
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True, "BlockPublicPolicy": True,
                "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
            },
        },
    )  # fmt: skip
    # No security group takes anything from anywhere: every rule names a source group.
    for group in template.find_resources("AWS::EC2::SecurityGroup").values():
        assert "0.0.0.0/0" not in json.dumps(group["Properties"].get("SecurityGroupIngress"))
    for rule in template.find_resources("AWS::EC2::SecurityGroupIngress").values():
        assert "CidrIp" not in rule["Properties"] and rule["Properties"]["SourceSecurityGroupId"]
    # Every IAM statement names its resources: no bare "*" but for the actions AWS gives no
    # resource type (stack.py says why).
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources, actions = statement["Resource"], statement["Action"]
            if "*" in (resources if isinstance(resources, list) else [resources]):
                assert resources == "*", statement
                assert ({actions} if isinstance(actions, str) else set(actions)) <= UNSCOPED_ACTIONS


def test_the_database_is_set_up_for_logical_replication_and_reached_only_by_its_clients(
    synth: Synth,
):
    params = synth.one("AWS::RDS::DBParameterGroup")["Parameters"]
    assert params == {"rds.logical_replication": "1", "max_replication_slots": "10",
                      "max_wal_senders": "10", "wal_sender_timeout": "0",
                      "max_slot_wal_keep_size": "4096"}  # fmt: skip
    db = synth.one("AWS::RDS::DBInstance")
    assert db["StorageEncrypted"] is True and db["DeletionProtection"] is True
    assert db["EngineVersion"].startswith("16") and db["MultiAZ"] is True
    ingress = {
        (r["Properties"]["GroupId"]["Fn::GetAtt"][0], r["Properties"]["FromPort"],
         r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0])
        for r in synth.of_type("AWS::EC2::SecurityGroupIngress").values()
    }  # fmt: skip
    names = ("DatabaseSg", "MskSg", "ConnectWorkersSg", "EmrSg", "DagsterSg")
    sg = {name: synth.logical_id(name, "AWS::EC2::SecurityGroup") for name in names}
    assert ingress == {
        (sg["DatabaseSg"], 5432, sg["ConnectWorkersSg"]),
        (sg["DatabaseSg"], 5432, sg["DagsterSg"]),
        (sg["MskSg"], 9098, sg["ConnectWorkersSg"]),
        (sg["MskSg"], 9098, sg["EmrSg"]),
        (sg["MskSg"], 9098, sg["DagsterSg"]),
    }
    for group in synth.of_type("AWS::EC2::SecurityGroup").values():
        assert "SecurityGroupIngress" not in group["Properties"]  # nothing else gets in


def test_aurora_takes_the_same_parameters_on_its_cluster(aurora: Synth):
    params = aurora.one("AWS::RDS::DBClusterParameterGroup")["Parameters"]
    assert params["rds.logical_replication"] == "1" and params["wal_sender_timeout"] == "0"
    assert aurora.one("AWS::RDS::DBCluster")["Engine"] == "aurora-postgresql"
    assert not aurora.of_type("AWS::EC2::VPC")  # the existing VPC, by ids
    assert aurora.one("AWS::MSK::Cluster")["BrokerNodeGroupInfo"]["ClientSubnets"] == SUBNETS


def test_msk_takes_iam_over_tls_only_and_creates_no_topic_by_itself(synth: Synth):
    cluster = synth.one("AWS::MSK::Cluster")
    auth = cluster["ClientAuthentication"]
    assert auth["Sasl"]["Iam"]["Enabled"] is True and auth["Unauthenticated"]["Enabled"] is False
    assert cluster["EncryptionInfo"]["EncryptionInTransit"]["ClientBroker"] == "TLS"
    assert cluster["LoggingInfo"]["BrokerLogs"]["CloudWatchLogs"]["Enabled"] is True
    properties = synth.one("AWS::MSK::Configuration")["ServerProperties"]
    assert "auto.create.topics.enable=false" in properties.splitlines()


def test_the_connect_role_has_exactly_the_documented_permissions(synth: Synth):
    documented = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
    actions = synth.actions("ConnectRole")
    assert actions == {
        "kafka-cluster:Connect", "kafka-cluster:DescribeCluster", "kafka-cluster:ReadData",
        "kafka-cluster:WriteData", "kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic",
        "kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup", "s3:PutObject",
        "s3:ListBucket", "secretsmanager:GetSecretValue",
    }  # fmt: skip
    for action in actions:
        assert action.split(":")[1] in documented, action


def test_the_column_salt_is_generated_into_a_secret_only_the_connect_role_reads(synth: Synth):
    """The salt of hashed columns and fields: generated by Secrets Manager (never a value in the
    template), under the name the connector's reference uses, readable by the Connect role."""
    secrets = {k: r["Properties"] for k, r in synth.of_type("AWS::SecretsManager::Secret").items()}
    salt_id = synth.logical_id("ColumnSaltSecret", "AWS::SecretsManager::Secret")
    salt = secrets[salt_id]
    assert salt["Name"] == MskConnectSettings.salt_secret
    generated = salt["GenerateSecretString"]
    assert generated["GenerateStringKey"] == SALT_KEY and generated["PasswordLength"] >= 32
    assert generated["SecretStringTemplate"] == "{}" and "SecretString" not in salt
    msk = MskConnectSettings("r", "b-1.msk:9098", ("s",), ("g",), "arn:role", "bucket")
    assert msk.column_salt_ref == f"${{secretsmanager:{salt['Name']}:{SALT_KEY}}}"
    reads = [st for st in synth.statements("ConnectRole")
             if st["Action"] == ["secretsmanager:GetSecretValue"]]  # fmt: skip
    assert {r for st in reads for r in st["Resource"]} == {
        "${" + salt_id + "}", "${" + synth.logical_id("ReplicationSecret",
                                                      "AWS::SecretsManager::Secret") + "}"
    }  # fmt: skip


def test_buckets_are_private_encrypted_tls_only_and_raw_objects_expire_when_asked(
    synth: Synth, aurora: Synth
):
    buckets = synth.of_type("AWS::S3::Bucket")
    assert len(buckets) == 3
    for bucket in buckets.values():
        p = bucket["Properties"]
        assert p["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert set(p["PublicAccessBlockConfiguration"].values()) == {True}
    for policy in synth.of_type("AWS::S3::BucketPolicy").values():
        (deny,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                   if s["Effect"] == "Deny"]  # fmt: skip
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert not any("LifecycleConfiguration" in b["Properties"] for b in buckets.values())
    raw = aurora.template["Resources"][aurora.logical_id("RawBucket", "AWS::S3::Bucket")]
    (rule,) = raw["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 30


def test_emr_serverless_runs_the_emr_7_release_with_a_scoped_job_role(
    synth: Synth, aurora: Synth
):
    import pyspark

    app = synth.one("AWS::EMRServerless::Application")
    assert app["ReleaseLabel"] == EMR_RELEASE and app["Type"] == "SPARK"
    assert EMR_RELEASE.startswith("emr-7.") and pyspark.__version__.startswith("3.5.")
    actions = synth.actions("EmrJobRole")
    assert {"s3:GetObject", "s3:PutObject", "glue:UpdateTable"} <= actions
    assert not any(a.endswith("*") for a in actions)
    # The running-cluster launcher: no application, an instance profile for your cluster.
    assert not aurora.of_type("AWS::EMRServerless::Application")
    assert aurora.of_type("AWS::IAM::InstanceProfile")


def _value(name: str, spec: Any) -> str:
    """A deployed value for an output: its literal, or a plausible one for a token."""
    if isinstance(spec, str):
        return spec
    if name.endswith("_ARN"):
        return f"arn:aws:iam::123456789012:role/{name.lower()}"
    if name == "CDC_LAKE_AWS_REGION":
        return "eu-west-1"
    if name == "CDC_LAKE_MSK_SUBNETS":
        return "subnet-a,subnet-b"
    return f"{name.lower().replace('_', '-')}-value"


def test_the_outputs_are_an_environment_the_prod_resources_and_msk_deploy_take(synth: Synth):
    outputs = synth.template["Outputs"]
    named = {o["Description"].removeprefix(OUTPUT_PREFIX): o["Value"] for o in outputs.values()}
    env = {n: _value(n, v) for n, v in named.items() if n.startswith("CDC_LAKE_")}
    # What `cdc-lake aws env` adds (the brokers, from MSK) and the deployment sets itself.
    env |= {"CDC_LAKE_KAFKA_BOOTSTRAP": "b-1.msk:9098,b-2.msk:9098", "CDC_LAKE_PG_USER": "app"}
    settings = ProdSettings.from_env(env)  # raises, naming each missing variable
    assert settings.spark_target == "emr-serverless"
    msk, source = msk_deploy_settings(env)
    assert msk.plugin_bucket == env["CDC_LAKE_MSK_PLUGIN_BUCKET"]
    assert named["CDC_LAKE_MSK_PLUGIN_BUCKET"] == named["CDC_LAKE_LAKE_BUCKET"]  # one bucket
    assert source.raw_prefix == env["CDC_LAKE_RAW_PREFIX"] == "cdc-events/"
    assert not [n for n in env if "PASSWORD" in n]  # no secret is an output


def test_unknown_context_is_refused():
    with pytest.raises(ValueError, match="unknown stack settings: colour"):
        settings_from_context({"colour": "blue"})


def test_the_app_runs_as_the_cdk_cli_runs_it(tmp_path: Path):
    """``cdk deploy --app "python -m cdc_lake.infra.app" -c ...``: the CLI passes the context
    and the output folder in the environment."""
    import os

    env = os.environ | {"CDK_OUTDIR": str(tmp_path),
                        "CDK_CONTEXT_JSON": json.dumps({"stack_name": "lake-test",
                                                        "database": "aurora"})}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "cdc_lake.infra.app"], env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "!!" not in done.stderr  # jsii's Node.js banner stays quiet
    template = json.loads((tmp_path / "lake-test.template.json").read_text())
    assert any(r["Type"] == "AWS::RDS::DBCluster" for r in template["Resources"].values())
