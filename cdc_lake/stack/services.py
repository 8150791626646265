"""The stack's servers: PostgreSQL, S3Proxy, a KRaft Kafka broker, a Kafka Connect worker and the
lake server (a warm Spark session that runs the lake's Spark apps, ``lake_server.py``).

Each ``Service`` knows how to prepare its state (config files, an initialised data directory),
the command that runs it in the foreground, how to tell it is healthy, and what to do once it is
(create roles, buckets). ``LocalStack`` in ``stack.py`` drives them in order.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from cdc_lake.stack import lake_server
from cdc_lake.stack.process import StackError, open_private_log, port_in_use, write_private
from cdc_lake.stack.settings import StackSettings
from cdc_lake.streaming.connect_config import DEBEZIUM_TEMPLATE, connector_class

LOG4J2_PROPERTIES = """\
status = warn
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""

# S3Proxy logs through logback, which defaults to DEBUG without a config.
LOGBACK_XML = """\
<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>[%d] %level %msg \\(%logger\\)%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise StackError(
            "Java 17 or newer is needed by Kafka, Kafka Connect, S3Proxy and Spark, and no `java` "
            "is on PATH. Fix: apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)."
        )
    return found


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    # e.g. openjdk version "17.0.15" 2025-04-15
    for token in out.split():
        token = token.strip('"')
        if token[:1].isdigit():
            major = token.split(".")[0]
            return int(major if major != "1" else token.split(".")[1])
    raise StackError(f"Could not read the Java version from `{java} -version`: {out.strip()}")


def require_java() -> str:
    java = java_binary()
    major = java_major_version(java)
    if major < 17:
        raise StackError(
            f"{java} is Java {major}; Kafka 4 and S3Proxy need Java 17 or newer. "
            "Fix: apt-get install -y openjdk-17-jre-headless and put it first on PATH "
            "(or set JAVA_HOME)."
        )
    return java


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL (15 or later) server binaries."""
    candidates = []
    for p in Path("/usr/lib/postgresql").glob("*/bin/postgres"):
        try:
            candidates.append((int(p.parent.parent.name), p.parent))
        except ValueError:
            continue
    candidates = [c for c in candidates if c[0] >= 15]
    if candidates:
        return max(candidates)[1]
    found = shutil.which("pg_config")
    if found:
        bindir = subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip()
        if (Path(bindir) / "postgres").is_file():
            return Path(bindir)
    return None


