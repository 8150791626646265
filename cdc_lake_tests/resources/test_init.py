"""``cdc_lake/resources/__init__.py``: the resource set the definitions take is ``pinned``."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.system_config.objects import ResolvedRunConfig

from cdc_lake.resources import pinned
from cdc_lake.resources.streaming import KafkaConnectResource


def test_run_config_cannot_set_a_pinned_resource_field(monkeypatch):
    """The definitions' resources are ``pinned``: a run config that points the Connect
    resource elsewhere, or reads its password from another variable, fails validation and names
    the resource; without resource config the values (and EnvVar names) are the built ones."""
    seen: list[tuple[str, str | None]] = []

    @dg.asset
    def uses_connect(kafka_connect: KafkaConnectResource) -> None:
        seen.append((kafka_connect.url, kafka_connect.password))

    resources = pinned(
        {
            "kafka_connect": KafkaConnectResource(
                url="http://127.0.0.1:1", user="u", password=dg.EnvVar("CDC_LAKE_TEST_PINNED")
            )
        }
    )
    job = dg.define_asset_job("j").resolve(
        asset_graph=dg.Definitions(assets=[uses_connect], resources=resources).resolve_asset_graph()
    )
    evil = {"url": "http://127.0.0.1:2", "password": {"env": "CDC_LAKE_S3_SECRET_KEY"}}
    for config in (evil, {"url": "http://127.0.0.1:2"}, {"password": "x"}):
        with pytest.raises(DagsterInvalidConfigError, match="kafka_connect") as refused:
            ResolvedRunConfig.build(job, {"resources": {"kafka_connect": {"config": config}}})
        assert "unexpected config" in str(refused.value)
    monkeypatch.setenv("CDC_LAKE_TEST_PINNED", "the-password")
    assert dg.materialize([uses_connect], resources=resources).success
    assert seen == [("http://127.0.0.1:1", "the-password")]
