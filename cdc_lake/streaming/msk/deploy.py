"""Deploy both connectors to MSK Connect: the worker configuration, the connectors, and
``deploy_to_msk_connect``, which also makes the plugins (``cdc_lake.streaming.msk.plugins``).

Every step is idempotent, so rerunning is always safe:

- The worker configuration (converters and the Secrets Manager config provider) is named with
  the hash of its properties: reused when it exists, created otherwise.
- Connectors are looked up by name. An absent one is created. An existing one is first awaited
  until RUNNING (an earlier run may have left it CREATING or UPDATING), then gets at most two
  ``update_connector`` calls, because the API takes either the connector configuration or the
  worker settings (capacity, plugin, worker configuration) per request, never both: one for a
  changed configuration, then one for changed worker settings. Nothing is sent when neither
  changed. Settings MSK Connect cannot update (cluster, network, authentication, role, Connect
  version, log delivery) raise ``MskConnectError`` naming them instead of being ignored.
- The source gets a few MSK-only keys (``msk_source_extras``) that never override a rendered
  one: MSK brokers do not auto-create topics, so Connect creates the source's topic.

Failure behaviour: settings, secrets (``check_no_literal_secrets``) and plugin folders are
checked before the first AWS call. After that, the first failure raises and stops the deploy;
what was created before it stays and is reused by the next run. A connector that becomes
FAILED, an update that MSK Connect rolled back, or a plugin that failed to create raises
``MskConnectError`` with the resource's name, state and the service's
``stateDescription``/``errorInfo`` (code and message). Waiting is bounded by ``timeout_s`` and
polls every ``poll_s``.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cdc_lake.streaming.connect_config import CdcConnectorSettings, connector_names
from cdc_lake.streaming.msk.api import MskConnectError, Sleep, find_by_name, poll
from cdc_lake.streaming.msk.plugins import (
    MskPluginDirs,
    PluginResult,
    ensure_plugin,
    plugin_archives,
)
from cdc_lake.streaming.msk.secrets import check_no_literal_secrets
from cdc_lake.streaming.msk.settings import MskConnectSettings

CONNECTOR_HINTS = {
    "FAILED": ". Fix: read the worker logs (CDC_LAKE_MSK_LOG_GROUP); MSK Connect cannot update "
    "a FAILED connector, so delete it and rerun once the cause is fixed",
    "PAUSED": ". Fix: resume it (aws kafkaconnect resume-connector) and rerun",
}


# --- connector configs --------------------------------------------------------------------


def msk_source_extras(settings: MskConnectSettings) -> dict[str, str]:
    return {
        # MSK restarts connectors that use config providers often unless told not to.
        "config.action.reload": "none",
        # MSK brokers do not auto-create topics: Connect creates the source's topic.
        "topic.creation.default.replication.factor": str(settings.topic_replication_factor),
        "topic.creation.default.partitions": "1",
    }


def with_extras(name: str, config: Mapping[str, str], extras: Mapping[str, str]) -> dict[str, str]:
    clash = sorted(set(config) & set(extras))
    if clash:
        raise ValueError(f"connector {name}: MSK extras would override rendered keys {clash}")
    return {**config, **extras}


# --- worker configuration -----------------------------------------------------------------


@dataclass
class WorkerConfigResult:
    name: str
    arn: str
    revision: int
    created: bool

    def ref(self) -> dict[str, Any]:
        return {"workerConfigurationArn": self.arn, "revision": self.revision}


def ensure_worker_configuration(
    kafkaconnect: Any, settings: MskConnectSettings
) -> WorkerConfigResult:
    """Worker configurations cannot be edited, so the name carries the properties' hash."""
    properties = settings.worker_properties()
    digest = hashlib.sha256(properties.encode()).hexdigest()[:12]
    name = f"{settings.name_prefix}-workers-{digest}"
    found = find_by_name(
        kafkaconnect,
        "list_worker_configurations",
        "workerConfigurations",
        "name",
        name,
        namePrefix=name,
    )
    if found is not None and found.get("workerConfigurationState") == "DELETING":
        raise MskConnectError(f"worker configuration {name} is being deleted; rerun later")
    if found is not None:
        return WorkerConfigResult(
            name, found["workerConfigurationArn"], int(found["latestRevision"]["revision"]), False
        )
    made = kafkaconnect.create_worker_configuration(
        name=name,
        description="cdc-lake workers: string converters, Secrets Manager config provider",
        propertiesFileContent=base64.b64encode(properties.encode()).decode(),
    )
    return WorkerConfigResult(
        name, made["workerConfigurationArn"], int(made["latestRevision"]["revision"]), True
    )


