"""The execute-snapshot signal's data, its guards, and the connector and SQL it relies on."""

from __future__ import annotations

import pytest

from cdc_lake.cli import main
from cdc_lake.resources.local import local_connector_settings
from cdc_lake.source.database import sql_files
from cdc_lake.stack import StackSettings
from cdc_lake.streaming.signals import SIGNAL_TABLE, execute_snapshot_data


def test_signal_for_chosen_orders_filters_on_order_id():
    assert execute_snapshot_data([10300, 10248, 10300, 11000]) == {
        "data-collections": ["datalake.cdc_events"],
        "type": "incremental",
        "additional-conditions": [
            {
                "data-collection": "datalake.cdc_events",
                "filter": "order_id IN (10248, 10300, 11000)",
            }
        ],
    }


def test_signal_for_all_orders_has_no_condition():
    assert execute_snapshot_data(None) == {
        "data-collections": ["datalake.cdc_events"],
        "type": "incremental",
    }


@pytest.mark.parametrize("bad", [[], ["1); DROP TABLE x; --"], [True], [1.5]])
def test_only_integer_order_ids_reach_the_filter(bad: list):
    with pytest.raises(ValueError):
        execute_snapshot_data(bad)


def test_connector_and_sql_agree_on_debezium_tables(tmp_path):
    cfg = local_connector_settings(
        StackSettings.from_env(state_dir=tmp_path, port_base=20000)
    ).debezium()
    assert cfg["signal.data.collection"] == SIGNAL_TABLE
    assert cfg["heartbeat.interval.ms"] == "10000"
    assert cfg["heartbeat.action.query"] == "UPDATE datalake.cdc_heartbeat SET beat_at = now()"
    # Applied after the outbox SQL, which creates the publication that it extends.
    names = [p.name for p in sql_files()]
    assert names.index("003_debezium.sql") > names.index("002_outbox.sql")


def test_resnapshot_cli_needs_a_choice(capsys):
    assert main(["source", "resnapshot"]) == 2
    assert "--orders 1,2,3 or --all" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["source", "resnapshot", "--orders", "1,2", "--all"])
    with pytest.raises(SystemExit):
        main(["source", "resnapshot", "--orders", "1,x"])
