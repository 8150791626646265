"""The AWS Glue Data Catalog side of the lake.

- The Hudi table registers itself: Hudi's Hive sync runs inside the Spark write when
  ``glue_sync_options`` are among the write options. In ``hms`` mode it talks to the metastore of
  the Spark session, which on EMR (cluster with the Glue catalog as its metastore, and EMR
  Serverless by default) is the Glue Data Catalog: this is the route AWS documents for Hudi on
  EMR, and it needs no jar beyond the image's Hudi bundle. It syncs only on schema or partition
  changes, so Glue does not keep a table version per commit.
- The order items are plain Parquet, rewritten in full each time; ``register_parquet_table``
  creates or updates their Glue table from Dagster, so Athena queries both.
"""

from __future__ import annotations

from typing import Any

ORDER_ITEMS_COLUMNS = (
    ("customer_id", "string"),
    ("order_id", "bigint"),
    ("order_date", "date"),
    ("product_id", "bigint"),
    ("product_name", "string"),
    ("unit_price", "double"),
    ("quantity", "bigint"),
    ("discount", "double"),
    ("revenue", "double"),
)


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


def parquet_table_input(table: str, location: str, columns=ORDER_ITEMS_COLUMNS) -> dict[str, Any]:
    return {
        "Name": table,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"classification": "parquet", "EXTERNAL": "TRUE"},
        "StorageDescriptor": {
            "Columns": [{"Name": n, "Type": t} for n, t in columns],
            "Location": location,
            "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
            "SerdeInfo": {
                "SerializationLibrary": (
                    "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
                ),
                "Parameters": {"serialization.format": "1"},
            },
        },
    }


def register_parquet_table(glue_client: Any, database: str, table: str, location: str) -> str:
    """Create (or update, if it changed) an external Parquet table; return what was done."""
    wanted = parquet_table_input(table, location)
    try:
        glue_client.get_database(Name=database)
    except glue_client.exceptions.EntityNotFoundException:
        glue_client.create_database(DatabaseInput={"Name": database})
    try:
        current = glue_client.get_table(DatabaseName=database, Name=table)["Table"]
    except glue_client.exceptions.EntityNotFoundException:
        glue_client.create_table(DatabaseName=database, TableInput=wanted)
        return "created"
    sd = current.get("StorageDescriptor", {})
    same = sd.get("Location") == location and [
        (c["Name"], c["Type"]) for c in sd.get("Columns", [])
    ] == [(c["Name"], c["Type"]) for c in wanted["StorageDescriptor"]["Columns"]]
    if same:
        return "unchanged"
    glue_client.update_table(DatabaseName=database, TableInput=wanted)
    return "updated"
