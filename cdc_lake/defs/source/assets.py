"""The captured source tables in PostgreSQL: the outbox, ``datalake.cdc_events``, and every other
captured table (``cdc_lake/source/captured.py``), such as ``datalake.customers``.

Materialising the outbox applies the project's SQL (schema, outbox table, triggers, publication)
and is idempotent: existing tables and data are kept; sample data is loaded only into empty
tables; the outbox is brought in line with the orders without rewriting unchanged rows, so a
rerun emits no change events. It also publishes every captured table and lets the replication
role read it (``cdc_lake/source/database.py``).

The other captured tables belong to the application that writes them: they are external assets
here, the start of their own lineage (topic, raw files, Hudi table).
"""

import datetime

import dagster as dg

from cdc_lake.defs import stage_attrs, stage_spec
from cdc_lake.defs.keys import KEYS, table_keys
from cdc_lake.resources.source import PostgresResource
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.captured import OUTBOX
from cdc_lake.source.database import prepare_source


@dg.asset(
    key=table_keys(OUTBOX).source,
    kinds={"postgres"},
    **stage_attrs(__name__),
)
def cdc_events_outbox(
    context: dg.AssetExecutionContext, postgres: PostgresResource, cdc: CdcPipelineResource
) -> dg.MaterializeResult:
    """One row per order, kept current by triggers on orders and order_details (the
    transactional outbox), with the order's items, products, customer, employee, shipper and
    shipment as JSONB. Published for logical replication with REPLICA IDENTITY FULL."""
    conn = postgres.connect()
    try:
        stats, loaded = prepare_source(
            conn,
            postgres.replication_user,
            scale=cdc.sample_scale,
            seed=cdc.sample_seed,
            progress=context.log.info,
        )
    finally:
        conn.close()
    metadata: dict[str, dg.MetadataValue] = {
        "dagster/row_count": dg.MetadataValue.int(stats.rows),
        "orders": dg.MetadataValue.int(stats.orders),
        "order_lines": dg.MetadataValue.int(stats.order_lines),
        "sample_data_loaded": dg.MetadataValue.bool(loaded),
        "table": dg.MetadataValue.text(f"{postgres.database}.datalake.cdc_events"),
    }
    if stats.last_update:  # an empty outbox has none: no "None" in the UI
        updated = datetime.datetime.fromisoformat(stats.last_update)
        metadata["last_update"] = dg.MetadataValue.timestamp(updated)
    return dg.MaterializeResult(metadata=metadata)


# Captured as they are: written by the application, published by the outbox asset above.
captured_source_tables = [
    stage_spec(
        __name__,
        k.source,
        {"postgres"},
        f"The source table {k.table.source}, captured as it is (key "
        f"{', '.join(k.table.keys)}): published for logical replication by the outbox asset.",
        [],
    )
    for k in KEYS
    if not k.table.maintained
]
