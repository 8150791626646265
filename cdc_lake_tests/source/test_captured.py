"""A second captured table from its declaration alone (``cdc_lake/source/captured.py``): the real
source publishes ``datalake.customers``, the real Debezium captures it into a topic of its own,
the real S3 sink writes that topic under a folder of its own, and the upsert lands it in a Hudi
table keyed by its text key. After a workload of inserts, updates and deletes, the lake equals
the source, by the digest both sides compute and row by row."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdc_lake.lake.digest import compare_digests, source_digest
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import SchemaChangeError, columns_from_catalog
from cdc_lake.lake.table_state import evaluate
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, TABLES, CapturedTable, captured
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.connect_config import topic_name
from cdc_lake.streaming.topics import end_offsets, wait_for_consumer

COLUMNS = "customer_id, company_name, contact_name, city, country"


def test_a_declaration_names_its_table():
    assert captured("datalake.customers") is CUSTOMERS and CUSTOMERS in TABLES
    assert CUSTOMERS.lake_partition == () and OUTBOX.lake_partition == ("order_year",)
    with pytest.raises(KeyError, match="datalake.nope is not a captured table"):
        captured("datalake.nope")


def test_a_key_is_one_column_or_several():
    details = CapturedTable(
        source="datalake.order_details", key=("order_id", "product_id"), ddl_file=""
    )
    assert details.keys == ("order_id", "product_id") and CUSTOMERS.keys == ("customer_id",)
    assert details.key_unique_check == "order_id_product_id_unique"
    assert OUTBOX.key_unique_check == "order_id_unique"  # as existing instances name it
    for bad in ((), ("a", "a"), ("a", "")):
        with pytest.raises(ValueError, match="datalake.bad: a key is one column or several"):
            CapturedTable(source="datalake.bad", key=bad, ddl_file="")


def _caught_up(resources: dict, topic: str) -> None:
    conf, cdc = resources["kafka"].client_conf(), resources["cdc"]
    stable, last = 0, None
    while stable < 3:
        ends = end_offsets(conf, topic)
        stable = stable + 1 if ends == last else 0
        last = ends
        time.sleep(1)
    wait_for_consumer(conf, cdc.sink_consumer_group, topic, 120)


def _source_rows(pg: Any) -> dict[str, tuple]:
    with pg.cursor() as cur:
        cur.execute(f"SELECT {COLUMNS} FROM datalake.customers")
        rows = {r[0].strip(): tuple(r[1:]) for r in cur.fetchall()}
    pg.commit()
    return rows


def test_customers_reach_a_lake_table_of_their_own(
    ingested, resources: dict, local_stack: LocalStack, pg, spark: SparkSession
):
    s = local_stack.settings
    cdc = resources["cdc"]
    topic = topic_name(cdc.topic_prefix, CUSTOMERS)
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    source = RawSource(s.raw_bucket, cdc.raw_prefix, topic)
    table = HudiTableConfig(
        base_path=f"s3a://{s.lake_bucket}/tests/{uuid.uuid4().hex[:8]}/customers",
        table_name=CUSTOMERS.name,
        partition_field="",
    )
    tag = uuid.uuid4().hex[:4].upper()
    # A workload: new customers (text keys), updates of existing ones, and a delete.
    with pg.cursor() as cur:
        for i in range(3):
            cur.execute(
                "INSERT INTO datalake.customers (customer_id, company_name, city) "
                "VALUES (%s, %s, 'Lyon')",
                (f"Z{tag}{i}", f"Company {tag} {i}"),
            )
        cur.execute(
            "UPDATE datalake.customers SET contact_name = 'Renamed ' || customer_id "
            "WHERE customer_id IN (SELECT customer_id FROM datalake.customers "
            "                      ORDER BY customer_id LIMIT 5)"
        )
    pg.commit()
    _caught_up(resources, topic)

    columns = columns_from_catalog(pg, CUSTOMERS.source)
    first = ingest_new_files(
        spark, client, source, table, source_columns=columns, captured=CUSTOMERS
    )
    assert first.committed is not None and first.schema is not None
    assert first.schema.keys == ("customer_id",) and first.schema.table == CUSTOMERS.source
    # Its files are the customers topic's own: none of the outbox's.
    assert first.files and all(f.key.startswith(f"{cdc.raw_prefix}{topic}/") for f in first.files)
    state = evaluate(spark, table, None, schema=first.schema)
    assert state is not None and state.duplicated_keys == 0
    salt = s.credentials.column_salt
    diff = compare_digests(source_digest(pg, schema=first.schema, salt=salt), state.digest)
    assert diff.equal, diff
    lake = {
        r["customer_id"]: tuple(r[c.strip()] for c in COLUMNS.split(",")[1:])
        for r in live_rows(read_table(spark, table.base_path)).collect()
    }
    assert lake == _source_rows(pg)
    assert not any(f.startswith("order_year") for f in read_table(spark, table.base_path).columns)

    # Deletes and updates of the new rows, then the next commit follows the change feed.
    with pg.cursor() as cur:
        cur.execute("DELETE FROM datalake.customers WHERE customer_id = %s", (f"Z{tag}0",))
        cur.execute(
            "UPDATE datalake.customers SET city = 'Porto' WHERE customer_id = %s", (f"Z{tag}1",)
        )
    pg.commit()
    _caught_up(resources, topic)
    second = ingest_new_files(
        spark, client, source, table, source_columns=columns, captured=CUSTOMERS
    )
    assert second.committed is not None and second.committed.deletes == 1
    assert second.schema is not None
    followed = evaluate(spark, table, state.digest, schema=second.schema)
    assert followed is not None and followed.mode == "incremental"
    diff = compare_digests(source_digest(pg, schema=second.schema, salt=salt), followed.digest)
    assert diff.equal, diff
    lake = {
        r["customer_id"]: r["city"] for r in live_rows(read_table(spark, table.base_path)).collect()
    }
    assert f"Z{tag}0" not in lake and lake[f"Z{tag}1"] == "Porto"
    assert set(lake) == set(_source_rows(pg))
    # A replay of every file changes nothing.
    again = ingest_new_files(
        spark, client, source, table, source_columns=columns, captured=CUSTOMERS, replay_from=0
    )
    assert again.schema is not None
    replayed = evaluate(spark, table, followed.digest, schema=again.schema)
    assert replayed is not None and replayed.digest["digest"] == followed.digest["digest"]

    # A column policy changed after the table was written stops the next refresh before it
    # writes anything, naming the column; under the declared policies it then goes on.
    with pg.cursor() as cur:
        cur.execute(
            "UPDATE datalake.customers SET city = 'Oslo' WHERE customer_id = %s", (f"Z{tag}2",)
        )
    pg.commit()
    _caught_up(resources, topic)
    changes = {
        "phone is no longer hashed": replace(CUSTOMERS, hashed=()),
        "fax is no longer excluded": replace(CUSTOMERS, exclude=()),
        "city is now hashed": replace(CUSTOMERS, hashed=("phone", "city")),
        "city is now excluded": replace(CUSTOMERS, exclude=("fax", "city")),
    }
    for said, changed in changes.items():
        with pytest.raises(SchemaChangeError, match=f"a column policy changed: {said}"):
            ingest_new_files(spark, client, source, table, source_columns=columns, captured=changed)
    third = ingest_new_files(
        spark, client, source, table, source_columns=columns, captured=CUSTOMERS
    )
    assert third.committed is not None and third.committed.updates == 1


def test_the_salt_is_only_a_reference_in_connect(ingested, resources: dict, local_stack):
    """The source connector's config holds the salt's reference, never the salt, and the worker
    logs neither it nor the plain config."""
    s = local_stack.settings
    salt = s.credentials.column_salt
    connect = resources["kafka_connect"].client()
    config = connect.config(resources["cdc"].source_connector_name)
    assert config is not None
    assert config["transforms.hash.salt.secret"] == "${env:CDC_LAKE_COLUMN_SALT}"
    assert config["transforms.hash.columns"] == "datalake.customers.phone"
    assert config["column.exclude.list"] == r"datalake\.customers\.fax"
    assert salt not in json.dumps(config)
    logs = [f.read_text(errors="replace") for f in s.logs_dir.glob("connect*") if f.is_file()]
    assert logs and not any(salt in text for text in logs)
    # Debezium logs its task's resolved config at start: the salt's key is there, masked.
    assert any("transforms.hash.salt.secret = ********" in text for text in logs)
