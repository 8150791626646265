"""The assets' keys, in pipeline order: one home, so that a stage refers to its neighbours
without importing their definitions (and the stages import no cycle).

Keys follow the storage: the source table in PostgreSQL, the Kafka topic, the raw files on S3,
the Hudi table, the order items on S3. Each captured table (``cdc_lake/source/captured.py``) has
its own first four, named after it (its declaration may name the source asset), and a fifth,
``<name>_history`` beside its Hudi table, when its declaration keeps a history; a mart's key is
its own, and its table is the one whose declaration lists it (``marts``).
"""

from dataclasses import dataclass

import dagster as dg

from cdc_lake.source.captured import TABLES, CapturedTable


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
    # Its history table's, when its declaration keeps one (``history``).
    history: dg.AssetKey | None = None


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
        history=dg.AssetKey(["hudi", schema, f"{name}_history"]) if table.history else None,
    )


KEYS = tuple(table_keys(t) for t in TABLES)
# One Debezium connector and one S3 sink serve every table: their checks sit on the first
# declared table's topic and raw files (the asset a user opens first).
CONNECTORS = KEYS[0]
ORDER_ITEMS_KEY = dg.AssetKey(["s3", "marts", "order_items"])
