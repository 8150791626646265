"""Pure pieces of the stack: cluster ids, ports, credentials."""

from __future__ import annotations

import base64

from cdc_lake.stack import StackSettings
from cdc_lake.stack.services import new_cluster_id


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
