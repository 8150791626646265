"""``cdc-lake msk deploy`` and ``cdc-lake aws env``: the production side of the command.

``msk deploy`` puts the plugins, the worker configuration and both connectors on Amazon MSK
Connect, with the settings the prod resources read (``cdc_lake/resources/prod.py``); ``--dry-run``
prints them and calls no AWS API. ``aws env`` prints a deployed stack's outputs as the Dagster
deployment's ``CDC_LAKE_*`` variables (``cdc_lake/infra/outputs.py``). Both take a client factory
so the tests can pass botocore stubs; otherwise boto3's clients on the default credential chain.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lake.ops.args import stack_settings

if TYPE_CHECKING:
    from cdc_lake.streaming.msk.plugins import MskPluginDirs


def _msk_plugin_dirs(args: argparse.Namespace, config_provider: str) -> MskPluginDirs:
    """The jars to deploy: --debezium-dir and --s3-sink-dir, else the plugins that
    `cdc-lake stack install` put in the local stack's jars dir (known here, not in the MSK
    package)."""
    from cdc_lake.streaming.msk.plugins import MskPluginDirs

    stack = stack_settings(args)
    debezium = args.debezium_dir or stack.classpath_dir("plugins/debezium")
    s3_sink = args.s3_sink_dir or stack.classpath_dir("plugins/s3sink")
    return MskPluginDirs(Path(debezium), Path(s3_sink), Path(config_provider))


def _aws_clients(client_factory: Callable[..., Any] | None) -> Callable[..., Any]:
    """The tests' client factory (botocore stubs), or boto3's clients on the default chain."""
    if client_factory is not None:
        return client_factory
    import boto3

    return boto3.client


def cmd_msk_deploy(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    client_factory: Callable[..., Any] | None = None,
) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from cdc_lake.resources.prod import msk_deploy_settings
    from cdc_lake.streaming.msk.api import MskConnectError
    from cdc_lake.streaming.msk.deploy import deploy_to_msk_connect, render_msk_configs
    from cdc_lake.streaming.msk.plugins import plugin_archives

    env = os.environ if environ is None else environ
    try:
        # Read as the prod resources read them; both halves' missing variables in one message.
        msk, connectors = msk_deploy_settings(env)
        provider_dir = args.config_provider_dir or env.get("CDC_LAKE_MSK_CONFIG_PROVIDER_DIR")
        if not provider_dir:
            raise ValueError(
                "no config-provider folder: pass --config-provider-dir or set "
                "CDC_LAKE_MSK_CONFIG_PROVIDER_DIR to the unpacked msk-config-providers release"
            )
        dirs = _msk_plugin_dirs(args, provider_dir)
        if args.dry_run:
            configs = render_msk_configs(msk, connectors)
            archives = plugin_archives(msk, dirs)
            plan = {
                "connectors": configs,
                "plugins": {
                    role: f"s3://{msk.plugin_bucket}/{a.key(msk.plugin_prefix)}"
                    for role, a in archives.items()
                },
                "worker_properties": msk.worker_properties(),
            }
            print(json.dumps(plan, indent=2))
            return 0
        client = _aws_clients(client_factory)
        result = deploy_to_msk_connect(
            client("kafkaconnect", region_name=msk.region),
            client("s3", region_name=msk.region),
            msk,
            connectors,
            dirs,
            timeout_s=args.timeout,
            poll_s=args.poll,
            log=lambda message: print(f"[msk] {message}", file=sys.stderr),
        )
    except (ValueError, MskConnectError, ClientError, BotoCoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


def add_msk_cli(subparsers: Any) -> None:
    """Register ``cdc-lake msk deploy`` on the CLI's subparsers."""
    msk = subparsers.add_parser("msk", help="deploy the connectors to Amazon MSK Connect")
    actions = msk.add_subparsers(dest="msk_action", required=True)
    deploy = actions.add_parser(
        "deploy",
        help="create or update the plugins, worker configuration and both connectors",
        description="Settings come from CDC_LAKE_AWS_REGION, CDC_LAKE_MSK_* and the source's "
        "CDC_LAKE_PG_HOST, CDC_LAKE_PG_DATABASE, CDC_LAKE_RAW_BUCKET (see "
        "cdc_lake/resources/prod.py and cdc_lake/streaming/msk/settings.py).",
    )
    deploy.add_argument(
        "--config-provider-dir",
        help="unpacked msk-config-providers release (default: CDC_LAKE_MSK_CONFIG_PROVIDER_DIR)",
    )
    deploy.add_argument("--debezium-dir", help="Debezium jars (default: the stack's plugin)")
    deploy.add_argument("--s3-sink-dir", help="S3 sink jars (default: the stack's plugin)")
    deploy.add_argument("--timeout", type=float, default=1800.0, help="seconds per wait")
    deploy.add_argument("--poll", type=float, default=15.0, help="seconds between polls")
    deploy.add_argument(
        "--dry-run",
        action="store_true",
        help="print the configs, plugin keys and worker properties; call no AWS API",
    )
    deploy.set_defaults(func=cmd_msk_deploy)


def cmd_aws_env(args: argparse.Namespace, client_factory: Callable[..., Any] | None = None) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from cdc_lake.infra.outputs import env_lines, stack_variables

    client = _aws_clients(client_factory)
    try:
        variables = stack_variables(
            client("cloudformation", region_name=args.region),
            client("kafka", region_name=args.region),
            args.stack,
        )
    except (ValueError, ClientError, BotoCoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(env_lines({"CDC_LAKE_ENV": "prod", **variables}), end="")
    return 0


def add_aws_cli(subparsers: Any) -> None:
    """Register ``cdc-lake aws env`` on the CLI's subparsers."""
    aws = subparsers.add_parser("aws", help="the production stack (cdc_lake/infra)")
    actions = aws.add_subparsers(dest="aws_action", required=True)
    env = actions.add_parser(
        "env",
        help="print the Dagster deployment's CDC_LAKE_* variables from a deployed stack",
        description="Reads the stack's outputs (CloudFormation) and its MSK cluster's IAM "
        "brokers; prints NAME=value lines. Secrets are not printed: the stack names them "
        "(CDC_LAKE_REPLICATION_SECRET); set CDC_LAKE_PG_USER and inject CDC_LAKE_PG_PASSWORD "
        "from Secrets Manager.",
    )
    env.add_argument("--stack", default="cdc-lake", help="the stack's name (default cdc-lake)")
    env.add_argument("--region", help="its region (default: the AWS SDK's)")
    env.set_defaults(func=cmd_aws_env)
