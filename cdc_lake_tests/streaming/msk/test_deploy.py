"""Deploying to MSK Connect: request shapes, idempotency, secrets and failures.

The kafkaconnect client is stubbed and S3 is moto's server (see ``helpers``).
"""

from __future__ import annotations

import hashlib

import pytest

from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.api import MskConnectError
from cdc_lake.streaming.msk.deploy import deploy_to_msk_connect
from cdc_lake.streaming.msk.plugins import MskPluginDirs
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import (
    CAPACITY,
    KAFKA_CLUSTER,
    PASSWORD_REF,
    S3,
    SINK,
    SINK_ARN,
    SOURCE,
    SOURCE_ARN,
    WORKER_ARN,
    WORKER_NAME,
    WORKER_REF,
    create_request,
    deploy,
    described,
    expected_configs,
    no_sleep,
    plugins_for,
    stub_created_connector,
    stub_existing_plugins_and_worker,
    stub_listed_connector,
    stub_new_plugin,
    stub_new_worker_config,
)


def test_deploy_refuses_a_literal_password_before_any_aws_call(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc
):
    client, _ = kc  # no responses stubbed: any kafkaconnect call would fail the test
    literal = CdcConnectorSettings(**{**cdc.__dict__, "replication_password_ref": "hunter2"})
    with pytest.raises(ValueError, match=f"connector {SOURCE}: 'database.password'"):
        deploy_to_msk_connect(client, None, msk, literal, dirs, sleep=no_sleep)
    # The salt of hashed columns likewise: a literal, or the local stack's env reference.
    for salt in ("pepper", "${env:CDC_LAKE_COLUMN_SALT}"):
        literal = CdcConnectorSettings(**{**cdc.__dict__, "column_salt_ref": salt})
        with pytest.raises(ValueError, match=f"connector {SOURCE}: 'transforms.hash.salt.secret"):
            deploy_to_msk_connect(client, None, msk, literal, dirs, sleep=no_sleep)


def test_first_deploy_creates_plugins_worker_config_and_connectors(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    # The rendered Debezium config carries only a reference to the password.
    assert source_config["database.password"] == PASSWORD_REF
    assert source_config["transforms.hash.salt.secret"] == (
        "${secretsmanager:cdc-lake/column-salt:column_salt}"
    )
    assert "aws.access.key.id" not in sink_config and "aws.s3.endpoint" not in sink_config
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub_created_connector(stub, SOURCE, SOURCE_ARN, source_config, dbz)
    stub_created_connector(stub, SINK, SINK_ARN, sink_config, sink)

    result = deploy(client, s3, msk, cdc, dirs)

    assert s3.puts == [dbz.key, sink.key]
    assert s3.read(dbz.key) == dbz.data and s3.read(sink.key) == sink.data
    assert result["plugins"]["source"] == {
        "name": dbz.name,
        "arn": dbz.arn,
        "revision": 1,
        "s3_uri": f"s3://{s3.bucket}/{dbz.key}",
        "sha256": hashlib.sha256(dbz.data).hexdigest(),
        "uploaded": True,
        "created": True,
    }
    assert result["worker_configuration"] == {
        "name": WORKER_NAME,
        "arn": WORKER_ARN,
        "revision": 1,
        "created": True,
    }
    assert {n: (c["action"], c["arn"], c["state"]) for n, c in result["connectors"].items()} == {
        SOURCE: ("created", SOURCE_ARN, "RUNNING"),
        SINK: ("created", SINK_ARN, "RUNNING"),
    }


def test_second_deploy_reuses_everything_and_uploads_nothing(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub_created_connector(stub, SOURCE, SOURCE_ARN, source_config, dbz)
    stub_created_connector(stub, SINK, SINK_ARN, sink_config, sink)
    deploy(client, s3, msk, cdc, dirs)
    assert len(s3.puts) == 2

    # Everything exists and matches: only look-ups, no create_* or update_* request.
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub, SOURCE, SOURCE_ARN, described(SOURCE, SOURCE_ARN, source_config, dbz)
    )
    stub_listed_connector(stub, SINK, SINK_ARN, described(SINK, SINK_ARN, sink_config, sink))
    again = deploy(client, s3, msk, cdc, dirs)

    assert len(s3.puts) == 2  # the same jars give the same key, already uploaded
    assert [p["uploaded"] for p in again["plugins"].values()] == [False, False]
    assert [p["created"] for p in again["plugins"].values()] == [False, False]
    assert again["worker_configuration"]["created"] is False
    assert {n: c["action"] for n, c in again["connectors"].items()} == {
        SOURCE: "unchanged",
        SINK: "unchanged",
    }


def test_existing_connector_is_updated_with_its_current_version(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, sink_config = expected_configs(cdc)
    old_config = {**source_config, "snapshot.mode": "never"}
    stub_existing_plugins_and_worker(stub, dbz, sink)
    # The source runs an older config on an older plugin and a smaller capacity.
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, old_config, dbz, version="V7", revision=1, capacity={}),
    )
    op = f"{SOURCE_ARN}/operation/1"
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING", "connectorOperationArn": op},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V7",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector_operation",
        {"connectorOperationArn": op, "connectorOperationState": "UPDATE_IN_PROGRESS"},
        {"connectorOperationArn": op},
    )
    stub.add_response(
        "describe_connector_operation",
        {"connectorOperationArn": op, "connectorOperationState": "UPDATE_COMPLETE"},
        {"connectorOperationArn": op},
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V8", capacity={}),
        {"connectorArn": SOURCE_ARN},
    )
    # Worker settings go in a second request: the API refuses them with the configuration.
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING"},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V8",
            "capacity": CAPACITY,
            "plugins": [dbz.ref()],
            "workerConfiguration": WORKER_REF,
        },
    )
    stub.add_response(
        "describe_connector",
        described(SOURCE, SOURCE_ARN, source_config, dbz, version="V9"),
        {"connectorArn": SOURCE_ARN},
    )
    stub_listed_connector(stub, SINK, SINK_ARN, described(SINK, SINK_ARN, sink_config, sink))

    result = deploy(client, s3, msk, cdc, dirs)

    assert result["connectors"][SOURCE]["action"] == "updated"
    assert result["connectors"][SOURCE]["updates"] == ["connectorConfiguration", "workerSetting"]
    assert result["connectors"][SINK]["action"] == "unchanged"


