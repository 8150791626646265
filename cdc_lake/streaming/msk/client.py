"""The Dagster side of MSK Connect: ``MskConnectClient`` answers what the topic and raw assets
ask of Connect, with the same interface as the Connect REST client
(``cdc_lake.streaming.connect_client``).

It never creates anything: plugins and the worker configuration are made by
``cdc-lake msk deploy`` (it needs the connector jars, which the Dagster deployment does not
carry). ``deploy`` keeps an existing connector's configuration current, on the plugin and
worker configuration it already runs, and waits for RUNNING; it is idempotent (nothing is sent
when the configuration is unchanged). A connector that does not exist yet raises
``MskConnectError`` saying to run the deploy command. MSK Connect reports no per-task states, so
the status documents have no tasks and the connector's state stands for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc_lake.streaming.msk.api import MskConnectError, find_by_name
from cdc_lake.streaming.msk.deploy import (
    MskConnectDeployer,
    WorkerConfigResult,
    msk_source_extras,
    with_extras,
)
from cdc_lake.streaming.msk.plugins import PluginResult
from cdc_lake.streaming.msk.settings import MskConnectSettings


class MskConnectClient:
    """What the topic and raw assets ask of Connect, answered by MSK Connect.

    Plugins and the worker configuration are made by ``cdc-lake msk deploy`` (it needs the
    connector jars, which the Dagster deployment does not carry). Materialising an asset then
    keeps the existing connector's configuration current, with the plugin and worker
    configuration it already runs, and waits for RUNNING. A connector that does not exist yet is
    an error that says to run the deploy command."""

    def __init__(self, kafkaconnect: Any, settings: MskConnectSettings, poll_s: float = 15.0):
        self.kc = kafkaconnect
        self.settings = settings
        self.poll_s = poll_s

    def connectors(self) -> list[str]:
        names = []
        for page in self.kc.get_paginator("list_connectors").paginate():
            names += [c["connectorName"] for c in page.get("connectors", [])]
        return names

    def restart_failed(self, name: str) -> list[str]:
        """Nothing: MSK Connect restarts a connector's failed workers itself."""
        return []

    def status(self, name: str) -> dict[str, Any] | None:
        """Kafka Connect's status shape; MSK Connect reports no per-task states."""
        found = find_by_name(
            self.kc, "list_connectors", "connectors", "connectorName", name,
            connectorNamePrefix=name,
        )  # fmt: skip
        if found is None:
            return None
        desc = self.kc.describe_connector(connectorArn=found["connectorArn"])
        return {"connector": {"state": desc["connectorState"]}, "tasks": []}

    def deploy(
        self,
        name: str,
        config: dict[str, str],
        timeout_s: float,
        log: Callable[[str], None] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        found = find_by_name(
            self.kc, "list_connectors", "connectors", "connectorName", name,
            connectorNamePrefix=name,
        )  # fmt: skip
        if found is None:
            raise MskConnectError(
                f"connector {name} does not exist on MSK Connect. Fix: run `cdc-lake msk deploy` "
                "(it creates the plugins, the worker configuration and both connectors)."
            )
        desc = self.kc.describe_connector(connectorArn=found["connectorArn"])
        plugin = desc["plugins"][0]["customPlugin"]
        worker = desc.get("workerConfiguration") or {}
        if config.get("connector.class", "").startswith("io.debezium."):  # the source's extras
            config = with_extras(name, config, msk_source_extras(self.settings))
        deployer = MskConnectDeployer(self.kc, self.settings, timeout_s, self.poll_s, log=log)
        result = deployer.ensure_connector(
            name,
            config,
            PluginResult(plugin.get("customPluginArn", ""), plugin["customPluginArn"],
                         plugin["revision"], "", "", False, False),
            WorkerConfigResult(worker.get("workerConfigurationArn", ""),
                               worker.get("workerConfigurationArn", ""),
                               worker.get("revision", 1), False),
        )  # fmt: skip
        # MSK Connect reports no per-task states; the connector's state stands for them.
        return result.action, {"connector": {"state": result.state}, "tasks": []}
