"""Where the local stack lives and how clients reach it.

Everything the stack writes sits under one state directory (default ``.cdc-lake/`` at the project
root, or ``CDC_LAKE_STATE_DIR``). Ports are derived from one base (``CDC_LAKE_PORT_BASE``) so a
second stack, such as the test suite's, can run beside a developer's without clashing.

Credentials are never written in code or committed config: on first use they are generated at
random and kept in ``<state>/credentials.json`` (mode 0600). ``CDC_LAKE_PG_PASSWORD``,
``CDC_LAKE_REPLICATION_PASSWORD``, ``CDC_LAKE_S3_ACCESS_KEY``, ``CDC_LAKE_S3_SECRET_KEY`` and
``CDC_LAKE_CONNECT_PASSWORD`` (the Kafka Connect REST API's basic auth) and
``CDC_LAKE_KAFKA_PASSWORD`` (the Dagster side's Kafka user) and ``CDC_LAKE_COLUMN_SALT`` (the salt
of hashed columns) override them.

Kafka authenticates every client and authorizes each request (``cdc_lake/stack/kafka_acls.py``):
four users, each with a password of its own. ``broker`` is the broker itself (SASL/PLAIN, to its
controller and on its own clients' listener; its password only in the broker's 0600 properties
file), ``connect`` the Connect worker, ``dagster`` the Dagster side (read-only: offsets and lag)
and ``tester`` the tests' and benchmarks' reader, all three SASL/SCRAM-SHA-512, their
credentials set by the broker at each start.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_lake.stack.process import write_private
from cdc_lake.streaming.connect_config import CdcConnectorSettings

DEFAULT_PORT_BASE = 15400
# How every client of the stack's Kafka connects (module docstring): declared once, here.
KAFKA_SECURITY_PROTOCOL = "SASL_PLAINTEXT"
KAFKA_SASL_MECHANISM = "SCRAM-SHA-512"
# The broker's own logins (to its controller, and its admin client) use PLAIN: its password is
# in its own properties file, and SCRAM credentials live in the metadata the broker serves.
KAFKA_BROKER_MECHANISM = "PLAIN"
# Connect's worker group and its three internal topics, whose records (connector configs, the
# session key, source offsets) nobody but the Connect worker may read or write.
CONNECT_GROUP = "cdc-lake-connect"
CONNECT_TOPIC_PREFIX = "_cdc_lake_connect_"

# Offsets from the port base; the last two digits echo each server's usual port.
PORT_OFFSETS = {
    "lake_server": 2,  # as Spark Connect's 15002
    "postgres": 32,
    "s3": 80,
    "connect": 83,
    "connect_2": 84,  # a second Connect worker (connect_workers=2)
    "kafka": 92,
    "kafka_controller": 93,
    # The Spark standalone cluster (CDC_LAKE_LOCAL_SPARK=cluster only): master and two workers,
    # each with its RPC port and its web UI.
    "spark_master": 77,
    "spark_master_ui": 79,
    "spark_worker_1": 71,
    "spark_worker_1_ui": 81,
    "spark_worker_2": 72,
    "spark_worker_2_ui": 82,
}

# Where the local Spark apps run (``CDC_LAKE_LOCAL_SPARK``), the first the default:
# - ``server``: the stack's lake server, a warm local Spark session;
# - ``in_process``: a local session in the run's own process, with its JVM start;
# - ``cluster``: a Spark application on the stack's standalone cluster (a master and two
#   workers that ``cdc-lake stack up`` then starts), shipped and started as an EMR step is.
LOCAL_SPARK_MODES = ("server", "in_process", "cluster")
SPARK_WORKERS = 2
# How many Kafka Connect workers the stack may run, the first the default: the second is
# "connect_2" (its REST port in PORT_OFFSETS).
CONNECT_WORKERS = (1, 2)


def local_spark_mode(mode: str | None = None) -> str:
    """``mode``, else ``CDC_LAKE_LOCAL_SPARK``, else the default; one of ``LOCAL_SPARK_MODES``."""
    mode = mode or os.environ.get("CDC_LAKE_LOCAL_SPARK") or LOCAL_SPARK_MODES[0]
    if mode not in LOCAL_SPARK_MODES:
        choices = ", ".join(repr(m) for m in LOCAL_SPARK_MODES)
        raise ValueError(f"CDC_LAKE_LOCAL_SPARK={mode!r} is not a mode; use one of {choices}")
    return mode


def project_root() -> Path:
    """The checkout this package runs from, or the working directory for an installed package."""
    here = Path(__file__).resolve().parents[2]
    if (here / "pyproject.toml").is_file() and (here / "cdc_lake").is_dir():
        return here
    return Path.cwd()


def maven_dir() -> Path:
    return Path(__file__).resolve().parent / "maven"


@dataclass(frozen=True)
class Credentials:
    pg_superuser_password: str
    pg_password: str
    replication_password: str
    s3_access_key: str
    s3_secret_key: str
    connect_password: str
    kafka_broker_password: str
    kafka_connect_password: str
    kafka_password: str  # the Dagster side's
    kafka_tester_password: str  # the tests' and benchmarks'
    column_salt: str  # of hashed columns (CapturedTable.hashed): Connect's and the digest's
    # The Spark cluster's: its RPC secret (spark.authenticate.secret, shared by the master, the
    # workers and every application) and its web UIs' bearer token.
    spark_secret: str
    spark_ui_token: str

    @staticmethod
    def load_or_create(path: Path) -> Credentials:
        stored: dict[str, str] = {}
        if path.is_file():
            stored = json.loads(path.read_text())
        fresh = {
            "pg_superuser_password": stored.get("pg_superuser_password")
            or secrets.token_urlsafe(18),
            "pg_password": stored.get("pg_password") or secrets.token_urlsafe(18),
            "replication_password": stored.get("replication_password") or secrets.token_urlsafe(18),
            "s3_access_key": stored.get("s3_access_key") or "cdclake" + secrets.token_hex(6),
            "s3_secret_key": stored.get("s3_secret_key") or secrets.token_urlsafe(24),
            "connect_password": stored.get("connect_password") or secrets.token_urlsafe(18),
            "kafka_broker_password": stored.get("kafka_broker_password")
            or secrets.token_urlsafe(18),
            "kafka_connect_password": stored.get("kafka_connect_password")
            or secrets.token_urlsafe(18),
            "kafka_password": stored.get("kafka_password") or secrets.token_urlsafe(18),
            "kafka_tester_password": stored.get("kafka_tester_password")
            or secrets.token_urlsafe(18),
            "column_salt": stored.get("column_salt") or secrets.token_urlsafe(24),
            "spark_secret": stored.get("spark_secret") or secrets.token_urlsafe(24),
            "spark_ui_token": stored.get("spark_ui_token") or secrets.token_urlsafe(24),
        }
        if fresh != stored:
            write_private(path, json.dumps(fresh, indent=2))
        env = {
            "pg_password": os.environ.get("CDC_LAKE_PG_PASSWORD"),
            "replication_password": os.environ.get("CDC_LAKE_REPLICATION_PASSWORD"),
            "s3_access_key": os.environ.get("CDC_LAKE_S3_ACCESS_KEY"),
            "s3_secret_key": os.environ.get("CDC_LAKE_S3_SECRET_KEY"),
            "connect_password": os.environ.get("CDC_LAKE_CONNECT_PASSWORD"),
            "kafka_password": os.environ.get("CDC_LAKE_KAFKA_PASSWORD"),
            "column_salt": os.environ.get("CDC_LAKE_COLUMN_SALT"),
        }
        fresh.update({k: v for k, v in env.items() if v})
        return Credentials(**fresh)


@dataclass(frozen=True)
class StackSettings:
    """Paths, ports, names and credentials of one local stack."""

    state_dir: Path
    jars_dir: Path
    port_base: int = DEFAULT_PORT_BASE
    host: str = "127.0.0.1"
    pg_database: str = "cdc_lake"
    pg_user: str = "cdc_lake"
    replication_user: str = "cdc_replicator"
    connect_user: str = "cdc_lake"  # the Connect REST API's one basic-auth user
    # Kafka's users (module docstring; what each may do: cdc_lake/stack/kafka_acls.py).
    kafka_broker_user: str = "broker"
    kafka_connect_user: str = "connect"
    kafka_user: str = "dagster"
    kafka_tester_user: str = "tester"
    raw_bucket: str = "cdc-raw"
    lake_bucket: str = "cdc-lake"
    # The lake server's warm-up writes its raw files and its throwaway table here, and deletes
    # what it wrote: buckets of its own, which no prefix a user sets can reach
    # (cdc_lake/stack/warm_up.py).
    warm_up_buckets: tuple[str, str] = ("cdc-warm-up-raw", "cdc-warm-up-lake")
    region: str = CdcConnectorSettings.region  # declared once, with the connectors' settings
    # PostgreSQL's max_slot_wal_keep_size: a slot that falls further behind is invalidated
    # (its connector must re-snapshot) rather than holding WAL until the disk fills.
    slot_wal_keep_mb: int = 4096
    start_timeout_s: float = 120.0
    spark_mode: str = LOCAL_SPARK_MODES[0]  # one of LOCAL_SPARK_MODES
    # Kafka Connect workers in the group: 1, or 2 (CDC_LAKE_CONNECT_WORKERS; the second one's REST
    # API on port "connect_2"), as MSK Connect runs several.
    connect_workers: int = CONNECT_WORKERS[0]
    # False: the broker's listeners are PLAINTEXT, with no authorizer, and every client connects
    # without a login. Only the benchmark that measures what SASL costs sets it (bench/sasl_cost.py,
    # on a stack of its own); nothing reads it from the environment, so `cdc-lake stack up` always
    # authenticates.
    kafka_sasl: bool = True
    _credentials: list[Credentials] = field(default_factory=list, compare=False, repr=False)

    @staticmethod
    def from_env(
        state_dir: str | Path | None = None,
        port_base: int | None = None,
        jars_dir: str | Path | None = None,
    ) -> StackSettings:
        state = Path(
            state_dir or os.environ.get("CDC_LAKE_STATE_DIR") or project_root() / ".cdc-lake"
        ).resolve()
        jars = Path(jars_dir or os.environ.get("CDC_LAKE_JARS_DIR") or state / "jars").resolve()
        base = port_base or int(os.environ.get("CDC_LAKE_PORT_BASE", DEFAULT_PORT_BASE))
        workers = int(os.environ.get("CDC_LAKE_CONNECT_WORKERS") or CONNECT_WORKERS[0])
        if workers not in CONNECT_WORKERS:
            raise ValueError(f"CDC_LAKE_CONNECT_WORKERS={workers}: one of {CONNECT_WORKERS}")
        return StackSettings(
            state_dir=state,
            jars_dir=jars,
            port_base=base,
            spark_mode=local_spark_mode(),
            connect_workers=workers,
        )

    # --- ports and endpoints -------------------------------------------------------------
    def port(self, name: str) -> int:
        return self.port_base + PORT_OFFSETS[name]

    @property
    def buckets(self) -> tuple[str, ...]:
        return (self.raw_bucket, self.lake_bucket, *self.warm_up_buckets)

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.port('kafka')}"

    @property
    def connect_url(self) -> str:
        return f"http://{self.host}:{self.port('connect')}"

    @property
    def connect_auth(self) -> tuple[str, str]:
        """User and password of the Connect REST API's basic auth."""
        return self.connect_user, self.credentials.connect_password

    @property
    def kafka_users(self) -> dict[str, str]:
        """Kafka's users and their passwords: the broker's, Connect's, Dagster's, the tests'."""
        c = self.credentials
        return {
            self.kafka_broker_user: c.kafka_broker_password,
            self.kafka_connect_user: c.kafka_connect_password,
            self.kafka_user: c.kafka_password,
            self.kafka_tester_user: c.kafka_tester_password,
        }

    def kafka_mechanism(self, user: str) -> str:
        """The SASL mechanism ``user`` logs in with: PLAIN for the broker, SCRAM for clients."""
        return KAFKA_BROKER_MECHANISM if user == self.kafka_broker_user else KAFKA_SASL_MECHANISM

    @property
    def kafka_security_protocol(self) -> str:
        return KAFKA_SECURITY_PROTOCOL if self.kafka_sasl else "PLAINTEXT"

    def kafka_client_conf(self, user: str | None = None) -> dict[str, Any]:
        """librdkafka settings for ``user`` (Dagster's by default) on the broker's clients'
        listener. The password is in the returned dict: for a client, never for a log."""
        name = user or self.kafka_user
        if not self.kafka_sasl:
            return {"bootstrap.servers": self.kafka_bootstrap, "security.protocol": "PLAINTEXT"}
        return {
            "bootstrap.servers": self.kafka_bootstrap,
            "security.protocol": KAFKA_SECURITY_PROTOCOL,
            "sasl.mechanism": self.kafka_mechanism(name),
            "sasl.username": name,
            "sasl.password": self.kafka_users[name],
        }

    @property
    def spark_master_url(self) -> str:
        """The standalone cluster's master (``spark_mode`` "cluster")."""
        return f"spark://{self.host}:{self.port('spark_master')}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host}:{self.port('s3')}"

    @property
    def credentials(self) -> Credentials:
        # Generated lazily so that merely building settings writes nothing.
        if not self._credentials:
            path = self.state_dir / "credentials.json"
            self._credentials.append(Credentials.load_or_create(path))
        return self._credentials[0]

    def pg_dsn(
        self, user: str | None = None, password: str | None = None, database: str | None = None
    ) -> str:
        user = user or self.pg_user
        if password is None:
            password = (
                self.credentials.pg_password
                if user == self.pg_user
                else self.credentials.replication_password
            )
        db = database or self.pg_database
        return f"postgresql://{user}:{password}@{self.host}:{self.port('postgres')}/{db}"

    # --- layout ----------------------------------------------------------------------------
    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def conf_dir(self) -> Path:
        return self.state_dir / "conf"

    def data_dir(self, service: str) -> Path:
        return self.state_dir / "data" / service

    def classpath_dir(self, name: str) -> Path:
        """One resolved classpath: kafka, connect, s3proxy, spark, or plugins/<name>."""
        return self.jars_dir / name

    @property
    def plugin_path(self) -> Path:
        return self.jars_dir / "plugins"

    def spark_jars(self) -> list[Path]:
        return sorted(self.classpath_dir("spark").glob("*.jar"))


def local_secret_env(settings: StackSettings) -> dict[str, str]:
    """The stack's credentials under the variable names the local resources' EnvVars (and
    s3a in Spark's JVM) read. Values are secrets: for a process's environment or the
    mode-0600 ``.env``, never for argv or logs."""
    c = settings.credentials
    return {
        "CDC_LAKE_PG_PASSWORD": c.pg_password,
        "CDC_LAKE_S3_ACCESS_KEY": c.s3_access_key,
        "CDC_LAKE_S3_SECRET_KEY": c.s3_secret_key,
        "CDC_LAKE_CONNECT_PASSWORD": c.connect_password,
        "CDC_LAKE_KAFKA_PASSWORD": c.kafka_password,
        # The digest hashes a hashed column as the source connector does (lake/digest.py).
        "CDC_LAKE_COLUMN_SALT": c.column_salt,
        # Read by Spark's s3a (EnvironmentVariableCredentialsProvider) in the JVM.
        "AWS_ACCESS_KEY_ID": c.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": c.s3_secret_key,
    }
