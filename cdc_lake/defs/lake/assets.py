"""The Hudi ``cdc_events`` table: raw CDC files upserted with Spark.

Each materialisation ingests only the raw files after the checkpoint held in the newest Hudi
commit. The latest change per order wins by (source ts_ms, LSN), within a batch and across
batches that arrive out of order. Deletes are applied (hard by default). A malformed file fails
the run, naming the object key and line, and commits nothing; with ``quarantine`` on, its bad
lines go to the quarantine prefix and the run goes on. A run with no new files commits nothing.
The Spark job (``cdc_lake/jobs/lake_jobs.py``) runs on local Spark or on EMR, as the
``spark_jobs`` resource decides, and evaluates the key and delete checks right after its commit.
See ``cdc_lake/lake/ingest.py`` for the details.
"""

import dagster as dg

from cdc_lake.defs.raw.assets import RAW_KEY
from cdc_lake.resources import CdcPipelineResource, LakeResource
from cdc_lake.spark_jobs import SparkJobsResource

HUDI_KEY = dg.AssetKey(["hudi", "datalake", "cdc_events"])


@dg.asset(
    key=HUDI_KEY,
    deps=[RAW_KEY],
    group_name="lake",
    kinds={"hudi", "spark", "s3"},
    owners=["team:data-platform"],
    tags={"stage": "lake"},
    check_specs=[
        dg.AssetCheckSpec(
            "order_id_unique", asset=HUDI_KEY, description="order_id is unique in the Hudi table"
        ),
        dg.AssetCheckSpec(
            "no_deleted_orders",
            asset=HUDI_KEY,
            description="no deleted order survives in the table (hard deletes)",
        ),
    ],  # fmt: skip
)
def cdc_events_hudi(
    context: dg.AssetExecutionContext,
    spark_jobs: SparkJobsResource,
    cdc: CdcPipelineResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """The current state of every order, one row per order_id, upserted from the raw CDC files
    into an Apache Hudi table (COPY_ON_WRITE by default). Dates are DATE, updated_at TIMESTAMP;
    order_items, products, customer, employee, shipper and shipment stay JSON strings."""
    outcome = spark_jobs.run(context, "upsert", lake.upsert_params(cdc))
    if outcome.metadata["commit_instant"].value == "none":
        context.log.info("no new raw files since the checkpoint: nothing committed")
    return outcome.materialize_result(context)
