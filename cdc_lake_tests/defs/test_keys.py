"""A captured table's Dagster names (``cdc_lake/defs/keys.py``): derived from the table's name,
or taken from its declaration; the outbox's are the ones existing instances know."""

from __future__ import annotations

import json

import dagster as dg

from cdc_lake.defs.keys import KEYS, table_keys
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, TABLES, CapturedTable


def test_the_outbox_keeps_its_names_and_another_table_derives_its_own():
    outbox, customers = table_keys(OUTBOX), table_keys(CUSTOMERS)
    assert outbox.source == dg.AssetKey(["postgres", "datalake", "cdc_events_outbox"])
    assert (outbox.refresh_job, outbox.sensor) == ("lake_refresh", "raw_cdc_files_sensor")
    assert customers.source == dg.AssetKey(["postgres", "datalake", "customers"])
    assert customers.topic == dg.AssetKey(["kafka", "customers_topic"])
    assert customers.raw == dg.AssetKey(["s3", "raw", "customers_files"])
    assert customers.hudi == dg.AssetKey(["hudi", "datalake", "customers"])
    assert customers.refresh_job == "customers_lake_refresh"
    assert customers.sensor == "customers_raw_files_sensor"
    assert [k.table for k in KEYS] == list(TABLES)
    # The names travel with the declaration to the Spark apps too.
    assert CapturedTable.from_json(json.loads(json.dumps(OUTBOX.to_json()))) == OUTBOX
