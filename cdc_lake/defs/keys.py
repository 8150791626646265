"""The five assets' keys, in pipeline order: one home, so that a stage refers to its neighbours
without importing their definitions (and the stages import no cycle).

Keys follow the storage: the outbox table in PostgreSQL, the Kafka topic, the raw files on S3,
the Hudi table, the order items on S3.
"""

import dagster as dg

OUTBOX_KEY = dg.AssetKey(["postgres", "datalake", "cdc_events_outbox"])
TOPIC_KEY = dg.AssetKey(["kafka", "cdc_events_topic"])
RAW_KEY = dg.AssetKey(["s3", "raw", "cdc_events_files"])
HUDI_KEY = dg.AssetKey(["hudi", "datalake", "cdc_events"])
ORDER_ITEMS_KEY = dg.AssetKey(["s3", "marts", "order_items"])
