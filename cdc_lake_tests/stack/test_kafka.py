"""The stack's Kafka broker authenticates every client on both of its listeners
(``cdc_lake/stack/services/kafka.py``): tried as a second Unix user against every TCP port the
broker's process listens on, found from the system, and as the stack's own users."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # pyright: ignore[reportPrivateImportUsage]

from cdc_lake.stack import LocalStack
from cdc_lake.stack.kafka_acls import Grant, acl_fields, grants, sync
from cdc_lake.stack.settings import CONNECT_TOPIC_PREFIX
from cdc_lake.streaming.topics import consumer_lag, end_offsets
from cdc_lake_tests.second_user import (
    as_user,
    attacker,
    kafka_login,
    kafka_metadata,
    listening_sockets,
)
from cdc_lake_tests.topic_reader import reader_conf


def test_another_local_user_is_refused_by_every_kafka_port(local_stack: LocalStack):
    s = local_stack.settings
    pid = local_stack.status()["kafka"].pid
    assert pid is not None
    ports = sorted({p for _, p in listening_sockets(pid)})
    # The clients' listener and the controller's, nothing else (JMX is off).
    assert ports == sorted([s.port("kafka"), s.port("kafka_controller")]), ports
    conf = local_stack.service("kafka").conf  # type: ignore[attr-defined]
    broker = s.kafka_broker_user

    def probe() -> dict:
        seen: dict = {}
        for port in ports:
            seen[str(port)] = {
                "metadata": kafka_metadata(port),
                "guessed": kafka_login(port, broker, "guessed"),
                "no user": kafka_login(port, "cdclake-attacker", ""),
            }
        try:
            seen["conf"] = conf.read_text()[:20]
        except PermissionError:
            seen["conf"] = "unreadable"
        return seen

    seen = as_user(attacker(), probe)
    assert "child_error" not in seen, seen
    for port in ports:
        answers = seen[str(port)]
        # No request is served before SASL; a wrong password is refused (58:
        # SASL_AUTHENTICATION_FAILED).
        assert answers == {
            "metadata": "closed", "guessed": "refused: 58", "no user": "refused: 58"
        }, (port, answers)  # fmt: skip
    assert seen["conf"] == "unreadable"
    # The same probes with the stack's own credentials: the broker's PLAIN login on both
    # listeners; PLAIN knows no other user (the clients log in with SCRAM, below).
    users = s.kafka_users
    for port in ports:
        assert kafka_login(port, broker, users[broker]) == "authenticated", port
        assert kafka_login(port, s.kafka_user, users[s.kafka_user]) == "refused: 58", port


def _read(conf: dict, topic: str) -> str:
    """What reading the first record of ``topic`` as ``conf``'s user gets: "read", "empty",
    or the error's name (in the metadata, or in the fetch)."""
    consumer = Consumer(
        {**conf, "group.id": TEST_GROUP, "enable.auto.commit": False, "log_level": 0}
    )
    try:
        # A topic the user may not even describe is refused in the metadata already.
        error = consumer.list_topics(topic, timeout=10).topics[topic].error
        if error is not None:
            return error.name()
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(20):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            return "read" if err is None else err.name()
        return "empty"
    finally:
        consumer.close()


def _write(conf: dict, topic: str) -> str:
    """What producing one record to ``topic`` as ``conf``'s user gets: "written" or the error's
    name."""
    seen: list[str] = []
    producer = Producer({**conf, "log_level": 0, "message.timeout.ms": 10000})
    producer.produce(
        topic,
        value=b"{}",
        on_delivery=lambda err, _m: seen.append(err.name() if err else "written"),
    )
    producer.flush(15)
    return seen[0] if seen else "undelivered"


TEST_GROUP = "cdc-lake-test-acl"
DENIED = "TOPIC_AUTHORIZATION_FAILED"