# --- connectors ---------------------------------------------------------------------------


@dataclass
class ConnectorResult:
    name: str
    arn: str
    action: str  # created, updated or unchanged
    updates: list[str] = field(default_factory=list)  # connectorConfiguration, workerSetting
    state: str = ""


def _subset(wanted: Any, actual: Any) -> bool:
    """True if every key of ``wanted`` is in ``actual`` with the same value (recursively);
    describe_* answers carry extra keys we never set."""
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _subset(v, actual[k]) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(wanted) == len(actual)
            and all(_subset(w, a) for w, a in zip(wanted, actual, strict=True))
        )
    return wanted == actual


def _immutable_drift(desc: Mapping[str, Any], settings: MskConnectSettings) -> list[str]:
    have_cluster = (desc.get("kafkaCluster") or {}).get("apacheKafkaCluster") or {}
    have_vpc = have_cluster.get("vpc") or {}
    checks: list[tuple[str, Any, Any]] = [
        ("bootstrapServers", have_cluster.get("bootstrapServers"), settings.bootstrap_servers),
        ("subnets", sorted(have_vpc.get("subnets") or []), sorted(settings.subnet_ids)),
        (
            "securityGroups",
            sorted(have_vpc.get("securityGroups") or []),
            sorted(settings.security_group_ids),
        ),
        (
            "authenticationType",
            (desc.get("kafkaClusterClientAuthentication") or {}).get("authenticationType"),
            "IAM",
        ),
        (
            "encryptionType",
            (desc.get("kafkaClusterEncryptionInTransit") or {}).get("encryptionType"),
            "TLS",
        ),
        (
            "serviceExecutionRoleArn",
            desc.get("serviceExecutionRoleArn"),
            settings.service_execution_role_arn,
        ),
        ("kafkaConnectVersion", desc.get("kafkaConnectVersion"), settings.kafka_connect_version),
    ]
    drift = [f"{what} is {have!r}, wanted {want!r}" for what, have, want in checks if have != want]
    wanted_logs = settings.log_delivery()
    if wanted_logs and not _subset(wanted_logs, desc.get("logDelivery") or {}):
        drift.append(f"logDelivery is {desc.get('logDelivery')!r}, wanted {wanted_logs!r}")
    return drift


