"""The Kafka Connect worker, with the REST guard that refuses secret references in a
connector's config (``connectors/rest-guard``).
"""

from __future__ import annotations

from pathlib import Path

from cdc_lake.stack.process import write_private
from cdc_lake.stack.services.base import JavaService
from cdc_lake.stack.services.kafka import sasl_jaas
from cdc_lake.stack.settings import (
    CONNECT_GROUP,
    CONNECT_TOPIC_PREFIX,
    KAFKA_SASL_MECHANISM,
    StackSettings,
)
from cdc_lake.streaming.connect_config import DEBEZIUM_TEMPLATE, connector_class

REBALANCE_DELAY_MS = 10_000


class KafkaConnect(JavaService):
    """A Kafka Connect worker in distributed mode, with Debezium and the S3 sink as plugins.

    Its REST API (loopback only) takes HTTP basic auth: Kafka's ``BasicAuthSecurityRestExtension``
    with a JAAS file naming ``PropertyFileLoginModule`` and a users file holding the stack's one
    user (``connect_user``, the ``connect_password`` credential), both 0600 in ``conf/``; the JVM
    gets only the JAAS file's path. A request without the credentials gets 401.

    ``${env:NAME}`` in a connector config resolves only for ``PROVIDER_ENV``, the variables the
    connectors need (``allowlist.pattern`` of ``EnvVarConfigProvider``); any other reference
    stays unresolved, so no caller can make the worker echo another variable (the validate
    endpoint puts resolved values in error messages). ``GUARD`` (``connectors/rest-guard``)
    lets the first into Debezium's ``database.password`` only, with the connector pointed at
    this stack's PostgreSQL, and the salt into a ``HashColumns`` transform's ``salt.secret``
    only; any other reference, anywhere, gets 400. The S3 sink
    reads its keys from the AWS SDK's default chain (``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` in the worker's environment), as on MSK Connect, so they are not
    resolvable through the provider.
    """

    name = "connect"
    ports = ("connect",)
    main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
    classpath = "connect"
    heap = "1g"
    # The only variables ${env:...} resolves: the Debezium connector's replication password and
    # the salt of its HashColumns transform.
    PROVIDER_ENV = ("CDC_LAKE_REPLICATION_PASSWORD", "CDC_LAKE_COLUMN_SALT")
    GUARD = "io.cdclake.connect.rest.SecretReferenceGuard"

    def __init__(self, settings: StackSettings, name: str = "connect"):
        """``name``: "connect", or "connect_2" for a second worker of the same group
        (``StackSettings.connect_workers``), which shares the group's topics and connectors."""
        super().__init__(settings)
        self.name = name
        self.ports = (name,)

    @property
    def url(self) -> str:
        return f"http://{self.s.host}:{self.s.port(self.name)}"

    @property
    def conf(self) -> Path:
        return self.s.conf_dir / f"{self.name}-distributed.properties"

    @property
    def jaas_conf(self) -> Path:
        return self.s.conf_dir / "connect-jaas.conf"

    @property
    def users_file(self) -> Path:
        return self.s.conf_dir / "connect-users.properties"

    def prepare(self) -> None:
        super().prepare()
        user, password = self.s.connect_auth
        # Properties syntax: "user: password"; a backslash in the password must be escaped.
        write_private(self.users_file, f"{user}: {password.replace(chr(92), chr(92) * 2)}\n")
        write_private(
            self.jaas_conf,
            "KafkaConnect {\n"
            "  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule\n"
            "  required\n"
            f'  file="{self.users_file}";\n'
            "};\n",
        )
        allow = "|".join(self.PROVIDER_ENV)
        # The worker's own clients and its connectors' (producer., consumer., admin.) log in to
        # Kafka as the Connect user; the file is 0600, as it holds that user's password.
        kafka_user = self.s.kafka_connect_user
        jaas = sasl_jaas(KAFKA_SASL_MECHANISM, kafka_user, self.s.kafka_users[kafka_user])
        login = (f"sasl.mechanism={KAFKA_SASL_MECHANISM}", f"sasl.jaas.config={jaas}")
        sasl = "".join(
            f"{prefix}{line}\n"
            for prefix in ("", "producer.", "consumer.", "admin.")
            for line in (
                f"security.protocol={self.s.kafka_security_protocol}",
                *(login if self.s.kafka_sasl else ()),
            )
        )
        write_private(
            self.conf,
            f"bootstrap.servers={self.s.kafka_bootstrap}\n" + sasl + f"group.id={CONNECT_GROUP}\n"
            f"listeners=http://{self.s.host}:{self.s.port(self.name)}\n"
            f"rest.advertised.host.name={self.s.host}\n"
            f"rest.advertised.port={self.s.port(self.name)}\n"
            # A worker that leaves the group (a crash) has its connectors and tasks held for it
            # this long before they move to the others (incremental cooperative rebalancing;
            # Kafka's default is 5 minutes).
            f"scheduled.rebalance.max.delay.ms={REBALANCE_DELAY_MS}\n"
            "rest.extension.classes="
            "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension,"
            f"{self.GUARD}\n"
            # The one config provider reference a connector config may hold, where, and the
            # database it must then point at (connectors/rest-guard).
            "cdclake.guard.secret.provider=env\n"
            f"cdclake.guard.secret.variable={self.PROVIDER_ENV[0]}\n"
            "cdclake.guard.secret.key=database.password\n"
            f"cdclake.guard.connector.class={connector_class(DEBEZIUM_TEMPLATE)}\n"
            f"cdclake.guard.pinned.database.hostname={self.s.host}\n"
            f"cdclake.guard.pinned.database.port={self.s.port('postgres')}\n"
            # ... and the salt reference, only in the salt.secret of a HashColumns transform.
            f"cdclake.guard.salt.variable={self.PROVIDER_ENV[1]}\n"
            f"plugin.path={self.s.plugin_path}\n"
            "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "key.converter.schemas.enable=false\n"
            "value.converter.schemas.enable=false\n"
            f"config.storage.topic={CONNECT_TOPIC_PREFIX}configs\n"
            f"offset.storage.topic={CONNECT_TOPIC_PREFIX}offsets\n"
            f"status.storage.topic={CONNECT_TOPIC_PREFIX}status\n"
            "config.storage.replication.factor=1\n"
            "offset.storage.replication.factor=1\n"
            "status.storage.replication.factor=1\n"
            "offset.flush.interval.ms=5000\n"
            # Secrets in connector configs are read from the environment: ${env:NAME}, for the
            # allowed names only.
            "config.providers=env\n"
            "config.providers.env.class="
            "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
            f"config.providers.env.param.allowlist.pattern=^({allow})$\n",
        )

    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.auth.login.config={self.jaas_conf}"]

    def argv(self) -> list[str]:
        return self.java_argv(str(self.conf))

    def env(self) -> dict[str, str]:
        # Connector configs say ${env:NAME}; the values never reach Connect's config topic.
        c = self.s.credentials
        return {
            "CDC_LAKE_REPLICATION_PASSWORD": c.replication_password,
            "CDC_LAKE_COLUMN_SALT": c.column_salt,
            # The S3 sink's credentials, through the AWS SDK's default chain.
            "AWS_ACCESS_KEY_ID": c.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": c.s3_secret_key,
        }

    def client(self):
        from cdc_lake.streaming.connect_client import ConnectClient

        return ConnectClient(self.url, timeout_s=10, auth=self.s.connect_auth)

    def healthy(self) -> bool:
        # /connectors answers only once the herder has joined the group and read its topics.
        status, _ = self.client().request("GET", "/connectors")
        return 200 <= status < 300

    def plugins(self) -> list[dict[str, str]]:
        return self.client().plugins()

    def details(self) -> dict[str, object]:
        user, password = self.s.connect_auth
        return {
            "url": self.url,
            "user": user,
            "password": password,
            "plugin_path": str(self.s.plugin_path),
        }
