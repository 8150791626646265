"""The streaming resources: Kafka clients, where the connectors run, and the CDC pipeline's names.

``ConnectResource`` is one interface with two implementations: a Kafka Connect REST endpoint
(``KafkaConnectResource``, the local stack's or a self-managed one) and Amazon MSK Connect
(``MskConnectResource``). Their clients deploy idempotently: an unchanged config is left alone.
Secrets are never in a config: the replication password is a config-provider reference the
Connect worker resolves, the Connect REST password an EnvVar read when a run starts.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

import boto3
import dagster as dg

from cdc_lake.resources.source import PostgresResource
from cdc_lake.source.captured import CapturedTable
from cdc_lake.streaming.connect_client import ConnectClient, Connectors
from cdc_lake.streaming.connect_config import CdcConnectorSettings, connector_names, topic_name
from cdc_lake.streaming.msk.client import MskConnectClient
from cdc_lake.streaming.msk.settings import MskConnectSettings


class KafkaResource(dg.ConfigurableResource):
    """Kafka client settings, passed through to librdkafka. The local stack's broker takes
    SASL/PLAIN (``sasl_username``, ``sasl_password``).

    ``msk_iam_region`` set: SASL_SSL with OAUTHBEARER tokens signed for MSK IAM auth by AWS's
    ``aws-msk-iam-sasl-signer-python`` from the default credential chain (the instance or task
    role), which is how clients reach MSK's IAM listener (port 9098)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    # SASL/PLAIN or SCRAM: the user, and its password (an EnvVar, read when a run starts).
    sasl_username: str | None = None
    sasl_password: str | None = None
    msk_iam_region: str | None = None

    def client_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            password = self.sasl_password
            if isinstance(password, dg.EnvVar):  # used outside a run (tests, scripts)
                password = password.get_value()
            conf |= {"sasl.username": self.sasl_username, "sasl.password": password or ""}
        if self.msk_iam_region:
            region = self.msk_iam_region

            def token(_config: Any) -> tuple[str, float]:
                from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

                value, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
                return value, expiry_ms / 1000

            conf |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": token,
            }
        return conf


class ConnectResource(dg.ConfigurableResource):
    """Where the connectors run: ``client()`` is a ``Connectors``
    (``cdc_lake/streaming/connect_client.py``), whichever implementation."""

    def client(self) -> Connectors:
        raise NotImplementedError


class KafkaConnectResource(ConnectResource):
    """A Kafka Connect REST endpoint (the local stack's, or a self-managed one), with HTTP basic
    auth when ``user`` is set (the password an EnvVar, read when a run starts)."""

    url: str
    timeout_s: float = 15.0
    user: str | None = None
    password: str | None = None

    def client(self) -> ConnectClient:
        password = self.password
        if isinstance(password, dg.EnvVar):  # used outside a run (tests, scripts): read it now
            password = password.get_value()
        auth = (self.user, password or "") if self.user else None
        return ConnectClient(self.url, timeout_s=self.timeout_s, auth=auth)


class MskConnectResource(ConnectResource):
    """Kafka Connect on Amazon MSK Connect (``CDC_LAKE_CONNECT_MODE=msk``). ``settings`` is
    ``MskConnectSettings.as_config()``, parsed once from the ``CDC_LAKE_MSK_*`` variables when
    the prod resources are built (``cdc_lake/streaming/msk/settings.py``); no secret is in it."""

    settings: dict[str, Any]
    poll_s: float = 15.0
    endpoint_url: str | None = None  # tests only

    def client(self) -> MskConnectClient:
        settings = MskConnectSettings.from_config(self.settings)
        kc = boto3.client(
            "kafkaconnect", region_name=settings.region, endpoint_url=self.endpoint_url
        )
        return MskConnectClient(kc, settings, self.poll_s)


# The connectors' settings and their defaults are declared once, in CdcConnectorSettings.
_CONNECTOR = {f.name: f.default for f in fields(CdcConnectorSettings) if f.default is not MISSING}


class CdcPipelineResource(dg.ConfigurableResource):
    """Names and knobs of the CDC pipeline: topic, connectors, buckets and prefixes. The fields
    it shares with ``CdcConnectorSettings`` take their defaults from there."""

    topic_prefix: str = _CONNECTOR["topic_prefix"]
    slot_name: str = _CONNECTOR["slot_name"]
    publication: str = _CONNECTOR["publication"]
    raw_bucket: str
    raw_prefix: str = _CONNECTOR["raw_prefix"]
    region: str = _CONNECTOR["region"]
    # A config-provider reference, resolved by the Connect worker: never the secret itself.
    replication_password_ref: str = _CONNECTOR["replication_password_ref"]
    column_salt_ref: str = _CONNECTOR["column_salt_ref"]
    # The S3 sink authenticates with the AWS SDK's default chain (the worker's environment
    # locally, the service execution role on MSK Connect): no keys in its config.
    s3_endpoint: str | None = _CONNECTOR["s3_endpoint"]
    flush_records: int = _CONNECTOR["flush_records"]
    flush_interval_ms: int = _CONNECTOR["flush_interval_ms"]
    heartbeat_interval_ms: int = _CONNECTOR["heartbeat_interval_ms"]
    # The lag checks WARN past these: WAL the slot retains, records the sink has not committed,
    # raw objects the lake has not ingested yet.
    slot_lag_warn_bytes: int = 1 << 30
    sink_lag_warn_records: int = 100_000
    pending_objects_warn: int = 100
    # The lake's lag in seconds (lake_lag_seconds, cdc_lake/defs/lake/lag.py): the age of the
    # oldest change not yet in the lake WARNs past the first, is an ERROR past the second.
    lag_warn_seconds: float = 900.0
    lag_error_seconds: float = 3600.0
    sample_scale: float = 1.0
    sample_seed: int = 42
    connector_timeout_s: float = 180.0

    def topic_of(self, table: CapturedTable) -> str:
        return topic_name(self.topic_prefix, table)

    @property
    def source_connector_name(self) -> str:
        return connector_names(self.topic_prefix)[0]

    @property
    def sink_connector_name(self) -> str:
        return connector_names(self.topic_prefix)[1]

    @property
    def sink_consumer_group(self) -> str:
        """Connect's consumer group of the sink: its committed offsets are what is in S3."""
        return f"connect-{self.sink_connector_name}"

    def connector_settings(self, postgres: PostgresResource) -> CdcConnectorSettings:
        return CdcConnectorSettings(
            pg_host=postgres.host,
            pg_port=postgres.port,
            pg_database=postgres.database,
            replication_user=postgres.replication_user,
            raw_bucket=self.raw_bucket,
            **{n: getattr(self, n) for n in _CONNECTOR if n in type(self).model_fields},
        )
