"""The original Northwind dump, loaded by the user, is used as it is: 829 events."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import psycopg2

from bench.outbox import OUTBOX_KEY, RAW_KEY, TOPIC_KEY
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres
from cdc_lake_tests.ingestion.helpers import metadata, raw_events

# shared/ sits beside the checkout (CI clones main next to it); CDC_LAKE_SHARED_DIR overrides.
SHARED = Path(os.environ.get("CDC_LAKE_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
DUMP = SHARED / "reference" / "northwind"


def create_database(stack: LocalStack, name: str) -> None:
    svc = stack.service("postgres")
    assert isinstance(svc, Postgres)
    svc.create_database(name, replace=True)


def test_original_dump_yields_829_events(local_stack: LocalStack, secret_env):
    assert (DUMP / "northwind_ddl.sql").is_file(), f"reference dump not found at {DUMP}"
    create_database(local_stack, "northwind_ref")
    s = local_stack.settings
    dsn = s.pg_dsn(database="northwind_ref")
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("CREATE SCHEMA datalake; SET search_path TO datalake")
        cur.execute((DUMP / "northwind_ddl.sql").read_text())
        cur.execute((DUMP / "northwind_data.sql").read_text())
    resources = local_resources(
        s,
        database="northwind_ref",
        topic_prefix="ref",
        slot_name="ref_slot",
        raw_prefix="ref-events/",
        flush_interval_ms=1500,
    )
    result = dg.materialize(
        [cdc_events_outbox, cdc_events_topic, raw_cdc_files], resources=resources
    )
    assert result.success
    outbox = metadata(result, OUTBOX_KEY)
    assert outbox["sample_data_loaded"] is False  # the dump's own data, nothing generated
    assert outbox["dagster/row_count"] == 829 and outbox["order_lines"] == 2152
    assert metadata(result, TOPIC_KEY)["records"] == 829
    assert metadata(result, RAW_KEY)["records_flushed"] == 829
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    events = raw_events(client, s.raw_bucket, "ref-events/", resources["cdc"].topic_of(OUTBOX))
    assert len(events) == 829
    assert {e["__db"] for e in events} == {"northwind_ref"}
    assert 11077 in {e["order_id"] for e in events} and 11075 not in {e["order_id"] for e in events}
