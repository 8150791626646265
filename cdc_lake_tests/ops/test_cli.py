"""The ``cdc-lake`` command (``cdc_lake/ops/cli.py``): its numbers' ranges, and ``stack status
--json``. ``msk``/``aws`` are tested in ``test_aws_cli.py``, ``source`` in
``test_source_cli.py``."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["workload", "--changes", "-3"], "--changes must be at least 1"),
        (["workload", "--changes", "0"], "--changes must be at least 1"),
        (["workload", "--rate", "-1"], "--rate must be at least 0"),
        (["workload", "--rate", "nan"], "--rate must be at least 0"),
        (["workload", "--changes", "many"], "not a number: 'many'"),
        (["lake", "replay", "--from-offset", "-1"], "--from-offset must be at least 0"),
        (["ui", "--port", "70000"], "--port must be from 1 to 65535"),
        (["source", "prepare", "--scale", "0"], "--scale must be from 0.001 to 1000"),
        (["refresh", "--timeout", "0"], "--timeout must be at least 1"),
    ],
)
def test_cli_rejects_numbers_out_of_range(argv: list[str], message: str, capsys):
    from cdc_lake.ops.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_status_json_gives_the_variables_dagster_needs(ingested, local_stack, monkeypatch, capsys):
    from cdc_lake.ops.cli import main
    from cdc_lake.ops.instance import default_home

    settings = local_stack.settings
    monkeypatch.setenv("CDC_LAKE_PORT_BASE", str(settings.port_base))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(["--state-dir", str(settings.state_dir), "stack", "status", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)["dagster_env"]
    assert env["DAGSTER_HOME"] == str(default_home(settings))
    assert env["CDC_LAKE_STATE_DIR"] == str(settings.state_dir)
    assert env["CDC_LAKE_PORT_BASE"] == str(settings.port_base)
    # What the resources' EnvVars read: the stack's credentials.
    assert env["CDC_LAKE_PG_PASSWORD"] and env["CDC_LAKE_S3_SECRET_KEY"]
