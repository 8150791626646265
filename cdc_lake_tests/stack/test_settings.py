"""Pure pieces of the stack: cluster ids, ports, credentials, the servers' properties."""

from __future__ import annotations

import base64
from dataclasses import replace

from cdc_lake.resources.local import local_resources
from cdc_lake.stack import StackSettings
from cdc_lake.stack.services import Kafka, KafkaConnect, new_cluster_id


def test_cluster_ids_are_kafka_uuids_never_starting_with_a_dash():
    ids = {new_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    for cluster_id in ids:
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_ports_follow_the_base_and_credentials_are_generated_once(tmp_path):
    s = StackSettings.from_env(state_dir=tmp_path, port_base=20000)
    assert (s.port("postgres"), s.port("kafka"), s.port("connect")) == (20032, 20092, 20083)
    first = s.credentials
    again = StackSettings.from_env(state_dir=tmp_path, port_base=20000).credentials
    assert first == again and first.pg_password != first.replication_password
    assert (tmp_path / "credentials.json").stat().st_mode & 0o777 == 0o600


def _properties(path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def _render(settings: StackSettings) -> tuple[dict[str, str], dict[str, str]]:
    """The broker's and the Connect worker's properties as ``prepare`` writes them (the KRaft
    storage marked formatted, so no JVM runs)."""
    logs = settings.data_dir("kafka")
    logs.mkdir(parents=True)
    (logs / "meta.properties").write_text("")
    kafka, connect = Kafka(settings), KafkaConnect(settings)
    kafka.prepare()
    connect.prepare()
    return _properties(kafka.conf), _properties(connect.conf)


def test_kafka_authenticates_unless_a_benchmark_turns_it_off_in_code(tmp_path, monkeypatch):
    # No variable turns SASL off: a user's stack always authenticates.
    for name in ("CDC_LAKE_KAFKA_SASL", "CDC_LAKE_KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.setenv(name, "PLAINTEXT")
    s = StackSettings.from_env(state_dir=tmp_path / "sasl", port_base=20000)
    broker, worker = _render(s)
    assert broker["listener.security.protocol.map"] == (
        "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
    )
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert "StandardAuthorizer" in broker["authorizer.class.name"]
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert worker[f"{prefix}security.protocol"] == "SASL_PLAINTEXT"
        assert worker[f"{prefix}sasl.jaas.config"].count(s.kafka_users["connect"]) == 1
    assert s.kafka_client_conf()["sasl.password"] == s.kafka_users[s.kafka_user]
    assert local_resources(s)["kafka"].client_conf()["sasl.username"] == s.kafka_user

    # The SASL-cost benchmark's twin (bench/sasl_cost.py): no login, no authorizer, and no
    # password anywhere in its client settings.
    plain = replace(s, state_dir=tmp_path / "plain", kafka_sasl=False, _credentials=[])
    broker, worker = _render(plain)
    assert broker["listener.security.protocol.map"] == "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert not any("sasl" in k or "authorizer" in k or k == "super.users" for k in broker)
    assert {k: v for k, v in worker.items() if "security" in k or "sasl" in k} == {
        f"{prefix}security.protocol": "PLAINTEXT"
        for prefix in ("", "producer.", "consumer.", "admin.")
    }
    conf = plain.kafka_client_conf(plain.kafka_tester_user)
    assert conf == {"bootstrap.servers": plain.kafka_bootstrap, "security.protocol": "PLAINTEXT"}
    assert local_resources(plain)["kafka"].client_conf() == {
        "bootstrap.servers": plain.kafka_bootstrap,
        "security.protocol": "PLAINTEXT",
    }


def test_the_warm_up_has_buckets_of_its_own_which_no_lake_prefix_reaches(tmp_path):
    """The lake server's warm-up deletes what it wrote under ``_warm_up/``: in buckets of its
    own, created with the stack's, so a user's prefix (``LakeResource.lake_prefix``, the raw
    prefix) can never be under it, whatever it is."""
    s = StackSettings.from_env(state_dir=tmp_path, port_base=30000)
    lake = local_resources(s)["lake"]
    used = {s.raw_bucket, s.lake_bucket, lake.lake_bucket}
    assert set(s.warm_up_buckets).isdisjoint(used) and len(set(s.warm_up_buckets)) == 2
    assert set(s.buckets) == used | set(s.warm_up_buckets)  # the S3 service creates each
