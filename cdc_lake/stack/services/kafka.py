"""A single KRaft Kafka broker (broker and controller in one process).

Both listeners authenticate every client with SASL/PLAIN (``CLIENT`` for clients, ``CONTROLLER``
for the broker's own controller traffic): a connection without a known user and its password
is closed before any request, so another local user can neither read a topic nor write one.
The users and passwords (``StackSettings.kafka_users``) are in the 0600 properties file only,
never in an argument or the environment. PLAIN sends the password in the clear, which is why
the listeners are bound to loopback, where no other user can watch the traffic.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from cdc_lake.stack.process import StackError, open_private_log, port_in_use, write_private
from cdc_lake.stack.services.base import JavaService
from cdc_lake.stack.settings import KAFKA_SASL_MECHANISM, KAFKA_SECURITY_PROTOCOL


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64. Like Kafka's own Uuid, never one
    that starts with '-', which a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def plain_jaas(user: str, password: str, users: dict[str, str] | None = None) -> str:
    """A ``sasl.jaas.config`` value for SASL/PLAIN: log in as ``user``; as a server, take
    ``users``. Refuses a value that JAAS's quoted strings cannot hold as it is."""
    pairs = {"username": user, "password": password} | {
        f"user_{u}": p for u, p in (users or {}).items()
    }
    for name, value in pairs.items():
        if not value or any(c in value for c in '"\\;\n'):
            raise StackError(
                f"kafka: the SASL {name} setting must be non-empty, without quotes, "
                "backslashes, semicolons or newlines (CDC_LAKE_KAFKA_PASSWORD, or "
                "credentials.json in the state directory)"
            )
    return f"{PLAIN_LOGIN} required " + " ".join(f'{k}="{v}"' for k, v in pairs.items()) + ";"


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
        users = self.s.kafka_users
        broker = self.s.kafka_broker_user
        write_private(
            self.conf,
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.voters=1@{h}:{cp}\n"
            f"listeners=CLIENT://{h}:{p},CONTROLLER://{h}:{cp}\n"
            f"advertised.listeners=CLIENT://{h}:{p}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=CLIENT\n"
            "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT\n"
            "sasl.enabled.mechanisms=PLAIN\n"
            "sasl.mechanism.inter.broker.protocol=PLAIN\n"
            "sasl.mechanism.controller.protocol=PLAIN\n"
            # Every user on the clients' listener; only the broker itself on the controller's.
            "listener.name.client.plain.sasl.jaas.config="
            f"{plain_jaas(broker, users[broker], users)}\n"
            "listener.name.controller.plain.sasl.jaas.config="
            f"{plain_jaas(broker, users[broker], {broker: users[broker]})}\n"
            f"log.dirs={logs}\n"
            "num.partitions=1\n"
            "offsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "auto.create.topics.enable=true\n"
            "log.retention.hours=-1\n",
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
        conf = self.s.kafka_client_conf(self.s.kafka_broker_user)
        admin = AdminClient({**conf, "socket.timeout.ms": 2000, "log_level": 0})
        meta = admin.list_topics(timeout=3)
        return len(meta.brokers) == 1

    def details(self) -> dict[str, object]:
        return {
            "bootstrap_servers": self.s.kafka_bootstrap,
            "security_protocol": KAFKA_SECURITY_PROTOCOL,
            "sasl_mechanism": KAFKA_SASL_MECHANISM,
            "user": self.s.kafka_user,
            "password": self.s.kafka_users[self.s.kafka_user],
            "controller": f"{self.s.host}:{self.s.port('kafka_controller')}",
            "data_dir": str(self.s.data_dir("kafka")),
        }
