"""The IAM principals the stack's roles trust: AWS services, and the Dagster deployment's
principal as ``InfraSettings.dagster_principal`` names it."""

from __future__ import annotations

from typing import cast

from aws_cdk import aws_iam as iam


def service_principal(name: str) -> iam.IPrincipal:
    # jsii's classes implement its interfaces at run time; pyright cannot see it.
    return cast(iam.IPrincipal, iam.ServicePrincipal(name))


def trusted_principal(value: str) -> iam.IPrincipal:
    """``dagster_principal``: a service principal (``*.amazonaws.com``), an account id (12
    digits), or an ARN (a role or user). Anything else raises ValueError."""
    if value.endswith(".amazonaws.com"):
        return service_principal(value)
    if len(value) == 12 and value.isdigit():
        return cast(iam.IPrincipal, iam.AccountPrincipal(value))
    if value.startswith("arn:"):
        return cast(iam.IPrincipal, iam.ArnPrincipal(value))
    raise ValueError(
        f"dagster_principal={value!r} is neither a service (ecs-tasks.amazonaws.com), an "
        "account id (12 digits) nor an ARN"
    )
