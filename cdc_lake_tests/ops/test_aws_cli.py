"""``cdc-lake msk deploy`` (``cdc_lake/ops/aws_cli.py``): its argument handling, its
missing-variable messages and its dry run (which creates no AWS client)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cdc_lake.ops.aws_cli import add_msk_cli
from cdc_lake.streaming.msk.plugins import MskPluginDirs
from cdc_lake_tests.streaming.msk.helpers import (
    BOOTSTRAP,
    PASSWORD_REF,
    REGION,
    ROLE,
    SINK,
    SOURCE,
    make_plugin_dirs,
)


@pytest.fixture
def dirs(tmp_path: Path) -> MskPluginDirs:
    return make_plugin_dirs(tmp_path)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cdc-lake")
    parser.add_argument("--state-dir")
    add_msk_cli(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_reports_missing_variables(capsys):
    args = parse(["msk", "deploy"])
    assert args.func(args, environ={}) == 2
    err = capsys.readouterr().err
    assert "CDC_LAKE_AWS_REGION" in err and "CDC_LAKE_MSK_PLUGIN_BUCKET" in err


def test_cli_names_the_msk_and_the_source_variables_in_one_message(capsys):
    args = parse(["msk", "deploy"])
    assert args.func(args, environ={"CDC_LAKE_PG_HOST": "db.internal"}) == 2
    err = capsys.readouterr().err
    for name in ("CDC_LAKE_MSK_SUBNETS", "CDC_LAKE_PG_DATABASE", "CDC_LAKE_RAW_BUCKET"):
        assert name in err, name
    assert "CDC_LAKE_PG_HOST" not in err


def test_cli_names_a_bad_port_as_the_prod_resources_do(capsys):
    """The source side is read by the prod resources' parser: "" is unset, a bad value named."""
    args = parse(["msk", "deploy"])
    env = {"CDC_LAKE_PG_HOST": "db.internal", "CDC_LAKE_PG_PORT": "54x"}
    assert args.func(args, environ=env) == 2
    err = capsys.readouterr().err
    assert "CDC_LAKE_PG_PORT='54x' is not a port number" in err
    assert "CDC_LAKE_PG_DATABASE" in err and "CDC_LAKE_MSK_SUBNETS" in err


def test_cli_dry_run_prints_the_plan_without_calling_aws(dirs: MskPluginDirs, capsys):
    env = {
        "CDC_LAKE_AWS_REGION": REGION,
        "CDC_LAKE_MSK_BOOTSTRAP": BOOTSTRAP,
        "CDC_LAKE_MSK_SUBNETS": "subnet-a,subnet-b",
        "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-connect",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN": ROLE,
        "CDC_LAKE_MSK_PLUGIN_BUCKET": "plugins",
        "CDC_LAKE_PG_HOST": "db.internal",
        "CDC_LAKE_PG_DATABASE": "cdc_lake",
        "CDC_LAKE_RAW_BUCKET": "cdc-raw-prod",
    }
    args = parse(
        [
            "msk",
            "deploy",
            "--dry-run",
            f"--config-provider-dir={dirs.config_provider}",
            f"--debezium-dir={dirs.debezium}",
            f"--s3-sink-dir={dirs.s3_sink}",
        ]
    )

    def no_clients(*a: Any, **kw: Any) -> Any:
        raise AssertionError("a dry run must not create AWS clients")

    assert args.func(args, environ=env, client_factory=no_clients) == 0
    plan = json.loads(capsys.readouterr().out)
    source = plan["connectors"][SOURCE]
    assert source["database.password"] == PASSWORD_REF
    assert source["database.hostname"] == "db.internal"
    assert source["database.user"] == "cdc_replication"
    assert plan["connectors"][SINK]["aws.s3.bucket.name"] == "cdc-raw-prod"
    assert plan["plugins"]["source"].startswith(
        "s3://plugins/msk-connect/plugins/cdc-lake-debezium-"
    )
    assert "config.providers=secretsmanager" in plan["worker_properties"]
