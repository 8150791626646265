"""The assets' keys, in pipeline order: one home, so that a stage refers to its neighbours
without importing their definitions (and the stages import no cycle).

Keys follow the storage: the source table in PostgreSQL, the Kafka topic, the raw files on S3,
the Hudi table, the order items on S3. Each captured table (``cdc_lake/source/captured.py``) has
its own first four, named after it; the outbox's source is the outbox asset, which this project
builds and keeps, and the order items are the outbox's alone.
"""

from dataclasses import dataclass

import dagster as dg

from cdc_lake.source.captured import OUTBOX, TABLES, CapturedTable


@dataclass(frozen=True)
class TableKeys:
    """A captured table's asset keys, and the names of the job and sensor that refresh it."""

    table: CapturedTable
    source: dg.AssetKey
    topic: dg.AssetKey
    raw: dg.AssetKey
    hudi: dg.AssetKey
    refresh_job: str
    sensor: str


def table_keys(table: CapturedTable) -> TableKeys:
    schema, name = table.source.split(".")
    return TableKeys(
        table=table,
        source=dg.AssetKey(["postgres", schema, table.source_asset or name]),
        topic=dg.AssetKey(["kafka", f"{name}_topic"]),
        raw=dg.AssetKey(["s3", "raw", f"{name}_files"]),
        hudi=dg.AssetKey(["hudi", schema, name]),
        refresh_job=table.refresh_job or f"{name}_lake_refresh",
        sensor=table.sensor or f"{name}_raw_files_sensor",
    )


KEYS = tuple(table_keys(t) for t in TABLES)
OUTBOX_KEYS = table_keys(OUTBOX)
OUTBOX_KEY = OUTBOX_KEYS.source
TOPIC_KEY = OUTBOX_KEYS.topic
RAW_KEY = OUTBOX_KEYS.raw
HUDI_KEY = OUTBOX_KEYS.hudi
ORDER_ITEMS_KEY = dg.AssetKey(["s3", "marts", "order_items"])
