"""The upsert and the source's schema, on real S3 and the real Hudi bundle with hand-written raw
files: a batch mixing events from before and after a column was added, a field nobody knows, and
a change the lake cannot take (``cdc_lake/lake/ingest.py``, "Schema")."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import socket

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from bench.outbox import cdc_events_hudi
from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.digest import spark_digest
from cdc_lake.lake.hudi_timeline import completed_commits, latest_schema
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_as_of, read_table
from cdc_lake.lake.schema import SchemaChangeError, SourceColumn
from cdc_lake.lake.table_state import evaluate
from cdc_lake.lake.tables import declared_columns
from cdc_lake.resources.local import local_resources
from cdc_lake.resources.source import PostgresResource
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack

ADDED = SourceColumn("sales_channel", "text")


def test_a_batch_mixing_old_and_new_schema_lands_whole(spark: SparkSession, lake: SyntheticLake):
    table = lake.table()
    lake.put([event(1, 100, 1), event(2, 100, 2)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    previous = evaluate(spark, table, None, schema=OUTBOX_SCHEMA)
    assert previous is not None
    # One batch: an event without the column (written before the ALTER), then events with it.
    lake.put([event(3, 200, 3), event(1, 210, 4, sales_channel="web"),
              event(4, 220, 5, sales_channel=None)])  # fmt: skip
    source = [*declared_columns(OUTBOX), ADDED]
    result = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert result.committed is not None and result.schema is not None
    assert result.schema.version == 2 and result.schema.names[-1] == "sales_channel"
    rows = {r["order_id"]: r for r in read_table(spark, table.base_path).collect()}
    assert {o: rows[o]["sales_channel"] for o in rows} == {1: "web", 2: None, 3: None, 4: None}
    recorded = latest_schema(spark, table.base_path)
    assert recorded is not None and recorded.column("sales_channel").source_type == "text"

    # The checks' state: the previous one covers other columns, so this is a full scan, and
    # its digest covers the new column (a value there changes it).
    state = evaluate(spark, table, previous.digest, schema=result.schema)
    assert state is not None and state.mode == "full"
    assert "sales_channel:text" in state.digest["columns"]
    live = live_rows(read_table(spark, table.base_path))
    assert state.digest["digest"] == spark_digest(live, schema=result.schema)["digest"]
    blanked = live.withColumn("sales_channel", live["sales_channel"].substr(1, 0))
    assert spark_digest(blanked, schema=result.schema)["digest"] != state.digest["digest"]
    # The next commit follows the change feed with the new columns, exactly.
    lake.put([event(2, 300, 6, sales_channel="phone")])
    ingest_new_files(spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX)
    followed = evaluate(spark, table, state.digest, schema=result.schema)
    rescan = evaluate(spark, table, state.digest, full_scan=True, schema=result.schema)
    assert followed is not None and followed.mode == "incremental"
    assert rescan is not None and rescan.incremental_matches_rescan is True
    assert followed.digest["digest"] == rescan.digest["digest"]


@pytest.mark.parametrize(
    ("table_type", "delete_mode"), [("COPY_ON_WRITE", "hard"), ("MERGE_ON_READ", "soft")]
)
def test_a_column_added_with_a_default_reaches_every_row_stored_before(
    spark: SparkSession, lake: SyntheticLake, table_type: str, delete_mode: str
):
    """ADD COLUMN ... DEFAULT: PostgreSQL reads the default for every row stored before and
    sends no change for them; the lake gives it to its stored live rows and to lines without
    it. On both table types (MERGE_ON_READ rewrites them into log files) and delete modes (a
    soft-deleted row is stored, not live: it is left as it was deleted)."""
    table = dataclasses.replace(lake.table(), table_type=table_type, delete_mode=delete_mode)
    lake.put([event(1, 100, 1), event(2, 100, 2), event(3, 100, 3)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    previous = evaluate(spark, table, None, schema=OUTBOX_SCHEMA)
    assert previous is not None
    # One batch: a line from before the ALTER (no field), a value, an explicit null.
    lake.put([event(3, 200, 4), event(1, 210, 5, channel="web", fee="1.00"),
              event(4, 220, 6, channel=None, fee=None)])  # fmt: skip
    source = [
        *declared_columns(OUTBOX),
        SourceColumn("channel", "text", True, 20, "retail"),
        SourceColumn("fee", "numeric(6,2)", True, 21, "2.50"),
        SourceColumn("opened", "timestamp with time zone", True, 22, "2026-01-02 03:04:05+01"),
        SourceColumn("note", "text", True, 23),  # added in the same ALTER, without a default
    ]
    result = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert result.committed is not None and result.schema is not None
    assert result.backfilled == 1 and result.backfilled_columns == ("channel", "fee", "opened")
    assert result.events_upserted == 4  # three changes and the stored order 2
    rows = {r["order_id"]: r for r in read_table(spark, table.base_path).collect()}
    assert {o: (r["channel"], r["fee"]) for o, r in rows.items()} == {
        1: ("web", "1.00"),
        2: ("retail", "2.50"),
        3: ("retail", "2.50"),
        4: (None, None),
    }
    opened = datetime.datetime(2026, 1, 2, 2, 4, 5)  # the session's time zone is UTC
    assert [rows[o]["opened"] for o in (1, 2, 3, 4)] == [opened] * 4  # no line had the field
    assert all(r["note"] is None for r in rows.values())
    assert rows[2]["cdc_ordering"] == previous_ordering(spark, table, 2)
    recorded = latest_schema(spark, table.base_path)
    assert recorded is not None and recorded.column("channel").missing_value == "retail"

    # A line written before the ALTER that arrives later (the sink lagging) still gets it, and
    # the stored rows are not filled again. The change feed follows both commits exactly.
    lake.put([event(5, 150, 7), event(2, 300, 8, channel="phone")])
    later = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert later.backfilled == 0 and later.backfilled_columns == ()
    assert later.schema is not None
    rows = {r["order_id"]: r for r in read_table(spark, table.base_path).collect()}
    assert (rows[5]["channel"], rows[2]["channel"]) == ("retail", "phone")
    followed = evaluate(spark, table, previous.digest, schema=later.schema)
    rescan = evaluate(spark, table, previous.digest, full_scan=True, schema=later.schema)
    assert rescan is not None and followed is not None
    assert followed.digest["digest"] == rescan.digest["digest"]
    live = live_rows(read_table(spark, table.base_path))
    assert rescan.digest["digest"] == spark_digest(live, schema=later.schema)["digest"]

    # Another column with a default, and no new line: a commit of its own, checkpoint as it was.
    source.append(SourceColumn("tier", "text", True, 24, "gold"))
    quiet = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert quiet.committed is not None and quiet.files == []
    assert quiet.backfilled == 5 and quiet.backfilled_columns == ("tier",)
    assert quiet.checkpoint == later.checkpoint
    stored = read_table(spark, table.base_path)
    assert {r["tier"] for r in stored.collect()} == {"gold"}
    assert all(stored.schema[c].nullable for c in ("channel", "fee", "opened", "tier"))
    assert latest_schema(spark, table.base_path) == quiet.schema
    again = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert again.committed is None and again.backfilled == 0

    # A column without a default, and no new line: a commit of its own too, which writes one
    # stored row again as it was; every row reads the column as null, the checkpoint as it was.
    before = {r["order_id"]: r.asDict() for r in live_rows(read_table(spark, table.base_path))
              .drop(*[c for c in stored.columns if c.startswith("_hoodie")]).collect()}  # fmt: skip
    source.append(SourceColumn("memo", "text", True, 25))
    plain = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert plain.committed is not None and plain.committed != quiet.committed
    assert plain.files == [] and plain.checkpoint == later.checkpoint
    assert plain.events_upserted == 1 and plain.backfilled == 0
    assert plain.backfilled_columns == ("memo",)
    stored = read_table(spark, table.base_path)
    after = {r["order_id"]: r.asDict() for r in live_rows(stored).collect()}
    assert {o: r.pop("memo") for o, r in after.items()} == dict.fromkeys(before)
    assert {o: {c: r[c] for c in before[o]} for o, r in after.items()} == before
    assert stored.schema["memo"].nullable and latest_schema(spark, table.base_path) == plain.schema
    assert plain.schema is not None and quiet.schema is not None
    assert plain.schema.version == quiet.schema.version + 1
    again = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert again.committed is None
    # Both kinds in one ALTER, still no new line: every stored row gets the default, and both
    # columns are named once.
    source += [
        SourceColumn("level", "text", True, 26, "one"),
        SourceColumn("memo2", "text", True, 27),
    ]
    both = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert both.backfilled == 5 and both.backfilled_columns == ("level", "memo2")
    rows = read_table(spark, table.base_path).collect()
    assert {(r["level"], r["memo2"]) for r in rows} == {("one", None)}

    # A delete, then a column with a default: the four live rows get it, the deleted one not.
    lake.put([event(5, 400, 9, op="d", deleted=True)])
    gone = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert gone.committed is not None and gone.backfilled == 0
    source.append(SourceColumn("zone", "text", True, 28, "z"))
    zoned = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX
    )
    assert zoned.backfilled == 4 and zoned.backfilled_columns == ("zone",)
    rows = {r["order_id"]: r for r in read_table(spark, table.base_path).collect()}
    assert {o: r["zone"] for o, r in rows.items() if not r["is_deleted"]} == dict.fromkeys(
        (1, 2, 3, 4), "z"
    )
    if delete_mode == "soft":
        assert rows[5]["is_deleted"] and rows[5]["zone"] is None
    else:
        assert 5 not in rows


def previous_ordering(spark: SparkSession, table, order_id: int) -> int:
    """The ordering of the order's first commit: a filled row keeps it."""
    first = next(completed_commits(spark, table.base_path))
    row = read_as_of(spark, table.base_path, first.instant).where(f"order_id = {order_id}").first()
    assert row is not None
    return row["cdc_ordering"]


