"""Every event of every captured table reaches the lake, end to end on the real stack (PostgreSQL,
Debezium, Kafka, the S3 sink, Spark with Hudi), on a pipeline of its own (the fault suite's
``FaultPipeline``), in order:

1. an unchanged TOASTed value (22,400 characters of text in a column added to
   ``datalake.customers``) next to an update of another column, with the table's replica
   identity FULL (what the source asset sets for a table declared ``replica_identity="full"``):
   the lake's value equals the source's, byte for byte. The customers' column policies hold
   throughout: their phone reaches the lake as the salted hash of the source's, and no plain
   phone or fax written here is in any topic record, raw file or Hudi file;
2. the same with the table left DEFAULT, several updates of one customer in one batch: Debezium
   sends its placeholder, and the lake fills it in from the stored row
   (``cdc_lake/lake/unavailable.py``): equal byte for byte again;
3. rows deleted while the table was out of the publication, so no event removes them from the
   lake: ``cdc-lake lake reconcile`` (``cdc_lake/ops/repair.py``) deletes them, and a second run
   deletes nothing;
4. a composite key: Northwind's ``order_details`` (``order_id``, ``product_id``), declared in
   this test only and added to the running pipeline as a user adds a table, through the random
   workload: the lake equals the source row by row and by the digest, and a replay changes
   nothing;
5. a table without a primary key, keyed by a unique index on a ``NOT NULL`` column (declared
   here only, like the order details, with no ``sql/`` file): Debezium keys its records by it
   (``message.key.columns``), the incremental snapshot sends it, and a change of the key moves
   the row. It is refreshed through Dagster, by the Hudi asset and ``matches_source`` check that
   the same factories build for every declared table, from its declaration alone: no other
   code names it. The lake equals the source, and the application's writes to the published
   table go on working;
6. ``TRUNCATE ... CASCADE`` of two captured tables at once (the customers and the outbox, and so
   the order details), then a new customer and a new order: each lake holds exactly what its
   source holds.

Throughout, the customers' history table (their declaration keeps one) is built after each
refresh of their lake table, and its current versions equal the lake's live rows (its check);
at the end every version is there, each closed at the source time of the change that ended it
(an update, the reconcile's delete, the truncate), and no plain phone or fax is in its files.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any

import dagster as dg
import psycopg2
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_lake.defs.keys import table_keys
from cdc_lake.defs.lake.assets import hudi_table_asset, hudi_tables
from cdc_lake.defs.lake.checks import lake_checks, table_checks
from cdc_lake.defs.lake.history import history_tables
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.digest import compare_digests, source_digest
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.reconcile import write_source_keys
from cdc_lake.lake.schema import columns_from_catalog
from cdc_lake.lake.table_state import evaluate
from cdc_lake.ops.repair import reconcile
from cdc_lake.source.captured import (
    CUSTOMERS,
    OUTBOX,
    RESCAN_CHECK,
    UNAVAILABLE_VALUE,
    CapturedTable,
)
from cdc_lake.spark_apps.params import HistoryReport
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.connect_config import topic_name
from cdc_lake.streaming.topics import wait_for_consumer
from cdc_lake_tests.faults.harness import FaultPipeline
from cdc_lake_tests.ingestion.helpers import raw_events
from cdc_lake_tests.policies import hashed as connector_hash
from cdc_lake_tests.topic_reader import read_all

# A third table with a composite primary key, declared here only: nothing else names it.
ORDER_DETAILS = CapturedTable(
    source="datalake.order_details", key=("order_id", "product_id"), ddl_file="001_northwind.sql"
)
DETAIL_COLUMNS = ("order_id", "product_id", "unit_price", "quantity", "discount")
# A table without a primary key: its key is a unique index (source/row_key.py).
AUDIT_LOG = CapturedTable(source="datalake.audit_log", key="entry", ddl_file="")


@pytest.fixture
def pipeline(local_stack: LocalStack, secret_env: dict[str, str], spark: Any) -> Iterator[Any]:
    p = FaultPipeline(local_stack, "every_event", sample_scale=0.05)
    try:
        yield p
    finally:
        p.close()


def sql(p: FaultPipeline, *statements: str, args: tuple = ()) -> list[tuple]:
    return p.sql(*statements, args=args)


def caught_up(p: FaultPipeline) -> None:
    """Debezium has published everything committed (a marker order after it, in WAL order), and
    the sink has committed both topics."""
    p.catch_up()
    topic = topic_name(p.cdc.topic_prefix, CUSTOMERS)
    wait_for_consumer(p.kafka_conf, p.cdc.sink_consumer_group, topic, 120)


def refresh_customers(p: FaultPipeline) -> dict[str, Any]:
    """The customers' lake table, then their history, as their refresh job runs them; the
    history's check must pass. The lake table's metadata."""
    assets = [hudi_tables[CUSTOMERS], history_tables[CUSTOMERS]]
    result = dg.materialize(assets, resources=p.resources)
    assert result.success
    (check,) = [c for c in result.get_asset_check_evaluations()
                if c.check_name == HistoryReport.MATCHES_LAKE_CHECK]  # fmt: skip
    assert check.passed, check.metadata
    (mat,) = [e.materialization for e in result.get_asset_materialization_events()
              if e.asset_key == table_keys(CUSTOMERS).hudi]  # fmt: skip
    return {k: v.value for k, v in mat.metadata.items()}


def customer_versions(p: FaultPipeline, spark: SparkSession) -> dict[str, list[tuple]]:
    """Per customer, its versions in the history table, oldest first: (phone, notes length,
    cdc_op, valid_from ms, valid_to ms or None)."""
    from pyspark.sql import functions as F

    path = f"{p.lake.table_path_of(CUSTOMERS)}_history"
    rows = read_table(spark, path).select(
        "customer_id", "phone", F.length("notes").alias("notes"), "cdc_op",
        F.unix_millis("valid_from").alias("f"), F.unix_millis("valid_to").alias("t"),
        "cdc_ordering",
    ).orderBy("cdc_ordering").collect()  # fmt: skip
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r["customer_id"].strip(), []).append(tuple(r)[1:6])
    return out


def refresh_and_match_customers(p: FaultPipeline) -> dg.AssetCheckEvaluation:
    _, matches, _ = table_checks[CUSTOMERS]
    result = dg.materialize([hudi_tables[CUSTOMERS], matches], resources=p.resources,
                            raise_on_error=False)  # fmt: skip
    (check,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "matches_source"]
    return check


def lake_customers(p: FaultPipeline, spark: SparkSession) -> dict[str, tuple]:
    path = f"s3a://{p.lake.lake_bucket}/{p.lake.table_prefix_of(CUSTOMERS)}"
    table = read_table(spark, path)
    assert "fax" not in table.columns  # excluded: the lake has no such column
    rows = live_rows(table).select("customer_id", "phone", "notes")
    return {r[0]: tuple(r[1:]) for r in rows.collect()}


def hashed(p: FaultPipeline, value: str | None) -> str | None:
    """A hashed column's value as the source connector writes it (connectors/ HashColumns)."""
    return connector_hash(p.stack.settings.credentials.column_salt, value)


