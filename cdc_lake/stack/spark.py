"""The one factory for Spark configuration: Hudi bundle, Kryo, Hudi SQL extension and catalog, and
s3a pointed at an S3 endpoint.

``spark_conf`` is a plain dict so that the Dagster PySpark resource, tests and benchmarks all
build the same session from it. It holds no secret: pyspark hands every conf to spark-submit as
a ``--conf`` argument, which any local user can read in ``ps``. s3a gets its keys from the
JVM's environment (the Dagster resource; EMR's instance role) or, in ``build_spark_session``,
from a 0600 profile file with the stack's keys, never from the Hadoop configuration, which
Spark broadcasts to every task in pieces that its block manager serves.

A local session is also closed and quiet: the driver and its block manager listen on 127.0.0.1
only and refuse a client without the JVM's own secret (``spark.authenticate``), the log level
is WARN (``conf/spark-log4j2.properties``, read as the JVM starts), there are no console
progress bars, and the SQL warehouse sits in the state directory rather than in
the working directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.hudi import SESSION_CONF
from cdc_lake.stack.process import StackError, keep_private
from cdc_lake.stack.settings import StackSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
LOG4J2_PROPERTIES = Path(__file__).resolve().parent / "conf" / "spark-log4j2.properties"
DRIVER_JAVA_OPTIONS = (
    "-Duser.timezone=UTC",
    f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES}",
    # Hudi's object sizer (JOL) must not attach to its own JVM: a dynamic attach that does not
    # complete leaves its SIGQUIT to the JVM, which then prints a whole thread dump to stdout.
    # The Serviceability Agent attach (another JVM, needs ptrace) is skipped too; JOL says so
    # in "# WARNING" lines and sizes objects without either.
    "-Djol.skipDynamicAttach=true",
    "-Djol.skipHotspotSAAttach=true",
)
# What a long-lived session (the lake server) keeps of the work it has done. Spark's status store
# keeps the last 1,000 SQL executions with their plans, and 1,000 jobs and stages, whether a UI
# reads them or not: measured by the soak benchmark, ~250 MB of the lake server's heap after
# ~100 commits (each commit is ~10 SQL executions with plans of ~180 kB). And its shared cache of
# file listings takes up to 250 MB, filling with the raw objects each commit lists once. A few
# dozen of each are plenty for a warning's context; the heap is flat after a few commits.
RETAINED = {
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.hive.filesourcePartitionFileCacheSize": str(32 * 1024 * 1024),
}
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
ENV_PROVIDER = "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
PROFILE_PROVIDER = "com.amazonaws.auth.profile.ProfileCredentialsProvider"
# A local session's s3a tries the JVM's environment first (a JVM started with AWS_* keys, as an
# in-process Spark may be), then the 0600 profile file that ``build_spark_session`` names. The
# first fails cleanly when the variables are absent, so the chain moves on to the second.
LOCAL_PROVIDERS = f"{ENV_PROVIDER},{PROFILE_PROVIDER}"
# The variables Spark copies into the Hadoop configuration (and so into what it broadcasts)
# when the JVM starts with them: ``build_spark_session`` starts its JVM without them.
AWS_KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
S3A_PROFILE = "cdc-lake"


def s3a_conf(endpoint: str, region: str, provider: str = ENV_PROVIDER) -> dict[str, str]:
    """s3a against one endpoint. By default the JVM reads AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY from its environment; no secret sits in the Spark config."""
    return {
        "spark.hadoop.fs.s3a.aws.credentials.provider": provider,
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
        # S3Proxy's ETags are not stable across copy/rename; s3a must not insist on them.
        "spark.hadoop.fs.s3a.change.detection.mode": "none",
        "spark.hadoop.fs.s3a.change.detection.version.required": "false",
    }


def spark_conf(settings: StackSettings, shuffle_partitions: int = 4) -> dict[str, str]:
    """A local session's config, without secrets: s3a reads its keys from the environment."""
    # No check for the jars here: building the config must work before they are installed.
    jars = settings.spark_jars()
    return {
        "spark.master": "local[*]",
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        # The block manager binds the driver's bind address too.
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        # The driver's RPC and its block manager refuse a client without the session's secret,
        # which local mode generates in the JVM (no secret in any conf or argument).
        "spark.authenticate": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(settings.state_dir / "spark-warehouse"),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": " ".join(DRIVER_JAVA_OPTIONS),
        **RETAINED,
        **SESSION_CONF,
        **s3a_conf(settings.s3_endpoint, settings.region, LOCAL_PROVIDERS),
    }


