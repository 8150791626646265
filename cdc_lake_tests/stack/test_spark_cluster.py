"""The Spark standalone cluster's configuration, without starting it: what is a secret stays in
0600 files, and nothing an argument carries is one. The cluster itself runs in
``faults/test_spark_cluster.py``."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest

from cdc_lake.resources.local import local_resources
from cdc_lake.resources.spark_cluster import SparkClusterLauncher
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import all_services
from cdc_lake.stack.settings import StackSettings, local_spark_mode
from cdc_lake.stack.spark_cluster import app_conf, app_properties, daemon_properties


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return StackSettings(state_dir=tmp_path / "state", jars_dir=tmp_path / "jars")


def test_only_the_cluster_mode_adds_the_master_and_two_workers(settings: StackSettings):
    cluster = ["spark_master", "spark_worker_1", "spark_worker_2"]
    assert not {s.name for s in all_services(settings)} & set(cluster)
    names = [s.name for s in all_services(replace(settings, spark_mode="cluster"))]
    assert names[-3:] == cluster
    ports = [settings.port(p) for s in all_services(replace(settings, spark_mode="cluster"))
             for p in s.ports]  # fmt: skip
    assert len(ports) == len(set(ports))  # no two servers on one port
    # `stack down` stops the optional servers whatever its own settings say.
    stoppable = {s.name for s in LocalStack(settings, verbose=False).stoppable}
    assert {*cluster, "connect_2"} <= stoppable


def test_the_mode_is_one_setting(monkeypatch: pytest.MonkeyPatch, settings: StackSettings):
    monkeypatch.setenv("CDC_LAKE_LOCAL_SPARK", "cluster")
    assert local_spark_mode() == "cluster"
    from_env = StackSettings.from_env(state_dir=settings.state_dir)
    assert from_env.spark_mode == "cluster"
    launcher = local_resources(from_env)["spark_jobs"]
    assert isinstance(launcher, SparkClusterLauncher)
    # The settings decide, not the variable read again: these say the lake server.
    assert not isinstance(local_resources(settings)["spark_jobs"], SparkClusterLauncher)
    assert launcher.stack_settings().spark_master_url == settings.spark_master_url
    monkeypatch.setenv("CDC_LAKE_LOCAL_SPARK", "yarn")
    with pytest.raises(ValueError, match="CDC_LAKE_LOCAL_SPARK='yarn' is not a mode"):
        local_spark_mode()


def test_secrets_are_in_0600_files_and_in_no_argument(settings: StackSettings, tmp_path: Path):
    c = settings.credentials
    secrets = (c.spark_secret, c.spark_ui_token, c.s3_access_key, c.s3_secret_key)
    for path in (daemon_properties(settings), app_properties(settings)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f"spark.authenticate.secret={c.spark_secret}\n" in path.read_text()
    launcher = SparkClusterLauncher.of(settings)
    argv = launcher.command(settings, tmp_path / "work")
    env = launcher.environment(settings)
    public = " ".join(argv) + " " + " ".join(app_conf(settings, "python").values())
    assert not [s for s in secrets if s in public]
    assert not [s for s in secrets if s in " ".join(env.values())]
    # The executors find the keys through the profile file's path, never the keys.
    conf = app_conf(settings, "python")
    profile = Path(conf["spark.executorEnv.AWS_CREDENTIAL_PROFILES_FILE"])
    assert stat.S_IMODE(profile.stat().st_mode) == 0o600
    assert c.s3_secret_key in profile.read_text()
    assert argv[argv.index("--master") + 1] == settings.spark_master_url
    assert argv[-1].endswith("entry.py") and "--py-files" in argv
