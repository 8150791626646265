"""The production stack synthesised once per session (``cdc_lake/infra``): the default
settings, and a variant (Aurora, an existing VPC, the running-cluster launcher, raw expiry, the
Dagster role as an EC2 instance profile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_lake.infra.app import build, settings_from_context
from cdc_lake.infra.settings import InfraSettings

SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]


class Synth:
    def __init__(self, settings: InfraSettings, outdir: Path):
        app, self.stack = build(settings, outdir=str(outdir))
        artifact = app.synth().get_stack_by_name(self.stack.stack_name)
        self.template: dict[str, Any] = artifact.template
        self.path = outdir / artifact.template_file
        self.messages = [(m.entry.type, str(m.entry.data), m.id) for m in artifact.messages]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == kind}

    def one(self, kind: str) -> dict[str, Any]:
        (resource,) = self.of_type(kind).values()
        return resource["Properties"]

    def logical_id(self, prefix: str, kind: str) -> str:
        (found,) = [k for k in self.of_type(kind) if k.startswith(prefix)]
        return found

    def statements(self, role_prefix: str) -> list[dict[str, Any]]:
        """The statements of the role's inline policies, intrinsics rendered (``render``),
        ``Action`` and ``Resource`` always lists."""
        role = self.logical_id(role_prefix, "AWS::IAM::Role")
        out = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role} in policy["Properties"]["Roles"]:
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    rendered = render(statement)
                    for key in ("Action", "Resource"):
                        if isinstance(rendered[key], str):
                            rendered[key] = [rendered[key]]
                    out.append(rendered)
        return out

    def actions(self, role_prefix: str) -> set[str]:
        return {a for statement in self.statements(role_prefix) for a in statement["Action"]}


def render(node: Any) -> Any:
    """CloudFormation intrinsics as readable text: ``${Logical.Attr}``, ``${AWS::Region}``, a
    join joined, ``${Msk.Arn/[1]}`` for the second "/"-part of an attribute."""
    if isinstance(node, list):
        return [render(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "Ref" in node:
        return "${" + node["Ref"] + "}"
    if "Fn::GetAtt" in node:
        return "${" + ".".join(node["Fn::GetAtt"]) + "}"
    if "Fn::Join" in node:
        separator, parts = node["Fn::Join"]
        return separator.join(render(p) for p in parts)
    if "Fn::Select" in node:
        index, (separator, source) = node["Fn::Select"][0], node["Fn::Select"][1]["Fn::Split"]
        return "${" + render(source).strip("${}") + f"{separator}[{index}]" + "}"
    return {k: render(v) for k, v in node.items()}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return Synth(InfraSettings(), tmp_path_factory.mktemp("cdk"))


@pytest.fixture(scope="session")
def aurora(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    settings = settings_from_context(
        {"database": "aurora", "raw_expiry_days": "30", "spark_target": "emr-step",
         "vpc_id": "vpc-0123456789abcdef0", "availability_zones": "eu-west-1a,eu-west-1b",
         "private_subnet_ids": ",".join(SUBNETS), "private_route_table_ids": "rtb-0a,rtb-0b",
         "dagster_principal": "ec2.amazonaws.com"}
    )  # fmt: skip
    return Synth(settings, tmp_path_factory.mktemp("cdk-aurora"))


