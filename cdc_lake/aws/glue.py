"""The AWS Glue Data Catalog side of the lake.

Both Hudi tables (``cdc_events`` and ``order_items``) register themselves: Hudi's Hive sync runs
inside the Spark write when ``glue_sync_options`` are among the write options. In ``hms`` mode it
talks to the metastore of the Spark session, which on EMR (cluster with the Glue catalog as its
metastore, and EMR Serverless by default) is the Glue Data Catalog: this is the route AWS
documents for Hudi on EMR, and it needs no jar beyond the image's Hudi bundle. It syncs only on
schema or partition changes, so Glue does not keep a table version per commit. Athena queries
both through Hudi's input format.
"""

from __future__ import annotations


def glue_sync_options(database: str, table: str, partition_field: str) -> dict[str, str]:
    """Hudi write options that sync the table into the Glue database after each commit."""
    opts = {
        "hoodie.datasource.meta.sync.enable": "true",
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.use_jdbc": "false",
        "hoodie.datasource.hive_sync.database": database,
        "hoodie.datasource.hive_sync.table": table,
        "hoodie.datasource.hive_sync.support_timestamp": "true",
        # Sync only when the schema or the partitions change: Glue versions every update.
        "hoodie.datasource.meta_sync.condition.sync": "true",
    }
    if partition_field:
        opts |= {
            "hoodie.datasource.hive_sync.partition_fields": partition_field,
            "hoodie.datasource.hive_sync.partition_extractor_class": (
                "org.apache.hudi.hive.MultiPartKeysValueExtractor"
            ),
        }
    else:
        opts["hoodie.datasource.hive_sync.partition_extractor_class"] = (
            "org.apache.hudi.hive.NonPartitionedExtractor"
        )
    return opts