def source_customers(p: FaultPipeline) -> dict[str, tuple]:
    """The source's customers as the lake holds them: phone hashed, fax left out."""
    rows = sql(p, "SELECT rtrim(customer_id), phone, notes FROM datalake.customers")
    return {r[0]: (hashed(p, r[1]), r[2]) for r in rows}


def plain_values_anywhere(
    p: FaultPipeline, values: list[str], tables: tuple[CapturedTable, ...] = (CUSTOMERS, OUTBOX)
) -> list[str]:
    """Where any of ``values`` is found as it is: the tables' topic records, their raw files
    and every file of their Hudi tables (data, logs and metadata)."""
    found: list[str] = []
    places: list[tuple[str, str]] = []
    for table in tables:
        topic = topic_name(p.cdc.topic_prefix, table)
        found += [f"topic record {r}" for r in read_all(p.reader_conf, topic)
                  if any(v in json.dumps(r, ensure_ascii=False) for v in values)]  # fmt: skip
        places += [
            (p.cdc.raw_bucket, f"{p.cdc.raw_prefix}{topic}/"),
            # The lake table and a history table beside it.
            (p.lake.lake_bucket, p.lake.table_prefix_of(table)),
        ]
    for bucket, prefix in places:
        for page in p.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                body = p.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                found += [f"s3://{bucket}/{obj['Key']}" for v in values if v.encode() in body]
    return found


