"""The stack's servers: PostgreSQL, S3Proxy, a KRaft Kafka broker, a Kafka Connect worker and the
lake server (a warm Spark session that runs the lake's Spark apps, ``lake_server.py``); with
``CDC_LAKE_LOCAL_SPARK=cluster``, a Spark standalone master and two workers as well.

Each ``Service`` knows how to prepare its state (config files, an initialised data directory),
the command that runs it in the foreground, how to tell it is healthy, and what to do once it is
(create roles, buckets). ``LocalStack`` in ``stack.py`` drives them in order.
"""

from cdc_lake.stack.services.base import (
    JavaService,
    Service,
    java_binary,
    java_major_version,
    require_java,
)
from cdc_lake.stack.services.connect import KafkaConnect
from cdc_lake.stack.services.kafka import Kafka, new_cluster_id
from cdc_lake.stack.services.lake import LakeServer
from cdc_lake.stack.services.postgres import Postgres, postgres_bindir
from cdc_lake.stack.services.s3proxy import S3Proxy
from cdc_lake.stack.services.spark_cluster import SparkMaster, SparkWorker, spark_cluster_services
from cdc_lake.stack.settings import StackSettings

__all__ = [
    "JavaService",
    "Kafka",
    "KafkaConnect",
    "LakeServer",
    "Postgres",
    "S3Proxy",
    "Service",
    "SparkMaster",
    "SparkWorker",
    "all_services",
    "java_binary",
    "java_major_version",
    "new_cluster_id",
    "postgres_bindir",
    "require_java",
    "spark_cluster_services",
]


def all_services(settings: StackSettings) -> list[Service]:
    """In start order; stopped in reverse."""
    return [
        Postgres(settings),
        S3Proxy(settings),
        Kafka(settings),
        KafkaConnect(settings),
        *(KafkaConnect(settings, f"connect_{n}") for n in range(2, settings.connect_workers + 1)),
        LakeServer(settings),
        *(spark_cluster_services(settings) if settings.spark_mode == "cluster" else []),
    ]
