"""Sessions from the project's Spark factory against the real stack: no secret in any process's
arguments, the driver listening on loopback only, and a quiet run that leaves nothing in the
working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import LakeServer
from cdc_lake.stack.spark import LOCAL_PROVIDERS, PROFILE_PROVIDER
from cdc_lake_tests.second_user import listening_sockets

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def stack_secrets(stack: LocalStack) -> dict[str, str]:
    return json.loads((stack.settings.state_dir / "credentials.json").read_text())


def all_cmdlines() -> dict[int, str]:
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    return found


def jvm_pid(spark) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def test_no_secret_in_the_arguments_of_the_stack_or_the_spark_jvm(local_stack: LocalStack, spark):
    # The session reaches S3 with the stack's keys, though no process was given them as an
    # argument; the scan covers every process on the machine.
    path = f"s3a://{local_stack.settings.lake_bucket}/tests/spark-keys"
    spark.range(3).write.mode("overwrite").parquet(path)
    assert spark.read.parquet(path).count() == 3

    secrets = stack_secrets(local_stack)
    assert len(secrets) == 13 and all(len(v) >= 16 for v in secrets.values())
    cmdlines = all_cmdlines()
    jvm = jvm_pid(spark)
    assert "org.apache.spark.deploy.SparkSubmit" in cmdlines[jvm]
    servers = [st.pid for st in local_stack.status().values()]
    assert all(pid in cmdlines for pid in servers), servers
    leaks = [
        (pid, name, line[:120])
        for pid, line in cmdlines.items()
        for name, value in secrets.items()
        if value in line
    ]
    assert leaks == []
    # Nor in the Hadoop configuration, which Spark broadcasts: s3a read the 0600 profile file.
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    assert hadoop.get("fs.s3a.access.key") is None and hadoop.get("fs.s3a.secret.key") is None
    assert hadoop.get("fs.s3a.aws.credentials.provider") == LOCAL_PROVIDERS
    assert LOCAL_PROVIDERS.endswith(PROFILE_PROVIDER)


def test_another_local_user_is_refused_by_every_spark_port(local_stack: LocalStack, spark):
    """Every TCP port of the tests' JVM and of the lake server's, found from the system, tried
    as a second Unix user: a block fetch by broadcast id and an RPC get Spark's demand for
    authentication, a py4j command gets py4j's, and no other port is open. What Spark 3.5 still
    serves without authentication is a stream of a jar it was given (public Maven jars; upstream
    apache/spark#58612), never a file: the test names what was served."""
    from cdc_lake_tests.second_user import (
        as_user,
        attacker,
        open_blocks,
        py4j_command,
        spark_rpc,
        spark_stream,
    )

    user = attacker()
    server = local_stack.service("lake_server")
    assert isinstance(server, LakeServer)
    _hudi_write(spark, f"s3a://{local_stack.settings.lake_bucket}/tests/ports-{uuid.uuid4().hex}")
    jvms = {"tests": jvm_pid(spark), "lake server": int(server.health()["jvm_pid"])}
    ports = {name: sorted({p for _, p in listening_sockets(pid)}) for name, pid in jvms.items()}
    given = Path(spark.sparkContext.getConf().get("spark.jars").split(",")[0])
    assert given.is_relative_to(local_stack.settings.jars_dir)  # from Maven Central
    jar = given.name

    def probe() -> dict:
        seen: dict = {}
        for name, listed in ports.items():
            for port in listed:
                blocks = set()
                for i in range(10):  # a port that does not answer once will not answer again
                    blocks.add(spark_rpc(port, open_blocks([f"broadcast_{i}_piece0"])))
                    if "timeout" in blocks:
                        break
                rpc = spark_rpc(port, b"\xac\xed\x00\x05")
                seen[f"{name}:{port}"] = {
                    "blocks": sorted(blocks),
                    "rpc": rpc,
                    # A Spark port waits for a whole frame: ask py4j's question elsewhere only.
                    "py4j": "not asked" if rpc.startswith("failure") else py4j_command(port),
                    "jar": spark_stream(port, f"/jars/{jar}"),
                    "file": spark_stream(port, "/files/credentials.json"),
                }
        return seen

    seen = as_user(user, probe)
    assert "child_error" not in seen, seen
    refused = "failure: java.lang.IllegalStateException: Expected SaslMessage"
    kinds: dict[str, list[str]] = {}
    for where, answers in seen.items():
        blocks = answers["blocks"]
        if blocks and all(a.startswith(refused) for a in blocks):
            assert answers["rpc"].startswith(refused), (where, answers)
            kinds.setdefault(where.split(":")[0], []).append("spark")
        elif answers["py4j"].startswith("!xsAuthentication error"):
            kinds.setdefault(where.split(":")[0], []).append("py4j")
        else:
            raise AssertionError(f"{where} is neither a Spark port that demands authentication "
                                 f"nor py4j's: {answers}")  # fmt: skip
        assert answers["file"] != "stream", (where, answers)
    # The driver's RPC and its block manager, and py4j's gateway, in each JVM.
    assert {k: sorted(v) for k, v in kinds.items()} == {
        "tests": ["py4j", "spark", "spark"], "lake server": ["py4j", "spark", "spark"]
    }, seen  # fmt: skip
    # What may be served: the given jar, on a driver port (named in a failure's output).
    served = sorted(w for w, a in seen.items() if a["jar"] == "stream")
    assert len(served) <= 2, served


def _hudi_write(spark, path: str) -> None:
    from bench.synthetic import OUTBOX_SCHEMA
    from cdc_lake.lake.hudi import HudiTableConfig

    # Rows keyed as the outbox's: its schema gives the key.
    table = HudiTableConfig(base_path=path, partition_field="")
    options = table.write_options(schema=OUTBOX_SCHEMA)
    rows = spark.range(0, 2000).selectExpr(
        "id AS order_id", "id AS cdc_ordering", "false AS _hoodie_is_deleted"
    )
    rows.write.format("hudi").options(**options).mode("append").save(path)


def test_the_spark_driver_listens_on_loopback_only(local_stack: LocalStack, spark):
    pid = jvm_pid(spark)
    listening = listening_sockets(pid)
    # The driver's RPC endpoint, its block manager and py4j's gateway.
    assert len(listening) >= 3, listening
    # During a Hudi write too: its embedded timeline server listened on :: (issue 10).
    path = f"s3a://{local_stack.settings.lake_bucket}/tests/listen-{uuid.uuid4().hex}"
    seen, polls = set(listening), 0
    with ThreadPoolExecutor(1) as pool:
        write = pool.submit(_hudi_write, spark, path)
        while not write.done():
            seen |= set(listening_sockets(pid))
            polls += 1
            time.sleep(0.02)
        write.result()
    assert polls > 10  # the write took long enough to be watched
    assert spark.read.format("hudi").load(path).count() == 2000
    assert [s for s in seen if s[0] not in LOOPBACK] == []


QUIET_JOB = textwrap.dedent(
    """
    import uuid

    from cdc_lake.stack.settings import StackSettings
    from cdc_lake.stack.spark import build_spark_session

    s = StackSettings.from_env()
    spark = build_spark_session(s, app_name="cdc-lake-quiet")
    path = f"s3a://{s.lake_bucket}/tests/quiet-job-{uuid.uuid4().hex}"
    rows = spark.range(0, 20000).selectExpr("id AS order_id", "id % 7 AS v", "id % 3 AS g")
    (
        rows.repartition(8)
        .write.format("hudi")
        .option("hoodie.table.name", "quiet_job")
        .option("hoodie.datasource.write.recordkey.field", "order_id")
        .option("hoodie.datasource.write.precombine.field", "v")
        .option("hoodie.datasource.write.partitionpath.field", "")
        .option(
            "hoodie.datasource.write.keygenerator.class",
            "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        )
        .option("hoodie.datasource.write.operation", "upsert")
        .mode("overwrite")
        .save(path)
    )
    print(spark.read.format("hudi").load(path).groupBy("g").count().count())
    spark.sql("CREATE DATABASE IF NOT EXISTS quiet_job")
    spark.stop()
    """
)


def test_a_spark_job_is_quiet_and_leaves_nothing_in_the_working_directory(
    local_stack: LocalStack, tmp_path: Path
):
    s = local_stack.settings
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "CDC_LAKE_S3_", "PYSPARK_", "SPARK_"))
    }
    env.update(
        CDC_LAKE_STATE_DIR=str(s.state_dir),
        CDC_LAKE_PORT_BASE=str(s.port_base),
        CDC_LAKE_JARS_DIR=str(s.jars_dir),
    )
    proc = subprocess.run(
        [sys.executable, "-c", QUIET_JOB],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Before the answer, at most "# WARNING" lines of Hudi's object sizer (JOL), which prints
    # to System.out, out of log4j's reach.
    *before, answer = proc.stdout.splitlines()
    assert answer == "3"
    assert [line for line in before if not line.startswith("# WARNING")] == []
    noisy = [
        line
        for line in proc.stderr.splitlines()
        if " INFO " in line or " DEBUG " in line or "[Stage " in line
    ]
    assert noisy == [], f"{len(noisy)} noisy lines, first: {noisy[:5]}"
    # The SQL warehouse (where CREATE DATABASE went) is in the state directory.
    assert list(tmp_path.iterdir()) == []
    assert (s.state_dir / "spark-warehouse" / "quiet_job.db").is_dir()


def test_a_long_lived_session_keeps_a_bounded_history_of_its_work(spark):
    """The lake server runs thousands of commits on one session: Spark's status store keeps no
    more SQL executions and jobs than ``RETAINED`` says, however many ran (the soak benchmark
    measured ~250 MB of heap at Spark's defaults)."""
    from cdc_lake.stack.spark import RETAINED

    executions = int(RETAINED["spark.sql.ui.retainedExecutions"])
    jobs = int(RETAINED["spark.ui.retainedJobs"])
    for conf, value in RETAINED.items():
        assert spark.sparkContext.getConf().get(conf) == value
    for i in range(max(executions, jobs) + 20):
        spark.range(i + 1).selectExpr("sum(id)").collect()  # one SQL execution, one job
    store = spark._jsparkSession.sharedState().statusStore()
    app = spark.sparkContext._jsc.sc().statusStore()
    deadline = time.monotonic() + 30
    counts = (store.executionsCount(), app.jobsList(None).size())
    while counts[0] > executions or counts[1] > jobs:  # trimmed on a thread of its own
        assert time.monotonic() < deadline, counts
        time.sleep(0.5)
        counts = (store.executionsCount(), app.jobsList(None).size())
    assert 0 < counts[0] <= executions and 0 < counts[1] <= jobs, counts