def details_table(
    p: FaultPipeline, declared: CapturedTable = ORDER_DETAILS
) -> tuple[RawSource, HudiTableConfig]:
    topic = p.cdc.topic_of(declared)
    return RawSource(p.cdc.raw_bucket, p.cdc.raw_prefix, topic), p.lake.table_config(declared)


def refresh_details(
    p: FaultPipeline, spark: SparkSession, declared: CapturedTable = ORDER_DETAILS, **kw: Any
) -> IngestResult:
    """The upsert of a table's new raw files (the order details' by default), as the Hudi
    asset runs it."""
    wait_for_consumer(p.kafka_conf, p.cdc.sink_consumer_group, p.cdc.topic_of(declared), 120)
    source, table = details_table(p, declared)
    with connected(p) as conn:
        columns = columns_from_catalog(conn, declared.source)
    return ingest_new_files(
        spark, p.s3, source, table, source_columns=columns, captured=declared, **kw
    )


def refresh_declared(p: FaultPipeline, declared: CapturedTable) -> dict[str, Any]:
    """A table declared in this test only, refreshed as Dagster refreshes any: its Hudi asset
    and its ``matches_source`` check, built by the factories that build every declared table's.
    The Hudi asset's metadata; its checks and ``matches_source`` all pass."""
    wait_for_consumer(p.kafka_conf, p.cdc.sink_consumer_group, p.cdc.topic_of(declared), 120)
    keys = table_keys(declared)
    _, matches, _ = lake_checks(keys)
    result = dg.materialize([hudi_table_asset(keys), matches], resources=p.resources)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {e.check_name for e in evaluations} == {
        declared.key_unique_check, declared.no_deleted_check, RESCAN_CHECK, "matches_source"
    }
    assert all(e.passed for e in evaluations), [e.description for e in evaluations]
    (mat,) = [e.materialization for e in result.get_asset_materialization_events()]
    return {k: v.value for k, v in mat.metadata.items()}


def audit_match(p: FaultPipeline, spark: SparkSession) -> None:
    """The lake's audit log equals the source's, row by row."""
    source = dict(sql(p, "SELECT entry, msg FROM datalake.audit_log"))
    rows = live_rows(read_table(spark, p.lake.table_path_of(AUDIT_LOG))).select("entry", "msg")
    lake = rows.collect()
    assert {r[0]: r[1] for r in lake} == source and len(lake) == len(source)


@contextlib.contextmanager
def connected(p: FaultPipeline) -> Iterator[Any]:
    conn = psycopg2.connect(p.dsn, connect_timeout=5)
    try:
        yield conn
    finally:
        conn.close()


def details_match(p: FaultPipeline, spark: SparkSession, result: IngestResult) -> dict[str, Any]:
    """The lake's order details equal the source's, row by row and by the digest; the lake's
    digest state."""
    assert result.schema is not None
    _, table = details_table(p)
    names = ", ".join(DETAIL_COLUMNS)
    rows = sql(p, f"SELECT {names} FROM {ORDER_DETAILS.source}")
    source = {(r[0], r[1]): tuple(r[2:]) for r in rows}
    lake = {
        (r[0], r[1]): tuple(r[2:])
        for r in live_rows(read_table(spark, table.base_path)).select(*DETAIL_COLUMNS).collect()
    }
    assert set(lake) == set(source)
    for k, (price, quantity, discount) in source.items():
        got = lake[k]
        assert got[1] == quantity and abs(got[0] - price) < 1e-4 and abs(got[2] - discount) < 1e-6
    state = evaluate(spark, table, None, schema=result.schema)
    assert state is not None and state.duplicated_keys == 0
    with connected(p) as conn:
        diff = compare_digests(source_digest(conn, schema=result.schema), state.digest)
    assert diff.equal, diff
    return state.digest