class Service:
    name: str = ""
    ports: tuple[str, ...] = ()
    stop_signal: int = signal.SIGTERM
    run_as: str | None = None

    def __init__(self, settings: StackSettings):
        self.s = settings

    @property
    def log(self) -> Path:
        return self.s.logs_dir / f"{self.name}.log"

    @property
    def endpoint(self) -> str:
        return f"{self.s.host}:{self.s.port(self.ports[0])}"

    def fix_hint(self) -> str:
        return f"read {self.log}"

    def prepare(self) -> None:
        """Write config and initialise data on first start. Must be idempotent."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def cwd(self) -> Path | None:
        """Where the server runs; None: where ``up`` was called."""
        return None

    def healthy(self) -> bool:
        raise NotImplementedError

    def after_healthy(self) -> None:
        """Provision what clients expect (roles, buckets); idempotent."""

    def details(self) -> dict[str, object]:
        return {"endpoint": self.endpoint}


class JavaService(Service):
    main_class = ""
    classpath = ""
    heap = "512m"

    def jvm_options(self) -> list[str]:
        """Extra JVM options: paths and switches only, never a secret (argv is public)."""
        return []

    def java_argv(self, *args: str) -> list[str]:
        cp_dir = self.s.classpath_dir(self.classpath)
        if not any(cp_dir.glob("*.jar")):
            raise StackError(
                f"{self.name}: no jars in {cp_dir}. Fix: run `cdc-lake stack install` first."
            )
        return [
            require_java(),
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.s.conf_dir / 'log4j2.properties'}",
            f"-Dlogback.configurationFile={self.s.conf_dir / 'logback.xml'}",
            *self.jvm_options(),
            "-cp",
            f"{cp_dir}/*",
            self.main_class,
            *args,
        ]

    def prepare(self) -> None:
        self.s.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.s.conf_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        (self.s.conf_dir / "logback.xml").write_text(LOGBACK_XML)


class Postgres(Service):
    """PostgreSQL with wal_level=logical, an application user and a replication user.

    When run as root the server runs as the ``postgres`` system user (PostgreSQL refuses root).

    ``pg_hba.conf`` is written on every start: every login needs a password (scram-sha-256) over
    loopback; the replication user may connect, from loopback only, to the project's database
    (and the ones ``create_database`` adds, listed in ``replication_databases``), which covers
    both the logical-replication (walsender) and the plain connection Debezium opens, and to
    nothing else: not ``postgres``, not another database, not a physical replication connection
    (which would stream the whole cluster's WAL).
    """

    name = "postgres"
    ports = ("postgres",)
    stop_signal = signal.SIGINT  # "fast" shutdown: roll back sessions, checkpoint, exit

    def __init__(self, settings: StackSettings):
        super().__init__(settings)
        self.run_as = "postgres" if os.geteuid() == 0 else None

    @property
    def data(self) -> Path:
        return self.s.data_dir("postgres")

    @property
    def socket_dir(self) -> Path:
        return self.s.run_dir / "postgres-socket"

    def bindir(self) -> Path:
        found = postgres_bindir()
        if found is None:
            raise StackError(
                "postgres: no PostgreSQL 15+ server found under /usr/lib/postgresql. "
                "Fix: run `cdc-lake stack install` (it runs apt-get install postgresql)."
            )
        return found

    def _chown(self, path: Path) -> None:
        if self.run_as:
            shutil.chown(path, self.run_as, self.run_as)

    def prepare(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.socket_dir)
        if not (self.data / "PG_VERSION").is_file():
            self.data.mkdir(parents=True, exist_ok=True)
            self.data.chmod(0o700)
            self._chown(self.data)
            pwfile = self.s.run_dir / "pg-init-pw"
            pwfile.write_text(self.s.credentials.pg_superuser_password + "\n")
            pwfile.chmod(0o600)
            self._chown(pwfile)
            try:
                result = subprocess.run(
                    [
                        str(self.bindir() / "initdb"),
                        "-D",
                        str(self.data),
                        "-U",
                        "postgres",
                        f"--pwfile={pwfile}",
                        "--auth-local=scram-sha-256",
                        "--auth-host=scram-sha-256",
                        "--encoding=UTF8",
                        "--locale=C",
                    ],
                    capture_output=True,
                    text=True,
                    user=self.run_as,
                    group=self.run_as,
                    extra_groups=[] if self.run_as else None,
                )
            finally:
                pwfile.unlink(missing_ok=True)
            with open_private_log(self.log) as f:
                f.write((result.stdout + result.stderr).encode())
            if result.returncode != 0:
                raise StackError(
                    f"postgres: initdb failed (see {self.log}): {result.stderr.strip()[-500:]}"
                )
        self.write_hba()
        conf = self.data / "cdc_lake.conf"
        conf.write_text(
            "# Written by cdc-lake on every start; override with ALTER SYSTEM.\n"
            f"port = {self.s.port('postgres')}\n"
            f"listen_addresses = '{self.s.host}'\n"
            f"unix_socket_directories = '{self.socket_dir}'\n"
            "wal_level = logical\n"
            "max_wal_senders = 10\n"
            "max_replication_slots = 10\n"
            f"max_slot_wal_keep_size = {self.s.slot_wal_keep_mb}MB\n"
            "shared_buffers = 128MB\n"
            "logging_collector = off\n"
        )
        self._chown(conf)
        main_conf = self.data / "postgresql.conf"
        if "include_if_exists = 'cdc_lake.conf'" not in main_conf.read_text():
            with main_conf.open("a") as f:
                f.write("\ninclude_if_exists = 'cdc_lake.conf'\n")

    @property
    def replication_databases(self) -> Path:
        return self.data / "replication_databases"

    def write_hba(self, add_database: str | None = None) -> None:
        """pg_hba.conf (see the class docstring); ``add_database`` joins the replication user's
        databases. The server reads it on start or ``pg_reload_conf()``."""
        names = [self.s.pg_database]
        if self.replication_databases.is_file():
            names += self.replication_databases.read_text().split()
        if add_database:
            names.append(add_database)
        self.replication_databases.write_text("\n".join(dict.fromkeys(names)) + "\n")
        repl = self.s.replication_user
        hba = self.data / "pg_hba.conf"
        hba.write_text(
            "# Written by cdc-lake on every start. First match wins.\n"
            "# TYPE  DATABASE                 USER  ADDRESS       METHOD\n"
            f"host    @replication_databases   {repl}  127.0.0.1/32  scram-sha-256\n"
            f"host    all                      {repl}  all           reject\n"
            f"host    replication              {repl}  all           reject\n"
            f"local   all                      {repl}                reject\n"
            "local   all                      all                 scram-sha-256\n"
            "host    all                      all   127.0.0.1/32  scram-sha-256\n"
            "host    all                      all   ::1/128       scram-sha-256\n"
        )
        for path in (self.replication_databases, hba):
            path.chmod(0o600)
            self._chown(path)

    def argv(self) -> list[str]:
        return [str(self.bindir() / "postgres"), "-D", str(self.data)]

    def _connect(self, user: str = "postgres", password: str | None = None, db: str = "postgres"):
        import psycopg2

        return psycopg2.connect(
            host=self.s.host,
            port=self.s.port("postgres"),
            user=user,
            password=password or self.s.credentials.pg_superuser_password,
            dbname=db,
            connect_timeout=3,
        )

    def healthy(self) -> bool:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone() == (1,)
        finally:
            conn.close()

    def after_healthy(self) -> None:
        from psycopg2 import sql

        c = self.s.credentials
        conn = self._connect()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                for role, password, attrs in (
                    (self.s.pg_user, c.pg_password, "LOGIN"),
                    (self.s.replication_user, c.replication_password, "LOGIN REPLICATION"),
                ):
                    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                    verb = "ALTER" if cur.fetchone() else "CREATE"
                    cur.execute(
                        sql.SQL(verb + " ROLE {} WITH " + attrs + " PASSWORD %s").format(
                            sql.Identifier(role)
                        ),
                        (password,),
                    )
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.s.pg_database,))
                if not cur.fetchone():
                    cur.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            sql.Identifier(self.s.pg_database), sql.Identifier(self.s.pg_user)
                        )
                    )
                cur.execute(
                    sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                        sql.Identifier(self.s.pg_database), sql.Identifier(self.s.replication_user)
                    )
                )
        finally:
            conn.close()

    def create_database(self, name: str, replace: bool = False) -> None:
        """Another database owned by the app user, which the replication user may connect to
        (it joins ``replication_databases``; the server reloads pg_hba.conf)."""
        from psycopg2 import sql

        self.write_hba(add_database=name)
        admin = self._connect()
        admin.autocommit = True
        try:
            with admin.cursor() as cur:
                cur.execute("SELECT pg_reload_conf()")
                ident = sql.Identifier(name)
                if replace:
                    cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            ident, sql.Identifier(self.s.pg_user)
                        )
                    )
                cur.execute(
                    sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                        ident, sql.Identifier(self.s.replication_user)
                    )
                )
        finally:
            admin.close()

    def details(self) -> dict[str, object]:
        return {
            "endpoint": self.endpoint,
            "dsn": self.s.pg_dsn(),
            "database": self.s.pg_database,
            "user": self.s.pg_user,
            "password": self.s.credentials.pg_password,
            "replication_user": self.s.replication_user,
            "replication_password": self.s.credentials.replication_password,
            "replication_dsn": self.s.pg_dsn(self.s.replication_user),
            "data_dir": str(self.data),
        }

    def fix_hint(self) -> str:
        return f"read {self.log}; a broken data directory can be removed: {self.data}"


class S3Proxy(JavaService):
    """S3Proxy on a filesystem backend: objects are files under the state directory, so the
    lake survives ``down``/``up``."""

    name = "s3"
    ports = ("s3",)
    main_class = "org.gaul.s3proxy.Main"
    classpath = "s3proxy"
    heap = "512m"

    @property
    def conf(self) -> Path:
        return self.s.conf_dir / "s3proxy.conf"

    def prepare(self) -> None:
        super().prepare()
        data = self.s.data_dir("s3")
        data.mkdir(parents=True, exist_ok=True)
        c = self.s.credentials
        write_private(
            self.conf,
            f"s3proxy.endpoint={self.s.s3_endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={c.s3_access_key}\n"
            f"s3proxy.credential={c.s3_secret_key}\n"
            "jclouds.provider=filesystem-nio2\n"
            f"jclouds.filesystem.basedir={data}\n",
        )

    def argv(self) -> list[str]:
        return self.java_argv("--properties", str(self.conf))

    def client(self):
        import boto3
        from botocore.config import Config

        c = self.s.credentials
        return boto3.client(
            "s3",
            endpoint_url=self.s.s3_endpoint,
            aws_access_key_id=c.s3_access_key,
            aws_secret_access_key=c.s3_secret_key,
            region_name=self.s.region,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2},
                connect_timeout=3,
                read_timeout=30,
            ),
        )

    def healthy(self) -> bool:
        self.client().list_buckets()
        return True

    def after_healthy(self) -> None:
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in self.s.buckets:
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)

    def details(self) -> dict[str, object]:
        c = self.s.credentials
        return {
            "endpoint": self.s.s3_endpoint,
            "access_key": c.s3_access_key,
            "secret_key": c.s3_secret_key,
            "region": self.s.region,
            "buckets": {"raw": self.s.raw_bucket, "lake": self.s.lake_bucket},
            "path_style": True,
            "data_dir": str(self.s.data_dir("s3")),
        }


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
    lets that one reference into Debezium's ``database.password`` only, with the connector
    pointed at this stack's PostgreSQL; any other reference, anywhere, gets 400. The S3 sink
    reads its keys from the AWS SDK's default chain (``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` in the worker's environment), as on MSK Connect, so they are not
    resolvable through the provider.
    """

    name = "connect"
    ports = ("connect",)
    main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
    classpath = "connect"
    heap = "1g"
    # The only variables ${env:...} resolves: the Debezium connector's replication password.
    PROVIDER_ENV = ("CDC_LAKE_REPLICATION_PASSWORD",)
    GUARD = "io.cdclake.connect.rest.SecretReferenceGuard"

    @property
    def conf(self) -> Path:
        return self.s.conf_dir / "connect-distributed.properties"

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
        self.conf.write_text(
            f"bootstrap.servers={self.s.kafka_bootstrap}\n"
            "group.id=cdc-lake-connect\n"
            f"listeners=http://{self.s.host}:{self.s.port('connect')}\n"
            f"rest.advertised.host.name={self.s.host}\n"
            f"rest.advertised.port={self.s.port('connect')}\n"
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
            f"plugin.path={self.s.plugin_path}\n"
            "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "key.converter.schemas.enable=false\n"
            "value.converter.schemas.enable=false\n"
            "config.storage.topic=_cdc_lake_connect_configs\n"
            "offset.storage.topic=_cdc_lake_connect_offsets\n"
            "status.storage.topic=_cdc_lake_connect_status\n"
            "config.storage.replication.factor=1\n"
            "offset.storage.replication.factor=1\n"
            "status.storage.replication.factor=1\n"
            "offset.flush.interval.ms=5000\n"
            # Secrets in connector configs are read from the environment: ${env:NAME}, for the
            # allowed names only.
            "config.providers=env\n"
            "config.providers.env.class="
            "org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
            f"config.providers.env.param.allowlist.pattern=^({allow})$\n"
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
            # The S3 sink's credentials, through the AWS SDK's default chain.
            "AWS_ACCESS_KEY_ID": c.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": c.s3_secret_key,
        }

    def client(self):
        from cdc_lake.streaming.connect_client import ConnectClient

        return ConnectClient(self.s.connect_url, timeout_s=10, auth=self.s.connect_auth)

    def healthy(self) -> bool:
        # /connectors answers only once the herder has joined the group and read its topics.
        status, _ = self.client().request("GET", "/connectors")
        return 200 <= status < 300

    def plugins(self) -> list[dict[str, str]]:
        return self.client().plugins()

    def details(self) -> dict[str, object]:
        user, password = self.s.connect_auth
        return {
            "url": self.s.connect_url,
            "user": user,
            "password": password,
            "plugin_path": str(self.s.plugin_path),
        }


class LakeServer(Service):
    """The lake server: this package's Python running ``cdc_lake.stack.lake_server``, which
    builds one Spark session (Hudi, s3a on the stack's S3) and serves the lake's Spark apps on
    loopback to the local Spark launcher. Its token is a 0600 file in ``conf/`` (``prepare``);
    its argv names the state directory, ports base and jars; its environment holds no secret:
    it reads the S3 keys from ``credentials.json`` itself. Started last, after S3."""

    name = lake_server.SERVICE
    ports = (lake_server.SERVICE,)

    @property
    def token_file(self) -> Path:
        return lake_server.token_path(self.s)

    def prepare(self) -> None:
        lake_server.ensure_token(self.s)
        self.s.data_dir(self.name).mkdir(mode=0o700, parents=True, exist_ok=True)

    def cwd(self) -> Path | None:
        # Whatever Spark or Hudi drop in the working directory stays in the state directory.
        return self.s.data_dir(self.name)

    def argv(self) -> list[str]:
        if not self.s.spark_jars():
            raise StackError(
                f"{self.name}: no Hudi/s3a jars in {self.s.classpath_dir('spark')}. "
                "Fix: run `cdc-lake stack install` first."
            )
        require_java()
        return [
            sys.executable,
            # Not -m: the package imports the module, which runpy would then run a second time.
            "-c",
            "import sys; from cdc_lake.stack.lake_server import main; sys.exit(main())",
            "--state-dir",
            str(self.s.state_dir),
            "--port-base",
            str(self.s.port_base),
            "--jars-dir",
            str(self.s.jars_dir),
        ]

    def health(self) -> dict[str, int]:
        """The server's pid, its JVM's pid and how many apps it has run."""
        return lake_server.request(
            self.s.host, self.s.port(self.name), self.token_file, "GET", "/health", timeout_s=3
        )

    def healthy(self) -> bool:
        return bool(self.health()["jvm_pid"])

    def details(self) -> dict[str, object]:
        return {"endpoint": self.endpoint, "token_file": str(self.token_file)}


def all_services(settings: StackSettings) -> list[Service]:
    """In start order; stopped in reverse."""
    return [
        Postgres(settings),
        S3Proxy(settings),
        Kafka(settings),
        KafkaConnect(settings),
        LakeServer(settings),
    ]
