"""The execute-snapshot signal's data, its guards, and the connector and SQL it relies on."""

from __future__ import annotations

import pytest

from cdc_lake.resources.local import local_connector_settings
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, CapturedTable
from cdc_lake.source.database import sql_files
from cdc_lake.stack import StackSettings
from cdc_lake.streaming.signals import SIGNAL_TABLE, execute_snapshot_data, request_snapshot

# Not declared: a table whose key is two columns.
COMPOSITE = CapturedTable(
    source="datalake.order_details", key=("order_id", "product_id"), ddl_file="001_northwind.sql"
)


def test_signal_for_chosen_orders_filters_on_order_id():
    assert execute_snapshot_data([10300, 10248, 10300, 11000], OUTBOX) == {
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
    assert execute_snapshot_data(None, OUTBOX) == {
        "data-collections": ["datalake.cdc_events"],
        "type": "incremental",
    }


def test_signal_for_chosen_rows_of_a_text_keyed_table_quotes_the_values():
    keys = ["ANATR", "ALFKI", "ANATR", "Old World-1.2 x"]
    assert execute_snapshot_data(keys, CUSTOMERS) == {
        "data-collections": ["datalake.customers"],
        "type": "incremental",
        "additional-conditions": [
            {
                "data-collection": "datalake.customers",
                "filter": "customer_id IN ('ALFKI', 'ANATR', 'Old World-1.2 x')",
            }
        ],
    }
    assert execute_snapshot_data(None, CUSTOMERS) == {
        "data-collections": ["datalake.customers"],
        "type": "incremental",
    }


@pytest.mark.parametrize(
    "bad", [[], ["1); DROP TABLE x; --"], ["O'Brien"], ["a\\b"], [""], [True], [1.5], [None]]
)
def test_only_integers_and_safe_texts_reach_the_filter(bad: list):
    with pytest.raises(ValueError) as error:
        execute_snapshot_data(bad, CUSTOMERS)
    named = repr(bad[0]) if bad else "datalake.customers"  # the value, or the table
    assert named in str(error.value)


def test_rows_of_a_composite_key_table_cannot_be_picked():
    with pytest.raises(ValueError, match=r"datalake\.order_details's key is composite"):
        execute_snapshot_data([10248], COMPOSITE)
    assert execute_snapshot_data(None, COMPOSITE) == {
        "data-collections": ["datalake.order_details"],
        "type": "incremental",
    }


def test_a_refused_request_touches_no_connection():
    class NoConnection:
        def __getattr__(self, name: str):
            raise AssertionError(f"the connection was used ({name}) for a refused request")

    with pytest.raises(ValueError, match="O'Brien"):
        request_snapshot(NoConnection(), ["O'Brien"], table=CUSTOMERS)  # type: ignore[arg-type]


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
