"""The Hudi ``cdc_events`` table: raw CDC files upserted with Spark.

Each materialisation ingests only the raw files after the checkpoint held in the newest Hudi
commit. The latest change per order wins by (source ts_ms, LSN), within a batch and across
batches that arrive out of order. Deletes are applied (hard by default). A malformed file fails
the run, naming the object key and line, and commits nothing; with ``quarantine`` on, its bad
lines go to the quarantine prefix and the run goes on. A run with no new files commits nothing.
See ``cdc_lake/lake/ingest.py`` for the details.
"""

import dagster as dg
from dagster_aws.s3 import S3Resource
from dagster_pyspark import PySparkResource

from cdc_lake.defs.raw.assets import RAW_KEY
from cdc_lake.lake.hudi import table_exists
from cdc_lake.lake.ingest import RawSource, ingest_new_files, read_table
from cdc_lake.resources import CdcPipelineResource, LakeResource

HUDI_KEY = dg.AssetKey(["hudi", "datalake", "cdc_events"])


@dg.asset(
    key=HUDI_KEY,
    deps=[RAW_KEY],
    group_name="lake",
    kinds={"hudi", "spark", "s3"},
    owners=["team:data-platform"],
    tags={"stage": "lake"},
)
def cdc_events_hudi(
    context: dg.AssetExecutionContext,
    pyspark: PySparkResource,
    s3: S3Resource,
    cdc: CdcPipelineResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """The current state of every order, one row per order_id, upserted from the raw CDC files
    into an Apache Hudi table (COPY_ON_WRITE by default). Dates are DATE, updated_at TIMESTAMP;
    order_items, products, customer, employee, shipper and shipment stay JSON strings."""
    spark = pyspark.spark_session
    result = ingest_new_files(
        spark,
        s3.get_client(),
        RawSource(cdc.raw_bucket, cdc.raw_prefix, lake.scheme),
        lake.table_config(),
        quarantine_path=lake.quarantine_path if lake.quarantine else None,
    )
    commit = result.committed
    if commit is None:
        context.log.info("no new raw files since the checkpoint: nothing committed")
    rows = read_table(spark, lake.table_path).count() if table_exists(spark, lake.table_path) else 0
    return dg.MaterializeResult(
        metadata={
            "commit_instant": dg.MetadataValue.text(commit.instant if commit else "none"),
            "records_inserted": dg.MetadataValue.int(commit.inserts if commit else 0),
            "records_updated": dg.MetadataValue.int(commit.updates if commit else 0),
            "records_deleted": dg.MetadataValue.int(commit.deletes if commit else 0),
            "files_read": dg.MetadataValue.int(len(result.files)),
            "bytes_read": dg.MetadataValue.int(result.bytes_read),
            "events_read": dg.MetadataValue.int(result.events_read),
            "events_upserted": dg.MetadataValue.int(result.events_upserted),
            "quarantined_lines": dg.MetadataValue.int(result.quarantined),
            "dagster/row_count": dg.MetadataValue.int(rows),
            "table_path": dg.MetadataValue.path(lake.table_path),
            "table_type": dg.MetadataValue.text(lake.table_type),
            "checkpoint": dg.MetadataValue.json(result.checkpoint),
            "s3_list_requests": dg.MetadataValue.int(result.list_requests),
            "seconds": dg.MetadataValue.float(round(result.seconds, 2)),
        }
    )
