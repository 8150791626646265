"""A single KRaft Kafka broker (broker and controller in one process).
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from cdc_lake.stack.process import StackError, open_private_log, port_in_use
from cdc_lake.stack.services.base import JavaService


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64. Like Kafka's own Uuid, never one
    that starts with '-', which a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class Kafka(JavaService):
    """A single-node KRaft broker (broker and controller in one process)."""

    name = "kafka"
    ports = ("kafka", "kafka_controller")
    main_class = "kafka.Kafka"
    classpath = "kafka"
    heap = "768m"

    @property
    def conf(self) -> Path:
        return self.s.conf_dir / "kafka-server.properties"

    def prepare(self) -> None:
        super().prepare()
        logs = self.s.data_dir("kafka")
        h, p, cp = self.s.host, self.s.port("kafka"), self.s.port("kafka_controller")
        self.conf.write_text(
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.voters=1@{h}:{cp}\n"
            f"listeners=PLAINTEXT://{h}:{p},CONTROLLER://{h}:{cp}\n"
            f"advertised.listeners=PLAINTEXT://{h}:{p}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={logs}\n"
            "num.partitions=1\n"
            "offsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "auto.create.topics.enable=true\n"
            "log.retention.hours=-1\n"
        )
        if not (logs / "meta.properties").is_file():
            logs.mkdir(parents=True, exist_ok=True)
            cluster_id = new_cluster_id()
            argv = self.java_argv()
            # Same JVM and classpath, the storage tool instead of the broker.
            argv[argv.index(self.main_class) :] = [
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",
                "-c",
                str(self.conf),
            ]
            result = subprocess.run(argv, capture_output=True, text=True, umask=0o077)
            with open_private_log(self.log) as f:
                f.write((result.stdout + result.stderr).encode())
            if result.returncode != 0:
                raise StackError(
                    f"kafka: formatting the KRaft storage in {logs} failed (see {self.log}): "
                    f"{(result.stdout + result.stderr).strip()[-500:]}"
                )

    def argv(self) -> list[str]:
        return self.java_argv(str(self.conf))

    def healthy(self) -> bool:
        from confluent_kafka.admin import AdminClient

        if not port_in_use(self.s.host, self.s.port("kafka")):
            return False  # spares librdkafka's connection-refused log lines
        admin = AdminClient(
            {"bootstrap.servers": self.s.kafka_bootstrap, "socket.timeout.ms": 2000, "log_level": 0}
        )
        meta = admin.list_topics(timeout=3)
        return len(meta.brokers) == 1

    def details(self) -> dict[str, object]:
        return {
            "bootstrap_servers": self.s.kafka_bootstrap,
            "controller": f"{self.s.host}:{self.s.port('kafka_controller')}",
            "data_dir": str(self.s.data_dir("kafka")),
        }
