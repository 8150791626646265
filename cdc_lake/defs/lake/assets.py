"""The Hudi ``cdc_events`` table: raw CDC files upserted with Spark.

Each materialisation ingests only the raw lines past the checkpoint held in the newest Hudi
commit: the last Kafka offset ingested per topic partition, so re-cut, overwritten or
duplicated raw objects change nothing. Run config ``replay_from_offset`` re-reads the raw files
from that offset on (the repair path; ``cdc-lake lake replay``). The latest change per order
wins by (source ts_ms, LSN), within a batch and across batches that arrive out of order.
Deletes are applied (hard by default). A malformed line fails the run, naming the object key
and line, and commits nothing; with ``quarantine`` on, bad lines go to the quarantine prefix and
the run goes on. A run with nothing new commits nothing.
The Spark job (``cdc_lake/jobs/lake_jobs.py``) runs on local Spark or on EMR, as the
``spark_jobs`` resource decides, and evaluates the key and delete checks right after its commit.
See ``cdc_lake/lake/ingest.py`` for the details.
"""

import dagster as dg
from pydantic import Field

from cdc_lake.defs.raw.assets import RAW_KEY
from cdc_lake.resources import CdcPipelineResource, LakeResource
from cdc_lake.spark_jobs import SparkJobsResource

HUDI_KEY = dg.AssetKey(["hudi", "datalake", "cdc_events"])


class LakeRefreshConfig(dg.Config):
    replay_from_offset: int | None = Field(
        default=None,
        description="Re-ingest every topic partition's raw lines from this Kafka offset on, "
        "whatever the checkpoint says. The latest change still wins, so a replay only repairs.",
    )


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
    config: LakeRefreshConfig,
    spark_jobs: SparkJobsResource,
    cdc: CdcPipelineResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """The current state of every order, one row per order_id, upserted from the raw CDC files
    into an Apache Hudi table (COPY_ON_WRITE by default). Dates are DATE, updated_at TIMESTAMP;
    order_items, products, customer, employee, shipper and shipment stay JSON strings."""
    if config.replay_from_offset is not None:
        context.log.info(f"replaying the raw files from offset {config.replay_from_offset}")
    outcome = spark_jobs.run(context, "upsert", lake.upsert_params(cdc, config.replay_from_offset))
    if outcome.metadata["commit_instant"].value == "none":
        context.log.info("no new raw lines since the checkpoint: nothing committed")
    return outcome.materialize_result(context)
