"""The stack's Kafka broker authenticates every client on both of its listeners
(``cdc_lake/stack/services/kafka.py``): tried as a second Unix user against every TCP port the
broker's process listens on, found from the system, and as the stack's own users."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # pyright: ignore[reportPrivateImportUsage]

from cdc_lake.stack import LocalStack
from cdc_lake_tests.second_user import (
    as_user,
    attacker,
    kafka_login,
    kafka_metadata,
    listening_sockets,
)


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
    # The same probes with the stack's own credentials: the broker on both listeners; a client
    # user on the clients' listener only.
    users = s.kafka_users
    for port in ports:
        assert kafka_login(port, broker, users[broker]) == "authenticated", port
    assert kafka_login(s.port("kafka"), s.kafka_user, users[s.kafka_user]) == "authenticated"
    controller = kafka_login(s.port("kafka_controller"), s.kafka_user, users[s.kafka_user])
    assert controller == "refused: 58"


def test_kafka_produce_consume_round_trip_as_the_stack_user(local_stack: LocalStack):
    conf = local_stack.settings.kafka_client_conf()
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
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
