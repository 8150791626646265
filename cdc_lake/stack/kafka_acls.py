"""Who may do what on the local Kafka: one list of grants per user, and nothing else.

The broker runs KRaft's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``, so
a request that no grant allows is refused, whoever sent it. ``grants`` is the whole policy; the
broker service makes the broker's ACLs equal to it at each start (``sync``), removing any grant
that is not in it, so the policy on disk never drifts from this file.

- **broker**: a super user (``super.users``): its own controller and inter-broker traffic.
- **connect**: the Connect worker and its connectors. Each pipeline picks its own topic prefix
  (the tests and benchmarks run many), so the worker may read, write, create and describe any
  topic and join any group: it is what moves the data.
- **dagster**: the assets, checks and sensors. Describe only: topics' partitions and end
  offsets, groups' committed offsets (the sink's lag). It never reads a record.
- **tester**: the tests' and benchmarks' reader, which also writes (a redelivered record, a
  round trip of its own) and joins the sink's group (a fault test holds a partition).

Connect's internal topics (connector configs, the REST API's session key, source offsets) and
its worker group are Connect's alone: the tester is denied them outright (a deny wins over any
allow), and Dagster may only describe them. That closes the config-topic routes into the worker.
"""

# confluent_kafka.admin re-exports these names without listing them in __all__.
# pyright: reportPrivateImportUsage=false
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cdc_lake.stack.settings import CONNECT_GROUP, CONNECT_TOPIC_PREFIX, StackSettings


@dataclass(frozen=True, order=True)
class Grant:
    """One ACL: ``principal`` may (``allow``) or may not do ``operation`` on the resource."""

    principal: str  # "User:<name>"
    # confluent_kafka's ResourceType names: "TOPIC", "GROUP", or "BROKER" for Kafka's cluster
    # resource (whose one name is "kafka-cluster").
    resource: str
    name: str  # "*" for every resource of the kind; "kafka-cluster" for the cluster
    prefixed: bool
    operation: str  # confluent_kafka's AclOperation names
    allow: bool = True


def _each(
    user: str, resource: str, name: str, operations: Iterable[str], *, prefixed: bool = False,
    allow: bool = True,
) -> Iterator[Grant]:  # fmt: skip
    for op in operations:
        yield Grant(f"User:{user}", resource, name, prefixed, op, allow)


def grants(s: StackSettings) -> frozenset[Grant]:
    """The stack's whole ACL policy (module docstring)."""
    connect, dagster, tester = s.kafka_connect_user, s.kafka_user, s.kafka_tester_user
    topic_ops = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")
    return frozenset(
        [
            *_each(connect, "TOPIC", "*", topic_ops),
            *_each(connect, "GROUP", "*", ("READ", "DESCRIBE")),
            *_each(connect, "BROKER", "kafka-cluster", ("IDEMPOTENT_WRITE", "DESCRIBE")),
            # A sink that commits through a transactional producer (Iceberg's, in bench/).
            *_each(connect, "TRANSACTIONAL_ID", "*", ("WRITE", "DESCRIBE")),
            *_each(dagster, "TOPIC", "*", ("DESCRIBE",)),
            *_each(dagster, "GROUP", "*", ("DESCRIBE",)),
            *_each(tester, "TOPIC", "*", ("READ", "WRITE", "CREATE", "DESCRIBE")),
            *_each(tester, "GROUP", "*", ("READ", "DESCRIBE")),
            *_each(tester, "TOPIC", CONNECT_TOPIC_PREFIX, ("ALL",), prefixed=True, allow=False),
            *_each(tester, "GROUP", CONNECT_GROUP, ("ALL",), allow=False),
        ]
    )


def acl_fields(g: Grant) -> tuple[Any, ...]:
    """``g`` as the arguments of confluent_kafka's AclBinding and AclBindingFilter."""
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return (
        ResourceType[g.resource],
        g.name,
        ResourcePatternType.PREFIXED if g.prefixed else ResourcePatternType.LITERAL,
        g.principal,
        "*",  # from any host
        AclOperation[g.operation],
        AclPermissionType.ALLOW if g.allow else AclPermissionType.DENY,
    )


def grant_of(b: Any) -> Grant:
    """An AclBinding the broker described, as a Grant."""
    return Grant(
        b.principal,
        b.restype.name,
        b.name,
        b.resource_pattern_type.name == "PREFIXED",
        b.operation.name,
        b.permission_type.name == "ALLOW",
    )


def sync(admin: Any, wanted: frozenset[Grant], timeout_s: float = 30.0) -> tuple[int, int]:
    """Make the broker's ACLs equal to ``wanted``: create the missing ones, delete the others.
    Returns (created, deleted). Idempotent: a second call changes nothing."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # pyright: ignore[reportArgumentType]
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    have = {grant_of(b) for b in admin.describe_acls(every, request_timeout=timeout_s).result()}
    missing, extra = sorted(wanted - have), sorted(have - wanted)
    if extra:
        filters = [AclBindingFilter(*acl_fields(g)) for g in extra]
        for future in admin.delete_acls(filters, request_timeout=timeout_s).values():
            future.result()
    if missing:
        for future in admin.create_acls(
            [AclBinding(*acl_fields(g)) for g in missing], request_timeout=timeout_s
        ).values():
            future.result()
    return len(missing), len(extra)
