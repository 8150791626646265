"""MSK Connect settings: the variables they are read from, their validation, and the worker
configuration they declare."""

from __future__ import annotations

import pytest

from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import (
    BOOTSTRAP,
    REGION,
    ROLE,
    WORKER_PROPERTIES,
)


def test_from_env_names_every_missing_variable():
    with pytest.raises(ValueError) as e:
        MskConnectSettings.from_env({"CDC_LAKE_MSK_SUBNETS": "subnet-a"})
    for name in (
        "CDC_LAKE_AWS_REGION",
        "CDC_LAKE_MSK_BOOTSTRAP",
        "CDC_LAKE_MSK_SECURITY_GROUPS",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN",
        "CDC_LAKE_MSK_PLUGIN_BUCKET",
    ):
        assert name in str(e.value)
    assert "CDC_LAKE_MSK_SUBNETS" not in str(e.value)


def test_from_env_reads_lists_numbers_and_shared_fallbacks():
    env = {
        "AWS_REGION": REGION,  # fallback of CDC_LAKE_AWS_REGION
        "CDC_LAKE_KAFKA_BOOTSTRAP": BOOTSTRAP,  # fallback of CDC_LAKE_MSK_BOOTSTRAP
        "CDC_LAKE_MSK_SUBNETS": " subnet-a, subnet-b ,",
        "CDC_LAKE_MSK_SECURITY_GROUPS": "sg-connect",
        "CDC_LAKE_MSK_CONNECT_ROLE_ARN": ROLE,
        "CDC_LAKE_MSK_PLUGIN_BUCKET": "plugins",
        "CDC_LAKE_MSK_MCU_COUNT": "2",
        "CDC_LAKE_MSK_MIN_WORKERS": "1",
        "CDC_LAKE_MSK_MAX_WORKERS": "3",
        "CDC_LAKE_REPLICATION_SECRET": "prod/cdc",
    }
    s = MskConnectSettings.from_env(env)
    assert (s.region, s.bootstrap_servers) == (REGION, BOOTSTRAP)
    assert s.subnet_ids == ("subnet-a", "subnet-b") and s.security_group_ids == ("sg-connect",)
    assert s.capacity() == {
        "autoScaling": {
            "mcuCount": 2,
            "minWorkerCount": 1,
            "maxWorkerCount": 3,
            "scaleInPolicy": {"cpuUtilizationPercentage": 20},
            "scaleOutPolicy": {"cpuUtilizationPercentage": 80},
        }
    }
    assert s.password_ref == "${secretsmanager:prod/cdc:password}"
    assert s.log_delivery() is None
    with pytest.raises(ValueError, match="CDC_LAKE_MSK_MCU_COUNT='two' is not an integer"):
        MskConnectSettings.from_env({**env, "CDC_LAKE_MSK_MCU_COUNT": "two"})


def test_settings_refuse_non_iam_brokers_and_bad_capacity(msk: MskConnectSettings):
    fields = msk.__dict__
    with pytest.raises(ValueError, match="'b-1:9092' is not an IAM listener"):
        MskConnectSettings(**{**fields, "bootstrap_servers": "b-1:9092"})
    with pytest.raises(ValueError, match=r"mcu_count must be one of \(1, 2, 4, 8\)"):
        MskConnectSettings(**{**fields, "mcu_count": 3})
    with pytest.raises(ValueError, match="needs both min_workers and max_workers"):
        MskConnectSettings(**{**fields, "min_workers": 1})


def test_worker_configuration_declares_the_secrets_manager_provider(msk: MskConnectSettings):
    decoded = msk.worker_properties()
    props = dict(line.split("=", 1) for line in decoded.splitlines())
    assert props["config.providers"] == "secretsmanager"
    assert (
        props["config.providers.secretsmanager.class"]
        == "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"
    )
    assert props["config.providers.secretsmanager.param.region"] == REGION
    assert decoded == WORKER_PROPERTIES  # the exact content the create request is checked for
