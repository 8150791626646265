"""What the production path's tests share (``aws/``, ``resources/test_spark.py``,
``resources/test_lake.py``, ``infra/test_moto_deploy.py``): moto's server (the root conftest's
``moto_endpoint``) plays EMR, EMR Serverless and Glue, in ``REGION``.

S3 stays the real local S3 server of the session stack: the Spark apps' code, their Pipes
messages and the lake all live there, as they would live in one AWS account's S3. A synthetic
lake (``synthetic_lake``) puts raw files there, and ``synthetic_resources`` points the local
resources at its table, with the Spark launcher under test.
"""

from __future__ import annotations

from typing import Any

from bench.synthetic import SyntheticLake
from cdc_lake.resources.local import local_resources
from cdc_lake.stack import LocalStack

REGION = "us-east-1"


def synthetic_lake(local_stack: LocalStack) -> SyntheticLake:
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    return SyntheticLake(client, s.raw_bucket, s.lake_bucket)


def synthetic_resources(
    local_stack: LocalStack, syn: SyntheticLake, spark_jobs: Any, spark: str | None = None
) -> dict[str, Any]:
    resources = local_resources(
        local_stack.settings,
        spark=spark,
        lake={
            "lake_prefix": f"synthetic/{syn.name}",
            "order_items_prefix": f"synthetic/{syn.name}/order_items",
            "quarantine_prefix": f"synthetic/{syn.name}/quarantine",
        },
        raw_prefix=syn.raw_prefix,
    )
    return {**resources, "spark_jobs": spark_jobs or resources["spark_jobs"]}
