"""The one factory for Spark configuration: Hudi bundle, Kryo, Hudi SQL extension and catalog, and
s3a pointed at an S3 endpoint.

``spark_conf`` is a plain dict so that the Dagster PySpark resource, tests and benchmarks all
build the same session from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_lake.stack.process import StackError
from cdc_lake.stack.settings import StackSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HUDI_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
}


def s3a_conf(
    endpoint: str, region: str, access_key: str | None = None, secret_key: str | None = None
) -> dict[str, str]:
    """s3a against one endpoint. Without keys, the JVM reads AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY from its environment, so no secret sits in the Spark config."""
    keys = (
        {
            "spark.hadoop.fs.s3a.aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
            "spark.hadoop.fs.s3a.access.key": access_key,
            "spark.hadoop.fs.s3a.secret.key": secret_key,
        }
        if access_key and secret_key
        else {
            "spark.hadoop.fs.s3a.aws.credentials.provider": (
                "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
            )
        }
    )
    return {
        **keys,
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
        # S3Proxy's ETags are not stable across copy/rename; s3a must not insist on them.
        "spark.hadoop.fs.s3a.change.detection.mode": "none",
        "spark.hadoop.fs.s3a.change.detection.version.required": "false",
    }


def spark_conf(
    settings: StackSettings, shuffle_partitions: int = 4, with_keys: bool = True
) -> dict[str, str]:
    # No check for the jars here: building the config must work before they are installed.
    jars = settings.spark_jars()
    keys = (settings.credentials.s3_access_key, settings.credentials.s3_secret_key)
    return {
        "spark.master": "local[*]",
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        **HUDI_CONF,
        **s3a_conf(settings.s3_endpoint, settings.region, *(keys if with_keys else (None, None))),
    }


def build_spark_session(
    settings: StackSettings, app_name: str = "cdc-lake", extra: dict[str, str] | None = None
) -> SparkSession:
    from pyspark.sql import SparkSession

    if not settings.spark_jars():
        raise StackError(
            f"spark: no Hudi/s3a jars in {settings.classpath_dir('spark')}. "
            "Fix: run `cdc-lake stack install`."
        )
    builder = SparkSession.Builder().appName(app_name)
    for key, value in {**spark_conf(settings), **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