def set_s3a_keys(spark: SparkSession, access_key: str, secret_key: str) -> None:
    """Give a running session's s3a its keys through the JVM's Hadoop configuration, over py4j's
    local socket. Only for a JVM started without them in its environment: the Hadoop
    configuration travels in the pieces Spark broadcasts (``build_spark_session`` avoids it).
    Must run before the first s3a access, which caches the file system with the keys it found."""
    jsc: Any = spark.sparkContext._jsc  # a py4j JavaObject
    if jsc is None:
        raise StackError("spark: the session is stopped; build a new one")
    hadoop = jsc.hadoopConfiguration()
    hadoop.set("fs.s3a.aws.credentials.provider", SIMPLE_PROVIDER)
    hadoop.set("fs.s3a.access.key", access_key)
    hadoop.set("fs.s3a.secret.key", secret_key)


def write_s3a_profile(settings: StackSettings) -> Path:
    """The stack's S3 keys as an AWS profile (``S3A_PROFILE``) in a 0600 file: what s3a's
    ProfileCredentialsProvider, and boto3, read when a process's environment names the file."""
    c = settings.credentials
    profile = settings.conf_dir / "s3a-credentials"
    text = (
        f"[{S3A_PROFILE}]\naws_access_key_id = {c.s3_access_key}\n"
        f"aws_secret_access_key = {c.s3_secret_key}\n"
    )
    return keep_private(profile, text)


@contextmanager
def _in_environment(values: dict[str, str], without: tuple[str, ...] = ()) -> Iterator[None]:
    """``values`` in this process's environment, and the variables ``without`` out of it, while
    the block runs (a JVM started in it inherits that), as they were afterwards."""
    saved = {k: os.environ.get(k) for k in (*values, *without)}
    for k in without:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_spark_session(
    settings: StackSettings, app_name: str = "cdc-lake", extra: dict[str, str] | None = None
) -> SparkSession:
    """A local session on the stack, with the stack's S3 keys (see ``set_s3a_keys``)."""
    from pyspark.sql import SparkSession

    if not settings.spark_jars():
        raise StackError(
            f"spark: no Hudi/s3a jars in {settings.classpath_dir('spark')}. "
            "Fix: run `cdc-lake stack install`."
        )
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    conf = {**spark_conf(settings), **(extra or {})}
    builder = SparkSession.Builder().appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    c = settings.credentials
    # s3a reads the keys from a 0600 profile file that the new JVM's environment names
    # (ProfileCredentialsProvider): in no argument, no environment and not in the Hadoop
    # configuration, which Spark broadcasts to every task. (Keys in the JVM's environment would
    # not do: Spark copies AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY into that configuration;
    # so the JVM starts without them, even where this process has them, as the tests do.)
    profile = write_s3a_profile(settings)
    names = {"AWS_CREDENTIAL_PROFILES_FILE": str(profile), "AWS_PROFILE": S3A_PROFILE}
    with _in_environment(names, without=AWS_KEY_VARIABLES):
        spark = builder.getOrCreate()
    jvm: Any = spark.sparkContext._jvm
    if jvm.java.lang.System.getenv("AWS_CREDENTIAL_PROFILES_FILE") != str(profile):
        # A JVM that was running already, started without the profile's names: only its Hadoop
        # configuration can carry the keys.
        set_s3a_keys(spark, c.s3_access_key, c.s3_secret_key)
    return spark
