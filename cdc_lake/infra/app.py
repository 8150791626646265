"""The CDK app: ``npx aws-cdk deploy --app "python -m cdc_lake.infra.app"`` (the CDK CLI from
npm deploys; synthesis needs only this package). Choices come from CDK context
(``-c database=aurora``, ``-c raw_expiry_days=30``, ``-c vpc_id=...``; see ``InfraSettings``),
and the stack's name from ``-c stack_name=...`` (default ``cdc-lake``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from cdc_lake.infra.settings import InfraSettings
from cdc_lake.infra.stack import CdcLakeStack

DEFAULT_STACK = "cdc-lake"
# CDK feature flags this app takes (new projects' defaults): access logs are delivered under a
# bucket policy, not the legacy LogDeliveryWrite ACL.
FEATURE_FLAGS = {"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True}


def settings_from_context(context: Mapping[str, Any]) -> InfraSettings:
    """``InfraSettings`` from CDK context values (strings from ``-c``), refusing unknown keys."""
    fields = {f.name: f for f in dataclasses.fields(InfraSettings)}
    unknown = sorted(set(context) - set(fields) - {"stack_name"})
    if unknown:
        raise ValueError(f"unknown stack settings: {', '.join(unknown)}; known: {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, value in context.items():
        if name == "stack_name":
            continue
        default = fields[name].default
        if isinstance(default, bool):
            value = str(value).lower() in ("1", "true", "yes")
        elif name in ("slot_wal_keep_mb", "raw_expiry_days"):
            value = int(value)
        elif name in ("availability_zones", "private_subnet_ids", "private_route_table_ids"):
            value = tuple(v.strip() for v in str(value).split(",") if v.strip())
        values[name] = value
    return InfraSettings(**values)


def build(
    settings: InfraSettings,
    stack_name: str = DEFAULT_STACK,
    outdir: str | None = None,
    env: cdk.Environment | None = None,
) -> tuple[cdk.App, CdcLakeStack]:
    """The app with the stack and cdk-nag's AwsSolutions checks on it."""
    app = cdk.App(outdir=outdir, context=FEATURE_FLAGS)
    stack = CdcLakeStack(app, stack_name, settings, env=env)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


def main() -> None:
    """As the CDK CLI runs it: the context (``-c``) arrives in ``CDK_CONTEXT_JSON`` beside the
    CLI's own keys, and the output folder in ``CDK_OUTDIR`` (which ``cdk.App`` reads)."""
    given = json.loads(os.environ.get("CDK_CONTEXT_JSON") or "{}")
    names = ["stack_name", *(f.name for f in dataclasses.fields(InfraSettings))]
    context = {k: given[k] for k in names if given.get(k) is not None}
    app, _ = build(settings_from_context(context), str(context.get("stack_name") or DEFAULT_STACK))
    app.synth()


if __name__ == "__main__":
    main()
