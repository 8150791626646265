"""A single KRaft Kafka broker (broker and controller in one process).

Both listeners authenticate every client: a connection without a known user and its password
is closed before any request, so another local user can neither read a topic nor write one.
(Except on the SASL-cost benchmark's twin stack, ``StackSettings.kafka_sasl`` off: PLAINTEXT
and no authorizer, set in code only, never from the environment.)

- ``CLIENT`` takes SASL/SCRAM-SHA-512 for the clients (Connect, Dagster, the tests) and PLAIN
  for the broker alone. SCRAM credentials live in the cluster's metadata: at each start the
  broker, logged in with PLAIN, sets each client user's from ``StackSettings.kafka_users``
  (``after_healthy``). SCRAM never sends the password; the broker's PLAIN login does, which is
  one reason the listeners are bound to loopback, where no other user can watch the traffic.
- ``CONTROLLER`` takes the broker's PLAIN login only.

Every request is then authorized (``StandardAuthorizer``, deny by default): what each user may
do is ``cdc_lake/stack/kafka_acls.py``, made the broker's ACLs at each start.

Passwords are in the 0600 properties file and the 0600 credentials file, never in an argument
or the environment.
"""

# confluent_kafka.admin re-exports these names without listing them in __all__.
# pyright: reportPrivateImportUsage=false
from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from cdc_lake.stack.kafka_acls import grants, sync
from cdc_lake.stack.process import (
    StackError,
    open_private_log,
    port_in_use,
    wait_until,
    write_private,
)
from cdc_lake.stack.services.base import JavaService
from cdc_lake.stack.settings import (
    KAFKA_BROKER_MECHANISM,
    KAFKA_SASL_MECHANISM,
)


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64. Like Kafka's own Uuid, never one
    that starts with '-', which a command line would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
SCRAM_ITERATIONS = 4096  # the minimum Kafka takes: paid once per connection


def sasl_jaas(mechanism: str, user: str, password: str, users: dict[str, str] | None = None) -> str:
    """A ``sasl.jaas.config`` value: log in as ``user`` with ``mechanism``; as a PLAIN server,
    take ``users``. Refuses a value that JAAS's quoted strings cannot hold as it is."""
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
    options = " ".join(f'{k}="{v}"' for k, v in pairs.items())
    return f"{LOGIN_MODULES[mechanism]} required {options};"


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
        plain = KAFKA_BROKER_MECHANISM
        own = sasl_jaas(plain, broker, users[broker], {broker: users[broker]})
        security = (
            "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT\n"
            f"listener.name.client.sasl.enabled.mechanisms={KAFKA_SASL_MECHANISM},{plain}\n"
            f"listener.name.controller.sasl.enabled.mechanisms={plain}\n"
            f"sasl.mechanism.inter.broker.protocol={plain}\n"
            f"sasl.mechanism.controller.protocol={plain}\n"
            # PLAIN knows the broker alone, on both listeners; the clients' SCRAM credentials
            # are in the metadata (after_healthy).
            f"listener.name.client.plain.sasl.jaas.config={own}\n"
            f"listener.name.client.{KAFKA_SASL_MECHANISM.lower()}.sasl.jaas.config="
            f"{LOGIN_MODULES[KAFKA_SASL_MECHANISM]} required;\n"
            f"listener.name.controller.plain.sasl.jaas.config={own}\n"
            # Deny by default; what each user may do is cdc_lake/stack/kafka_acls.py.
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
            "allow.everyone.if.no.acl.found=false\n"
            f"super.users=User:{broker}\n"
            if self.s.kafka_sasl
            # The benchmark's stack without SASL (StackSettings.kafka_sasl): open to anyone.
            else "listener.security.protocol.map=CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        )
        write_private(
            self.conf,
            security + "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.voters=1@{h}:{cp}\n"
            f"listeners=CLIENT://{h}:{p},CONTROLLER://{h}:{cp}\n"
            f"advertised.listeners=CLIENT://{h}:{p}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=CLIENT\n"
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
        if not port_in_use(self.s.host, self.s.port("kafka")):
            return False  # spares librdkafka's connection-refused log lines
        return self._brokers(self.s.kafka_broker_user) == 1

    def after_healthy(self) -> None:
        """The clients' SCRAM credentials and the ACL policy, set as the broker (super user).
        Both are idempotent, so a start of a running stack sets them again (a password changed
        in the environment takes effect). Returns once every client user can log in."""
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialAlteration,
            UserScramCredentialUpsertion,
        )

        s = self.s
        if not s.kafka_sasl:
            return  # no users, no authorizer
        admin = AdminClient({**s.kafka_client_conf(s.kafka_broker_user), "log_level": 0})
        mechanism = ScramMechanism[KAFKA_SASL_MECHANISM.replace("-", "_")]
        clients = {u: p for u, p in s.kafka_users.items() if u != s.kafka_broker_user}
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mechanism, SCRAM_ITERATIONS), password.encode()
            )
            for user, password in clients.items()
        ]
        try:
            for future in admin.alter_user_scram_credentials(upserts).values():
                future.result()
            sync(admin, grants(s))
        except Exception as e:  # noqa: BLE001 - any broker error is a failed start
            raise StackError(
                f"kafka: setting users and ACLs failed: {e} (see {self.log}). A broker started "
                "by an older cdc-lake has no authorizer: `cdc-lake stack down`, then `stack up`."
            ) from e
        for user in clients:
            if not wait_until(lambda u=user: self._brokers(u) > 0, 30, alive=lambda: True):
                raise StackError(
                    f"kafka: user {user!r} cannot log in 30 s after its SCRAM credential was "
                    f"set (see {self.log})"
                )

    def _brokers(self, user: str) -> int:
        """How many brokers the cluster's metadata lists, asked as ``user`` (0: refused)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        conf = self.s.kafka_client_conf(user)
        admin = AdminClient({**conf, "socket.timeout.ms": 2000, "log_level": 0})
        try:
            return len(admin.list_topics(timeout=3).brokers)
        except KafkaException:
            return 0

    def details(self) -> dict[str, object]:
        return {
            "bootstrap_servers": self.s.kafka_bootstrap,
            "security_protocol": self.s.kafka_security_protocol,
            "sasl_mechanism": KAFKA_SASL_MECHANISM if self.s.kafka_sasl else None,
            "user": self.s.kafka_user if self.s.kafka_sasl else None,
            "password": self.s.kafka_users[self.s.kafka_user] if self.s.kafka_sasl else None,
            "controller": f"{self.s.host}:{self.s.port('kafka_controller')}",
            "data_dir": str(self.s.data_dir("kafka")),
        }
