"""End to end on the stack: PostgreSQL -> Debezium -> Kafka -> S3 sink -> Spark/Hudi -> order
items, materialised with the real local resources, with the asset checks; then a run with
nothing new, which needs no Spark app and still checks the lake against the source."""

from __future__ import annotations

import json
import time

import dagster as dg

from bench.outbox import HUDI_KEY, cdc_events_hudi, matches_source, no_quarantined_lines
from bench.synthetic import SyntheticLake, event
from cdc_lake.defs.keys import ORDER_ITEMS_KEY
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.lake.readers import read_table
from cdc_lake.marts.order_items import read_order_items
from cdc_lake.resources.local import local_resources
from cdc_lake.resources.spark import SparkLauncher
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets, wait_for_consumer
from cdc_lake_tests.policies import as_lake_json

CHECKS = [no_quarantined_lines, matches_source]
# Evaluated by the Spark apps themselves, declared as the assets' check specs.
JOB_CHECKS = ["order_id_unique", "no_deleted_orders", "incremental_matches_rescan",
              "revenue_non_negative", "orders_exist_in_lake"]  # fmt: skip

OUTBOX_SQL = """
SELECT order_id, customer_id, order_date, required_date, shipped_date, order_items, products,
       customer, employee, shipper, shipment, updated_at
FROM datalake.cdc_events
"""

# An independent flattening of the outbox, in SQL.
ITEMS_SQL = """
SELECT e.customer_id, e.order_id, e.order_date, (i->>'product_id')::bigint, p->>'product_name',
       (i->>'unit_price')::float8, (i->>'quantity')::bigint, (i->>'discount')::float8,
       (i->>'unit_price')::float8 * (i->>'quantity')::float8 * (1 - (i->>'discount')::float8)
FROM datalake.cdc_events e
CROSS JOIN LATERAL jsonb_array_elements(e.order_items) AS i
JOIN LATERAL jsonb_array_elements(e.products) AS p ON p->>'product_id' = i->>'product_id'
"""


def catch_up(resources: dict) -> None:
    """Wait until Debezium has published everything and the sink has flushed it."""
    conf, cdc = resources["kafka"].client_conf(), resources["cdc"]
    stable, last = 0, None
    while stable < 3:
        ends = end_offsets(conf, cdc.topic_of(OUTBOX))
        stable = stable + 1 if ends == last else 0
        last = ends
        time.sleep(1)
    wait_for_consumer(conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX), 120)


def _check_results(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_lake_equals_outbox_and_items_equal_sql_flattening(
    ingested, resources, local_stack: LocalStack, pg, spark
):
    catch_up(resources)
    instance = dg.DagsterInstance.ephemeral()
    assets = [cdc_events_hudi, order_items, *CHECKS]
    result = dg.materialize(assets, resources=resources, instance=instance)
    assert result.success
    names = {spec.name for check in CHECKS for spec in check.check_specs} | set(JOB_CHECKS)
    assert _check_results(result) == dict.fromkeys(names, True)

    with pg.cursor() as cur:
        cur.execute(OUTBOX_SQL)
        source = {r[0]: r for r in cur.fetchall()}
        cur.execute(ITEMS_SQL)
        source_items = {(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], round(r[8], 6))
                        for r in cur.fetchall()}  # fmt: skip
    lake_path = resources["lake"].table_path_of(OUTBOX)
    lake = {r["order_id"]: r for r in read_table(spark, lake_path).collect()}
    assert set(lake) == set(source) and len(lake) > 800
    for order_id, src in source.items():
        row = lake[order_id]
        assert row["customer_id"] == src[1].strip()
        assert (row["order_date"], row["required_date"], row["shipped_date"]) == src[2:5]
        for i, col in enumerate(
            ["order_items", "products", "customer", "employee", "shipper", "shipment"], start=5
        ):
            lake_value = json.loads(row[col]) if row[col] is not None else None
            salt = local_stack.settings.credentials.column_salt
            assert lake_value == as_lake_json(OUTBOX, col, src[i], salt), (order_id, col)
        assert row["updated_at"] == src[11].replace(tzinfo=None), order_id
        assert row["is_deleted"] is False

    items = read_order_items(spark, resources["lake"].order_items_path).collect()
    lake_items = {(r["customer_id"], r["order_id"], r["order_date"], r["product_id"],
                   r["product_name"], r["unit_price"], r["quantity"], r["discount"],
                   round(r["revenue"], 6)) for r in items}  # fmt: skip
    assert len(items) == len(lake_items) == len(source_items)
    assert lake_items == source_items

    # Nothing new since: no Spark app (the base resource would raise), the last commit stays
    # the latest materialization, and the blocking matches_source compares its digest with the
    # outbox again, and passes; the other checks are carried from the run that computed them.
    empty = dg.materialize(
        assets, resources={**resources, "spark_jobs": SparkLauncher()}, instance=instance
    )
    assert empty.success
    assert _check_results(empty) == dict.fromkeys(names, True)
    mats = {e.materialization.asset_key: e.materialization.metadata
            for e in empty.get_asset_materialization_events()}  # fmt: skip
    before = {e.materialization.asset_key: e.materialization.metadata
              for e in result.get_asset_materialization_events()}  # fmt: skip
    assert mats[HUDI_KEY]["new_commit"].value is False
    assert mats[HUDI_KEY]["commit_instant"] == before[HUDI_KEY]["commit_instant"]
    assert mats[ORDER_ITEMS_KEY]["unchanged"].value is True
    source_check = next(e for e in empty.get_asset_check_evaluations()
                        if e.check_name == "matches_source")  # fmt: skip
    assert "carried_from_run" not in source_check.metadata  # evaluated again, not carried
    assert source_check.metadata["source_rows"].value == len(source)


def test_quarantine_option_continues_and_the_check_reports(local_stack: LocalStack, secret_env):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    syn = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    syn.put([event(1, 100, 1), "not json at all", event(2, 100, 2)])
    resources = local_resources(
        s,
        lake={
            "lake_prefix": f"synthetic/{syn.name}",
            "quarantine_prefix": f"synthetic/{syn.name}/quarantine",
            "quarantine": True,
        },
        raw_prefix=syn.raw_prefix,
    )
    result = dg.materialize([cdc_events_hudi, no_quarantined_lines], resources=resources)
    assert result.success  # the run goes on...
    mats = [e.materialization for e in result.get_asset_materialization_events()]
    meta = {k: v.value for k, v in mats[0].metadata.items() if mats[0].asset_key == HUDI_KEY}
    assert meta["quarantined_lines"] == 1 and meta["events_upserted"] == 2
    checks = _check_results(result)
    assert checks["no_quarantined_lines"] is False  # ...and the check fails
    assert checks["order_id_unique"] and checks["no_deleted_orders"]
