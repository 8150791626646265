"""The local Spark standalone cluster (``CDC_LAKE_LOCAL_SPARK=cluster``): how its daemons and the
applications submitted to it are configured, and how to ask the master for its state.

The cluster is a master and ``SPARK_WORKERS`` workers (``cdc_lake/stack/services/spark_cluster.py``)
run from pyspark's own jars, each worker with one core and its executors in JVMs of their own,
as EMR's YARN runs them. What that changes against local mode, and how each is handled:

- **Authentication.** A standalone cluster has no way to hand out a secret per application: the
  master, the workers and every application share ``spark.authenticate.secret``. It is in two
  0600 properties files (``--properties-file``, read into the JVM, never an argument), one for the
  daemons and one for the applications; a worker gives it to the executors it starts in their
  environment (``_SPARK_AUTH_SECRET``), never on their command line.
- **Web UIs.** The master's and the workers' cannot be turned off; a servlet filter of ours
  (``connectors/spark-ui-guard``) answers 401 to any request without the bearer token of a 0600
  file. The kill links are off, and the master's REST submission server stays off (Spark's
  default).
- **S3 keys on the executors.** They read the same 0600 profile file as a local session
  (``write_s3a_profile``): its path, never the keys, is in the executors' environment.
- **Code.** The jars are on every executor's class path from its start (Hudi's Kryo registrator
  must load before the first task; EMR's image has its Hudi bundle on every node), and
  ``--jars`` ships them too. The apps' Python runs in the driver, from the ``--py-files`` zip
  (the apps have no Python UDF, so the executors run none of it).
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pyspark

from cdc_lake.stack.process import StackError, keep_private
from cdc_lake.stack.settings import SPARK_WORKERS, StackSettings
from cdc_lake.stack.spark import (
    DRIVER_JAVA_OPTIONS,
    S3A_PROFILE,
    spark_conf,
    write_s3a_profile,
)

SPARK_HOME = Path(pyspark.__file__).resolve().parent
UI_FILTER = "io.cdclake.spark.ui.TokenFilter"
UI_GUARD_CLASSPATH = "spark-ui-guard"
# What each worker offers, and what an application takes of it: one executor per worker.
WORKER_CORES, WORKER_MEMORY = 1, "1g"
EXECUTOR_MEMORY = "768m"


def scala_version() -> str:
    """The Scala version pyspark's jars are built for (``spark-core_2.12-...``): a worker's
    launcher of executors asks for it, as Spark's own scripts set it."""
    core = next((SPARK_HOME / "jars").glob("spark-core_*.jar"))
    return core.name.removeprefix("spark-core_").split("-", 1)[0]


def worker_names() -> list[str]:
    return [f"spark_worker_{i}" for i in range(1, SPARK_WORKERS + 1)]


def ui_token_path(settings: StackSettings) -> Path:
    return settings.conf_dir / "spark-ui-token"


def daemon_properties(settings: StackSettings) -> Path:
    """The master's and workers' 0600 properties file: the shared secret and the UI guard."""
    token = keep_private(ui_token_path(settings), settings.credentials.spark_ui_token + "\n")
    props = {
        "spark.authenticate": "true",
        "spark.authenticate.secret": settings.credentials.spark_secret,
        "spark.ui.filters": UI_FILTER,
        f"spark.{UI_FILTER}.param.tokenFile": str(token),
        "spark.ui.killEnabled": "false",
        "spark.master.rest.enabled": "false",
        # A dead worker is struck off after 15 s without a heartbeat rather than 60 s.
        "spark.worker.timeout": "15",
        # The executors' directories of finished applications go after a day.
        "spark.worker.cleanup.enabled": "true",
        "spark.worker.cleanup.appDataTtl": "86400",
    }
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    return keep_private(settings.conf_dir / "spark-cluster.properties", text)


def app_properties(settings: StackSettings) -> Path:
    """An application's 0600 properties file: the secret the cluster shares, and nothing else."""
    props = {
        "spark.authenticate": "true",
        "spark.authenticate.secret": settings.credentials.spark_secret,
    }
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    return keep_private(settings.conf_dir / "spark-app.properties", text)


DAEMON_JAVA_OPTIONS = ("-Xmx256m", *DRIVER_JAVA_OPTIONS)


def daemon_classpath(settings: StackSettings) -> str:
    return f"{SPARK_HOME / 'jars'}/*:{settings.classpath_dir(UI_GUARD_CLASSPATH)}/*"


def app_conf(settings: StackSettings, python: str) -> dict[str, str]:
    """An application's confs (no secret: they are spark-submit arguments): the local session's,
    on the cluster's master, with executors that find the jars, the S3 profile and ``python``."""
    jars = [str(j) for j in settings.spark_jars()]
    conf = {k: v for k, v in spark_conf(settings).items() if k not in ("spark.jars",)}
    profile = write_s3a_profile(settings)
    return {
        **conf,
        "spark.master": settings.spark_master_url,
        "spark.submit.deployMode": "client",
        "spark.driver.memory": "1g",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": str(WORKER_CORES),
        "spark.cores.max": str(WORKER_CORES * SPARK_WORKERS),
        "spark.executor.extraJavaOptions": " ".join(DRIVER_JAVA_OPTIONS),
        "spark.executor.extraClassPath": ":".join(jars),
        "spark.executorEnv.AWS_CREDENTIAL_PROFILES_FILE": str(profile),
        "spark.executorEnv.AWS_PROFILE": S3A_PROFILE,
        "spark.executorEnv.SPARK_LOCAL_IP": settings.host,
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
    }


def master_state(settings: StackSettings, timeout_s: float = 5) -> dict[str, Any]:
    """The master's state (its UI's ``/json/``: status, workers, applications)."""
    token = ui_token_path(settings).read_text().strip()
    conn = http.client.HTTPConnection(
        settings.host, settings.port("spark_master_ui"), timeout=timeout_s
    )
    try:
        conn.request("GET", "/json/", headers={"Authorization": f"Bearer {token}"})
        answer = conn.getresponse()
        body = answer.read()
    finally:
        conn.close()
    if answer.status != 200:
        raise StackError(f"spark_master: its UI answered {answer.status}")
    return json.loads(body)


def alive_workers(settings: StackSettings) -> set[int]:
    """The RPC ports of the workers the master holds ALIVE."""
    return {w["port"] for w in master_state(settings).get("workers", []) if w["state"] == "ALIVE"}
