"""The Dagster side of MSK Connect: the assets' client keeps a deployed connector current and
sends the deploy command when nothing is deployed."""

from __future__ import annotations

import pytest

from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.api import MskConnectError
from cdc_lake.streaming.msk.client import MskConnectClient
from cdc_lake.streaming.msk.plugins import MskPluginDirs
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import (
    SINK,
    SOURCE,
    SOURCE_ARN,
    described,
    expected_configs,
    plugins_for,
    stub_listed_connector,
)


def test_the_assets_client_updates_the_deployed_connector_on_its_own_plugin(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc
):
    client, stub = kc
    dbz, _ = plugins_for(dirs, "plugins")
    source_config, _ = expected_configs(cdc)
    old = {**source_config, "snapshot.mode": "never"}
    deployed = described(SOURCE, SOURCE_ARN, old, dbz, version="V3", revision=2)
    stub_listed_connector(stub, SOURCE, SOURCE_ARN, deployed)  # which plugin does it run?
    stub_listed_connector(stub, SOURCE, SOURCE_ARN, deployed)  # ensure_connector's lookup
    # Only the configuration changes: the plugin revision it runs (2) is kept, so no second
    # update of the worker settings is sent.
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING"},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V3",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V4", revision=2),
        {"connectorArn": SOURCE_ARN},
    )
    # The asset passes the plain rendered config; the MSK additions are the client's job.
    action, status = MskConnectClient(client, msk, poll_s=0).deploy(
        SOURCE, cdc.debezium(), timeout_s=5
    )
    assert (action, status["connector"]["state"]) == ("updated", "RUNNING")


def test_the_assets_client_sends_the_deploy_command_when_nothing_is_deployed(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, kc
):
    client, stub = kc
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": SINK})
    with pytest.raises(MskConnectError, match="cdc-lake msk deploy"):
        MskConnectClient(client, msk, poll_s=0).deploy(SINK, cdc.s3_sink_msk(), timeout_s=5)
