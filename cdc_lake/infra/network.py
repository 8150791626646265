"""The stack's networking: its VPC with private subnets (or an existing one, by ids), and the
security group of each client."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdc_lake.infra.settings import InfraSettings


def network(scope: Construct, settings: InfraSettings) -> ec2.IVpc:
    s = settings
    if s.vpc_id:
        return ec2.Vpc.from_vpc_attributes(
            scope,
            "Vpc",
            vpc_id=s.vpc_id,
            availability_zones=list(s.availability_zones),
            private_subnet_ids=list(s.private_subnet_ids),
            private_subnet_route_table_ids=list(s.private_route_table_ids) or None,
        )
    vpc = ec2.Vpc(
        scope,
        "Vpc",
        max_azs=2,
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        ],
    )
    vpc.add_flow_log("FlowLog")
    return vpc


def security_group(scope: Construct, vpc: ec2.IVpc, name: str, who: str) -> ec2.SecurityGroup:
    return ec2.SecurityGroup(
        scope, f"{name}Sg", vpc=vpc, description=f"cdc-lake: {who}", allow_all_outbound=True
    )
