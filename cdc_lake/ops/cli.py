"""The ``cdc-lake`` command.

cdc-lake stack install | up | down | status [--json]
cdc-lake source prepare [--scale N] | resnapshot (--keys K1,K2 | --all) [--table T]
cdc-lake workload [--changes N] [--rate R]   # a seeded stream of changes to the source
cdc-lake lake replay --from-offset N   # re-ingest the raw files from offset N (repair)
cdc-lake lake reconcile               # delete the lake rows whose key the source lacks (repair)
cdc-lake demo        # the README's main command: install, stack up, load the definitions, summary
cdc-lake refresh     # catch up: wait for Debezium and the S3 sink, then run lake_refresh
cdc-lake ui          # the Dagster UI and daemon on the stack's instance, behind a token
cdc-lake msk deploy  # production: plugins, worker configuration and connectors on MSK Connect
cdc-lake aws env     # production: a deployed stack's outputs as the Dagster deployment's env

The local stack's commands are here; ``source`` is in ``source_cli.py``, ``msk`` and ``aws`` in
``aws_cli.py``, what they share in ``args.py`` (all in ``cdc_lake/ops/``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from cdc_lake.ops.args import add_table_option, connect, number, stack_settings
from cdc_lake.ops.aws_cli import add_aws_cli, add_msk_cli
from cdc_lake.ops.source_cli import add_source_cli
from cdc_lake.source.captured import captured
from cdc_lake.stack import LocalStack, StackError
from cdc_lake.stack.install import install


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
    settings = stack_settings(args)
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
        from cdc_lake.ops.instance import dagster_env, default_home

        # The variables a Dagster process on this stack needs (`dg dev`, a script's runs):
        # DAGSTER_HOME as the CLI's runs take it (read here, not created), and the credentials.
        home = Path(os.environ.get("DAGSTER_HOME") or default_home(settings))
        out = {**stack.describe(), "dagster_env": dagster_env(settings, home)}
        print(json.dumps(out, indent=2))
        return 0 if stack.healthy() else 1
    return 0 if _print_status(stack) else 1


def cmd_workload(args: argparse.Namespace) -> int:
    import psycopg2

    from cdc_lake.source.workload import Workload

    settings = stack_settings(args)
    workload: Workload | None = None
    try:
        conn = connect(settings)
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
    from cdc_lake.ops.repair import reconcile, replay

    if args.action == "reconcile":
        return reconcile(stack_settings(args), table=captured(args.table))
    if args.from_offset is None:
        print("cdc-lake lake: error: replay needs --from-offset N", file=sys.stderr)
        raise SystemExit(2)
    return replay(stack_settings(args), args.from_offset, table=captured(args.table))


def cmd_demo(args: argparse.Namespace) -> int:
    from cdc_lake.ops.demo import run_demo

    return run_demo(stack_settings(args))


def cmd_ui(args: argparse.Namespace) -> int:
    from cdc_lake.ops.instance import serve_ui

    return serve_ui(stack_settings(args), port=args.port)


def cmd_refresh(args: argparse.Namespace) -> int:
    from cdc_lake.ops.refresh import run_refresh

    return run_refresh(stack_settings(args), timeout_s=args.timeout)


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
    add_source_cli(sub)  # cdc-lake source prepare | resnapshot: the source database
    workload = sub.add_parser("workload", help="apply a seeded stream of changes")
    workload.add_argument("--changes", type=number(int, 1, None, "--changes"), default=50)
    workload.add_argument(
        "--rate",
        type=number(float, 0, None, "--rate"),
        default=5.0,
        help="changes per second (0: max)",
    )
    workload.add_argument("--seed", type=int, default=7)
    workload.set_defaults(func=cmd_workload)
    lake = sub.add_parser("lake", help="the Hudi lake: repair")
    lake.add_argument("action", choices=["replay", "reconcile"])
    add_table_option(lake, "the captured table to repair")
    lake.add_argument(
        "--from-offset",
        type=number(int, 0, None, "--from-offset"),
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
        type=number(float, 1, None, "--timeout"),
        default=300.0,
        help="seconds to wait for Debezium and the sink",
    )
    refresh.set_defaults(func=cmd_refresh)
    ui = sub.add_parser(
        "ui",
        help="the Dagster UI and daemon on the stack's instance, behind a token (the URL it "
        "prints carries it)",
    )
    ui.add_argument("--port", type=number(int, 1, 65535, "--port"), default=3000)
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
