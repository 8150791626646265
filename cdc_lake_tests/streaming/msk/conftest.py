"""Fixtures of the MSK Connect tests: settings, source-side settings, plugin folders, a moto S3
bucket and a stubbed kafkaconnect client (see ``helpers``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdc_lake.streaming.connect_config import CdcConnectorSettings
from cdc_lake.streaming.msk.plugins import MskPluginDirs
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import BOOTSTRAP, REGION, ROLE, S3, make_plugin_dirs


@pytest.fixture
def msk() -> MskConnectSettings:
    return MskConnectSettings(
        region=REGION,
        bootstrap_servers=BOOTSTRAP,
        subnet_ids=("subnet-a", "subnet-b"),
        security_group_ids=("sg-connect",),
        service_execution_role_arn=ROLE,
        plugin_bucket="unused",  # each test sets its own moto bucket
        log_group="/msk/cdc",
    )


@pytest.fixture
def cdc(msk: MskConnectSettings) -> CdcConnectorSettings:
    return CdcConnectorSettings(
        topic_prefix="cdc",
        pg_host="cdc.cluster-abc.eu-west-1.rds.amazonaws.com",
        pg_port=5432,
        pg_database="cdc_lake",
        replication_user="cdc_replication",
        replication_password_ref=msk.password_ref,
        column_salt_ref=msk.column_salt_ref,
        raw_bucket="cdc-raw-prod",
        raw_prefix="cdc-events/",
        region=REGION,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> MskPluginDirs:
    return make_plugin_dirs(tmp_path)


@pytest.fixture
def s3(moto_endpoint: str) -> S3:
    return S3(moto_endpoint)


@pytest.fixture
def kc() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client(
        "kafkaconnect",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        # Every expected request was made: nothing stubbed was skipped.
        stubber.assert_no_pending_responses()
