"""The ``cdc-lake`` command.

cdc-lake stack install | up | down | status [--json]
cdc-lake source prepare [--scale N] | resnapshot (--orders 1,2,3 | --all)
cdc-lake lake replay --from-offset N   # re-ingest the raw files from offset N (repair)
cdc-lake lake reconcile               # delete the lake rows whose key the source lacks (repair)
cdc-lake demo        # the README's main command: install, stack up, load the definitions, summary
cdc-lake refresh     # catch up: wait for Debezium and the S3 sink, then run lake_refresh
cdc-lake msk deploy  # production: plugins, worker configuration and connectors on MSK Connect
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lake.source.captured import OUTBOX, TABLES, captured
from cdc_lake.stack import LocalStack, StackError, StackSettings
from cdc_lake.stack.install import install

if TYPE_CHECKING:
    from cdc_lake.streaming.msk.plugins import MskPluginDirs


def _settings(args: argparse.Namespace) -> StackSettings:
    return StackSettings.from_env(state_dir=args.state_dir)


def _print_status(stack: LocalStack) -> bool:
    desc = stack.describe()
    print(f"state dir: {desc['state_dir']}")
    for name, st in desc["services"].items():
        state = "healthy" if st["healthy"] else ("running, unhealthy" if st["pid"] else "stopped")
        rss = f"{st['rss_mb']:.0f} MiB" if st["rss_mb"] else "-"
        endpoint = stack.service(name).endpoint
        print(f"  {name:<11} {state:<20} pid={st['pid'] or '-':<8} rss={rss:<9} {endpoint}")
    spark = desc["spark"]
    print(f"  {'spark':<11} {'jars ready' if spark['ready'] else 'jars missing':<20} local[*]")
    return bool(desc["healthy"])


def cmd_stack(args: argparse.Namespace) -> int:
    settings = _settings(args)
    stack = LocalStack(settings)
    if args.action == "install":
        install(settings, browser=True)
        return 0
    if args.action == "up":
        t0 = time.monotonic()
        timings = stack.up()
        print(f"[stack] up in {time.monotonic() - t0:.1f}s: {timings}")
        return 0 if _print_status(stack) else 1
    if args.action == "down":
        stack.down()
        return 0
    if args.json:
        from cdc_lake.instance import dagster_env, default_home

        # The variables a Dagster process on this stack needs (`dg dev`, a script's runs):
        # DAGSTER_HOME as the CLI's runs take it (read here, not created), and the credentials.
        home = Path(os.environ.get("DAGSTER_HOME") or default_home(settings))
        out = {**stack.describe(), "dagster_env": dagster_env(settings, home)}
        print(json.dumps(out, indent=2))
        return 0 if stack.healthy() else 1
    return 0 if _print_status(stack) else 1


def _connect(settings: StackSettings):
    import psycopg2

    return psycopg2.connect(settings.pg_dsn())


def _order_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a list of order ids like 1,2,3: {text!r}") from e
    if not ids:
        raise argparse.ArgumentTypeError("no order ids given")
    return ids


def _number(kind: type, low: float, high: float | None = None, what: str = "") -> Any:
    """An argparse type: a ``kind`` (int or float) from ``low`` to ``high``, else a clear error."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from e
        if value < low or (high is not None and value > high) or value != value:  # NaN too
            bound = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}")
        return value

    return parse