def test_failed_connector_raises_with_its_state_description(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_new_plugin(stub, dbz)
    stub_new_plugin(stub, sink)
    stub_new_worker_config(stub)
    stub.add_response("list_connectors", {"connectors": []}, {"connectorNamePrefix": SOURCE})
    stub.add_response(
        "create_connector",
        {"connectorArn": SOURCE_ARN, "connectorName": SOURCE, "connectorState": "CREATING"},
        create_request(SOURCE, source_config, dbz),
    )
    stub.add_response(
        "describe_connector",
        described(
            SOURCE,
            SOURCE_ARN,
            source_config,
            dbz,
            state="FAILED",
            stateDescription={
                "code": "InvalidInput.InvalidConnectorConfiguration",
                "message": "Connection to cdc.cluster-abc refused",
            },
        ),
        {"connectorArn": SOURCE_ARN},
    )
    with pytest.raises(MskConnectError) as e:
        deploy(client, s3, msk, cdc, dirs)
    message = str(e.value)
    assert f"connector {SOURCE} is FAILED" in message
    assert "InvalidInput.InvalidConnectorConfiguration: Connection to cdc.cluster-abc refused" in (
        message
    )
    # The sink is not attempted after the source failed (no stubs left for it).


def test_rolled_back_update_raises_with_the_error_info(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    old_config = {**source_config, "tasks.max": "2"}
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub, SOURCE, SOURCE_ARN, described(SOURCE, SOURCE_ARN, old_config, dbz, version="V2")
    )
    op = f"{SOURCE_ARN}/operation/9"
    stub.add_response(
        "update_connector",
        {"connectorArn": SOURCE_ARN, "connectorState": "UPDATING", "connectorOperationArn": op},
        {
            "connectorArn": SOURCE_ARN,
            "currentVersion": "V2",
            "connectorConfiguration": source_config,
        },
    )
    stub.add_response(
        "describe_connector_operation",
        {
            "connectorOperationArn": op,
            "connectorOperationState": "ROLLBACK_COMPLETE",
            "errorInfo": {"code": "HealthCheckFailed", "message": "task 0 failed"},
        },
        {"connectorOperationArn": op},
    )
    with pytest.raises(
        MskConnectError, match="ROLLBACK_COMPLETE: HealthCheckFailed: task 0 failed"
    ):
        deploy(client, s3, msk, cdc, dirs)


def test_settings_that_cannot_be_updated_raise_instead_of_being_ignored(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_existing_plugins_and_worker(stub, dbz, sink)
    other_cluster = {
        "apacheKafkaCluster": {
            **KAFKA_CLUSTER["apacheKafkaCluster"],
            "bootstrapServers": "old:9098",
        }
    }
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, source_config, dbz, kafkaCluster=other_cluster),
    )
    with pytest.raises(MskConnectError, match="bootstrapServers is 'old:9098'"):
        deploy(client, s3, msk, cdc, dirs)


def test_waiting_gives_up_after_the_timeout(
    msk: MskConnectSettings, cdc: CdcConnectorSettings, dirs: MskPluginDirs, kc, s3: S3
):
    client, stub = kc
    dbz, sink = plugins_for(dirs, s3.bucket)
    source_config, _ = expected_configs(cdc)
    stub_existing_plugins_and_worker(stub, dbz, sink)
    stub_listed_connector(
        stub,
        SOURCE,
        SOURCE_ARN,
        described(SOURCE, SOURCE_ARN, source_config, dbz, state="CREATING"),
    )
    settings = MskConnectSettings(**{**msk.__dict__, "plugin_bucket": s3.bucket})
    with pytest.raises(MskConnectError, match=f"connector {SOURCE} is still CREATING after 0s"):
        deploy_to_msk_connect(client, s3.client, settings, cdc, dirs, timeout_s=0, sleep=no_sleep)
