"""The local Kafka's ACL policy (``cdc_lake/stack/kafka_acls.py``) as data; the broker enforcing
it is tried in ``test_kafka.py``."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AclBinding  # pyright: ignore[reportPrivateImportUsage]

from cdc_lake.stack.kafka_acls import acl_fields, grant_of, grants
from cdc_lake.stack.settings import CONNECT_GROUP, CONNECT_TOPIC_PREFIX, StackSettings

# The user names only: nothing here reads or writes credentials.
S = StackSettings(state_dir=Path("/nonexistent"), jars_dir=Path("/nonexistent"))
USERS = (S.kafka_connect_user, S.kafka_user, S.kafka_tester_user)


def test_every_grant_goes_to_the_broker_and_comes_back_as_it_was():
    for g in grants(S):
        assert grant_of(AclBinding(*acl_fields(g))) == g


def test_the_dagster_user_only_describes():
    mine = {g for g in grants(S) if g.principal == f"User:{S.kafka_user}"}
    assert mine and {(g.operation, g.allow) for g in mine} == {("DESCRIBE", True)}


def test_nobody_but_connect_may_touch_its_internal_topics_and_group():
    allowed = {
        g.principal
        for g in grants(S)
        if g.allow and g.operation != "DESCRIBE" and g.name == "*" and g.resource != "BROKER"
    }
    # Whoever may read or write every topic or group is Connect, or is denied Connect's.
    denied = {
        g.principal
        for g in grants(S)
        if not g.allow and g.operation == "ALL"
        and (g.resource, g.name, g.prefixed) in {
            ("TOPIC", CONNECT_TOPIC_PREFIX, True), ("GROUP", CONNECT_GROUP, False)
        }
    }  # fmt: skip
    assert allowed - denied == {f"User:{S.kafka_connect_user}"}
    assert denied == {f"User:{S.kafka_tester_user}"}


def test_the_policy_names_only_the_stacks_client_users():
    # The broker is a super user: it needs no grant.
    assert {g.principal for g in grants(S)} == {f"User:{u}" for u in USERS}
