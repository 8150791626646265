"""Render connector configs from the templates in ``connectors/``: the one code path for every
environment.

Templates are JSON objects whose values may hold ``{{name}}`` placeholders. Rendering is strict:
a placeholder without a value, or a value the template never uses, is an error that names the
template, so a typo cannot silently deploy a half-configured connector.

Heartbeats: every ``heartbeat_interval_ms`` Debezium updates ``datalake.cdc_heartbeat`` (a
published table, see ``sql/003_debezium.sql``) and acknowledges the LSN it has reached, so the
replication slot keeps up with the WAL while the outbox is quiet. Signals: inserting into
``datalake.debezium_signal`` drives incremental snapshots (``cdc_lake/streaming/signals.py``).

Secrets are never values here. The replication password and the salt of hashed columns are
config-provider references, ``${env:CDC_LAKE_REPLICATION_PASSWORD}`` and
``${env:CDC_LAKE_COLUMN_SALT}`` (local Connect, whose provider resolves only those variables) or
``${secretsmanager:...}`` (MSK Connect), which the worker resolves when it starts the task. The S3
sink has no keys in its config anywhere: it uses the AWS SDK's default chain (the local worker's
``AWS_*`` variables, or MSK Connect's service execution role).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.source.captured import TABLES, UNAVAILABLE_VALUE, CapturedTable, json_field
from cdc_lake.source.database import PG_PORT, PUBLICATION

PLACEHOLDER = re.compile(r"\{\{\s*([a-z0-9_]+)\s*\}\}")

DEBEZIUM_TEMPLATE = "debezium-postgres.json"
S3_SINK_LOCAL_TEMPLATE = "s3-sink-local.json"
S3_SINK_MSK_TEMPLATE = "s3-sink-msk.json"
# Short enough that a quiet outbox pins at most a few seconds of WAL, long enough to cost
# nothing: one UPDATE of one row and one heartbeat record per interval.
DEFAULT_HEARTBEAT_INTERVAL_MS = 10_000


class ConnectorConfigError(ValueError):
    pass


def connectors_dir() -> Path:
    """``connectors/`` of the checkout this package runs from; for an installed package (the
    templates are not package data), of the working directory."""
    checkout = Path(__file__).resolve().parents[2] / "connectors"
    return checkout if checkout.is_dir() else Path.cwd() / "connectors"


def topic_name(topic_prefix: str, table: CapturedTable) -> str:
    """Debezium's topic for a captured table: ``<prefix>.<schema>.<table>``, e.g.
    ``cdc.datalake.cdc_events`` for the outbox."""
    return f"{topic_prefix}.{table.source}"


def message_key_columns(tables: Sequence[CapturedTable]) -> str:
    """Debezium's ``message.key.columns`` for ``tables``: each one's declared key,
    ``<schema>.<table>:<column>,...;...``. Every record's Kafka key is then its declared key,
    whether the source holds it as the primary key or as a unique index (a table without a
    primary key would otherwise get no key: its changes spread over the partitions, and
    incremental snapshots skip it)."""
    return ";".join(f"{t.source}:{','.join(t.keys)}" for t in tables)


def excluded_columns(tables: Sequence[CapturedTable]) -> str:
    """Debezium's ``column.exclude.list`` for ``tables``: a regular expression per excluded
    column (``CapturedTable.exclude``), matched against ``<schema>.<table>.<column>``."""
    return ",".join(
        re.escape(f"{t.source}.{c}") for t in tables for c in t.exclude if not json_field(c)
    )


def hashed_columns(tables: Sequence[CapturedTable]) -> str:
    """The ``HashColumns`` transform's ``columns``: ``<schema>.<table>.<column>`` per hashed
    column (``CapturedTable.hashed``)."""
    return ",".join(f"{t.source}.{c}" for t in tables for c in t.hashed if not json_field(c))


def field_policies(tables: Sequence[CapturedTable], policy: str) -> str:
    """The ``HashColumns`` transform's ``fields.hashed`` or ``fields.excluded`` (``policy``):
    ``<schema>.<table>.<column>.<field>`` per declared field of a jsonb column."""
    return ",".join(
        f"{t.source}.{c}"
        for t in tables
        for c in (t.hashed if policy == "hashed" else t.exclude)
        if json_field(c)
    )


def connector_names(topic_prefix: str) -> tuple[str, str]:
    """(source, sink): the connectors' names, the same on every Connect. The sink's consumer
    group is ``connect-<sink>``."""
    return f"{topic_prefix}-debezium-source", f"{topic_prefix}-s3-sink"


def connector_class(template: str) -> str:
    """The ``connector.class`` a template names (fixed: never a placeholder)."""
    path = connectors_dir() / template
    try:
        return str(json.loads(path.read_text())["connector.class"])
    except (OSError, json.JSONDecodeError, KeyError) as e:
        raise ConnectorConfigError(f"connector template {path}: no connector.class ({e})") from e


def render_connector_config(template: str | Path, values: Mapping[str, object]) -> dict[str, str]:
    path = Path(template)
    if not path.is_absolute():
        path = connectors_dir() / path
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConnectorConfigError(f"connector template {path}: {e}") from e
    used: set[str] = set()
    missing: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        used.add(name)
        if name not in values or values[name] is None:
            missing.add(name)
            return match.group(0)
        return str(values[name])

    rendered = {key: PLACEHOLDER.sub(substitute, str(value)) for key, value in raw.items()}
    if missing:
        raise ConnectorConfigError(
            f"connector template {path.name}: no value for {sorted(missing)}"
        )
    unused = set(values) - used
    if unused:
        raise ConnectorConfigError(
            f"connector template {path.name}: settings {sorted(unused)} are not used by it"
        )
    return rendered


@dataclass(frozen=True, kw_only=True)
class CdcConnectorSettings:
    """Everything the two connectors need, for any environment. The defaults are the
    pipeline's: ``CdcPipelineResource`` takes its own from here."""

    pg_host: str
    pg_port: int = PG_PORT
    pg_database: str
    replication_user: str
    raw_bucket: str
    topic_prefix: str = "cdc"
    # A config-provider reference, resolved by the Connect worker: never the secret itself.
    replication_password_ref: str = "${env:CDC_LAKE_REPLICATION_PASSWORD}"
    # The salt of hashed columns, another reference (``salt.secret`` of ``HashColumns``).
    column_salt_ref: str = "${env:CDC_LAKE_COLUMN_SALT}"
    raw_prefix: str = "cdc-events/"
    region: str = "us-east-1"
    slot_name: str = "cdc_lake_slot"
    publication: str = PUBLICATION
    flush_records: int = 1000
    flush_interval_ms: int = 10_000
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    s3_endpoint: str | None = None
    # The captured tables: one topic each, in the Debezium connector and the sink.
    tables: tuple[CapturedTable, ...] = TABLES

    @property
    def topics(self) -> tuple[str, ...]:
        """One per captured table, all written by the one sink."""
        return tuple(topic_name(self.topic_prefix, t) for t in self.tables)

    def debezium(self) -> dict[str, str]:
        config = render_connector_config(
            DEBEZIUM_TEMPLATE,
            {
                "publication": self.publication,
                "slot_name": self.slot_name,
                "pg_host": self.pg_host,
                "pg_port": self.pg_port,
                "replication_user": self.replication_user,
                "replication_password": self.replication_password_ref,
                "pg_database": self.pg_database,
                "topic_prefix": self.topic_prefix,
                "tables": ",".join(t.source for t in self.tables),
                "key_columns": message_key_columns(self.tables),
                "excluded_columns": excluded_columns(self.tables),
                "hashed_columns": hashed_columns(self.tables),
                "hashed_fields": field_policies(self.tables, "hashed"),
                "excluded_fields": field_policies(self.tables, "excluded"),
                "column_salt": self.column_salt_ref,
                "heartbeat_interval_ms": self.heartbeat_interval_ms,
                "unavailable_value": UNAVAILABLE_VALUE,
            },
        )
        if not config["column.exclude.list"]:
            del config["column.exclude.list"]  # Debezium reads an empty list as unset anyway
        return config

    def s3_sink_local(self) -> dict[str, str]:
        return render_connector_config(
            S3_SINK_LOCAL_TEMPLATE,
            {
                "topics": ",".join(self.topics),
                "raw_bucket": self.raw_bucket,
                "raw_prefix": self.raw_prefix,
                "s3_endpoint": self.s3_endpoint,
                "region": self.region,
                "flush_records": self.flush_records,
                "flush_interval_ms": self.flush_interval_ms,
            },
        )

    def s3_sink_msk(self) -> dict[str, str]:
        """Our sink on MSK Connect: no endpoint and no keys, so it writes to AWS S3 with the
        SDK's default credentials chain, which there is the connector's service execution
        role."""
        return render_connector_config(
            S3_SINK_MSK_TEMPLATE,
            {
                "topics": ",".join(self.topics),
                "raw_bucket": self.raw_bucket,
                "raw_prefix": self.raw_prefix,
                "region": self.region,
                "flush_records": self.flush_records,
                "flush_interval_ms": self.flush_interval_ms,
            },
        )