class MskConnectDeployer:
    """The deploy's steps, with its clients, settings and waiting policy."""

    def __init__(
        self,
        kafkaconnect: Any,
        settings: MskConnectSettings,
        timeout_s: float = 1800.0,
        poll_s: float = 15.0,
        sleep: Sleep = time.sleep,
        log: Callable[[str], None] | None = None,
    ):
        self.kc = kafkaconnect
        self.settings = settings
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.sleep = sleep
        self.log = log or (lambda message: None)

    def wait_running(self, name: str, arn: str) -> dict[str, Any]:
        return poll(
            f"connector {name}",
            lambda: self.kc.describe_connector(connectorArn=arn),
            "connectorState",
            {"RUNNING"},
            {"FAILED", "DELETING", "PAUSED", "PAUSING"},
            self.timeout_s,
            self.poll_s,
            self.sleep,
            hints=CONNECTOR_HINTS,
        )

    def _update(
        self, name: str, desc: Mapping[str, Any], what: str, **params: Any
    ) -> dict[str, Any]:
        """One update_connector call against the described version, then wait for its
        operation and for RUNNING; returns the new description."""
        arn = desc["connectorArn"]
        self.log(f"connector {name}: updating its {what}")
        answer = self.kc.update_connector(
            connectorArn=arn, currentVersion=desc["currentVersion"], **params
        )
        op_arn = answer.get("connectorOperationArn")
        if op_arn:
            # A failed update is rolled back and the connector is RUNNING again, on the old
            # settings: only the operation tells.
            poll(
                f"update of connector {name}'s {what}",
                lambda: self.kc.describe_connector_operation(connectorOperationArn=op_arn),
                "connectorOperationState",
                {"UPDATE_COMPLETE"},
                {"UPDATE_FAILED", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED"},
                self.timeout_s,
                self.poll_s,
                self.sleep,
            )
        return self.wait_running(name, arn)

    def ensure_connector(
        self,
        name: str,
        config: dict[str, str],
        plugin: PluginResult,
        worker: WorkerConfigResult,
    ) -> ConnectorResult:
        check_no_literal_secrets(name, config)
        s = self.settings
        found = find_by_name(
            self.kc,
            "list_connectors",
            "connectors",
            "connectorName",
            name,
            connectorNamePrefix=name,
        )
        if found is not None and found.get("connectorState") == "DELETING":
            raise MskConnectError(f"connector {name} is being deleted; rerun once it is gone")
        if found is None:
            self.log(f"connector {name}: creating")
            request: dict[str, Any] = {
                "connectorName": name,
                "connectorDescription": f"cdc-lake {name}",
                "kafkaConnectVersion": s.kafka_connect_version,
                "serviceExecutionRoleArn": s.service_execution_role_arn,
                "capacity": s.capacity(),
                "connectorConfiguration": config,
                "kafkaCluster": s.kafka_cluster(),
                "kafkaClusterClientAuthentication": {"authenticationType": "IAM"},
                "kafkaClusterEncryptionInTransit": {"encryptionType": "TLS"},
                "plugins": [plugin.ref()],
                "workerConfiguration": worker.ref(),
            }
            log_delivery = s.log_delivery()
            if log_delivery:
                request["logDelivery"] = log_delivery
            arn = self.kc.create_connector(**request)["connectorArn"]
            desc = self.wait_running(name, arn)
            return ConnectorResult(name, arn, "created", state=desc["connectorState"])

        arn = found["connectorArn"]
        # An earlier run may have left it CREATING or UPDATING: updates need it RUNNING.
        desc = self.wait_running(name, arn)
        drift = _immutable_drift(desc, s)
        if drift:
            raise MskConnectError(
                f"connector {name} ({arn}) differs in settings MSK Connect cannot update: "
                + "; ".join(drift)
                + ". Fix: delete the connector and rerun (a new source connector snapshots "
                "again), or correct the settings."
            )
        updates = []
        if desc.get("connectorConfiguration") != config:
            desc = self._update(name, desc, "configuration", connectorConfiguration=config)
            updates.append("connectorConfiguration")
        worker_setting = {
            "capacity": s.capacity(),
            "plugins": [plugin.ref()],
            "workerConfiguration": worker.ref(),
        }
        have = {
            "capacity": desc.get("capacity") or {},
            "plugins": desc.get("plugins") or [],
            "workerConfiguration": desc.get("workerConfiguration") or {},
        }
        if not _subset(worker_setting, have):
            desc = self._update(name, desc, "worker settings", **worker_setting)
            updates.append("workerSetting")
        action = "updated" if updates else "unchanged"
        self.log(f"connector {name}: {action}")
        return ConnectorResult(name, arn, action, updates, desc["connectorState"])


def render_msk_configs(
    settings: MskConnectSettings, connectors: CdcConnectorSettings
) -> dict[str, dict[str, str]]:
    """{connector name: config}, source first, checked for secrets."""
    source_name, sink_name = connector_names(connectors.topic_prefix)
    configs = {
        source_name: with_extras(source_name, connectors.debezium(), msk_source_extras(settings)),
        sink_name: connectors.s3_sink_msk(),
    }
    for name, config in configs.items():
        check_no_literal_secrets(name, config)
    return configs


def deploy_to_msk_connect(
    kafkaconnect_client: Any,
    s3_client: Any,
    settings: MskConnectSettings,
    connectors: CdcConnectorSettings,
    plugin_dirs: MskPluginDirs,
    timeout_s: float = 1800.0,
    poll_s: float = 15.0,
    sleep: Sleep = time.sleep,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Create or update the plugins, the worker configuration and both connectors; wait for
    each connector to be RUNNING. Returns what was done, with ARNs and plugin revisions."""
    configs = render_msk_configs(settings, connectors)  # before any AWS call
    archives = plugin_archives(settings, plugin_dirs)
    d = MskConnectDeployer(kafkaconnect_client, settings, timeout_s, poll_s, sleep, log)
    plugins = {
        role: ensure_plugin(kafkaconnect_client, s3_client, settings, a, timeout_s, poll_s, sleep)
        for role, a in archives.items()
    }
    worker = ensure_worker_configuration(kafkaconnect_client, settings)
    (source_name, source), (sink_name, sink) = configs.items()
    results = [
        d.ensure_connector(source_name, source, plugins["source"], worker),
        d.ensure_connector(sink_name, sink, plugins["sink"], worker),
    ]
    return {
        "plugins": {role: asdict(p) for role, p in plugins.items()},
        "worker_configuration": asdict(worker),
        "connectors": {r.name: asdict(r) for r in results},
    }