def test_each_kafka_user_may_do_only_what_its_role_needs(local_stack: LocalStack):
    """Deny by default (cdc_lake/stack/kafka_acls.py): Dagster's user describes and reads
    offsets but no record; the tests' user reads and writes topics but never Connect's; only
    Connect reads its config topic (connector configs, the session key)."""
    s = local_stack.settings
    dagster, tester = s.kafka_client_conf(), s.kafka_client_conf(s.kafka_tester_user)
    connect = s.kafka_client_conf(s.kafka_connect_user)
    configs = f"{CONNECT_TOPIC_PREFIX}configs"
    topic = f"cdc-lake-test.acl-{uuid.uuid4().hex[:8]}"
    assert _write(tester, topic) == "written"  # created on first write

    # Dagster: offsets and lag of any topic, the config topic's included; no record, no write,
    # no topic of its own.
    assert sum(end_offsets(dagster, topic).values()) == 1
    assert sum(end_offsets(dagster, configs).values()) > 0
    assert _read(dagster, topic) == DENIED
    assert _read(dagster, configs) == DENIED
    assert _write(dagster, topic) == DENIED
    dagster_admin = AdminClient({**dagster, "log_level": 0})
    created = dagster_admin.create_topics([NewTopic("cdc-lake-x", 1)])
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        created["cdc-lake-x"].result(15)
    # The tests' user: any topic but Connect's internal ones, whatever it is allowed elsewhere.
    assert _read(tester, topic) == "read"
    for internal in ("configs", "offsets", "status"):
        assert _read(tester, f"{CONNECT_TOPIC_PREFIX}{internal}") == DENIED, internal
    assert _write(tester, configs) == DENIED
    # The Connect worker's own user reads them.
    assert _read(connect, configs) == "read"

    # The policy on the broker is the module's, and a grant made behind its back is undone at
    # the next start.
    from confluent_kafka.admin import AclBinding  # pyright: ignore[reportPrivateImportUsage]

    admin = AdminClient({**s.kafka_client_conf(s.kafka_broker_user), "log_level": 0})
    rogue = Grant(f"User:{s.kafka_user}", "TOPIC", configs, False, "READ")
    for future in admin.create_acls([AclBinding(*acl_fields(rogue))]).values():
        future.result()
    assert _read(dagster, configs) == "read"
    assert sync(admin, grants(s)) == (0, 1)
    assert sync(admin, grants(s)) == (0, 0)
    assert _read(dagster, configs) == DENIED


def test_kafka_produce_consume_round_trip_as_the_tests_user(local_stack: LocalStack):
    conf = reader_conf(local_stack.settings)
    topic = f"cdc-lake-test.roundtrip-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    producer = Producer(conf)
    sent = {f"k{i}": json.dumps({"n": i}) for i in range(50)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: dict[str, str] = {}
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            key, value = msg.key(), msg.value()
            assert key is not None and value is not None
            got[key.decode()] = value.decode()
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert got == sent
    # A wrong password gets no metadata.
    wrong = AdminClient({**conf, "sasl.password": "wrong", "log_level": 0})
    try:
        wrong.list_topics(timeout=5)
    except KafkaException as e:
        assert "Authentication" in str(e) or "_TRANSPORT" in str(e) or "TIMED_OUT" in str(e), e
    else:
        raise AssertionError("a wrong password listed the topics")


def test_offsets_are_read_quietly_and_a_refused_login_says_why(
    local_stack: LocalStack, capfd: pytest.CaptureFixture[str]
):
    """The Dagster side's offset and lag reads print nothing (librdkafka's own lines stay out of
    a run's output); a login the broker refuses raises, naming the reason."""
    conf = local_stack.settings.kafka_client_conf()
    configs = f"{CONNECT_TOPIC_PREFIX}configs"
    capfd.readouterr()
    for _ in range(10):
        assert sum(consumer_lag(conf, TEST_GROUP, configs).values()) > 0
    # Only librdkafka's own lines ("%3|<time>|FAIL|rdkafka#consumer-6| ..."): the worker's
    # Spark JVM, a child of this process, writes to the same stderr.
    printed = [line for line in capfd.readouterr().err.splitlines() if "|rdkafka#" in line]
    assert printed == []
    with pytest.raises(ConnectionError, match="invalid credentials"):
        end_offsets({**conf, "sasl.password": "wrong"}, configs, timeout_s=5)