def test_toasted_values_and_truncates_reach_the_lake(pipeline: FaultPipeline, spark):
    p = pipeline
    p.start()
    p.wait_running()
    (identity,) = sql(p, "SELECT relreplident FROM pg_class "
                         "WHERE oid = 'datalake.customers'::regclass")  # fmt: skip
    assert identity == ("f",)  # the source asset set it: the declaration's default
    first, second = [r[0] for r in sql(p, "SELECT customer_id FROM datalake.customers "
                                          "ORDER BY customer_id LIMIT 2")]  # fmt: skip
    notes = {c: secrets.token_hex(11_200) for c in (first, second)}  # 22,400 characters each
    full_customer = first.strip()
    sql(p, "ALTER TABLE datalake.customers ADD COLUMN notes text")
    for c, text in notes.items():
        sql(p, "UPDATE datalake.customers SET notes = %s WHERE customer_id = %s", args=(text, c))
    caught_up(p)
    refresh_customers(p)
    assert lake_customers(p, spark) == source_customers(p)

    # 1. FULL: an update of another column carries the whole row. The phone and fax written
    # here are personal data, which the declaration hashes and excludes.
    tag = secrets.token_hex(6)
    plain = {n: f"{n} {tag}" for n in ("full 1", "default 1", "default 3", "fax 1", "fax 2")}
    city = f"city {tag[:8]}"  # not personal: the search below must find it in each place
    sql(p, "UPDATE datalake.customers SET phone = %s, fax = %s, city = %s WHERE customer_id = %s",
        args=(plain["full 1"], plain["fax 1"], city, first))  # fmt: skip
    caught_up(p)
    meta = refresh_customers(p)
    assert meta["unavailable_lines_filled"] == 0
    lake, source = lake_customers(p, spark), source_customers(p)
    full = (hashed(p, plain["full 1"]), notes[first])
    assert lake[first.strip()] == full == source[first.strip()]

    # 2. DEFAULT: several updates of one customer in one batch, none touching the notes.
    sql(p, "ALTER TABLE datalake.customers REPLICA IDENTITY DEFAULT")
    for phone, fax in (("default 1", None), ("default 1", "fax 2"), ("default 3", "fax 2")):
        sql(p, "UPDATE datalake.customers SET phone = %s, fax = %s WHERE customer_id = %s",
            args=(plain[phone], fax and plain[fax], second))  # fmt: skip
    caught_up(p)
    topic = topic_name(p.cdc.topic_prefix, CUSTOMERS)
    events = raw_events(p.s3, p.cdc.raw_bucket, p.cdc.raw_prefix, topic)
    placeholders = [e for e in events if e.get("notes") == UNAVAILABLE_VALUE]
    assert len(placeholders) == 3  # what the WAL did not carry: Debezium's marker
    meta = refresh_customers(p)
    assert meta["unavailable_lines_filled"] == 3
    lake, source = lake_customers(p, spark), source_customers(p)
    default = (hashed(p, plain["default 3"]), notes[second])
    assert lake[second.strip()] == default == source[second.strip()]
    assert lake == source
    # Its history: the notes' version (the first build's), then the batch's last update (its
    # three collapse, as in the lake), the first closed when the second began.
    (old, new) = customer_versions(p, spark)[second.strip()]
    assert old[2] == new[2] == "u" and old[1] == new[1] == len(notes[second])
    assert new[0] == hashed(p, plain["default 3"]) and new[4] is None and old[4] == new[3]
    # The lake holds the hashes, and the plain values are nowhere past the source: the
    # connector hashed and excluded them before they entered Kafka.
    assert all(v is None or len(v) == 64 for v, _ in lake.values())
    assert "fax" not in events[-1] and events[-1]["phone"] == hashed(p, plain["default 3"])
    assert plain_values_anywhere(p, list(plain.values())) == []
    seen = plain_values_anywhere(p, [city])
    assert any(w.startswith("topic record") for w in seen), seen
    assert any(p.cdc.raw_bucket in w for w in seen), seen
    assert any(p.lake.lake_bucket in w and w.endswith(".parquet") for w in seen), seen

    # 2b. The outbox carries each order's customer row as JSON, under the same policy: its
    # phone hashed (a value that JSON escapes), its fax left out, the rest as PostgreSQL
    # prints it. A customer's change reaches the outbox with its orders' next change.
    (buyer,) = sql(p, "SELECT customer_id FROM datalake.orders WHERE customer_id IS NOT NULL "
                         "ORDER BY order_id LIMIT 1")[0]  # fmt: skip
    outbox_tag = secrets.token_hex(4)
    tricky = f'"q" \\ ü☎😀\t{outbox_tag}'  # phone is varchar(24)
    control = f"town {secrets.token_hex(4)}"
    sql(p, "UPDATE datalake.customers SET phone = %s, fax = %s, city = %s WHERE customer_id = %s",
        args=(tricky, f"fax {outbox_tag}", control, buyer))  # fmt: skip
    sql(p, "UPDATE datalake.orders SET freight = freight WHERE customer_id = %s", args=(buyer,))
    caught_up(p)
    p.refresh()
    orders = read_table(spark, p.lake.table_path_of(OUTBOX)).where(
        F.rtrim("customer_id") == buyer.strip()).select("customer").collect()  # fmt: skip
    assert orders and all(json.loads(r[0])["phone"] == hashed(p, tricky) for r in orders)
    assert all("fax" not in json.loads(r[0]) for r in orders)
    assert all(json.loads(r[0])["city"] == control for r in orders)
    diff = p.compare(spark)  # every order's JSON as the source's under the policies
    assert diff.clean, diff.describe()
    assert plain_values_anywhere(p, [outbox_tag], (OUTBOX,)) == []
    seen = plain_values_anywhere(p, [control], (OUTBOX,))
    assert any(w.startswith("topic record") for w in seen), seen
    assert any(p.cdc.raw_bucket in w for w in seen), seen
    assert any(p.lake.lake_bucket in w and w.endswith(".parquet") for w in seen), seen

    # 3. Leftovers: two customers deleted while the table was out of the publication.
    sql(p, "INSERT INTO datalake.customers (customer_id, company_name) "
           "VALUES ('LEFT1', 'Left over'), ('LEFT2', 'Left over')")  # fmt: skip
    caught_up(p)
    refresh_customers(p)
    sql(p, "ALTER PUBLICATION cdc_publication DROP TABLE datalake.customers",
        "DELETE FROM datalake.customers WHERE customer_id LIKE 'LEFT%%'",
        "ALTER PUBLICATION cdc_publication ADD TABLE datalake.customers")  # fmt: skip
    caught_up(p)
    check = refresh_and_match_customers(p)
    lake, source = lake_customers(p, spark), source_customers(p)
    assert set(lake) - set(source) == {"LEFT1", "LEFT2"} and set(source) <= set(lake)
    # matches_source names them, and the repair.
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert (
        "2 row(s) the source no longer has: customer_id=LEFT1; customer_id=LEFT2. Repair: "
        "`cdc-lake lake reconcile --table datalake.customers`" in (check.description or "")
    ), check.description
    said: list[str] = []
    settings = p.stack.settings
    assert reconcile(settings, resources=p.resources, say=said.append, table=CUSTOMERS) == 0, said
    assert any("2 of them left over" in line for line in said), said
    lake = lake_customers(p, spark)
    assert lake == source_customers(p)
    said = []
    assert reconcile(settings, resources=p.resources, say=said.append, table=CUSTOMERS) == 0, said
    assert not any("left over (commit" in line and "0 of them" not in line for line in said), said

    # 4. A composite key, added to the running pipeline, through the random workload.
    p.capture_more([ORDER_DETAILS])
    first = refresh_details(p, spark)
    assert first.schema is not None and first.schema.keys == ("order_id", "product_id")
    details_match(p, spark, first)
    p.workload(changes=120, rate=40, seed=49)
    caught_up(p)
    changed = refresh_details(p, spark)
    assert changed.committed is not None and changed.committed.deletes > 0
    digest = details_match(p, spark, changed)
    replayed = refresh_details(p, spark, replay_from=0)
    assert details_match(p, spark, replayed)["digest"] == digest["digest"]
    # A detail deleted while the table was out of the publication: the reconcile's composite
    # keys (both columns' text) find it, and only it.
    (gone,) = sql(p, "SELECT order_id, product_id FROM datalake.order_details "
                     "ORDER BY order_id, product_id LIMIT 1")  # fmt: skip
    sql(p, "ALTER PUBLICATION cdc_publication DROP TABLE datalake.order_details")
    sql(p, "DELETE FROM datalake.order_details WHERE order_id = %s AND product_id = %s", args=gone)
    sql(p, "ALTER PUBLICATION cdc_publication ADD TABLE datalake.order_details")
    caught_up(p)
    object_key = "faults/every-event/order_details_reconcile/keys"
    assert replayed.schema is not None
    with connected(p) as conn:
        keys, _ = write_source_keys(
            conn, p.s3, p.lake.lake_bucket, object_key, p.lake.uri(object_key), replayed.schema
        )
    reconciled = refresh_details(p, spark, reconcile=keys)
    assert reconciled.reconciled_rows == 1
    details_match(p, spark, reconciled)

    # 5. No primary key: a unique index on a NOT NULL column is the key.
    sql(p, "CREATE TABLE datalake.audit_log (entry int NOT NULL, msg text)",
        "CREATE UNIQUE INDEX audit_log_entry ON datalake.audit_log (entry)",
        "INSERT INTO datalake.audit_log "
        "SELECT n, 'entry ' || n FROM generate_series(1, 40) n")  # fmt: skip
    p.capture_more([ORDER_DETAILS, AUDIT_LOG])  # its incremental snapshot chunks by the key
    (identity,) = sql(p, "SELECT relreplident FROM pg_class "
                         "WHERE oid = 'datalake.audit_log'::regclass")  # fmt: skip
    assert identity == ("f",)
    first_audit = refresh_declared(p, AUDIT_LOG)
    assert first_audit["dagster/row_count"] == 40 and first_audit["new_commit"] is True
    audit_match(p, spark)
    sql(p, "UPDATE datalake.audit_log SET msg = 'changed' WHERE entry <= 5",
        "UPDATE datalake.audit_log SET entry = 100 WHERE entry = 6",
        "DELETE FROM datalake.audit_log WHERE entry IN (7, 8)",
        "INSERT INTO datalake.audit_log VALUES (41, 'new')")  # fmt: skip
    caught_up(p)
    changed_audit = refresh_declared(p, AUDIT_LOG)
    assert changed_audit["records_deleted"] == 3  # 7, 8 and 6
    audit_match(p, spark)
    keys = read_all(p.reader_conf, p.cdc.topic_of(AUDIT_LOG), keys=True)
    assert keys and all(k is None or set(k) == {"entry"} for k in keys)
    assert {"entry": 100} in keys and {"entry": 6} in keys

    # 6. One TRUNCATE of both captured tables (and, by CASCADE, the orders), then new rows.
    p.refresh()
    assert p.compare(spark).clean
    sql(p, "TRUNCATE datalake.customers, datalake.cdc_events CASCADE",
        "INSERT INTO datalake.customers (customer_id, company_name, notes) "
        "VALUES ('AFTER', 'After the truncate', 'kept')")  # fmt: skip
    caught_up(p)  # its marker is a new order of the new customer
    markers = [e for e in raw_events(p.s3, p.cdc.raw_bucket, p.cdc.raw_prefix, topic)
               if e.get("__op") == "t"]  # fmt: skip
    assert len(markers) == 1
    meta = refresh_customers(p)
    assert meta["rows_truncated"] == len(lake)
    assert lake_customers(p, spark) == source_customers(p) == {"AFTER": (None, "kept")}
    # The history kept every version: the truncate closed every open one at its own time, the
    # reconcile closed the leftovers, and only the new customer's is open.
    versions = customer_versions(p, spark)
    assert [c for c, vs in versions.items() if vs[-1][4] is None] == ["AFTER"]
    (truncated_at,) = {vs[-1][4] for c, vs in versions.items() if c not in ("AFTER", "LEFT1",
                                                                           "LEFT2")}  # fmt: skip
    assert truncated_at == markers[0]["__source_ts_ms"]
    assert all(versions[c][-1][4] < truncated_at for c in ("LEFT1", "LEFT2"))
    assert versions[full_customer][-1][0] == hashed(p, plain["full 1"])
    assert plain_values_anywhere(p, list(plain.values())) == []  # the history's files too
    outbox = p.refresh()
    assert outbox["rows_truncated"] > 0
    diff = p.compare(spark)
    assert diff.clean and diff.source_rows == 1, diff.describe()
    details = refresh_details(p, spark)
    assert details.truncated_rows > 0
    details_match(p, spark, details)
