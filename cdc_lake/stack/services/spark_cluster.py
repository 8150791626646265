"""The Spark standalone cluster's daemons (``CDC_LAKE_LOCAL_SPARK=cluster``): a master and two
workers, JVMs run from pyspark's own jars (``org.apache.spark.deploy.master.Master`` and
``...worker.Worker``, as Spark's ``sbin`` scripts start them). How they are configured, and why,
is ``cdc_lake/stack/spark_cluster.py``.

Their arguments are hosts, ports, paths and sizes; the secret and the UI token are in 0600 files.
A worker is healthy once the master holds it ALIVE; it starts its executors itself, as children
in its process group, so stopping a worker (or ``kill -9`` of its group) takes its executors too.
"""

from __future__ import annotations

from pathlib import Path

from cdc_lake.stack import spark_cluster as cluster
from cdc_lake.stack.process import StackError
from cdc_lake.stack.services.base import Service, require_java
from cdc_lake.stack.settings import StackSettings


class _SparkDaemon(Service):
    main_class = ""
    properties: Path  # the 0600 properties file ``prepare`` writes

    def prepare(self) -> None:
        self.s.data_dir(self.name).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.properties = cluster.daemon_properties(self.s)

    def cwd(self) -> Path | None:
        return self.s.data_dir(self.name)

    def env(self) -> dict[str, str]:
        # The worker finds the executors' jars under SPARK_HOME, for the Scala version it names.
        return {
            "SPARK_HOME": str(cluster.SPARK_HOME),
            "SPARK_SCALA_VERSION": cluster.scala_version(),
            "SPARK_LOCAL_IP": self.s.host,
        }

    def daemon_args(self) -> list[str]:
        """After the RPC and UI ports (``ports``): what this daemon adds."""
        return []

    def argv(self) -> list[str]:
        if not any(self.s.classpath_dir(cluster.UI_GUARD_CLASSPATH).glob("*.jar")):
            raise StackError(
                f"{self.name}: no UI guard jar in "
                f"{self.s.classpath_dir(cluster.UI_GUARD_CLASSPATH)}. "
                "Fix: run `cdc-lake stack install` first."
            )
        return [
            require_java(),
            *cluster.DAEMON_JAVA_OPTIONS,
            "-cp",
            cluster.daemon_classpath(self.s),
            self.main_class,
            "--host",
            self.s.host,
            "--port",
            str(self.s.port(self.ports[0])),
            "--webui-port",
            str(self.s.port(self.ports[1])),
            *self.daemon_args(),
            "--properties-file",
            str(self.properties),
        ]


class SparkMaster(_SparkDaemon):
    name = "spark_master"
    ports = ("spark_master", "spark_master_ui")
    main_class = "org.apache.spark.deploy.master.Master"

    def healthy(self) -> bool:
        return cluster.master_state(self.s).get("status") == "ALIVE"

    def details(self) -> dict[str, object]:
        return {
            "endpoint": self.s.spark_master_url,
            "ui": f"http://{self.s.host}:{self.s.port('spark_master_ui')}",
            "ui_token_file": str(cluster.ui_token_path(self.s)),
        }


class SparkWorker(_SparkDaemon):
    main_class = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, settings: StackSettings, name: str):
        super().__init__(settings)
        self.name = name
        self.ports = (name, f"{name}_ui")

    def daemon_args(self) -> list[str]:
        return [
            "--cores",
            str(cluster.WORKER_CORES),
            "--memory",
            cluster.WORKER_MEMORY,
            "--work-dir",
            str(self.s.data_dir(self.name) / "work"),
            self.s.spark_master_url,
        ]

    def healthy(self) -> bool:
        return self.s.port(self.name) in cluster.alive_workers(self.s)


def spark_cluster_services(settings: StackSettings) -> list[Service]:
    return [SparkMaster(settings), *(SparkWorker(settings, n) for n in cluster.worker_names())]
