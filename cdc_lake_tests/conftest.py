"""Session fixtures: one real local stack for the whole test run.

The stack gets a fresh state directory and its own port base (``CDC_LAKE_TEST_PORT_BASE``,
default 16400), so it never touches a developer's stack on the default ports. Jars come from the
project's installed jars directory; if they are missing the fixture installs them first.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cdc_lake.stack import LocalStack, StackSettings
from cdc_lake.stack.install import install, jars_installed
from cdc_lake.stack.settings import CONNECT_WORKERS, LOCAL_SPARK_MODES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# pytest-xdist's workers ("gw0", "gw1", ...) each start a stack of their own, 3,000 ports apart
# (16400, 19400): room for the test modules' own stacks at offsets 100..900, and clear of the
# benchmarks' default base (17400).
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
TEST_PORT_BASE = int(os.environ.get("CDC_LAKE_TEST_PORT_BASE", "16400")) + 3000 * _WORKER


def fresh_state_dir(prefix: str = "cdc-lake-test-") -> Path:
    # Not pytest's tmp_path: PostgreSQL runs as the postgres user, who must reach the directory.
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def make_settings(port_base: int, state_dir: Path | None = None) -> StackSettings:
    """A stack's settings for the tests: the default servers and Spark launcher whatever the
    caller's environment says (the tests that want the cluster or a second Connect worker start
    them themselves)."""
    project_jars = StackSettings.from_env().jars_dir
    settings = StackSettings.from_env(
        state_dir=state_dir or fresh_state_dir(), port_base=port_base, jars_dir=project_jars
    )
    return replace(settings, spark_mode=LOCAL_SPARK_MODES[0], connect_workers=CONNECT_WORKERS[0])


@pytest.fixture(scope="session")
def stack_settings() -> StackSettings:
    settings = make_settings(TEST_PORT_BASE)
    if not jars_installed(settings):
        install(settings)
    return settings


@pytest.fixture(scope="session")
def local_stack(stack_settings: StackSettings) -> Iterator[LocalStack]:
    stack = LocalStack(stack_settings, verbose=False)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        shutil.rmtree(stack_settings.state_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def fresh_boto3_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets boto3's default session anew: it caches the first credentials it
    resolves, so a test that sets other keys (moto's, a Stubber's) would hand them to the next
    test's clients of the stack's S3 server."""
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


@pytest.fixture(scope="session")
def spark(local_stack: LocalStack):
    from cdc_lake.stack.spark import build_spark_session

    session = build_spark_session(local_stack.settings, app_name="cdc-lake-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def plain_spark() -> Iterator[SparkSession]:
    """A plain local Spark (no Hudi, no S3, no stack), for tests of pure DataFrame functions.

    A JVM holds one SparkContext, and its classpath is fixed when it starts. So: if a context is
    already running (the stack's session, with Hudi and S3A), use it and leave it running; else
    start our own, and at the end stop it and shut its JVM down, so that a later stack session
    starts a JVM with its jars."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    own = SparkContext._active_spark_context is None
    session = (
        SparkSession.Builder()
        .master("local[2]")
        .appName("cdc-lake-plain-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.authenticate", "true")  # as every Spark the project starts
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    if own:
        session.sparkContext.setLogLevel("ERROR")
    yield session
    if own:
        session.stop()
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None


def processes_using(state_dir: Path) -> list[tuple[int, str]]:
    """Live processes whose command line mentions the state directory (every stack server's
    does: its data directory or config file is an argument)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if str(state_dir) in cmdline and state != "Z":
            found.append((int(proc.name), cmdline[:200]))
    return found


@pytest.fixture(scope="session")
def secret_env(local_stack: LocalStack) -> Iterator[dict[str, str]]:
    """The resources' EnvVars, set as `dagster dev` would get them from .env."""
    from cdc_lake.stack.settings import local_secret_env

    values = local_secret_env(local_stack.settings)
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    yield values
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def resources(local_stack: LocalStack, secret_env: dict[str, str]) -> dict:
    from cdc_lake.resources.local import local_resources

    # Short flush and heartbeat intervals: tests wait for raw files and slot progress in
    # seconds, not tens of seconds.
    return local_resources(local_stack.settings, flush_interval_ms=1500, heartbeat_interval_ms=1000)


@pytest.fixture(scope="session")
def ingested(resources: dict):
    """The sample data through outbox -> Debezium -> Kafka -> S3 sink, materialised once."""
    import dagster as dg

    from cdc_lake.defs.raw.assets import raw_cdc_files
    from cdc_lake.defs.source.assets import cdc_events_outbox
    from cdc_lake.defs.streaming.assets import cdc_events_topic

    result = dg.materialize(
        [cdc_events_outbox, cdc_events_topic, raw_cdc_files], resources=resources
    )
    assert result.success
    return result


@pytest.fixture
def pg(local_stack: LocalStack):
    import psycopg2

    conn = psycopg2.connect(local_stack.settings.pg_dsn())
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's server, for the AWS control planes that cannot run here (EMR, EMR Serverless,
    Glue) and for throwaway S3 buckets in tests of AWS-only code."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()