def test_a_field_nobody_knows_stops_naming_it(spark: SparkSession, lake: SyntheticLake):
    table = lake.table()
    lake.put([event(1, 100, 1)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    commits = list(completed_commits(spark, table.base_path))
    key = lake.put([event(2, 200, 2), event(3, 200, 3, surprise=1)])
    with pytest.raises(SchemaChangeError) as err:
        ingest_new_files(
            spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
    text = str(err.value)
    assert "surprise" in text and f"{key} line 2" in text and "Nothing was committed" in text
    assert list(completed_commits(spark, table.base_path)) == commits


def test_an_incompatible_change_commits_nothing(spark: SparkSession, lake: SyntheticLake):
    table = lake.table()
    lake.put([event(1, 100, 1)])
    ingest_new_files(
        spark, lake.client, lake.source, table, captured=OUTBOX, declared=OUTBOX_COLUMNS
    )
    commits = list(completed_commits(spark, table.base_path))
    lake.put([event(1, 200, 2, customer_id="7")])
    narrowed = [
        SourceColumn(c.name, "integer") if c.name == "customer_id" else c
        for c in declared_columns(OUTBOX)
    ]
    with pytest.raises(SchemaChangeError, match=r"'customer_id' changed type from bpchar"):
        ingest_new_files(
            spark, lake.client, lake.source, table, source_columns=narrowed, captured=OUTBOX
        )
    assert list(completed_commits(spark, table.base_path)) == commits
    row = read_table(spark, table.base_path).first()
    assert row is not None and row["customer_id"] == "ALFKI"


def test_without_the_source_the_refresh_keeps_the_recorded_columns(
    ingested, local_stack: LocalStack, secret_env, lake: SyntheticLake, spark: SparkSession
):
    """PostgreSQL unreachable: the Hudi asset warns and ingests with the columns the lake's last
    commit recorded; a field they lack still stops it. (``ingested``: the source's outbox
    exists, so only the unreachable server can make the catalog unreadable.)"""
    s = local_stack.settings
    lake.put([event(1, 100, 1), event(2, 100, 2, sales_channel="web")])
    prefixes = {"lake_prefix": f"synthetic/{lake.name}"}
    resources = local_resources(s, lake=prefixes, raw_prefix=lake.raw_prefix)
    table = lake.table()
    # The lake took sales_channel while the source could be read.
    source = [*declared_columns(OUTBOX), ADDED]
    ingest_new_files(spark, lake.client, lake.source, table, source_columns=source, captured=OUTBOX)
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    unreachable = PostgresResource(
        host=s.host,
        port=port,
        database=s.pg_database,
        user=s.pg_user,
        password=dg.EnvVar("CDC_LAKE_PG_PASSWORD"),
        replication_user=s.replication_user,
        sslmode="disable",
    )
    lake.put([event(3, 200, 3, sales_channel="phone")])
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [cdc_events_hudi], resources={**resources, "postgres": unreachable}, instance=instance
    )
    assert result.success
    logs = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("cannot be read, the lake keeps its own" in m and "unreachable" in m for m in logs)
    rows = {r["order_id"]: r["sales_channel"] for r in read_table(spark, table.base_path).collect()}
    assert rows == {1: None, 2: "web", 3: "phone"}
    lake.put([event(4, 300, 4, surprise="x")])
    failed = dg.materialize(
        [cdc_events_hudi], resources={**resources, "postgres": unreachable}, raise_on_error=False
    )
    assert not failed.success


def test_a_plain_value_in_a_hashed_column_stops_the_refresh(
    spark: SparkSession, lake: SyntheticLake
):
    """A hashed column (docs/column-policies.md) takes the connector's hashes and nulls; a raw
    line with a plain value there (written before the policy reached the connector) stops the
    refresh, naming the object, the line and the column, and nothing is committed."""
    declared = dataclasses.replace(OUTBOX, hashed=("sales_channel",))
    source = [*declared_columns(OUTBOX), ADDED]
    table = lake.table()
    digest = hashlib.sha256(b"salt" + b"web").hexdigest()
    lake.put([event(1, 100, 1, sales_channel=digest), event(2, 100, 2, sales_channel=None)])
    first = ingest_new_files(
        spark, lake.client, lake.source, table, source_columns=source, captured=declared
    )
    assert first.schema is not None and first.schema.column("sales_channel").kind == "hashed"
    rows = {r["order_id"]: r["sales_channel"] for r in read_table(spark, table.base_path).collect()}
    assert rows == {1: digest, 2: None}
    commits = len(list(completed_commits(spark, table.base_path)))
    lake.put([event(3, 200, 3, sales_channel=digest), event(1, 210, 4, sales_channel="web")])
    with pytest.raises(SchemaChangeError) as e:
        ingest_new_files(
            spark, lake.client, lake.source, table, source_columns=source, captured=declared
        )
    said = str(e.value)
    assert "line 2 holds a plain value of sales_channel" in said and "s3://" in said, said
    assert len(list(completed_commits(spark, table.base_path))) == commits


def test_a_json_field_against_its_policy_stops_the_refresh(
    spark: SparkSession, lake: SyntheticLake
):
    """The outbox's customer JSON (``customer.phone`` hashed, ``customer.fax`` excluded) takes
    hashes, nulls and absent fields; a raw line with a plain phone there, or any fax field, was
    written before the policy reached the connector: the refresh stops naming the object, the
    line and the field, and commits nothing."""
    assert "customer.phone" in OUTBOX.hashed_fields and "customer.fax" in OUTBOX.exclude
    table = lake.table()
    digest = hashlib.sha256(b"salt" + b"030-1").hexdigest()
    lake.put([
        event(1, 100, 1, customer=json.dumps({"customer_id": "A", "phone": digest})),
        event(2, 100, 2, customer=json.dumps({"phone": None, "city": "Fax Town"})),
        event(3, 100, 3, customer=json.dumps([{"fax": "in an array: not a field"}])),
        event(4, 100, 4, customer=None),
    ])  # fmt: skip
    first = ingest_new_files(spark, lake.client, lake.source, table,
                             source_columns=OUTBOX_COLUMNS, captured=OUTBOX)  # fmt: skip
    assert first.schema is not None and first.schema.hashed_fields == OUTBOX.hashed_fields
    assert "customer.fax" in first.schema.excluded
    commits = len(list(completed_commits(spark, table.base_path)))
    for customer, said in (
        ({"phone": "030-1"}, "a plain value of customer.phone, which the declaration hashes"),
        ({"fax": None, "phone": digest}, "the field customer.fax, which the declaration excludes"),
    ):
        # The same object each time (offsets 4 and 5), rewritten.
        key = lake.put([event(5, 200, 5), event(1, 210, 6, customer=json.dumps(customer))],
                       start=4)  # fmt: skip
        with pytest.raises(SchemaChangeError) as e:
            ingest_new_files(spark, lake.client, lake.source, table,
                             source_columns=OUTBOX_COLUMNS, captured=OUTBOX)  # fmt: skip
        assert f"{key} line 2 holds {said}" in str(e.value), str(e.value)
        assert len(list(completed_commits(spark, table.base_path))) == commits