def missing_orders(conn: Any, orders: list[int]) -> list[int]:
    """The given order ids that the outbox does not hold."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT o FROM unnest(%s::bigint[]) AS o WHERE NOT EXISTS "
            "(SELECT 1 FROM datalake.cdc_events e WHERE e.order_id = o) ORDER BY o",
            (sorted(set(orders)),),
        )
        return [int(r[0]) for r in cur.fetchall()]


def cmd_resnapshot(args: argparse.Namespace) -> int:
    """Ask Debezium to re-send orders from the outbox as it is now (an incremental snapshot)."""
    from cdc_lake.streaming.signals import request_snapshot

    if args.orders is None and not args.all:
        print("error: resnapshot needs --orders 1,2,3 or --all", file=sys.stderr)
        return 2
    table = captured(args.table)
    if table != OUTBOX and args.orders is not None:
        print(f"error: --orders picks outbox orders; for {table.source} use --all", file=sys.stderr)
        return 2
    orders: list[int] | None = None if args.all else args.orders
    conn = _connect(_settings(args))
    try:
        if orders is not None and (missing := missing_orders(conn, orders)):
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            print(
                f"error: {len(missing)} order(s) not in datalake.cdc_events: {shown}. Debezium "
                "re-sends the outbox as it is now, so nothing would be sent for them; nothing "
                "was requested. A lake row left over for a deleted order goes with a replay "
                "(cdc-lake lake replay --from-offset 0).",
                file=sys.stderr,
            )
            return 2
        signal_id = request_snapshot(conn, orders, table=table)
    finally:
        conn.close()
    if table != OUTBOX:
        what = f"every row of {table.source}"
    else:
        what = "every order" if orders is None else f"{len(set(orders))} order(s)"
    print(f"requested an incremental snapshot of {what}: signal {signal_id}")
    return 0


def cmd_source(args: argparse.Namespace) -> int:
    from cdc_lake.source.database import prepare_source

    if args.action == "resnapshot":
        return cmd_resnapshot(args)
    settings = _settings(args)
    conn = _connect(settings)
    try:
        stats, loaded = prepare_source(
            conn, settings.replication_user, scale=args.scale, seed=args.seed
        )
    finally:
        conn.close()
    print(f"outbox rows: {stats.rows:,} (orders {stats.orders:,}, lines {stats.order_lines:,});"
          f" sample data {'loaded' if loaded else 'already present'}")  # fmt: skip
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    import psycopg2

    from cdc_lake.source.workload import Workload

    settings = _settings(args)
    workload: Workload | None = None
    try:
        conn = _connect(settings)
        try:
            workload = Workload(conn, seed=args.seed)
            changes = workload.run(args.changes, args.rate, progress=print)
        finally:
            conn.close()
    except psycopg2.Error as e:
        # A restart or stop of PostgreSQL lands here: one line, not psycopg2's traceback.
        done = len(workload.applied) if workload else 0
        reason = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        where = f"{settings.host}:{settings.port('postgres')}/{settings.pg_database}"
        print(
            f"error: workload stopped after {done} of {args.changes} changes: PostgreSQL at "
            f"{where}: {reason.strip()}",
            file=sys.stderr,
        )
        return 1
    kinds: dict[str, int] = {}
    for c in changes:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    print(f"applied {len(changes)} changes: {kinds}")
    return 0


def cmd_lake(args: argparse.Namespace) -> int:
    from cdc_lake.repair import reconcile, replay

    if args.action == "reconcile":
        return reconcile(_settings(args), table=captured(args.table))
    if args.from_offset is None:
        print("cdc-lake lake: error: replay needs --from-offset N", file=sys.stderr)
        raise SystemExit(2)
    return replay(_settings(args), args.from_offset, table=captured(args.table))


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_lake.demo import run_demo

    return run_demo(_settings(args))


def cmd_ui(args: argparse.Namespace) -> int:
    from cdc_lake.instance import serve_ui

    return serve_ui(_settings(args), port=args.port)


def cmd_refresh(args: argparse.Namespace) -> int:
    from cdc_lake.refresh import run_refresh

    return run_refresh(_settings(args), timeout_s=args.timeout)


def _msk_plugin_dirs(args: argparse.Namespace, config_provider: str) -> MskPluginDirs:
    """The jars to deploy: --debezium-dir and --s3-sink-dir, else the plugins that
    `cdc-lake stack install` put in the local stack's jars dir (known here, not in the MSK
    package)."""
    from cdc_lake.streaming.msk.plugins import MskPluginDirs

    stack = _settings(args)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdc-lake", description="cdc-lake local stack and demo")
    parser.add_argument(
        "--state-dir", help="where the stack keeps its data (default: .cdc-lake/ in the project)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    stack = sub.add_parser("stack", help="install, start, stop or inspect the local stack")
    stack.add_argument("action", choices=["install", "up", "down", "status"])
    stack.add_argument("--json", action="store_true", help="status as JSON, with credentials")
    stack.set_defaults(func=cmd_stack)
    source = sub.add_parser("source", help="the source database")
    source.add_argument("action", choices=["prepare", "resnapshot"])
    source.add_argument(
        "--scale",
        type=_number(float, 0.001, 1000, "--scale"),
        default=1.0,
        help="1 = Northwind's 829 orders",
    )
    source.add_argument("--seed", type=int, default=42)
    chosen = source.add_mutually_exclusive_group()
    chosen.add_argument(
        "--orders", type=_order_ids, help="resnapshot: these order ids, comma-separated"
    )
    chosen.add_argument("--all", action="store_true", help="resnapshot: every row of the table")
    source.add_argument(
        "--table",
        choices=[t.source for t in TABLES],
        default=OUTBOX.source,
        help="resnapshot: the captured table (default: the outbox)",
    )
    source.set_defaults(func=cmd_source)
    workload = sub.add_parser("workload", help="apply a seeded stream of changes")
    workload.add_argument("--changes", type=_number(int, 1, None, "--changes"), default=50)
    workload.add_argument(
        "--rate",
        type=_number(float, 0, None, "--rate"),
        default=5.0,
        help="changes per second (0: max)",
    )
    workload.add_argument("--seed", type=int, default=7)
    workload.set_defaults(func=cmd_workload)
    lake = sub.add_parser("lake", help="the Hudi lake: repair")
    lake.add_argument("action", choices=["replay", "reconcile"])
    lake.add_argument(
        "--table",
        choices=[t.source for t in TABLES],
        default=OUTBOX.source,
        help="the captured table to repair (default: the outbox)",
    )
    lake.add_argument(
        "--from-offset",
        type=_number(int, 0, None, "--from-offset"),
        help="replay: re-ingest every topic partition's raw lines from this Kafka offset on",
    )
    lake.set_defaults(func=cmd_lake)
    demo = sub.add_parser("demo", help="set everything up and run the whole pipeline")
    demo.set_defaults(func=cmd_demo)
    refresh = sub.add_parser(
        "refresh",
        help="bring the lake up to date with what PostgreSQL has committed, via lake_refresh",
    )
    refresh.add_argument(
        "--timeout",
        type=_number(float, 1, None, "--timeout"),
        default=300.0,
        help="seconds to wait for Debezium and the sink",
    )
    refresh.set_defaults(func=cmd_refresh)
    ui = sub.add_parser(
        "ui",
        help="the Dagster UI and daemon on the stack's instance, behind a token (the URL it "
        "prints carries it)",
    )
    ui.add_argument("--port", type=_number(int, 1, 65535, "--port"), default=3000)
    ui.set_defaults(func=cmd_ui)
    add_msk_cli(sub)  # cdc-lake msk deploy: the connectors on Amazon MSK Connect
    add_aws_cli(sub)  # cdc-lake aws env: a deployed stack's outputs as the environment
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except StackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
